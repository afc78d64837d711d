"""Compiled twins of Perfetto's own decoders (numba): one pass per message instead of numpy passes.

:func:`decode_flat_compiled` is the twin of :func:`._flat.decode_flat`:

It accepts exactly the packets the numpy decoder accepts (see :mod:`._flat`
for the rule) and gives the same values for the fields the reader uses: the
top-level ``TOP`` fields, the PerfSample ``INNER`` fields and the follower
counts (repeated inner field 7). A differential test compares the two on
real and random packets. Imported only once the wire kernels are compiled
(``wire.vector.compiled()``), i.e. for large traces.

:func:`callstack_entries` decodes interned ``Callstack`` entries (iid, frame
ids) as ``_tables._callstacks`` does with the field walker, or gives None
for anything unusual (the walker then decides, and reports errors).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from polyprof.wire._compiled import _varint

__all__ = ["callstack_entries", "decode_flat_compiled"]

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}
_PERF_KEY = (66 << 3) | 2
_MAX_FLAT = 2048
_FOLLOWER = 7


@njit(inline="always", **_OPTIONS)
def _slot(slots, number):  # noqa: ANN001, ANN202 - numba
    """Column of field ``number`` (``slots``: a table by field number), -1 if not wanted."""
    return slots[number] if 0 <= number < slots.size else -1


@njit(**_OPTIONS)
def _packet(buf, p, end, m, top_f, top_p, top_v, in_f, in_p, in_v, fvals, k):  # noqa: ANN001, ANN202, PLR0913
    """Decode packet ``m``; the new follower count ``k``, or -1 when the packet is not flat."""
    pay_start = pay_end = np.int64(-1)
    while p < end:
        nested = pay_start <= p < pay_end  # keys are read in order: only the payload's end matters
        key, p = _varint(buf, p, end)
        if p < 0 or p >= end:  # over-long varint, or a key without a value
            return -1
        val, q = _varint(buf, p, end)
        if q < 0:
            return -1
        if key == _PERF_KEY and pay_start < 0:
            if val > np.uint64(end - q):
                return -1  # the payload reaches past the packet
            pay_start, pay_end = q, q + np.int64(val)
            j = _slot(top_f, 66)
            if j >= 0:
                top_p[j, m], top_v[j, m] = True, val
            p = q
            continue
        if key & np.uint64(7) != 0:  # a string, a fixed-width field or a second perf_sample
            return -1
        number = np.int64(key >> np.uint64(3))
        if nested:
            if q > pay_end:
                return -1  # the payload ends inside this field
            j = _slot(in_f, number)
            if j >= 0:
                in_p[j, m], in_v[j, m] = True, val
            if number == _FOLLOWER:
                fvals[k] = val
                k += 1
        else:
            j = _slot(top_f, number)
            if j >= 0:
                top_p[j, m], top_v[j, m] = True, val
        p = q
    return k


@njit(**_OPTIONS)
def _decode(buf, starts, ends, top_f, top_p, top_v, in_f, in_p, in_v, ok, fvals, fcount):  # noqa: ANN001, ANN202
    k = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        if end - p > _MAX_FLAT or end <= p or buf[end - 1] >= 0x80:
            continue
        k2 = _packet(buf, p, end, m, top_f, top_p, top_v, in_f, in_p, in_v, fvals, k)
        if k2 < 0:
            top_p[:, m] = False
            top_v[:, m] = 0
            in_p[:, m] = False
            in_v[:, m] = 0
            continue
        ok[m] = True
        fcount[m] = k2 - k
        k = k2
    return k


def _slots(fields: tuple[int, ...]) -> np.ndarray:
    table = np.full(max(fields) + 1, -1, dtype=np.int64)
    table[list(fields)] = np.arange(len(fields))
    return table


def decode_flat_compiled(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, top: tuple[int, ...],
                         inner: tuple[int, ...]) -> tuple[np.ndarray, dict, dict, tuple[np.ndarray, np.ndarray]]:
    """(ok, top, inner, followers) as :class:`._flat.Flat` holds them, for the fields ``top`` and ``inner``."""
    n = starts.size
    top_f, in_f = _slots(top), _slots(inner)
    # One row per field (a contiguous column per field for the numpy passes that follow).
    top_p, top_v = np.zeros((len(top), n), dtype=bool), np.zeros((len(top), n), dtype=np.uint64)
    in_p, in_v = np.zeros((len(inner), n), dtype=bool), np.zeros((len(inner), n), dtype=np.uint64)
    ok, fcount = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
    span = ends - starts
    # Written before read, and read only up to what was written: no zero-filled (page-faulted) 16 MB.
    fvals = np.empty(int(span[span <= _MAX_FLAT].sum()) // 2 + 1 if n else 1, dtype=np.uint64)
    used = _decode(buf, starts.astype(np.int64), ends.astype(np.int64), top_f, top_p, top_v, in_f, in_p, in_v,
                   ok, fvals, fcount)
    return (ok, {f: (top_p[j], top_v[j]) for j, f in enumerate(top)},
            {f: (in_p[j], in_v[j]) for j, f in enumerate(inner)}, (fvals[:used].copy(), fcount))


@njit(**_OPTIONS)
def _skip(buf, p, end, wt):  # noqa: ANN001, ANN202 - numba
    """Position after a field's value of wire type ``wt`` at ``p``; -1 when malformed."""
    if wt == 0:
        _, p = _varint(buf, p, end)
        return p
    if wt == 1 or wt == 5:
        p += 8 if wt == 1 else 4
        return p if p <= end else -1
    if wt == 2:
        ln, p = _varint(buf, p, end)
        if p < 0 or ln > np.uint64(end - p):
            return -1
        return p + np.int64(ln)
    return -1


@njit(**_OPTIONS)
def _callstacks(buf, starts, ends, iids, counts, frames):  # noqa: ANN001, ANN202 - numba
    """Fill iid, frame count and frame ids of every entry; the number of frames, or -1."""
    k = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        first = k
        while p < end:
            key, p = _varint(buf, p, end)
            if p < 0:
                return -1
            wt, number = key & np.uint64(7), key >> np.uint64(3)
            if number == 0:
                return -1
            if number == 1 or (number == 2 and wt == 0):
                if wt != 0:
                    return -1
                val, p = _varint(buf, p, end)
                if p < 0:
                    return -1
                if number == 1:
                    iids[m] = val
                else:
                    frames[k] = val
                    k += 1
            elif number == 2:
                if wt != 2:
                    return -1
                ln, p = _varint(buf, p, end)
                if p < 0 or ln > np.uint64(end - p):
                    return -1
                stop = p + np.int64(ln)
                while p < stop:
                    val, p = _varint(buf, p, stop)
                    if p < 0:
                        return -1
                    frames[k] = val
                    k += 1
            else:
                p = _skip(buf, p, end, np.int64(wt))
                if p < 0:
                    return -1
        counts[m] = k - first
    return k


def callstack_entries(buf: np.ndarray, starts: np.ndarray,
                      ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(iid per entry, frame ids end to end, frame count per entry) of ``Callstack`` messages
    ``buf[starts:ends]``; None when one is malformed or unusual (iid not a varint)."""
    n = starts.size
    iids, counts = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.int64)
    frames = np.empty(int((ends - starts).sum()) + 1, dtype=np.uint64)  # a frame id takes a byte at least
    used = _callstacks(buf, starts.astype(np.int64), ends.astype(np.int64), iids, counts, frames)
    if used < 0:
        return None
    return iids, frames[:used].copy(), counts
