"""The profile as pprof's legacy parsers hold it, and how it becomes a Profile.

pprof's legacy parsers give every distinct (adjusted) address one location
that samples share, and correct the stacks (signal-handler frame, duplicated
leaf) and number locations before any id exists. :class:`Parsed` keeps the
stacks as address columns so those corrections (:mod:`._stacks`) and the
mapping rules (:mod:`._maps`) run vectorized, and :func:`build` hands the
result to the one :class:`~polyprof.model.builder.ProfileBuilder` in pprof's
final order (mappings, then locations in order of first use).

Also here: a line scanner that splits as Go's ``bufio.Scanner`` does (so
line numbers and "line too long" match), Go's integer syntax, and the
byte-offset errors every legacy parser raises.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

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


@dataclass
class Parsed:
    """One legacy profile in pprof's shape, its stacks as columns.

    pprof gives every distinct (adjusted) address one location shared by the
    samples, so a location *is* its address until mappings are assigned:
    stacks are kept as addresses (``flat``, leaf first, split by ``offsets``)
    and the corrections in :mod:`._stacks` act on them. ``symbols`` names
    addresses (Java); ``blocks`` is the ``bytes`` label of heap samples."""

    sample_types: list[tuple[str, str]]
    period_type: tuple[str, str] | None
    period: int
    duration_nanos: int = 0
    warnings: list[str] = field(default_factory=list)
    mappings: list[Mapping] = field(default_factory=list)
    symbols: dict[int, tuple[Function, int]] = field(default_factory=dict)
    #: return addresses point after the call: pprof moves them back one byte onto
    #: it for every frame ("all"), all but the leaf ("caller") or none ("")
    adjust: str = ""
    values: list[list[int]] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    _flat: list[int] = field(default_factory=list)
    _ends: list[int] = field(default_factory=list)
    # columns, once frozen (empty until then)
    frozen: bool = False
    flat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    value_array: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    # locations, once numbered (see _stacks.number_locations; empty until then)
    loc_address: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    frame_loc: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    loc_mapping: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def add(self, values: list[int], addresses: list[int], block: int | None = None) -> None:
        """One sample (``adjust`` is applied to its addresses when frozen)."""
        self._flat.extend(addresses)
        self._ends.append(len(self._flat))
        self.values.append(values)
        if block is not None:
            self.blocks.append(block)

    def bump_last(self) -> None:
        """Count the last sample once more (a repeated thread)."""
        if self.values:
            self.values[-1][0] += 1

    def set_columns(self, flat: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
        self.flat, self.offsets, self.value_array = flat, offsets, values
        self.frozen = True

    def freeze(self) -> None:
        """Turn the samples added one by one into columns."""
        if self.frozen:
            return
        width = len(self.sample_types)
        if any(len(v) != width for v in self.values):  # pprof's CheckValid refuses this too
            i = next(i for i, v in enumerate(self.values) if len(v) != width)
            raise broken(f"sample {i + 1} has {len(self.values[i])} values but the profile declares "
                         f"{width} sample types", None)
        offsets = np.array([0, *self._ends], dtype=np.int64)
        self.set_columns(adjusted(np.array(self._flat, dtype=np.uint64), offsets, self.adjust), offsets,
                         np.array(self.values, dtype=np.int64).reshape(len(self.values), width))
        self._flat, self._ends = [], []


def adjusted(flat: np.ndarray, offsets: np.ndarray, adjust: str) -> np.ndarray:
    """``flat`` with return addresses moved back one byte (see ``Parsed.adjust``)."""
    if not adjust:
        return flat
    step = np.ones(len(flat), dtype=np.uint64)
    if adjust == "caller":
        step[offsets[:-1][np.diff(offsets) > 0]] = 0  # the leaf is the interrupted pc, not a return address
    return flat - step  # wraps below 0 as Go's uint64 does


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
    kept = 1 - (math.exp(exponent) if exponent < 709 else math.inf)  # Go's formula, for its numbers
    if kept == 0:  # average size far below the rate: pprof's scale is +Inf, which fits no int64
        return None
    scale = 1 / kept
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
    """``p`` (numbered, mapped) as a Profile: mappings and locations in pprof's
    order, samples as read."""
    b = ProfileBuilder("pprof-legacy")
    meta = b.meta
    meta.sample_types = [ValueType(*t) for t in p.sample_types]
    meta.period_type = ValueType(*p.period_type) if p.period_type else None
    meta.period, meta.duration_nanos = p.period, p.duration_nanos
    meta.drop_frames, meta.keep_frames = drop_frames, keep_frames
    meta.warnings.extend(p.warnings)
    map_rows = np.array([b.mapping(m.start, m.limit, m.offset, _text(m.file), _text(m.build_id))
                         for m in p.mappings] + [-1], dtype=np.int32)  # index -1: no mapping
    n = len(p.loc_address)
    line_counts, line_function, line_line = np.zeros(n, np.int64), [], []
    if p.symbols:
        functions: dict[int, int] = {}
        for i, address in enumerate(p.loc_address.tolist()):
            named = p.symbols.get(address)
            if named is not None:
                fn, line = named
                if id(fn) not in functions:
                    name = _text(fn.name)
                    functions[id(fn)] = b.function(name, name, _text(fn.filename))
                line_counts[i] = 1
                line_function.append(functions[id(fn)])
                line_line.append(line)
        p.loc_address = np.zeros(n, np.uint64)  # pprof aggregates Java profiles without addresses
    first = b.add_locations_bulk(map_rows[p.loc_mapping], p.loc_address, np.zeros(n, np.bool_), line_counts,
                                 np.array(line_function, np.int32), np.array(line_line, np.int64),
                                 np.zeros(len(line_line), np.int64))
    stacks = b.stacks_from_csr(p.frame_loc + first, p.offsets, leaf_first=True)
    labelsets = None
    if p.blocks:
        sizes, inverse = np.unique(np.array(p.blocks, dtype=np.int64), return_inverse=True)
        sets = np.array([b.labelset([Label("bytes", num=int(v))]) for v in sizes], dtype=np.int32)
        labelsets = sets[inverse.reshape(-1)]
    b.add_samples_bulk(stacks, p.value_array, labelsets)
    return b.finish()
