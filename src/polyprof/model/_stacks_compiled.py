"""Compiled kernels over whole stacks (numba): bulk interning and outermost-occurrence sums.

:func:`intern_stacks` gives exactly :func:`polyprof.model.bulk_stacks._intern`'s
result (a differential test compares them over random and real stacks) by
another road: the stacks are sorted by content, root first (a multikey
quicksort: three-way partitions on the frame at one depth, so a prefix
shared by many stacks is compared once per partition, and a stack alone in
its partition is never looked at again), and then one linear walk over the
sorted stacks hands out callsites in pre-order with siblings ordered by
location — the numbering the level-by-level numpy walk produces. Only the
index of the stacks, one int32 per stack and the result are allocated,
where the numpy walk keeps a frontier and per-level copies (on a 7.8M
callsite profile: 0.3 s instead of 1.5 s, a few hundred MB less at peak).

:func:`outermost_sums` is :func:`polyprof.analysis.graph.node_weights`'s
cumulative column for callsites in pre-order: one pass with a running
"covered until" per node instead of a sort of every (callsite, node) pair.

Loaded only for work large enough to pay for numba (see
``polyprof.model.bulk_stacks``); small inputs never import it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["intern_stacks", "outermost_sums"]

#: Partitions this small are finished by insertion sort (fewer passes than more partitioning).
_SMALL = 12


@njit(inline="always", cache=True, nogil=True)
def _word(flat, start, length, step, i, d, bits, per):  # noqa: ANN001, ANN202 - numba
    """Stack ``i``'s locations at depths ``d .. d+per-1`` (root = 0) packed as one int64 that
    compares as the sequence does: ``location + 1`` per ``bits``-bit digit, 0 past the end
    (so a shorter stack sorts first)."""
    w = np.int64(0)
    n = length[i]
    for t in range(per):
        v = np.int64(flat[start[i] + step * (d + t)]) + 1 if d + t < n else np.int64(0)
        w = (w << bits) | v
    return w


@njit(inline="always", cache=True, nogil=True)
def _less(flat, start, length, step, a, b, d, bits, per):  # noqa: ANN001, ANN202 - numba
    """Whether stack ``a`` sorts before stack ``b``, both equal above depth ``d``."""
    while True:
        x = _word(flat, start, length, step, a, d, bits, per)
        y = _word(flat, start, length, step, b, d, bits, per)
        if x != y:
            return x < y
        if d + per > length[a]:
            return False
        d += per


@njit(cache=True, nogil=True)
def _sort(flat, start, length, step, idx, bits, per):  # noqa: ANN001, ANN202 - numba
    """Sort the stack ids ``idx`` by content, root first: a multikey quicksort on words of
    ``per`` locations, with each row's word at the partition's depth cached beside it (loaded
    once per depth, moved with the row), so partitioning reads memory in order."""
    mask = (np.int64(1) << bits) - 1
    word = np.empty(idx.size, dtype=np.int64)
    cap = 1024
    work = np.empty((cap, 4), dtype=np.int64)  # lo, hi, depth, whether ``word`` holds that depth
    work[0, 0], work[0, 1], work[0, 2], work[0, 3] = 0, idx.size, 0, 0
    top = 1
    while top:
        top -= 1
        lo, hi, d, cached = work[top, 0], work[top, 1], work[top, 2], work[top, 3]
        if hi - lo <= _SMALL:
            for k in range(lo + 1, hi):
                v = idx[k]
                j = k
                while j > lo and _less(flat, start, length, step, v, idx[j - 1], d, bits, per):
                    idx[j] = idx[j - 1]
                    j -= 1
                idx[j] = v
            continue
        if not cached:
            for k in range(lo, hi):
                word[k] = _word(flat, start, length, step, idx[k], d, bits, per)
        # median of three as the pivot (sorted and reversed runs stay balanced)
        a, b, c = word[lo], word[(lo + hi) // 2], word[hi - 1]
        pivot = max(min(a, b), min(max(a, b), c))
        lt, i, gt = lo, lo, hi - 1
        while i <= gt:
            x = word[i]
            if x < pivot:
                idx[lt], idx[i] = idx[i], idx[lt]
                word[lt], word[i] = x, word[lt]
                lt += 1
                i += 1
            elif x > pivot:
                idx[gt], idx[i] = idx[i], idx[gt]
                word[gt], word[i] = x, word[gt]
                gt -= 1
            else:
                i += 1
        if top + 3 > cap:
            cap *= 2
            grown = np.empty((cap, 4), dtype=np.int64)
            grown[:top] = work[:top]
            work = grown
        for s, e, dd in ((lo, lt, d), (gt + 1, hi, d), (lt, gt + 1, d + per)):
            if e - s > 1 and (dd == d or pivot & mask):  # equal rows that ended are done
                work[top, 0], work[top, 1], work[top, 2], work[top, 3] = s, e, dd, dd == d
                top += 1


@njit(cache=True, nogil=True)
def _shared(flat, start, length, step, idx, lcp):  # noqa: ANN001, ANN202 - numba
    """Frames each sorted stack shares with the one before it; returns the callsites needed."""
    total = 0
    for k in range(idx.size):
        i = idx[k]
        n = 0
        if k:
            j = idx[k - 1]
            m = min(length[i], length[j])
            while n < m and flat[start[i] + step * n] == flat[start[j] + step * n]:
                n += 1
        lcp[k] = n
        total += length[i] - n
    return total


@njit(cache=True, nogil=True)
def _number(flat, start, length, step, idx, lcp, path, leaf, parent, location, depth, size):  # noqa: ANN001, ANN202
    """New callsites in pre-order: each sorted stack adds the frames it does not share."""
    nid = 0
    for k in range(idx.size):
        i = idx[k]
        for d in range(lcp[k], length[i]):
            parent[nid] = path[d - 1] if d else -1
            location[nid] = flat[start[i] + step * d]
            depth[nid] = d
            path[d] = nid
            nid += 1
        leaf[i] = path[length[i] - 1] if length[i] else -1
    for c in range(nid - 1, -1, -1):  # children come after their parent
        size[c] += 1
        if parent[c] >= 0:
            size[parent[c]] += size[c]


def intern_stacks(flat: np.ndarray, offsets: np.ndarray,
                  leaf_first: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(leaf, parent, location, depth, size) of stack ``i`` = ``flat[offsets[i]:offsets[i+1]]``,
    numbered as :func:`polyprof.model.bulk_stacks._intern` numbers them."""
    length = np.diff(offsets).astype(np.int64)
    start = (offsets[1:] - 1 if leaf_first else offsets[:-1]).astype(np.int64)
    step = -1 if leaf_first else 1
    idx = np.arange(length.size, dtype=np.int64)
    bits = max(int(flat.max(initial=0)) + 1, 1).bit_length()
    _sort(flat, start, length, step, idx, bits, max(63 // bits, 1))
    lcp = np.empty(length.size, dtype=np.int32)
    total = int(_shared(flat, start, length, step, idx, lcp))
    leaf = np.empty(length.size, dtype=np.int32)
    parent, location, depth = (np.empty(total, dtype=np.int32) for _ in range(3))
    size = np.zeros(total, dtype=np.int64)
    path = np.empty(max(int(length.max(initial=0)), 1), dtype=np.int64)
    _number(flat, start, length, step, idx, lcp, path, leaf, parent, location, depth, size)
    return leaf, parent, location, depth, size


@njit(cache=True, nogil=True)
def _outermost(location, size, live, loc_start, loc_nodes, subtree, reach, cum):  # noqa: ANN001, ANN202
    for c in range(location.size):
        if not live[c]:
            continue
        loc = location[c]
        end = c + size[c] - 1
        for k in range(loc_start[loc], loc_start[loc + 1]):
            n = loc_nodes[k]
            if c > reach[n]:
                cum[n] += subtree[c]
            if end > reach[n]:
                reach[n] = end


def outermost_sums(location: np.ndarray, size: np.ndarray, live: np.ndarray, loc_start: np.ndarray,
                   loc_nodes: np.ndarray, subtree: np.ndarray, n_nodes: int) -> np.ndarray:
    """Per node, the sum of ``subtree`` over the live callsites holding it that have no
    ancestor holding it (callsite ids in pre-order, ``size`` their subtree sizes; a
    location's nodes are ``loc_nodes[loc_start[loc]:loc_start[loc+1]]``)."""
    reach = np.full(n_nodes, -1, dtype=np.int64)
    cum = np.zeros(n_nodes, dtype=np.int64)
    _outermost(location, size, live, loc_start, loc_nodes, subtree, reach, cum)
    return cum
