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

import numpy as np

from polyprof.formats.pprof_legacy._java import java_symbols
from polyprof.formats.pprof_legacy._maps import apply_maps, parse_maps
from polyprof.formats.pprof_legacy._parsed import INT64_MAX, NotMine, Parsed, Scanner, adjusted, broken, checked
from polyprof.formats.pprof_legacy._stacks import dedupe_leaf, drop_handler_frames
from polyprof.model.tree import segment_positions

__all__ = ["CPU_TYPES", "header", "parse_cpu"]

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
    drop_handler_frames(p)
    apply_maps(p, parse_maps(Scanner(rest, end)))
    dedupe_leaf(p)
    return p


def _records(p: Parsed, data: bytes, word: str, *, adjust: bool) -> int:
    """Read the sample records into ``p``'s columns; the byte offset after the end marker."""
    size = struct.calcsize(word)
    words = np.frombuffer(data, dtype=np.dtype(word[0] + {"I": "u4", "Q": "u8"}[word[1]]),
                          count=len(data) // size).astype(np.uint64)
    w = memoryview(words.data)  # indexing gives Python ints, fast
    n, pos, end = len(words), 5, None
    starts: list[int] = []
    depths: list[int] = []
    while pos < n:
        if pos + 1 >= n:
            raise broken(f"binary CPU profile cut inside a sample record ({len(data) - pos * size} bytes left)",
                         pos * size)
        depth = w[pos + 1]
        if depth > n - pos - 2:
            raise broken(f"sample record says {depth} frames but only {n - pos - 2} words follow "
                         "(truncated or not a CPU profile)", pos * size)
        if depth == 1 and w[pos] == 0 and w[pos + 2] == 0:
            end = pos + 3  # the end marker: the memory map follows
            break
        starts.append(pos)
        depths.append(depth)
        pos += 2 + depth
    if end is None:
        if len(data) > n * size:
            raise broken(f"binary CPU profile cut inside a sample record ({len(data) - n * size} bytes left)",
                         n * size)
        p.warnings.append("binary CPU profile has no end-of-data marker: it may be truncated, and has no memory map")
        end = n
    _columns(p, words, np.array(starts, dtype=np.int64), np.array(depths, dtype=np.int64), adjust)
    return end * size


def _columns(p: Parsed, words: np.ndarray, starts: np.ndarray, depths: np.ndarray, adjust: bool) -> None:
    counts = words[starts]
    too_big = counts > np.uint64(INT64_MAX // p.period)
    if too_big.any():
        i = int(np.flatnonzero(too_big)[0])
        raise broken(f"sample count {int(counts[i])} too large (pprof would wrap it)", int(starts[i]) * words.itemsize)
    offsets = np.concatenate(([0], np.cumsum(depths))).astype(np.int64)
    frame = segment_positions(depths) + np.repeat(starts.astype(np.int64) + 2, depths)  # words after count, depth
    flat = adjusted(words[frame], offsets, "caller" if adjust else "")
    counts = counts.astype(np.int64)
    p.set_columns(flat, offsets, np.stack([counts, counts * p.period], axis=1))
