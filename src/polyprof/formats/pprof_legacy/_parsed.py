"""The profile as pprof's legacy parsers hold it, and how it becomes a Profile.

pprof's legacy parsers build an object graph in which one location stands for
one (adjusted) address and samples share location objects; its heuristics
(dropping the signal-handler frame, de-duplicating the leaf, renumbering)
act on that graph before any id exists. The parsers here build the same small
graph so those heuristics read like pprof's, and :func:`build` hands the
result to the one :class:`~polyprof.model.builder.ProfileBuilder`, in pprof's
final order (mappings, then locations in order of first use).

Also here: a line scanner that splits as Go's ``bufio.Scanner`` does (so
line numbers and "line too long" match), Go's integer syntax, and the
byte-offset errors every legacy parser raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from polyprof.errors import MalformedInputError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile, ValueType

MASK64 = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
MAX_LINE = 64 * 1024  # bufio.Scanner's default token limit: pprof fails on longer lines


class NotMine(Exception):
    """pprof's ``errUnrecognized``: this parser does not read the input; the next one may."""

    def __init__(self, reason: str, offset: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.offset = reason, offset


def broken(message: str, offset: int | None) -> MalformedInputError:
    return MalformedInputError(message, fmt="pprof-legacy", offset=offset)


@dataclass(eq=False)
class Mapping:
    start: int
    limit: int
    offset: int = 0
    file: str = ""
    build_id: str = ""


@dataclass(eq=False)
class Function:
    name: str
    filename: str = ""


@dataclass(eq=False)
class Location:
    address: int
    mapping: Mapping | None = None
    function: Function | None = None
    line: int = 0


@dataclass(eq=False)
class Sample:
    values: list[int]
    locations: list[Location]
    block_size: int | None = None  # pprof's numeric label "bytes" of heap samples


@dataclass
class Parsed:
    """One legacy profile in pprof's shape: locations interned by address."""

    sample_types: list[tuple[str, str]]
    period_type: tuple[str, str] | None
    period: int
    duration_nanos: int = 0
    samples: list[Sample] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    mappings: list[Mapping] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    by_address: dict[int, Location] = field(default_factory=dict)

    def location(self, address: int) -> Location:
        """The location of ``address``, made on first use (pprof's ``locs`` map)."""
        loc = self.by_address.get(address)
        if loc is None:
            loc = self.by_address[address] = Location(address)
            self.locations.append(loc)
        return loc

    def stack(self, addresses: list[int], adjust: str) -> list[Location]:
        """Locations of ``addresses``, each minus 1 (``adjust="all"``), all but
        the leaf (``"caller"``) or none (``""``): return addresses point after
        the call, pprof moves them onto it."""
        out = []
        for i, a in enumerate(addresses):
            if adjust == "all" or (adjust == "caller" and i > 0):
                a = (a - 1) & MASK64
            out.append(self.location(a))
        return out


# ---- Go's number syntax and arithmetic --------------------------------------

def go_int(text: str, base: int = 10) -> int:
    """``strconv.ParseInt(text, base, 64)``; ValueError when Go's fails."""
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    if base == 0:
        low = digits[:2].lower()
        if low in ("0x", "0o", "0b"):
            base, digits = {"0x": 16, "0o": 8, "0b": 2}[low], digits[2:]
        elif digits[:1] == "0" and len(digits) > 1:
            base, digits = 8, digits[1:]
        else:
            base = 10
    if not digits or not (digits.isascii() and digits.isalnum()):
        raise ValueError(f"invalid number {text!r}")
    value = sign * int(digits, base)  # ValueError for a digit outside the base, as Go
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise ValueError(f"number out of range {text!r}")
    return value


def go_uint(text: str, base: int = 0) -> int:
    """``strconv.ParseUint(text, base, 64)`` for the hex and decimal forms legacy profiles use."""
    if base == 0 and text[:2].lower() == "0x":
        base, text = 16, text[2:]
    value = int(text, base or 10) if text and text.isascii() and text.isalnum() else -1
    if not 0 <= value <= MASK64:
        raise ValueError(f"invalid or out-of-range address {text!r}")
    return value


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def to_int64(x: float) -> int | None:
    """Go's ``int64(x)`` for a float that fits, else None (Go's result is undefined there)."""
    if math.isnan(x) or not -9.223372036854776e18 <= x < 9.223372036854776e18:
        return None
    return int(x)


def checked(value: int) -> int | None:
    """``value`` if it fits pprof's int64 sample values, else None (Go would wrap it)."""
    return value if -INT64_MAX - 1 <= value <= INT64_MAX else None


def scale_heap(count: int, size: int, rate: int) -> tuple[int, int] | None:
    """Un-sample one heap sample (pprof's ``scaleHeapSample``).

    A sample of average size S appears with probability 1-exp(-S/R) under a
    Poisson sampler of mean interval R, so count and size are divided by it.
    None when the scaled values do not fit an int64."""
    if count == 0 or size == 0:
        return 0, 0
    if rate <= 1:  # 1: every allocation was recorded; below: unknown, left as is
        return count, size
    exponent = -(size / count) / rate
    scale = 1 / (1 - (math.exp(exponent) if exponent < 709 else math.inf))
    c, s = to_int64(count * scale), to_int64(size * scale)
    return None if c is None or s is None else (c, s)


# ---- lines ----------------------------------------------------------------

class Scanner:
    """Lines as Go's ``bufio.Scanner`` splits them (one trailing CR dropped).

    ``text`` holds the input decoded as Latin-1, so string offsets are byte
    offsets; ``base`` is the offset of ``text`` in the file. After the last
    line ``line`` is "" (as Go's ``Text()`` is)."""

    def __init__(self, text: str, base: int = 0) -> None:
        self.text, self.base = text, base
        self.pos = 0
        self.line = ""
        self.lineno = 0
        self.start = 0

    def scan(self) -> bool:
        text = self.text
        if self.pos >= len(text):
            self.line = ""
            return False
        end = text.find("\n", self.pos)
        nxt = end + 1 if end >= 0 else len(text)
        end = end if end >= 0 else len(text)
        self.start, self.lineno = self.pos, self.lineno + 1
        if end - self.pos >= MAX_LINE:
            raise self.error(f"line longer than {MAX_LINE} bytes (pprof's limit too)")
        line = text[self.pos:end]
        self.line = line.removesuffix("\r")
        self.pos = nxt
        return True

    @property
    def offset(self) -> int:
        return self.base + self.start

    def error(self, message: str) -> MalformedInputError:
        return broken(f"line {self.lineno}: {message}", self.offset)

    def not_mine(self, reason: str) -> NotMine:
        return NotMine(f"line {self.lineno}: {reason}", self.offset)


WS = " \t\n\v\f\r"  # Go's ASCII white space (str.strip would take more in Latin-1 text)


def trim(line: str) -> str:
    return line.strip(WS)


def is_space_or_comment(line: str) -> bool:
    t = trim(line)
    return not t or t[0] == "#"


# ---- into the model --------------------------------------------------------

def _text(s: str) -> str:
    """A string pprof holds as raw bytes (we decoded Latin-1), as UTF-8 text."""
    return s if s.isascii() else s.encode("latin-1").decode("utf-8", "replace")


def build(p: Parsed, drop_frames: str, keep_frames: str) -> Profile:
    """``p`` as a Profile: mappings and locations in pprof's order, samples as read."""
    b = ProfileBuilder("pprof-legacy")
    meta = b.meta
    meta.sample_types = [ValueType(*t) for t in p.sample_types]
    meta.period_type = ValueType(*p.period_type) if p.period_type else None
    meta.period, meta.duration_nanos = p.period, p.duration_nanos
    meta.drop_frames, meta.keep_frames = drop_frames, keep_frames
    meta.warnings.extend(p.warnings)
    maps = {id(m): b.mapping(m.start, m.limit, m.offset, _text(m.file), _text(m.build_id)) for m in p.mappings}
    rows: dict[int, int] = {}
    for loc in p.locations:
        lines: tuple = ()
        if loc.function is not None:
            name = _text(loc.function.name)
            lines = ((b.function(name, name, _text(loc.function.filename)), loc.line, 0),)
        rows[id(loc)] = b.location(maps[id(loc.mapping)] if loc.mapping else -1, loc.address, lines)
    width = len(p.sample_types)
    for i, s in enumerate(p.samples):
        if len(s.values) != width:  # pprof's CheckValid refuses this too
            raise broken(f"sample {i + 1} has {len(s.values)} values but the profile declares "
                         f"{width} sample types", None)
        labels = (Label("bytes", num=s.block_size),) if s.block_size is not None else ()
        b.add_sample(b.stack([rows[id(loc)] for loc in s.locations]), s.values, labels=labels)
    return b.finish()
