"""gperftools' binary CPU profiles (C++ and Java), as ``go tool pprof`` reads them.

Layout (every number one machine word, 4 or 8 bytes, either byte order; the
header tells which): header ``0, 3, 0 (C++) or 1 (Java), period in µs, 0``;
then records ``count, depth, pc...`` (leaf first); then the end marker
``0, 1, 0``; then, as text, the memory map (C++) or Java's
``0xaddress function (File.java:line)`` symbol lines.

pprof's corrections, reproduced: return addresses other than the leaf move
back one byte onto the call (C++ only); a frame that is second in nearly
every sample (all but one in 32) is the signal handler's and is removed, at
most twice; a leaf repeated as its own caller (pushed by both the unwinder
and the signal context) is removed once.

Stricter than pprof: a record that runs past the end is an error here (a
64-bit profile cut inside a stack reads as zero addresses in pprof), and a
profile without the end marker gets a warning.
"""

from __future__ import annotations

import struct
from collections import Counter

from polyprof.formats.pprof_legacy._java import java_symbols
from polyprof.formats.pprof_legacy._maps import apply_maps, parse_maps
from polyprof.formats.pprof_legacy._parsed import (
    MASK64,
    NotMine,
    Parsed,
    Sample,
    Scanner,
    broken,
    checked,
)

__all__ = ["dedupe_leaf", "header", "parse_cpu"]

# pprof tries the word formats in this order and takes the first whose header fits.
_WORDS = ("<I", ">I", "<Q", ">Q")
CPU_TYPES = [("samples", "count"), ("cpu", "nanoseconds")]


def header(data: bytes) -> tuple[str, bool, int] | None:
    """(struct word format, is Java, period in µs) if ``data`` starts a legacy CPU profile."""
    for word in _WORDS:
        fmt = struct.Struct(word[0] + "5" + word[1])
        if len(data) < fmt.size:
            continue
        n = fmt.unpack_from(data)
        if n[0] == 0 and n[1] == 3 and n[2] in (0, 1) and n[3] > 0 and n[4] == 0:
            return word, n[2] == 1, n[3]
    return None


def parse_cpu(data: bytes) -> Parsed:
    found = header(data)
    if found is None:
        raise NotMine("not a legacy binary CPU profile header")
    word, java, period_us = found
    period = checked(period_us * 1000)
    if period is None:
        raise broken(f"sampling period {period_us} µs does not fit 64 bits", 12)
    p = Parsed(list(CPU_TYPES), ("cpu", "nanoseconds"), period)
    end = _records(p, data, word, adjust=not java)
    rest = data[end:].decode("latin-1")
    if java:
        java_symbols(p, rest, end)
        return p
    _drop_handler_frames(p)
    apply_maps(p, parse_maps(Scanner(rest, end)))
    dedupe_leaf(p)
    return p


def _records(p: Parsed, data: bytes, word: str, *, adjust: bool) -> int:
    """Read the sample records; the offset just past the end marker."""
    size = struct.calcsize(word)
    pair = struct.Struct(word[0] + "2" + word[1])
    pos, n = 5 * size, len(data)
    while pos < n:
        if pos + pair.size > n:
            raise broken(f"binary CPU profile cut inside a sample record ({n - pos} bytes left)", pos)
        count, depth = pair.unpack_from(data, pos)
        body = pos + pair.size
        if depth > (n - body) // size:
            raise broken(f"sample record says {depth} frames but only {(n - body) // size} words follow "
                         "(truncated or not a CPU profile)", pos)
        addrs = list(struct.unpack_from(f"{word[0]}{depth}{word[1]}", data, body))
        if count == 0 and depth == 1 and addrs[0] == 0:
            return body + size  # the end marker: the memory map follows
        values = [checked(count), checked(count * p.period)]
        if None in values:
            raise broken(f"sample count {count} too large (pprof would wrap it)", pos)
        p.samples.append(Sample(values, p.stack(addrs, "caller" if adjust else "")))
        pos = body + depth * size
    p.warnings.append("binary CPU profile has no end-of-data marker: it may be truncated, and has no memory map")
    return pos


def _drop_handler_frames(p: Parsed) -> None:
    """Remove a second frame common to nearly all samples: the signal handler's.

    The leaf comes from the signal context and is right; the frame above it
    is often pushed by the handler. Two addresses can never both qualify, so
    the scan order does not matter."""
    margin = len(p.samples) // 32
    for _ in range(2):
        counts = Counter(s.locations[1].address for s in p.samples if len(s.locations) > 1)
        for address, count in counts.items():
            if count >= len(p.samples) - margin:
                for s in p.samples:
                    if len(s.locations) > 1 and s.locations[1].address == address:
                        del s.locations[1]
                break


def dedupe_leaf(p: Parsed) -> None:
    """Remove a caller that is the leaf minus one: the same pc seen twice.

    The location stays listed (pprof numbered it already)."""
    for s in p.samples:
        locs = s.locations
        if len(locs) > 1 and locs[0].address == (locs[1].address + 1) & MASK64:
            del locs[1]
