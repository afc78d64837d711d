"""Compiled decode (numba) of a heap packet's HeapSamples: one pass over their bytes.

The twin of ``_heap._samples``'s field walk (``walk_varint_fields`` then one
``scalar_column`` per field), for the bulk walk of a packet (``strict``
False): the varint fields it reads (callstack id, the plain and the
dump-at-max values) land in one (7, samples) column block, the last
occurrence winning, and a dump-at-max flag per sample. It gives None (the
walker then decides, and names any damage) for anything the walker would
reject, and for a wanted field written with a fixed-width wire type (which
``scalar_column`` would take). Imported only once the wire kernels are
compiled; ``tests/test_perfetto_heap_walk.py`` compares the paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from polyprof.wire._compiled import _tag, _varint

__all__ = ["heap_samples"]

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}


@njit(**_OPTIONS)
def _samples(buf, starts, ends, slot, flag, cols, at_max):  # noqa: ANN001, ANN202 - numba
    for m in range(starts.size):
        p, end = starts[m], ends[m]
        while p < end:
            number, wt, p = _tag(buf, p, end)
            if p < 0:
                return False
            wanted = number < slot.size and slot[number] >= 0
            if wt == 0:
                val, p = _varint(buf, p, end)
                if p < 0:
                    return False
                if wanted:
                    cols[slot[number], m] = val
                    if number == flag:
                        at_max[m] = True
            elif wt == 2:
                raw, p = _varint(buf, p, end)
                if p < 0 or raw > np.uint64(1 << 62) or p + np.int64(raw) > end:
                    return False
                p += np.int64(raw)
            else:
                p += 8 if wt == 1 else 4
                if p > end or wanted:
                    return False
    return True


def heap_samples(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, numbers: tuple[int, ...],
                 flag: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(columns of the varint fields ``numbers`` as uint64, absent = 0, one row per field; whether
    field ``flag`` is present: a dump-at-max sample) of every HeapSample ``buf[starts[i]:ends[i]]``,
    or None (see the module docstring)."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    if starts.size and (int(starts.min()) < 0 or int(ends.max()) > buf.size):
        return None
    slot = np.full(max(numbers) + 1, -1, dtype=np.int64)
    slot[list(numbers)] = np.arange(len(numbers))
    cols = np.zeros((len(numbers), starts.size), dtype=np.uint64)
    at_max = np.zeros(starts.size, dtype=bool)
    if not _samples(buf, starts, ends, slot, flag, cols, at_max):
        return None
    return cols, at_max
