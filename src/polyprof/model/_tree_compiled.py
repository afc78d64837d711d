"""Compiled twins of the tree kernels in :mod:`polyprof.model.tree` (numba, no compiler needed).

Each function gives exactly the result of its numpy twin (a differential
hypothesis test checks it) or ``None`` when it declines (a parent cycle,
keys too wide for a counting sort), so that the numpy twin runs.
:mod:`polyprof.model.tree` imports this module only for trees large enough
to pay for loading numba (``tree._kernels``); small trees never import it.

The numpy kernels spend their time in whole-array passes repeated per
pointer-jumping step or per level (a sort per level); here the same
results come from single linear walks and counting sorts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["add_subtree_sums", "expand_chains", "intern_level", "intern_paths", "path_sums", "place_children"]


@njit(cache=True, nogil=True)
def _path_sums(parent, acc, done, stack):  # noqa: ANN001, ANN202 - numba
    """Fill ``acc`` (the values) with sums over every node's path; False on a cycle."""
    n = parent.size
    for i in range(n):
        if done[i]:
            continue
        top = 0
        v = i
        while v >= 0 and not done[v]:  # climb to a finished ancestor (or above the root)
            if top == n:
                return False
            stack[top] = v
            top += 1
            v = parent[v]
        while top:
            top -= 1
            u = stack[top]
            p = parent[u]
            if p >= 0:
                acc[u] += acc[p]
            done[u] = True
    return True


def path_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """Sum of ``values`` over every node and its ancestors (int64)."""
    acc = np.array(values, dtype=np.int64, copy=True)
    n = acc.size
    up = np.ascontiguousarray(parent, dtype=np.int64)
    if n and (int(up.max()) >= n or int(up.min()) < -1):
        return None
    if not _path_sums(up, acc, np.zeros(n, dtype=np.bool_), np.empty(n, dtype=np.int64)):
        return None
    return acc


@njit(cache=True, nogil=True)
def _chains(parent, count, owner, within, up, first):  # noqa: ANN001, ANN202
    k = 0
    for c in range(count.size):
        first[c] = k
        k += count[c]
    for c in range(count.size):
        p = parent[c]
        above = first[p] + count[p] - 1 if p >= 0 else -1
        f = first[c]
        for j in range(count[c]):
            owner[f + j] = c
            within[f + j] = j
            up[f + j] = above if j == 0 else f + j - 1


def expand_chains(parent: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """(node of every item, place in its chain, item above, each node's first item), chains in id order."""
    count = np.ascontiguousarray(count, dtype=np.int64)
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    if count.size and (int(count.min()) < 0 or int(parent.max()) >= count.size or int(parent.min()) < -1):
        return None
    total = int(count.sum())
    out = (np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.int64),
           np.empty(count.size, np.int64))
    _chains(parent, count, *out)
    return out


@njit(cache=True, nogil=True)
def _by_label(keys, labels, lo, hi, out):  # noqa: ANN001, ANN202
    """Sort ``out[lo:hi]`` (positions) by ``labels``: insertion sort, these runs are mostly tiny."""
    if hi - lo > 48:
        run = out[lo:hi].copy()
        out[lo:hi] = run[np.argsort(labels[run])]  # equal labels: any order (one id)
        return
    for a in range(lo + 1, hi):
        k = out[a]
        lab = labels[k]
        b = a - 1
        while b >= lo and labels[out[b]] > lab:
            out[b + 1] = out[b]
            b -= 1
        out[b + 1] = k


@njit(cache=True, nogil=True)
def _number(pk, lab, ids, parents, labels, made):  # noqa: ANN001, ANN202
    """Ids from ``made`` on for the distinct (parent ``pk``, label ``lab``) pairs, in that
    order, into ``ids`` (per pair) and ``parents``/``labels`` (per id): a counting sort by
    parent, then each parent's run by label. Returns the next id, or -1 when the parents
    span too wide a range for a counting sort."""
    n = pk.size
    if not n:
        return made
    lo = hi = pk[0]
    for k in range(n):
        if pk[k] < lo:
            lo = pk[k]
        if pk[k] > hi:
            hi = pk[k]
    span = hi - lo + 1
    if span > 4 * n + 1024:  # parents scattered (never for a real tree): numpy sorts
        return -1
    tally = np.zeros(span + 1, np.int64)
    for k in range(n):
        tally[pk[k] - lo + 1] += 1
    for v in range(span):
        tally[v + 1] += tally[v]
    out = np.empty(n, np.int64)
    for k in range(n):
        slot = pk[k] - lo
        out[tally[slot]] = k
        tally[slot] += 1
    a = 0
    while a < n:  # each parent's run, by label
        b = a + 1
        while b < n and pk[out[b]] == pk[out[a]]:
            b += 1
        if b - a > 1:
            _by_label(pk, lab, a, b, out)
        a = b
    prev_p, prev_l = np.int64(-2), np.int64(-1)
    for k in out:
        p, lb = pk[k], lab[k]
        if p != prev_p or lb != prev_l:
            parents[made] = p
            labels[made] = lb
            made += 1
            prev_p, prev_l = p, lb
        ids[k] = made - 1
    return made


