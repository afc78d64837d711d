"""Compiled twin of ``_perf._deltas`` (numba): running-counter deltas in one pass per chunk.

:func:`deltas_compiled` gives exactly what the numpy ``_deltas`` gives (the
per-row increase of each key's counter, the state carried in ``prev``, the
count of counters that went backwards) without the per-chunk sort of the
keys: one pass in row order over a small open-addressing table of the keys
(sequence, cpu). Imported only once the wire kernels are compiled
(``wire.vector.compiled()``), i.e. for large traces; a differential test
compares the two on random and real counters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["deltas_compiled"]

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1


@njit(**_OPTIONS)
def _run(keys, values, present, tkeys, tvals, used, shift, out):
    """Fill ``out``; ``tkeys/tvals/used`` hold each key's last value (preloaded with ``prev``)."""
    mask = tkeys.size - 1
    backs = 0
    for i in range(keys.size):
        if not present[i]:
            continue
        k = keys[i]
        h = (np.uint64(k) * _GOLDEN) >> shift
        s = np.int64(h) & mask
        while used[s] and tkeys[s] != k:
            s = (s + 1) & mask
        v = np.int64(values[i])
        d = v - tvals[s] if used[s] else v
        used[s] = True
        tkeys[s] = k
        tvals[s] = v
        if d < 0:
            backs += 1
            d = v
        out[i] = d
    return backs


def _place(tkeys: np.ndarray, tvals: np.ndarray, used: np.ndarray, shift: int, k: int, v: int) -> None:
    mask = tkeys.size - 1
    s = (((k & _MASK64) * int(_GOLDEN)) & _MASK64) >> shift & mask  # the kernel's hash, in Python ints
    while used[s] and tkeys[s] != k:
        s = (s + 1) & mask
    used[s], tkeys[s], tvals[s] = True, k, v


def deltas_compiled(keys: np.ndarray, values: np.ndarray, present: np.ndarray,
                    prev: dict[int, int]) -> tuple[np.ndarray, int]:
    """(per-row deltas, count of counters that went backwards); updates ``prev`` like ``_deltas``."""
    out = np.zeros(keys.size, dtype=np.int64)
    if not present.any():
        return out, 0
    room = len(prev) + int(np.count_nonzero(present))
    bits = max(4, (2 * room - 1).bit_length())
    size = 1 << bits
    tkeys = np.zeros(size, dtype=np.int64)
    tvals = np.zeros(size, dtype=np.int64)
    used = np.zeros(size, dtype=np.bool_)
    shift = 64 - bits
    for k, v in prev.items():
        _place(tkeys, tvals, used, shift, k, v)
    backs = _run(keys.astype(np.int64, copy=False), values.view(np.int64) if values.dtype.kind in "ui" and
                 values.itemsize == 8 else values.astype(np.int64), present, tkeys, tvals, used,
                 np.uint64(shift), out)
    for s in np.nonzero(used)[0].tolist():
        prev[int(tkeys[s])] = int(tvals[s])
    return out, int(backs)
