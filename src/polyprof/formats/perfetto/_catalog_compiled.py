"""Compiled twins (numba) of the catalog's passes over tens of millions of frame ids.

A heap dump's callstacks hold one frame id per frame (26M in the large
benchmark dump). Resolving them (iid -> catalog frame) and copying the used
stacks into a profile (catalog frame -> model location) were numpy passes
that each made an index copy (``present[iids]``, ``table[iids]`` cast the
uint32 ids to intp first), a gathered copy of the runs and a sorted or
tabled ``distinct``. These kernels do the same in one pass each, reading the
runs where they lie:

``mark_runs``  ``present[values[s:s+l]] = True`` for every run (distinct values)
``map_runs``   ``table[values[s:s+l]]`` for every run, end to end, in ``out``'s type
``map_hash_runs``  ``map_runs`` over several columns and the hash of each run, as
               :func:`polyprof.wire.vector.hash_runs` makes it (one pass, no widening)
``callstack_entries32``  interned Callstack entries of the usual shape decoded with their
               frame ids written as uint32 at once

:func:`warm_calls` calls these (and the shared stack-interning kernels a heap dump's
profile is built with) once on tiny inputs with a read's argument types: a heap-dump read
runs it on a thread from its first dump on (``_heap.HeapCollector``), so that numba loads
their machine code while the read's first kernels run.

Imported only once the wire kernels are compiled (``wire.vector.compiled()``),
i.e. for large traces; the numpy expressions they replace stay the other
path, and ``tests/test_perfetto_catalog_compiled.py`` compares the two.
Callers guarantee every value indexes its table (tables are sized by the
values' maximum or by the catalog they index).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["callstack_entries32", "map_hash_runs", "map_runs", "mark_runs", "warm_calls"]

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}


@njit(**_OPTIONS)
def _mark(values, starts, lengths, present):  # noqa: ANN001, ANN202 - numba
    for i in range(starts.size):
        s = starts[i]
        for j in range(s, s + lengths[i]):
            present[values[j]] = True


@njit(**_OPTIONS)
def _map(values, starts, lengths, table, out):  # noqa: ANN001, ANN202 - numba
    k = 0
    for i in range(starts.size):
        s = starts[i]
        for j in range(s, s + lengths[i]):
            out[k] = table[values[j]]
            k += 1


def mark_runs(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray, present: np.ndarray) -> None:
    """Set ``present[v]`` for every value ``v`` of the runs ``values[starts[i]:starts[i]+lengths[i]]``."""
    _mark(values, np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(lengths, dtype=np.int64),
          present)


def map_runs(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray, table: np.ndarray,
             dtype: Any = None) -> np.ndarray:
    """``table[values[ranges(starts, lengths)]]`` without the index column (in ``dtype``, else
    the table's type)."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    out = np.empty(int(lengths.sum()), dtype=table.dtype if dtype is None else dtype)
    _map(values, starts, lengths, table, out)
    return out


@njit(**_OPTIONS)
def _map_hash(values, starts, lengths, table, mix, base, out, at, hashes, h0):  # noqa: ANN001, ANN202 - numba
    k = at
    for i in range(starts.size):
        h = np.uint64(0)
        power = np.uint64(1)
        for j in range(starts[i], starts[i] + lengths[i]):
            v = table[values[j]]
            out[k] = v
            k += 1
            y = (np.uint64(v) + np.uint64(1)) * mix
            y ^= y >> np.uint64(31)
            h += y * power
            power *= base
        hashes[h0 + i] = h


def map_hash_runs(runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]], total: int, table: np.ndarray,
                  mix: np.uint64, base: np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """For ``runs`` ((values, starts, lengths) each, ``total`` values in all): ``table`` of every
    run's values, end to end, and the :func:`polyprof.wire.vector.hash_runs` hash of each run
    of the result (given that function's ``mix`` and ``base``; 0 for an empty run). The
    table's values must be non-negative."""
    out = np.empty(total, dtype=table.dtype)
    hashes = np.empty(sum(s.size for _, s, _ in runs), dtype=np.uint64)
    at = h0 = 0
    for values, starts, lengths in runs:
        starts = np.ascontiguousarray(starts, dtype=np.int64)
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        _map_hash(values, starts, lengths, table, mix, base, out, at, hashes, h0)
        at += int(lengths.sum())
        h0 += starts.size
    return out, hashes