@njit(cache=True, nogil=True)
def _intern(up, label, order, bounds, node_of, parents, labels, starts):  # noqa: ANN001, ANN202
    """Every level in turn (node_of of a level's parents is known when it is reached)."""
    made = 0
    for d in range(bounds.size - 1):
        items = order[bounds[d]:bounds[d + 1]]
        n = items.size
        pk, lab, ids = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
        for k in range(n):
            u = up[items[k]]
            pk[k] = node_of[u] if u >= 0 else -1
            lab[k] = label[items[k]]
        made = _number(pk, lab, ids, parents, labels, made)
        if made < 0:
            return False
        for k in range(n):
            node_of[items[k]] = ids[k]
        starts[d + 1] = made
    return True


def intern_level(parent: np.ndarray, label: np.ndarray, n_labels: int,
                 first_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(id of each pair, parent and label of each new id) as :func:`polyprof.model.tree.intern_level`."""
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    label = np.ascontiguousarray(label, dtype=np.int64)
    n = parent.size
    if n and (int(label.min()) < 0 or int(label.max()) >= n_labels or int(parent.min()) < -1):
        return None
    ids, parents, labels = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    made = _number(parent, label, ids, parents, labels, 0)
    if made < 0:
        return None
    return ids + first_id, parents[:made].copy(), labels[:made].copy()


def intern_paths(up: np.ndarray, label: np.ndarray, order: np.ndarray, bounds: np.ndarray,
                 n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]] | None:
    """Interned paths as :func:`polyprof.model.tree.intern_paths` gives them."""
    up = np.ascontiguousarray(up, dtype=np.int64)
    label = np.ascontiguousarray(label, dtype=np.int64)
    order = np.ascontiguousarray(order, dtype=np.int64)
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    if bounds.size == 0 or bounds[0] != 0 or bounds[-1] != order.size:
        return None
    if label.size and (int(label.min()) < 0 or int(label.max()) >= n_labels):
        return None
    node_of = np.full(up.size, -1, dtype=np.int64)
    parents = np.empty(order.size, dtype=np.int64)
    labels = np.empty(order.size, dtype=np.int64)
    starts = np.zeros(bounds.size, dtype=np.int64)
    if not _intern(up, label, order, bounds, node_of, parents, labels, starts):
        return None
    made = int(starts[-1])
    return node_of, parents[:made].copy(), labels[:made].copy(), starts.tolist()


@njit(cache=True, nogil=True)
def _push_up(out, nodes, lo, parent):  # noqa: ANN001, ANN202
    """Add each node's value to its parent's (``nodes`` empty: the nodes are lo, lo + 1, ...)."""
    if nodes.size:
        for k in range(parent.size):
            out[parent[k]] += out[nodes[k]]
    else:
        for k in range(parent.size):
            out[parent[k]] += out[lo + k]


def _level_nodes(nodes: np.ndarray | slice) -> tuple[np.ndarray, int]:
    """(node array, or empty when the level is the slice starting at the given id)."""
    if isinstance(nodes, slice):
        return _NONE, int(nodes.start or 0)
    return np.ascontiguousarray(nodes, dtype=np.int64), 0


_NONE = np.zeros(0, dtype=np.int64)


def _fits(values: np.ndarray, levels: list) -> bool:
    """Whether the compiled level kernels take these arrays (1-D int64, slices with a step of 1)."""
    return values.ndim == 1 and values.dtype == np.int64 and all(
        not isinstance(lv.nodes, slice) or lv.nodes.step in (None, 1) for lv in levels)


def add_subtree_sums(out: np.ndarray, levels: list) -> np.ndarray | None:
    """:func:`polyprof.model.tree.add_subtree_sums` in place: children before parents, one walk per level."""
    if not _fits(out, levels):
        return None
    for lv in reversed(levels[1:]):
        if lv.parent.size:
            nodes, lo = _level_nodes(lv.nodes)
            _push_up(out, nodes, lo, np.ascontiguousarray(lv.parent, dtype=np.int64))
    return out


@njit(cache=True, nogil=True)
def _place(pos, extent, nodes, lo, parent, starts, step, parent_position, record):  # noqa: ANN001, ANN202
    """Positions of one level: each run of siblings side by side from its parent's position + step."""
    n = parent.size
    for r in range(starts.size):
        end = starts[r + 1] if r + 1 < starts.size else n
        acc = 0
        for k in range(starts[r], end):
            node = nodes[k] if nodes.size else lo + k
            above = pos[parent[k]]
            if record:
                parent_position[node] = above
            pos[node] = above + step + acc
            acc += extent[node]


def place_children(extent: np.ndarray, levels: list, step: int, pos: np.ndarray,
                   parent_position: np.ndarray | None) -> bool:
    """The levels below the roots of :func:`polyprof.model.tree.place_children` (roots placed in
    ``pos`` already); False (nothing written) when the arrays do not fit the kernel."""
    if not _fits(extent, levels) or any(lv.starts.size and lv.starts[0] != 0 for lv in levels[1:]) or (
            parent_position is not None and parent_position.dtype != np.int64):
        return False
    record = parent_position is not None
    out = parent_position if parent_position is not None else _NONE
    for lv in levels[1:]:
        nodes, lo = _level_nodes(lv.nodes)
        _place(pos, extent, nodes, lo, np.ascontiguousarray(lv.parent, dtype=np.int64),
               np.ascontiguousarray(lv.starts, dtype=np.int64), step, out, record)
    return True
