"""Compiled twin of :func:`polyprof.formats.span_bytes.sub_spans` (numba, no compiler needed).

Imported only when the decode kernels of :mod:`polyprof.wire.vector` are in use (large
inputs); it gives exactly the numpy twin's answer or None on damage (the caller's numpy walk
then names it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from polyprof.wire._compiled import _spans_equal, _varint

__all__ = ["sub_spans"]

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}  # as wire/_compiled.py: no allocation
_DAMAGED, _FULL = -2, -1
#: Up to this many bytes of ids, they are written in one pass into a buffer with a slot for every
#: LEN field the input could hold (reserved, its pages touched only as far as written: 216 MB
#: for 54M callchain entries); beyond it a first pass counts them.
_ONE_PASS_MAX = 1 << 31


@njit(inline="always", **_OPTIONS)
def _skip(buf, p, end, wt):
    """(start, length, next position) of the value of wire type ``wt`` at ``p``; next -1 on damage."""
    if wt == 0:
        _, p = _varint(buf, p, end)
        return p, np.int64(0), p
    if wt == 1 or wt == 5:
        q = p + (8 if wt == 1 else 4)
        return p, np.int64(0), q if q <= end else np.int64(-1)
    if wt == 2:
        raw, p = _varint(buf, p, end)
        if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
            return p, np.int64(0), np.int64(-1)
        return p, np.int64(raw), p + np.int64(raw)
    return p, np.int64(0), np.int64(-1)


@njit(inline="always", **_OPTIONS)
def _words(buf, aligned, s, n):
    """The span's first 16 bytes as two little-endian words (zero past its end); from three of
    the buffer's ``aligned`` words (``buf`` viewed as uint64) unless they reach its end."""
    q = s >> 3
    if n > 0 and q + 2 < aligned.size:
        r = np.uint64(8 * (s & 7))
        a, b, c = aligned[q], aligned[q + 1], aligned[q + 2]
        w0 = a >> r
        w1 = b >> r
        if r:
            w0 |= b << (np.uint64(64) - r)
            w1 |= c << (np.uint64(64) - r)
        if n < 8:
            return w0 & ((np.uint64(1) << np.uint64(8 * n)) - np.uint64(1)), np.uint64(0)
        if n < 16:
            w1 &= (np.uint64(1) << np.uint64(8 * (n - 8))) - np.uint64(1)
        return w0, w1
    w0 = np.uint64(0)
    w1 = np.uint64(0)
    for j in range(min(n, 8)):
        w0 |= np.uint64(buf[s + j]) << np.uint64(8 * j)
    for j in range(8, min(n, 16)):
        w1 |= np.uint64(buf[s + j]) << np.uint64(8 * (j - 8))
    return w0, w1


@njit(inline="always", **_OPTIONS)
def _hash(buf, s, n, w0, w1):
    """A span's hash: from its two words when it has at most 16 bytes (no chain of multiplies
    per byte), else from every byte."""
    mix = np.uint64(0x9E3779B97F4A7C15)
    if n <= 16:
        h = (w0 * mix) ^ ((w1 + np.uint64(n)) * np.uint64(0xC2B2AE3D27D4EB4F))
    else:
        h = np.uint64(n) * mix
        for j in range(s, s + n):
            h = (h ^ (h >> np.uint64(29)) ^ np.uint64(buf[j])) * mix
    return h ^ (h >> np.uint64(32))


@njit(inline="always", **_OPTIONS)
def group_of(buf, aligned, table, s, n, k, groups, first_k, first_start, first_len, first_words):  # noqa: ANN001, ANN202
    """The group of span ``buf[s:s+n]`` (the ``k``-th) through the open-addressing ``table``:
    an existing one, or new group ``groups`` (its first span recorded); -1 when the group
    arrays are full."""
    mask = np.uint64(table.size - 1)
    w0, w1 = _words(buf, aligned, s, n)
    at = _hash(buf, s, n, w0, w1) & mask
    while True:
        g = table[at]
        if g < 0:
            if groups >= first_start.size:
                return -1
            table[at] = groups
            first_k[groups], first_start[groups], first_len[groups] = k, s, n
            first_words[groups, 0], first_words[groups, 1] = w0, w1
            return groups
        if first_len[g] == n and first_words[g, 0] == w0 and first_words[g, 1] == w1 and (
                n <= 16 or _spans_equal(buf, first_start[g], s, n)):
            return g
        at = (at + np.uint64(1)) & mask


