"""Compiled twins of the decode kernels in :mod:`polyprof.wire.vector` (numba, no compiler needed).

Each function here gives exactly the result of its numpy twin (a
differential hypothesis test checks it over random and real inputs) or
``None`` when the input is malformed, so that the numpy twin runs and raises
its precise error. :mod:`polyprof.wire.vector` imports this module only
after a read has decoded enough bytes to pay for loading numba and the
cached machine code (see ``vector._kernels``); small inputs never import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["factorize", "frame_packets", "gather_runs", "hash_runs", "le32_records", "nested_scalars",
           "packed_varints", "scalar_fields", "walk_fields"]

_OK, _BAD = 0, 1

#: Kernels allocate nothing, so they run without numba's reference counting: with it, every
#: call of ``_varint`` (an array argument) costs an atomic incref/decref pair, which made the
#: walkers about seven times slower (54M callchain entries: 10 s instead of 1.5 s).
_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}
_kernel = njit(**_OPTIONS)


@njit(inline="always", **_OPTIONS)
def _varint(buf, p, end):  # noqa: ANN001, ANN202 - numba
    """(value, next position); next position -1 when truncated or longer than ten bytes.

    A one-byte fast path and a uint64 shift: measured quicker than a ``range(10)`` loop
    with early returns.
    """
    b = np.uint64(buf[p]) if p < end else np.uint64(0x80)
    if b < 0x80:
        return b, p + 1
    value = b & np.uint64(0x7F)
    shift = np.uint64(7)
    q = p + 1
    while q < end and q < p + 10:
        b = np.uint64(buf[q])
        q += 1
        value |= (b & np.uint64(0x7F)) << shift
        if b < 0x80:
            return value, q
        shift += np.uint64(7)
    return value, np.int64(-1)


@njit(inline="always", **_OPTIONS)
def _tag(buf, p, end):  # noqa: ANN001, ANN202 - numba
    """(field number, wire type, next position) of the tag at ``p``; next position -1 when it is
    cut, names field 0, or has a wire type protobuf does not allow here (groups, 6, 7)."""
    tag, p = _varint(buf, p, end)
    wt = np.int64(tag & np.uint64(7))
    number = np.int64(tag >> np.uint64(3))
    if p < 0 or number == 0 or wt == 3 or wt == 4 or wt == 6 or wt == 7:
        return number, wt, np.int64(-1)
    return number, wt, p


@_kernel
def _fields(buf, starts, ends, offsets, msg, field, wire, value, start, length, fill):  # noqa: ANN001, ANN202
    """Count (``fill`` False: into ``offsets[m+1]``) or decode the fields of every message."""
    k = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        n = 0
        while p < end:
            number, wt, p = _tag(buf, p, end)
            if p < 0:
                return _BAD
            val = np.uint64(0)
            s = ln = np.int64(0)
            if wt == 0:
                val, p = _varint(buf, p, end)
                if p < 0:
                    return _BAD
            elif wt == 2:
                raw, p = _varint(buf, p, end)
                if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
                    return _BAD
                s, ln = p, np.int64(raw)
                p += ln
            else:
                width = 8 if wt == 1 else 4
                if p + width > end:
                    return _BAD
                for j in range(width):
                    val |= np.uint64(buf[p + j]) << np.uint64(8 * j)
                p += width
            if fill:
                msg[k], field[k], wire[k], value[k], start[k], length[k] = m, number, wt, val, s, ln
                k += 1
            n += 1
        if not fill:
            offsets[m + 1] = offsets[m] + n
    return _OK


def walk_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """(msg, field, wire, value, start, length) of every field of every message, message-major."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    if starts.size and (int(starts.min()) < 0 or int(ends.max()) > buf.size):
        return None
    offsets = np.zeros(starts.size + 1, dtype=np.int64)
    z = np.zeros(0, dtype=np.int64)
    if _fields(buf, starts, ends, offsets, z, z, z.astype(np.int8), z.astype(np.uint64), z, z, False) != _OK:
        return None
    total = int(offsets[-1])
    cols = (np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.int8),
            np.empty(total, np.uint64), np.empty(total, np.int64), np.empty(total, np.int64))
    _fields(buf, starts, ends, offsets, *cols, True)
    return cols


