"""Compiled twin of the callsite-forest hash in :mod:`polyprof.store.rows` (numba, no compiler needed).

:func:`callsite_hashes` gives bit for bit the ids of the numpy path
(``finish(combine(combine(TAG, parent id), frame id))``, see
:mod:`polyprof.store.ids`; a differential hypothesis test and a test on real
profiles check it) or ``None`` when it declines (a parent cycle), so that
the numpy path runs and reports it. The numpy path needs a sort by depth
and one vector step per depth; here one linear walk hashes every node once,
parents first (ids are persisted: this is an exact re-implementation, not
a faster hash).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from polyprof.store import ids

__all__ = ["callsite_hashes"]

_K1 = np.uint64(ids.K1)
_K2 = np.uint64(0xBF58476D1CE4E5B9)
_K3 = np.uint64(0x94D049BB133111EB)
_MASK63 = np.uint64(2**63 - 1)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


@njit(cache=True, inline="always")
def _mix(x):  # noqa: ANN001, ANN202 - numba
    """:func:`ids.mix` on one uint64."""
    x = x ^ (x >> _S30)
    x = x * _K2
    x = x ^ (x >> _S27)
    x = x * _K3
    return x ^ (x >> _S31)


@njit(cache=True, nogil=True)
def _hash_forest(parent, frame, c, h, up, done, stack):  # noqa: ANN001, ANN202, PLR0913 - numba
    """Fill ``h`` (ids) and ``up`` (parent ids, 0 for roots); False on a parent cycle."""
    n = parent.size
    for i in range(n):
        if done[i]:
            continue
        top = 0
        v = i
        while v >= 0 and not done[v]:  # climb to a hashed ancestor (or above the root)
            if top == n:
                return False
            stack[top] = v
            top += 1
            v = parent[v]
        while top:
            top -= 1
            u = stack[top]
            p = parent[u]
            above = h[p] if p >= 0 else np.uint64(0)
            x = _mix((_mix(above ^ c) * _K1) ^ frame[u]) & _MASK63
            h[u] = x if x != np.uint64(0) else np.uint64(1)
            up[u] = above
            done[u] = True
    return True


def callsite_hashes(parent: np.ndarray, frame: np.ndarray, c: np.uint64) -> tuple[np.ndarray, np.ndarray] | None:
    """(id, parent id) as int64 of every node of a forest given by ``parent`` (int64, -1 for
    roots) and ``frame`` (uint64 frame ids), with ``c = TAG * K1`` of the kind; None on a cycle."""
    n = parent.size
    h = np.zeros(n, dtype=np.uint64)
    up = np.zeros(n, dtype=np.uint64)
    ok = _hash_forest(parent, frame, np.uint64(c), h, up, np.zeros(n, dtype=np.bool_), np.empty(n, dtype=np.int64))
    return (h.view(np.int64), up.view(np.int64)) if ok else None
