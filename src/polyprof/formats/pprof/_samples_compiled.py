"""Compiled decode of a large pprof file's samples in one pass (numba).

The numpy path (``_read._samples``) walks every field of every sample, then
selects the location ids, the values and the label records, decodes each
group with its own kernel, maps location ids to rows and checks the labels'
string indexes: a dozen passes over arrays of millions of positions. Here
one walk per sample does all of it and writes the final columns (location
rows in the reader's narrow type, CSR offsets, values, label columns).

Anything unusual (a malformed or unknown-wire-type field, a sample with the
wrong number of values, a dangling location id, a label field that is not
a varint, a string index outside the table) makes :func:`decode_samples`
return None, and the numpy path decodes the samples and raises its precise
error: both paths give identical results on every input (differential tests
in ``tests/test_pprof_kernels.py``). Loaded only when the compiled decode
kernels are (a large input), so small inputs never import numba.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from polyprof.wire._compiled import _OPTIONS, _tag, _varint

__all__ = ["Decoded", "decode_samples"]

_OK, _BAD = 0, 1


@njit(inline="always", **_OPTIONS)
def _skip(buf, p, end, wt):  # noqa: ANN001, ANN202 - numba
    """The position after a field's payload of wire type ``wt`` (-1 when malformed)."""
    if wt == 0:
        _, p = _varint(buf, p, end)
        return p
    if wt == 2:
        raw, p = _varint(buf, p, end)
        if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
            return np.int64(-1)
        return p + np.int64(raw)
    width = 8 if wt == 1 else 4
    return p + width if p + width <= end else np.int64(-1)


@njit(**_OPTIONS)
def _count(buf, starts, ends, totals):  # noqa: ANN001, ANN202 - numba
    """Check the samples' framing and count location ids, values and labels into ``totals``."""
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        while p < end:
            number, wt, p = _tag(buf, p, end)
            if p < 0:
                return _BAD
            if (number == 1 or number == 2) and wt == 0:
                totals[number - 1] += 1
            elif (number == 1 or number == 2) and wt == 2:
                raw, p = _varint(buf, p, end)
                if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
                    return _BAD
                stop = p + np.int64(raw)
                while p < stop:
                    _, p = _varint(buf, p, stop)
                    if p < 0:
                        return _BAD
                    totals[number - 1] += 1
                continue
            elif number == 1 or number == 2:
                return _BAD  # a fixed-width location id or value: the numpy path names it
            elif number == 3 and wt == 2:
                totals[2] += 1
            p = _skip(buf, p, end, wt)
            if p < 0:
                return _BAD
    return _OK


@njit(inline="always", **_OPTIONS)
def _label(buf, p, end, size, k, key, sval, num, unit):  # noqa: ANN001, ANN202 - numba
    """Decode one label record (all four fields varints, last one wins) into row ``k``."""
    f0 = f1 = f2 = f3 = np.uint64(0)
    while p < end:
        tag, p = _varint(buf, p, end)
        if p < 0 or tag & np.uint64(7) != 0:
            return _BAD
        v, p = _varint(buf, p, end)
        if p < 0:
            return _BAD
        number = tag >> np.uint64(3)
        if number == 1:
            f0 = v
        elif number == 2:
            f1 = v
        elif number == 3:
            f2 = v
        elif number == 4:
            f3 = v
        else:
            return _BAD
    if f0 >= size or f1 >= size or f3 >= size:
        return _BAD
    key[k], sval[k], num[k], unit[k] = f0, f1, f2, f3
    return _OK


@njit(**_OPTIONS)
def _fill(buf, starts, ends, width, table, size, offsets, locs, values, owner, key, sval, num,  # noqa: ANN001, ANN202
          unit):
    """Write every sample's location rows, values and labels (after :func:`_count` passed)."""
    nl = nv = nlab = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        first_value = nv
        while p < end:
            number, wt, p = _tag(buf, p, end)
            if number == 1 or number == 2:
                stop = end
                if wt == 2:
                    raw, p = _varint(buf, p, end)
                    stop = p + np.int64(raw)
                while p < stop:
                    v, p = _varint(buf, p, stop)
                    if number == 2:
                        if nv - first_value >= width:
                            return _BAD
                        values[nv] = v
                        nv += 1
                    else:
                        if v >= np.uint64(table.size) or table[v] < 0:
                            return _BAD
                        locs[nl] = table[v]
                        nl += 1
                    if wt == 0:
                        break
                continue
            if number == 3 and wt == 2:
                raw, p = _varint(buf, p, end)
                stop = p + np.int64(raw)
                if _label(buf, p, stop, size, nlab, key, sval, num, unit) != _OK:
                    return _BAD
                owner[nlab] = m
                nlab += 1
                p = stop
                continue
            p = _skip(buf, p, end, wt)
        if nv - first_value != width:
            return _BAD
        offsets[m + 1] = nl
    return _OK


class Decoded(NamedTuple):
    """The samples' columns: location rows (CSR), values (samples x width), label records."""

    locs: np.ndarray
    offsets: np.ndarray
    values: np.ndarray
    owner: np.ndarray
    key: np.ndarray
    str: np.ndarray
    num: np.ndarray
    unit: np.ndarray


def decode_samples(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, width: int, table: np.ndarray,
                   loc_dtype: np.dtype, strings: int) -> Decoded | None:
    """Decode the samples at ``starts``/``ends`` of ``buf``: location ids become ``table[id]``
    (the model row, -1: no such location), ``width`` values each, label string indexes below
    ``strings``. None when anything is unusual (the numpy path then decodes and names it)."""
    n = starts.size
    if n and (int(starts.min()) < 0 or int(ends.max()) > buf.size) or strings >= 2**31:
        return None
    totals = np.zeros(3, dtype=np.int64)
    if _count(buf, starts, ends, totals) != _OK or int(totals[1]) != n * width:
        return None
    nl, nv, nlab = (int(t) for t in totals)
    offsets = np.zeros(n + 1, dtype=np.int64)
    locs = np.empty(nl, dtype=loc_dtype)
    values = np.empty(nv, dtype=np.uint64)
    owner = np.empty(nlab, dtype=np.int64)
    key, sval, unit = (np.empty(nlab, dtype=np.int32) for _ in range(3))
    num = np.empty(nlab, dtype=np.uint64)
    if _fill(buf, starts, ends, width, table, np.uint64(strings), offsets, locs, values, owner, key, sval, num, unit) != _OK:
        return None
    return Decoded(locs, offsets, values.view(np.int64).reshape(n, width), owner, key, sval, num.view(np.int64),
                   unit)