@njit(**_OPTIONS)
def _uvarint(buf, p, end, most):  # noqa: ANN001, ANN202 - numba
    """(value, position after) of a varint of at most ``most`` bytes at ``p``; position -1 if longer or cut."""
    v = np.uint64(0)
    for k in range(most):
        if p >= end:
            return v, -1
        b = buf[p]
        p += 1
        v |= np.uint64(b & 0x7F) << np.uint64(7 * k)
        if b < 0x80:
            return v, p
    return v, -1


@njit(**_OPTIONS)
def _callstacks32(buf, starts, ends, iids, counts, frames):  # noqa: ANN001, ANN202 - numba
    """Callstack entries of the usual shape only (one-byte tags: iid 08, frame ids 10, unpacked,
    each under 2**32): iid, count and frames of each; the number of frames, or -1 for anything else."""
    k = 0
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        first = k
        while p < end:
            key = buf[p]
            p += 1
            if key == 0x08:
                v, p = _uvarint(buf, p, end, 9)
                if p < 0:
                    return -1
                iids[m] = v
            elif key == 0x10:
                v, p = _uvarint(buf, p, end, 5)
                if p < 0 or v > np.uint64(0xFFFFFFFF):
                    return -1
                frames[k] = np.uint32(v)
                k += 1
            else:
                return -1
        counts[m] = k - first
    return k


def callstack_entries32(buf: np.ndarray, starts: np.ndarray,
                        ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``_flat_compiled.callstack_entries`` when every entry has the usual shape and every frame id
    fits 32 bits, with the frame ids as uint32 written once (no uint64 column, copy and narrowing
    pass over a heap dump's 26M frame ids); None otherwise (the caller then decodes as before).
    Every frame id takes two bytes at least (tag and value): the buffer is sized by that."""
    n = starts.size
    iids, counts = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.int64)
    frames = np.empty(int((ends - starts).sum()) // 2 + 1, dtype=np.uint32)  # pages touched only where written
    used = _callstacks32(buf, starts.astype(np.int64), ends.astype(np.int64), iids, counts, frames)
    if used <= 0:  # none: the caller's uint64 empty column, as before
        return None
    return iids, frames[:used], counts


def warm_calls() -> None:
    """The kernels a heap-dump read calls after its first dump, each called once on a tiny
    input with the argument types the read passes (a chunk's read-only bytes, uint32 interned
    frame ids, int32 catalog frames, uint8 or uint16 model locations), in the order it calls
    them; the builder's stack interning of that many stacks (its radix sort from 16k), and the
    first kernels of an analysis of the profile."""
    from polyprof.model import _stacks_compiled
    from polyprof.wire import _compiled
    from polyprof.wire.vector import HASH_BASE, HASH_MIX

    buf = np.frombuffer(bytes([0x08, 0x01, 0x10, 0x02]), dtype=np.uint8)  # read-only, as a chunk's bytes
    one = np.zeros(1, dtype=np.int64)
    callstack_entries32(buf, one, np.full(1, buf.size, dtype=np.int64))
    iids = np.zeros(2, dtype=np.uint64)  # callstack iids (a dump's samples, from 1M of them)
    mark_runs(iids, one, np.full(1, 2, dtype=np.int64), np.zeros(1, dtype=bool))
    map_runs(iids, one, np.full(1, 2, dtype=np.int64), np.zeros(1, dtype=np.int64))
    frames, length = np.zeros(2, dtype=np.uint32), np.full(1, 2, dtype=np.int64)  # one stack of two frames
    mark_runs(frames, one, length, np.zeros(1, dtype=bool))
    cat, _ = map_hash_runs([(frames, one, length)], 2, np.zeros(1, dtype=np.int32), HASH_MIX, HASH_BASE)
    _compiled.factorize([np.zeros(4, dtype=np.int64)])
    mark_runs(cat, one, length, np.zeros(1, dtype=bool))
    n = _stacks_compiled._RADIX_FROM
    for dtype in (np.uint8, np.uint16):
        locs = map_runs(cat, one, length, np.zeros(1, dtype=dtype))
        _stacks_compiled.intern_stacks(np.resize(locs, n), np.arange(n + 1, dtype=np.int64), False)
    # and the first kernels of an analysis of the profile (subtree sums, outermost-occurrence sums)
    _stacks_compiled.subtree_sums(np.zeros(1, dtype=np.int64), np.full(1, -1, dtype=np.int32))
    _stacks_compiled.outermost_sums(np.zeros(1, dtype=np.int32), np.ones(1, dtype=np.int32), np.ones(1, dtype=bool),
                                    np.array([0, 1]), np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int64), 1)
