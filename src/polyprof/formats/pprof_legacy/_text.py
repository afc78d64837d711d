"""The C++ and Go runtimes' legacy text profiles, as ``go tool pprof`` reads them.

- heap / growth (``heap profile: N: B [N: B] @ heap_v2/R``; Go's
  ``debug=1`` page says ``@ heap/2R``): one ``inuse_n: inuse_b [alloc_n:
  alloc_b] @ pcs`` line per stack. Alloc columns are kept when they differ
  from the in-use ones; ``heap_v2`` samples are un-sampled (divided by
  1-exp(-size/R), the chance a Poisson sampler of mean R records them) and
  carry their block size as a ``bytes`` label.
- Go count profiles (``goroutine profile: total N``, ``threadcreate``): ``n @ pcs``.
- threads (``--- threadz 1 ---`` then ``--- Thread ID (name: N/TID) stack: ---``
  blocks, ``[same as previous thread]`` counting the previous one again);
  one sample per thread. pprof requires the memory map section at the end.
- contention (``--- contentionz 1 ---``, Go's ``--- mutex:`` / ``--- contention:``):
  ``cycles/second``, ``sampling period``, ``ms since reset`` attributes, then
  ``delay count @ pcs`` lines; counts are multiplied by the sampling period and
  delays turned from cycles into nanoseconds.

Return addresses move back one byte onto the call (threads: all but the leaf).
"""

from __future__ import annotations

import re

from polyprof.formats.pprof_legacy._java import hex_addresses
from polyprof.formats.pprof_legacy._maps import apply_maps, is_map_sentinel, parse_maps
from polyprof.formats.pprof_legacy._parsed import (NotMine, Parsed, Scanner, checked, go_div, go_int,
                                                   is_space_or_comment, scale_heap, to_int64, trim)
from polyprof.formats.pprof_legacy._stacks import dedupe_leaf

__all__ = ["HEAP_HEADER", "OTHER_HEAP", "THREAD", "THREADZ", "parse_contention", "parse_count", "parse_heap",
           "parse_thread"]

_NUMS = r"heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+) *\]"
HEAP_HEADER = re.compile(_NUMS + r" *@ *(heap[_a-z0-9]*)/?(\d*)", re.ASCII)
OTHER_HEAP = re.compile(_NUMS + r" @ (?:growthz?|fragmentationz?)", re.ASCII)
_HEAP_SAMPLE = re.compile(r"(-?\d+): *(-?\d+) *\[ *(\d+): *(\d+) *] @([ x0-9a-f]*)", re.ASCII)
_CONTENTION_SAMPLE = re.compile(r"(\d+) *(\d+) @([ x0-9a-f]*)", re.ASCII)
COUNT_HEADER = re.compile(r"([^\t\n\f\r ]+) profile: total \d+", re.ASCII)
_COUNT = re.compile(r"(\d+) @((?: 0x[0-9a-f]+)+)", re.ASCII)
THREADZ = re.compile(r"--- threadz \d+ ---", re.ASCII)
THREAD = re.compile(r"--- Thread [0-9A-Fa-f]+ \(name: .*/\d+\) stack: ---", re.ASCII)
CONTENTION_PREFIXES = ("--- contentionz ", "--- mutex:", "--- contention:")
_ALLOC_INUSE = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
                ("inuse_space", "bytes")]


def _rest(s: Scanner, p: Parsed) -> Parsed:
    """Skip to the memory map section and read it (pprof's ``parseAdditionalSections``)."""
    while not is_map_sentinel(s.line) and s.scan():
        pass
    apply_maps(p, parse_maps(s))
    return p


def _addresses(s: Scanner, text: str) -> list[int]:
    return hex_addresses(text, f"line {s.lineno}", s.offset)


def _int(s: Scanner, text: str, base: int = 10) -> int:
    try:
        return go_int(text, base)
    except ValueError as exc:
        raise s.error(str(exc)) from None


# ---- heap -------------------------------------------------------------------

def parse_heap(s: Scanner) -> Parsed:
    if not s.scan():
        raise NotMine("empty")
    m = HEAP_HEADER.search(s.line)
    if m:
        sampling, period, has_alloc = _heap_header(m)
    elif OTHER_HEAP.search(s.line):
        sampling, period, has_alloc = "", 1, False
    else:
        raise NotMine("not a heap profile header")
    types = list(_ALLOC_INUSE) if has_alloc else [("objects", "count"), ("space", "bytes")]
    p = Parsed(types, ("space", "bytes"), period, adjust="all")
    while s.scan():
        line = trim(s.line)
        if is_space_or_comment(line):
            continue
        if is_map_sentinel(line):
            break
        values, block, addrs = _heap_sample(s, line, period if sampling else 0, has_alloc)
        p.add(values, addrs, block)
    return _rest(s, p)


def _heap_header(m: re.Match) -> tuple[str, int, bool]:
    try:
        period = go_int(m[6]) if m[6] else 0
    except ValueError:
        raise NotMine("heap profile sampling rate out of range", 0) from None
    has_alloc = (m[3] != m[1] and m[3] != "0") or (m[4] != m[2] and m[4] != "0")
    if m[5] in ("heapz_v2", "heap_v2"):
        return "v2", period, has_alloc
    if m[5] == "heapprofile":
        return "", 1, has_alloc
    if m[5] == "heap":  # Go's runtime writes twice its MemProfileRate
        return "v2", go_div(period, 2), has_alloc
    raise NotMine(f"unknown heap profile kind {m[5]!r}", 0)


