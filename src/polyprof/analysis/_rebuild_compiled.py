"""Compiled twin of :func:`polyprof.analysis.stacks.rebuild`'s walk (numba, no compiler needed).

The numpy rebuild is a composition of whole-array passes: a level-wise
``fill_down`` for each callsite's nearest kept ancestor-or-self, a
pointer-jumping ``path_sums`` for the new depths, a stable sort by depth,
then the interning. Callsite parents precede their children, so the first
three are one forward walk here, and the sort by depth is a counting sort
(stable: ids ascending within a depth, as ``argsort(kind="stable")``); the
interning is :func:`polyprof.model._tree_compiled.intern_paths` itself.
The results are exactly the numpy path's (a differential hypothesis test
checks it). Imported only for trees large enough to pay for numba
(``stacks._kernels``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from polyprof.model import _tree_compiled

__all__ = ["nearest", "rebuild"]


@njit(cache=True, nogil=True)
def _walk(parent, keep, cut, self_or_above, above, depth, count):  # noqa: ANN001, ANN202 - numba
    """Per callsite: its nearest kept ancestor-or-self, its nearest kept proper ancestor (none
    above a cut), and for kept ones their depth in the new tree; ``count``: kept per depth.
    False when a parent does not precede its child (then the numpy path runs)."""
    for c in range(parent.size):
        p = parent[c]
        if p >= c:
            return False
        a = self_or_above[p] if p >= 0 and not cut[c] else -1
        above[c] = a
        if keep[c]:
            self_or_above[c] = c
            d = depth[a] + 1 if a >= 0 else 0
            depth[c] = d
            count[d] += 1
        else:
            self_or_above[c] = -1 if cut[c] else a
    return True


@njit(cache=True, nogil=True)
def _by_depth(keep, depth, bounds, order):  # noqa: ANN001, ANN202
    """Kept callsites grouped by depth, ids ascending within one (a stable counting sort)."""
    at = bounds[:-1].copy()
    for c in range(keep.size):
        if keep[c]:
            order[at[depth[c]]] = c
            at[depth[c]] += 1


@njit(cache=True, nogil=True)
def _resolve(self_or_above, new_id, out):  # noqa: ANN001, ANN202
    for c in range(out.size):
        s = self_or_above[c]
        out[c] = new_id[s] if s >= 0 else -1


def rebuild(parent: np.ndarray, keep: np.ndarray, location: np.ndarray, cut: np.ndarray,
            width: int) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray] | None:
    """(parent and location of every new callsite, where each depth's callsites begin, the
    new id of every old callsite's nearest kept ancestor-or-self) as the numpy rebuild
    gives them; None when it declines (a parent after its child, a location out of range)."""
    n = parent.size
    parent = np.ascontiguousarray(parent)
    keep = np.ascontiguousarray(keep, dtype=np.bool_)
    cut = np.ascontiguousarray(cut, dtype=np.bool_)
    self_or_above = np.empty(n, np.int64)
    above = np.empty(n, np.int64)
    depth = np.zeros(n, np.int64)
    count = np.zeros(n + 1, np.int64)
    if not _walk(parent, keep, cut, self_or_above, above, depth, count):
        return None
    levels = int(np.flatnonzero(count)[-1]) + 1 if count.any() else 0
    bounds = np.zeros(levels + 1, np.int64)
    np.cumsum(count[:levels], out=bounds[1:])
    order = np.empty(int(bounds[-1]), np.int64)
    _by_depth(keep, depth, bounds, order)
    del depth, count
    made = _tree_compiled.intern_paths(above, location, order, bounds, width)
    if made is None:
        return None
    new_id, new_parent, new_loc, starts = made
    del above, order
    new_of = np.empty(n, np.int64)
    _resolve(self_or_above, new_id, new_of)
    return new_parent, new_loc, starts, new_of


@njit(cache=True, nogil=True)
def _nearest(parent, flag, out):  # noqa: ANN001, ANN202
    for c in range(parent.size):
        p = parent[c]
        if p >= c:
            return False
        out[c] = c if flag[c] else (out[p] if p >= 0 else -1)
    return True


def nearest(parent: np.ndarray, flag: np.ndarray) -> np.ndarray | None:
    """Per callsite: the nearest ancestor-or-self where ``flag`` holds, or -1, as
    :func:`polyprof.analysis.stacks.nearest`; None when a parent does not precede its child."""
    out = np.empty(parent.size, np.int64)
    return out if _nearest(np.ascontiguousarray(parent), np.ascontiguousarray(flag, dtype=np.bool_), out) else None