@_kernel
def _packed(b, lengths, values, counts):  # noqa: ANN001, ANN202
    k = 0
    p = 0
    for i in range(lengths.size):
        end = p + lengths[i]
        n = 0
        while p < end:
            v, p = _varint(b, p, end)
            if p < 0:
                return _BAD
            values[k] = v
            k += 1
            n += 1
        counts[i] = n
    return _OK


def packed_varints(b: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Values and per-span counts of the packed varints in ``b`` (the spans' bytes end to end)."""
    values = np.empty(int(np.count_nonzero(b < 0x80)), dtype=np.uint64)
    counts = np.zeros(lengths.size, dtype=np.int64)
    if _packed(b, np.ascontiguousarray(lengths, dtype=np.int64), values, counts) != _OK:
        return None
    return values, counts


@_kernel
def _frame(buf, pos, end, max_len, starts, ends):  # noqa: ANN001, ANN202
    k = 0
    while pos < end and buf[pos] == 0x0A:
        ln, p = _varint(buf, pos + 1, end)
        if p < 0 or ln > np.uint64(max_len) or p + np.int64(ln) > end:
            break
        starts[k] = p
        pos = p + np.int64(ln)
        ends[k] = pos
        k += 1
    return k, pos


def frame_packets(buf: np.ndarray, pos: int, end: int, max_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Packets ``0A len payload`` from ``pos`` on, while they are complete and at most ``max_len``:
    (payload starts, payload ends, where the run stopped)."""
    room = max((end - pos) // 2, 0)
    starts = np.empty(room, dtype=np.int64)
    ends = np.empty(room, dtype=np.int64)
    k, stop = _frame(buf, pos, end, max_len, starts, ends)
    return starts[:k].copy(), ends[:k].copy(), int(stop)


@_kernel
def _hash(values, offsets, mix, base, out):  # noqa: ANN001, ANN202
    for i in range(offsets.size - 1):
        h = np.uint64(0)
        power = np.uint64(1)
        for k in range(offsets[i], offsets[i + 1]):
            y = (np.uint64(values[k]) + np.uint64(1)) * mix
            y ^= y >> np.uint64(31)
            h += y * power
            power *= base
        out[i] = h


def hash_runs(values: np.ndarray, offsets: np.ndarray, mix: np.uint64, base: np.uint64) -> np.ndarray:
    out = np.empty(offsets.size - 1, dtype=np.uint64)
    _hash(values, offsets, mix, base, out)
    return out


@_kernel
def _gather(values, starts, lengths, out):  # noqa: ANN001, ANN202
    k = 0
    for i in range(starts.size):
        s = starts[i]
        for j in range(lengths[i]):
            out[k] = values[s + j]
            k += 1


def gather_runs(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    out = np.empty(int(lengths.sum()), dtype=values.dtype)
    _gather(np.ascontiguousarray(values), starts, lengths, out)
    return out


@_kernel
def _le32(buf, pos, end, starts, ends):  # noqa: ANN001, ANN202
    k = 0
    while pos + 4 <= end:
        size = np.int64(buf[pos]) | (np.int64(buf[pos + 1]) << 8) | (np.int64(buf[pos + 2]) << 16) | \
            (np.int64(buf[pos + 3]) << 24)
        if size == 0 or pos + 4 + size > end:
            break
        starts[k] = pos + 4
        pos += 4 + size
        ends[k] = pos
        k += 1
    return k, pos


def le32_records(buf: np.ndarray, pos: int, end: int) -> tuple[np.ndarray, np.ndarray, int]:
    room = max((end - pos) // 5, 0)
    starts = np.empty(room, dtype=np.int64)
    ends = np.empty(room, dtype=np.int64)
    k, stop = _le32(buf, pos, end, starts, ends)
    return starts[:k].copy(), ends[:k].copy(), int(stop)


@njit(inline="always", **_OPTIONS)
def _scalars_one(buf, p, end, slot, values, present, row, lfield, lstart, llen):  # noqa: ANN001, ANN202
    """The wanted varint fields of the message ``buf[p:end]`` into ``values[:, row]`` (column by
    column: the caller's columns come out contiguous), and the span of its last LEN field
    ``lfield`` (if not -1) into ``lstart[row]``, ``llen[row]``."""
    while p < end:
        tag, p = _varint(buf, p, end)
        if p < 0:
            return _BAD
        wt = np.int64(tag & np.uint64(7))
        number = np.int64(tag >> np.uint64(3))
        if number == 0 or wt == 3 or wt == 4 or wt == 6 or wt == 7:
            return _BAD
        if wt == 0:
            val, p = _varint(buf, p, end)
            if p < 0:
                return _BAD
            if number < slot.size and slot[number] >= 0:
                values[slot[number], row] = val
                present[slot[number], row] = True
        elif wt == 2:
            raw, p = _varint(buf, p, end)
            if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
                return _BAD
            if number == lfield:
                lstart[row] = p
                llen[row] = np.int64(raw)
            p += np.int64(raw)
        else:
            p += 8 if wt == 1 else 4
            if p > end:
                return _BAD
    return _OK


@_kernel
def _scalars(buf, starts, ends, slot, values, present, none):  # noqa: ANN001, ANN202
    for m in range(starts.size):
        if _scalars_one(buf, starts[m], ends[m], slot, values, present, m, -1, none, none) != _OK:
            return _BAD
    return _OK


def scalar_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                  numbers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    if starts.size and (int(starts.min()) < 0 or int(ends.max()) > buf.size):
        return None
    slot = np.full(max(numbers) + 1, -1, dtype=np.int64)
    slot[list(numbers)] = np.arange(len(numbers))
    values = np.zeros((len(numbers), starts.size), dtype=np.uint64)
    present = np.zeros((len(numbers), starts.size), dtype=bool)
    if _scalars(buf, starts, ends, slot, values, present, np.zeros(0, dtype=np.int64)) != _OK:
        return None
    return values.T, present.T


@_kernel
def _nested(buf, starts, ends, field, slot, counts, values, present, fill, lfield, lstart,  # noqa: ANN001, ANN202
            llen):
    k = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        n = 0
        while p < end:
            tag, p = _varint(buf, p, end)
            if p < 0:
                return _BAD
            wt = np.int64(tag & np.uint64(7))
            number = np.int64(tag >> np.uint64(3))
            if number == 0 or wt == 3 or wt == 4 or wt == 6 or wt == 7:
                return _BAD
            if wt == 0:
                _, p = _varint(buf, p, end)
                if p < 0:
                    return _BAD
            elif wt == 2:
                raw, p = _varint(buf, p, end)
                if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
                    return _BAD
                if number == field:
                    if fill and _scalars_one(buf, p, p + np.int64(raw), slot, values, present, k, lfield, lstart,
                                             llen) != _OK:
                        return _BAD
                    k += 1
                    n += 1
                p += np.int64(raw)
            else:
                p += 8 if wt == 1 else 4
                if p > end:
                    return _BAD
        counts[m] = n
    return _OK


def nested_scalars(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int, numbers: tuple[int, ...],
                   span: int = -1) -> tuple[np.ndarray, ...] | None:
    """(counts, values, present, span starts, span lengths); the spans (of LEN field ``span``
    of each sub-message, length -1 when absent) are empty when ``span`` is -1."""
    if starts.size and (int(starts.min()) < 0 or int(ends.max()) > buf.size):
        return None
    slot = np.full(max(numbers) + 1, -1, dtype=np.int64)
    slot[list(numbers)] = np.arange(len(numbers))
    counts = np.zeros(starts.size, dtype=np.int64)
    none_v = np.zeros((len(numbers), 0), dtype=np.uint64)
    none_p = np.zeros((len(numbers), 0), dtype=bool)
    none = np.zeros(0, dtype=np.int64)
    if _nested(buf, starts, ends, field, slot, counts, none_v, none_p, False, -1, none, none) != _OK:
        return None
    total = int(counts.sum())
    values = np.zeros((len(numbers), total), dtype=np.uint64)
    present = np.zeros((len(numbers), total), dtype=bool)
    lstart = np.zeros(total if span >= 0 else 0, dtype=np.int64)
    llen = np.full(lstart.size, -1, dtype=np.int64)
    if _nested(buf, starts, ends, field, slot, counts, values, present, True, span, lstart, llen) != _OK:
        return None
    return counts, values.T, present.T, lstart, llen


@_kernel
def _factorize(k, c0, c1, c2, c3, table, ids, first):  # noqa: ANN001, ANN202
    """Rows (c0[i], .. c{k-1}[i]) numbered in order of first sight through the open-addressing
    ``table`` (slots hold a row's group, -1 when free): the number of groups, or -1 when more
    groups than ``first`` has room for (half the table) would be needed."""
    mask = np.uint64(table.size - 1)
    groups = 0
    limit = first.size
    mix = np.uint64(0x9E3779B97F4A7C15)
    for i in range(c0.size):
        h = np.uint64(c0[i]) * mix
        if k > 1:
            h = (h ^ (h >> np.uint64(29)) ^ np.uint64(c1[i])) * mix
        if k > 2:
            h = (h ^ (h >> np.uint64(29)) ^ np.uint64(c2[i])) * mix
        if k > 3:
            h = (h ^ (h >> np.uint64(29)) ^ np.uint64(c3[i])) * mix
        slot = (h ^ (h >> np.uint64(32))) & mask
        while True:
            g = table[slot]
            if g < 0:
                if groups >= limit:
                    return -1
                table[slot] = groups
                first[groups] = i
                ids[i] = groups
                groups += 1
                break
            r = first[g]
            if c0[r] == c0[i] and (k < 2 or c1[r] == c1[i]) and (k < 3 or c2[r] == c2[i]) and \
                    (k < 4 or c3[r] == c3[i]):
                ids[i] = g
                break
            slot = (slot + np.uint64(1)) & mask
    return groups


def factorize(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(group of each row, first row of each group), groups numbered in order of first sight;
    ``cols``: one to four int64 columns of equal length. None when more than a quarter of the
    rows are distinct (a sort is then as quick, and the table would be large)."""
    n = cols[0].size
    padded = list(cols) + [cols[0]] * (4 - len(cols))
    ids = np.empty(n, dtype=np.int64)
    cap, most = 1 << 16, 1 << max(n // 2 - 1, 1 << 16).bit_length()  # most: room for n/4 groups
    while cap <= most:
        table = np.full(cap, -1, dtype=np.int64)
        first = np.empty(cap // 2, dtype=np.int64)
        groups = _factorize(len(cols), *padded, table, ids, first)
        if groups >= 0:
            return ids, first[:groups].copy()
        cap *= 4  # (the rows read so far are a poor guess: most groups show up early)
    return None


@_kernel
def _spans_equal(values, a, b, length):  # noqa: ANN001, ANN202
    for j in range(length):
        if values[a + j] != values[b + j]:
            return False
    return True


@_kernel
def _factorize_spans(values, starts, lengths, table, ids, first):  # noqa: ANN001, ANN202
    """Spans ``values[starts[i]:starts[i]+lengths[i]]`` numbered by content in order of first
    sight through the open-addressing ``table`` (slots hold a span's group, -1 when free; at
    least twice as many slots as spans): equal hashes are confirmed value by value, so
    colliding spans stay apart. Returns the number of groups."""
    mask = np.uint64(table.size - 1)
    mix = np.uint64(0x9E3779B97F4A7C15)
    groups = 0
    empty = -1  # the group of empty spans (often most of them: Chromium's shared names)
    for i in range(starts.size):
        s, n = starts[i], lengths[i]
        if n == 0:
            if empty < 0:
                empty = groups
                first[groups] = i
                groups += 1
            ids[i] = empty
            continue
        h = np.uint64(n) * mix
        for j in range(s, s + n):
            h = (h ^ (h >> np.uint64(29)) ^ np.uint64(values[j])) * mix
        slot = (h ^ (h >> np.uint64(32))) & mask
        while True:
            g = table[slot]
            if g < 0:
                table[slot] = groups
                first[groups] = i
                ids[i] = groups
                groups += 1
                break
            r = first[g]
            if lengths[r] == n and _spans_equal(values, starts[r], s, n):
                ids[i] = g
                break
            slot = (slot + np.uint64(1)) & mask
    return groups


def factorize_spans(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group of each span, first span of each group), groups numbered in order of first sight."""
    n = starts.size
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    slots = 1 << max(2 * int(np.count_nonzero(lengths)), 16).bit_length()
    table = np.full(slots, -1, dtype=np.int32 if n < 2**30 else np.int64)
    ids = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    groups = _factorize_spans(np.ascontiguousarray(values), np.ascontiguousarray(starts, dtype=np.int64),
                              np.ascontiguousarray(lengths, dtype=np.int64), table, ids, first)
    return ids, first[:groups].copy()


@_kernel
def _nested_ids(buf, starts, ends, field, slot, scratch, seen, table, ids, first, rows):  # noqa: ANN001, ANN202
    """:func:`nested_scalars` that keeps each distinct sub-message row once: ``rows[:, g]`` the
    values of group ``g``, ``ids[k]`` the group of sub-message ``k`` (groups in order of first
    sight, ``first[g]`` its first sub-message). Returns the number of groups, -1 when ``first``
    is full, -2 on damage (the numpy walk then names it)."""
    mask = np.uint64(table.size - 1)
    mix = np.uint64(0x9E3779B97F4A7C15)
    width = scratch.shape[0]
    none = ids[:0]
    k = 0
    groups = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        while p < end:
            tag, p = _varint(buf, p, end)
            if p < 0:
                return -2
            wt = np.int64(tag & np.uint64(7))
            number = np.int64(tag >> np.uint64(3))
            if number == 0 or wt == 3 or wt == 4 or wt == 6 or wt == 7:
                return -2
            if wt == 0:
                _, p = _varint(buf, p, end)
                if p < 0:
                    return -2
            elif wt == 2:
                raw, p = _varint(buf, p, end)
                if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
                    return -2
                if number == field:
                    for j in range(width):
                        scratch[j, 0] = 0
                    if _scalars_one(buf, p, p + np.int64(raw), slot, scratch, seen, 0, -1, none, none) != _OK:
                        return -2
                    h = np.uint64(0)
                    for j in range(width):
                        h = (h ^ (h >> np.uint64(29)) ^ scratch[j, 0]) * mix
                    at = (h ^ (h >> np.uint64(32))) & mask
                    while True:
                        g = table[at]
                        if g < 0:
                            if groups >= first.size:
                                return -1
                            table[at] = groups
                            for j in range(width):
                                rows[j, groups] = scratch[j, 0]
                            first[groups] = k
                            ids[k] = groups
                            groups += 1
                            break
                        same = True
                        for j in range(width):
                            if rows[j, g] != scratch[j, 0]:
                                same = False
                        if same:
                            ids[k] = g
                            break
                        at = (at + np.uint64(1)) & mask
                    k += 1
                p += np.int64(raw)
            else:
                p += 8 if wt == 1 else 4
                if p > end:
                    return -2
    return groups


def nested_ids(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int,
               numbers: tuple[int, ...]) -> tuple[np.ndarray, ...] | None:
    """(sub-messages per message, group of each, values of each group (groups x numbers), first
    sub-message of each group); None on damage or when more than a quarter are distinct."""
    if starts.size and (int(starts.min()) < 0 or int(ends.max()) > buf.size):
        return None
    slot = np.full(max(numbers) + 1, -1, dtype=np.int64)
    slot[list(numbers)] = np.arange(len(numbers))
    counts = np.zeros(starts.size, dtype=np.int64)
    none_v = np.zeros((len(numbers), 0), dtype=np.uint64)
    none = np.zeros(0, dtype=np.int64)
    if _nested(buf, starts, ends, field, slot, counts, none_v, none_v.astype(bool), False, -1, none, none) != _OK:
        return None
    total = int(counts.sum())
    ids = np.empty(total, dtype=np.int32 if total < 2**31 else np.int64)
    scratch = np.zeros((len(numbers), 1), dtype=np.uint64)
    seen = np.zeros((len(numbers), 1), dtype=bool)
    cap, most = 1 << 16, 1 << max(total // 2 - 1, 1 << 16).bit_length()
    while cap <= most:
        table = np.full(cap, -1, dtype=np.int64)
        first = np.empty(cap // 2, dtype=np.int64)
        rows = np.empty((len(numbers), cap // 2), dtype=np.uint64)
        groups = _nested_ids(buf, starts, ends, field, slot, scratch, seen, table, ids, first, rows)
        if groups == -2:
            return None
        if groups >= 0:
            return counts, ids, rows[:, :groups].T.copy(), first[:groups].copy()
        cap *= 8
    return None


def warm() -> None:
    """Load the field walker's machine code (and numba's code generator with it, the first
    load's ~0.5 s) now: :func:`polyprof.wire.vector.prefetch` runs this on a thread while a
    large input is still being inflated."""
    walk_fields(np.frombuffer(b"\x08\x01", dtype=np.uint8), np.zeros(1, np.int64), np.full(1, 2, np.int64))
