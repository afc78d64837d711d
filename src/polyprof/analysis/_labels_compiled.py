"""Compiled twin of :func:`polyprof.analysis.labels._framed_paths`'s fill (numba, no compiler needed).

The numpy form walks the paths one depth at a time for all (stack, labelset)
groups at once: a whole-array step per depth. Here each group's new stack is
written in one walk up its callsites, leaf frames and root frames around it
(the same CSR, a differential test checks it). Imported only for work large
enough to pay for numba (``labels._kernels``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["fill_paths"]


@njit(cache=True, nogil=True)
def _fill(stack, ls, parent, location, lmap, offsets, leaf, leaf_own, root, root_own, flat):  # noqa: ANN001, ANN202, PLR0913
    for i in range(stack.size):
        at = offsets[i]
        s = ls[i]
        for k in range(leaf_own[s], leaf_own[s + 1]):
            flat[at] = leaf[k]
            at += 1
        c = stack[i]
        while c >= 0:
            flat[at] = lmap[location[c]]
            at += 1
            c = parent[c]
        for k in range(root_own[s], root_own[s + 1]):
            flat[at] = root[k]
            at += 1
        if at != offsets[i + 1]:
            return False
    return True


def fill_paths(stack: np.ndarray, ls: np.ndarray, parent: np.ndarray, location: np.ndarray, lmap: np.ndarray,
               offsets: np.ndarray, leaf: tuple[np.ndarray, np.ndarray],
               root: tuple[np.ndarray, np.ndarray]) -> np.ndarray | None:
    """The flat locations of every group's new stack (leaf label frames, its path leaf first
    through ``lmap``, root label frames) at ``offsets``; ``leaf``/``root``: each labelset's
    frames as CSR (frames, starts). None when a path's length is not what ``offsets`` says."""
    flat = np.empty(int(offsets[-1]), np.int64)
    ok = _fill(stack, ls, parent, location, np.ascontiguousarray(lmap, dtype=np.int64), offsets, leaf[0], leaf[1],
               root[0], root[1], flat)
    return flat if ok else None