def _heap_sample(s: Scanner, line: str, rate: int, has_alloc: bool) -> tuple[list[int], int, list[int]]:
    """(values, block size, addresses) of one line; ``rate`` 0 means no un-sampling."""
    m = _HEAP_SAMPLE.search(line)
    if not m:
        raise s.error("not a heap sample ('inuse_count: inuse_bytes [alloc_count: alloc_bytes] @ addresses')")
    values: list[int] = []
    block = 0
    for count_text, size_text, what in ([(m[3], m[4], "allocation")] if has_alloc else []) + [(m[1], m[2], "inuse")]:
        count, size = _int(s, count_text), _int(s, size_text)
        if count == 0 and size != 0:
            raise s.error(f"{what} count was 0 but {what} bytes was {size}")
        if count:
            block = go_div(size, count)
            scaled = scale_heap(count, size, rate) if rate else (count, size)
            if scaled is None or checked(block) is None:
                raise s.error("un-sampled values do not fit 64 bits")
            count, size = scaled
        values += [count, size]
    return values, block, _addresses(s, m[5])


# ---- Go count profiles ----------------------------------------------------------

def parse_count(s: Scanner) -> Parsed:
    while s.scan() and is_space_or_comment(s.line):
        pass
    m = COUNT_HEADER.fullmatch(s.line)
    if not m:
        raise NotMine("not a Go count profile header")
    p = Parsed([(m[1], "count")], (m[1], "count"), 1, adjust="all")
    while s.scan():
        line = s.line
        if is_space_or_comment(line):
            continue
        if line.startswith("---"):
            break
        m = _COUNT.fullmatch(line)
        if not m:
            raise s.error("not a count line ('N @ 0xaddress ...')")
        addrs = _addresses(s, m[2])
        p.add([_int(s, m[1], 0)], addrs)
    return _rest(s, p)


# ---- threads ------------------------------------------------------------------

def parse_thread(s: Scanner) -> Parsed:
    while s.scan() and is_space_or_comment(s.line):
        pass
    line = s.line
    if THREADZ.search(line):
        while s.scan():  # skip to the first thread
            line = s.line
            if is_map_sentinel(line) or line.startswith("-"):
                break
    elif not THREAD.search(line):
        raise NotMine("not a thread profile header")
    p = Parsed([("thread", "count")], ("thread", "count"), 1, adjust="caller")
    while not is_map_sentinel(line) and not line.startswith("---- no stack trace for"):
        if not THREAD.search(line):
            raise s.not_mine("expected '--- Thread ID (name: NAME/TID) stack: ---' or the memory map "
                             f"section, found {line[:60]!r}")
        line, addrs = _thread_stack(s)
        if addrs:
            p.add([1], addrs)
        else:  # [same as previous thread]: one more of the last
            p.bump_last()
    _rest(s, p)
    dedupe_leaf(p)
    return p


def _thread_stack(s: Scanner) -> tuple[str, list[int]]:
    """Addresses up to the next ``---`` line (none for a repeated thread); that line."""
    line, same, addrs = "", False, []
    while s.scan():
        line = trim(s.line)
        if not line:
            continue
        if line.startswith("---"):
            break
        if "same as previous thread" in line:
            same = True
            continue
        addrs += _addresses(s, line)
    return line, [] if same else addrs


# ---- contention ---------------------------------------------------------------

def parse_contention(s: Scanner) -> Parsed:
    if not s.scan() or not s.line.startswith(CONTENTION_PREFIXES):
        raise NotMine("not a contention profile header")
    p = Parsed([("contentions", "count"), ("delay", "nanoseconds")], ("contentions", "count"), 1,
               adjust="all")
    hz = _attributes(s, p)
    while True:
        line = trim(s.line)
        if line.startswith("---"):
            break
        if not is_space_or_comment(line):
            m = _CONTENTION_SAMPLE.search(line)
            if not m:
                raise s.not_mine("not a contention sample ('delay count @ addresses')")
            values = _contention_values(s, _int(s, m[1]), _int(s, m[2]), p.period, hz)
            p.add(values, _addresses(s, m[3]))
        if not s.scan():
            break
    return _rest(s, p)


def _attributes(s: Scanner, p: Parsed) -> int:
    """Read ``name = value`` lines into ``p``; the CPU frequency (0 if not given)."""
    hz = 0
    while s.scan():
        line = trim(s.line)
        if is_space_or_comment(line):
            continue
        if line.startswith("---") or "=" not in line:
            break
        key, value = (trim(x) for x in line.split("=", 1))
        if key not in ("cycles/second", "sampling period", "ms since reset", "discarded samples"):
            raise s.not_mine(f"unknown contention profile attribute {key!r}")  # 'format': a Java profile
        try:
            number = go_int(value, 0)
        except ValueError as exc:
            if key == "discarded samples":
                continue
            raise s.not_mine(f"{key}: {exc}") from None
        if key == "cycles/second":
            hz = number
        elif key == "sampling period":
            p.period = number
        elif key == "ms since reset":
            if checked(number * 1_000_000) is None:
                raise s.error(f"ms since reset {number} too large")
            p.duration_nanos = number * 1_000_000
    return hz


def _contention_values(s: Scanner, delay: int, count: int, period: int, hz: int) -> list[int]:
    """[count, delay in ns], un-sampled: counts times the period, delays from cycles to ns."""
    if period > 0:
        if hz > 0:
            scaled = to_int64(float(delay) * float(period) / (float(hz) / 1e9))
            if scaled is None:
                raise s.error(f"delay {delay} too large once scaled")
            delay = scaled
        counted = checked(count * period)
        if counted is None:
            raise s.error("contention count too large once multiplied by the sampling period")
        count = counted
    return [count, delay]