@njit(**_OPTIONS)
def _walk(buf, aligned, starts, ends, field, counts, table, ids, first_k, first_start, first_len, first_words, sizes,
          slot, values, present, span, spans):
    """Count (``ids`` empty: into ``counts``) or number by content (groups in order of first
    sight, through the open-addressing ``table``) the LEN fields ``field`` of every message.
    ``sizes[g]``: the members of group ``g``. On the way, varint field ``number`` with
    ``slot[number] >= 0`` goes to ``values[m, slot[number]]`` (the last one wins) and LEN
    field ``span`` to ``spans[m]`` (start, length of the last one, how many). Returns the
    number of groups, -1 when ``first_start`` is full, -2 on damage."""
    fill = ids.size > 0
    k = 0
    groups = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        c = 0
        while p < end:
            tag, p = _varint(buf, p, end)
            if p < 0:
                return _DAMAGED
            wt = np.int64(tag & np.uint64(7))
            number = np.int64(tag >> np.uint64(3))
            if number == 0 or wt == 3 or wt == 4 or wt == 6 or wt == 7:
                return _DAMAGED
            if wt == 0 and number < slot.size and slot[number] >= 0:
                value, p = _varint(buf, p, end)
                if p < 0:
                    return _DAMAGED
                values[m, slot[number]] = value
                present[m, slot[number]] = True
                continue
            s, n, p = _skip(buf, p, end, wt)
            if p < 0:
                return _DAMAGED
            if wt == 2 and number == span:
                spans[m, 0], spans[m, 1] = s, n
                spans[m, 2] += 1
            if wt != 2 or number != field:
                continue
            c += 1
            if not fill:
                continue
            g = group_of(buf, aligned, table, s, n, k, groups, first_k, first_start, first_len, first_words)
            if g < 0:
                return _FULL
            if g == groups:
                sizes[g] = 0
                groups += 1
            sizes[g] += 1
            ids[k] = g
            k += 1
        counts[m] = c
    return groups


def sub_spans(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int, numbers: tuple[int, ...] = (),
              span: int = -1) -> tuple[np.ndarray, ...] | None:
    """See :func:`polyprof.formats.span_bytes.sub_spans_and_fields`; None on damage or when more
    than a quarter of the spans are distinct (the caller's numpy path then groups them)."""
    if starts.size and (int(starts.min()) < 0 or int(ends.max()) > buf.size):
        return None
    counts = np.zeros(starts.size, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    slot = np.full(max(numbers, default=0) + 1, -1, dtype=np.int64)
    slot[list(numbers)] = np.arange(len(numbers))
    values = np.zeros((starts.size, len(numbers)), dtype=np.uint64)
    present = np.zeros((starts.size, len(numbers)), dtype=bool)
    spans = np.zeros((starts.size, 3), dtype=np.int64)
    extra = (slot, values, present, span, spans)
    aligned = buf[:buf.size // 8 * 8].view("<u8")  # the words _words reads spans from
    room = int(np.maximum(ends - starts, 0).sum()) // 2  # the most LEN fields the bytes can hold
    if room * 4 > _ONE_PASS_MAX:  # count them first
        if _walk(buf, aligned, starts, ends, field, counts, none, none.astype(np.int32), none, none, none,
                 np.zeros((0, 2), dtype=np.uint64), none, *extra) < 0:
            return None
        room = int(counts.sum())
    if not room:
        if _walk(buf, aligned, starts, ends, field, counts, none, none.astype(np.int32), none, none, none,
                 np.zeros((0, 2), dtype=np.uint64), none, *extra) < 0:
            return None
        tail = (values, present, spans[:, 0], np.where(spans[:, 2] > 0, spans[:, 1], -1), spans[:, 2])
        return (counts, none, none, none, none, none, *tail)
    ids = np.empty(room, dtype=np.int32 if room < 2**31 else np.int64)  # pages touched as written
    cap, most = 1 << 16, 1 << max(room // 2 - 1, 1 << 16).bit_length()
    while cap <= most:
        table = np.full(cap, -1, dtype=np.int64)
        first_k, first_start, first_len, sizes = (np.empty(cap // 2, dtype=np.int64) for _ in range(4))
        first_words = np.empty((cap // 2, 2), dtype=np.uint64)
        spans[:] = 0
        groups = _walk(buf, aligned, starts, ends, field, counts, table, ids, first_k, first_start, first_len, first_words,
                       sizes, *extra)
        if groups == _DAMAGED:
            return None
        if groups >= 0:
            total = int(counts.sum())
            tail = (values, present, spans[:, 0], np.where(spans[:, 2] > 0, spans[:, 1], -1), spans[:, 2])
            # ids[:total] is a view: the reservation's unwritten pages were never touched, so it
            # costs no memory, where a copy cost 216 MB and 0.3 s for 54M callchain entries.
            return (counts, ids[:total], first_k[:groups].copy(),
                    first_start[:groups].copy(), first_len[:groups].copy(), sizes[:groups].copy(), *tail)
        cap *= 8
    return None
