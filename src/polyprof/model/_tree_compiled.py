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

__all__ = ["add_subtree_sums", "compact", "expand_chains", "intern_level", "intern_paths", "merge_paths",
           "path_sums", "place_children", "preorder_keep", "preorder_layout", "reversed_paths"]


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
    up = _ids(parent)
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
def _radix(labels, out, lo, hi):  # noqa: ANN001, ANN202
    """Stable sort of ``out[lo:hi]`` by ``labels`` (>= 0): nothing when they are all equal, one
    counting pass when they span little more than the run, else least-significant-digit passes
    of as many bits as the run is long (8 to 16: a tally as long as the run)."""
    n = hi - lo
    least, most = labels[out[lo]], labels[out[lo]]
    for a in range(lo, hi):
        v = labels[out[a]]
        least = min(least, v)
        most = max(most, v)
    span = most - least + 1
    if span == 1:
        return
    bits = 8
    while bits < 16 and (1 << bits) < n:
        bits += 1
    one_pass = span <= 4 * n + 1024
    size = span if one_pass else 1 << bits
    mask = size - 1
    shift = 0
    src = out[lo:hi].copy()
    dst = np.empty(n, np.int64)
    tally = np.empty(size + 1, np.int64)
    while True:
        tally[:] = 0
        for k in range(n):
            d = labels[src[k]] - least if one_pass else ((labels[src[k]] - least) >> shift) & mask
            tally[d + 1] += 1
        for v in range(size):
            tally[v + 1] += tally[v]
        for k in range(n):
            d = labels[src[k]] - least if one_pass else ((labels[src[k]] - least) >> shift) & mask
            dst[tally[d]] = src[k]
            tally[d] += 1
        src, dst = dst, src
        shift += bits
        if one_pass or (span - 1) >> shift == 0:
            break
    out[lo:hi] = src


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
    ordered = True
    for k in range(1, n):
        if pk[k] < pk[k - 1]:
            ordered = False
            break
    if ordered:  # already by parent (a level of pre-order or level-ordered parents)
        out = np.arange(n)
    else:
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
    sp, sl = pk[out], lab[out]  # gathered once: the runs are then sorted in contiguous memory
    scratch = np.empty(n, np.int64)
    a = 0
    while a < n:  # each parent's run, by label
        b = a + 1
        while b < n and sp[b] == sp[a]:
            b += 1
        if b - a > 1:
            _sort_by_key(sl, out, out, a, b, scratch)
        a = b
    prev_p, prev_l = np.int64(-2), np.int64(-1)
    for k in range(n):
        p, lb = sp[k], sl[k]
        if p != prev_p or lb != prev_l:
            parents[made] = p
            labels[made] = lb
            made += 1
            prev_p, prev_l = p, lb
        ids[out[k]] = made - 1
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


@njit(cache=True, nogil=True)
def _sort_by_key(key, bc, bj, lo, hi, scratch):  # noqa: ANN001, ANN202
    """Sort the parallel ``bc``/``bj`` entries ``lo:hi`` by ``key[lo:hi]`` (equal keys: any order)."""
    n = hi - lo
    if n <= 32:
        for a in range(lo + 1, hi):
            k, c, j = key[a], bc[a], bj[a]
            b = a - 1
            while b >= lo and key[b] > k:
                key[b + 1], bc[b + 1], bj[b + 1] = key[b], bc[b], bj[b]
                b -= 1
            key[b + 1], bc[b + 1], bj[b + 1] = k, c, j
        return
    order = scratch[:n]
    for k in range(n):
        order[k] = lo + k
    _radix(key, order, 0, n)
    moved_c, moved_j, moved_k = bc[order], bj[order], key[order]
    bc[lo:hi], bj[lo:hi], key[lo:hi] = moved_c, moved_j, moved_k


@njit(cache=True, nogil=True)
def _merge_paths(parent, count, first, frames, leaf0, leaf1, out_parent, out_name, self0, self1, at):  # noqa: ANN001, ANN202, PLR0913
    """The name tree of a callsite forest in pre-order, children by name: a depth-first walk
    that groups the next frames of one node's items by name. Returns the number of nodes.
    An empty ``leaf0`` sums no weights; a non-empty ``at`` gets the node of each callsite's
    last frame."""
    n = parent.size
    kid_start = np.zeros(n + 2, np.int64)  # callsites by parent (roots under slot 0)
    for c in range(n):
        kid_start[parent[c] + 2] += 1
    for c in range(n + 1):
        kid_start[c + 1] += kid_start[c]
    kids = np.empty(n, np.int64)
    for c in range(n):
        kids[kid_start[parent[c] + 1]] = c
        kid_start[parent[c] + 1] += 1
    for g in range(n + 1, 0, -1):  # each slot held its group's end: shift to starts
        kid_start[g] = kid_start[g - 1]
    kid_start[0] = 0
    # p's children (p = -1: the roots) are kids[kid_start[p + 1]:kid_start[p + 2]]
    cap = frames.size + 1
    bc, bj, key = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    scratch = np.empty(cap, np.int64)
    st_node, st_cur, st_hi = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    top = 0
    reached = kid_start[1] - kid_start[0]
    for k in range(kid_start[0], kid_start[1]):
        c = kids[k]
        bc[top], bj[top], key[top] = c, 0, frames[first[c]]
        top += 1
    _sort_by_key(key, bc, bj, 0, top, scratch)
    out_parent[0], out_name[0] = -1, -1
    made, depth = 1, 0
    st_node[0], st_cur[0], st_hi[0] = 0, 0, top
    while depth >= 0:
        cur, hi = st_cur[depth], st_hi[depth]
        if cur >= hi:
            depth -= 1  # this node's children are done: their segment is let go
            if depth >= 0:
                top = st_hi[depth]
            continue
        name = key[cur]
        end = cur + 1
        while end < hi and key[end] == name:
            end += 1
        st_cur[depth] = end
        node = made
        made += 1
        out_parent[node], out_name[node] = st_node[depth], name
        lo = top
        for e in range(cur, end):
            c, j = bc[e], bj[e]
            if j + 1 < count[c]:
                bc[top], bj[top], key[top] = c, j + 1, frames[first[c] + j + 1]
                top += 1
                continue
            if leaf0.size:
                self0[node] += leaf0[c]
            if leaf1.size:
                self1[node] += leaf1[c]
            if at.size:
                at[c] = node
            reached += kid_start[c + 2] - kid_start[c + 1]
            for k in range(kid_start[c + 1], kid_start[c + 2]):
                d = kids[k]
                bc[top], bj[top], key[top] = d, 0, frames[first[d]]
                top += 1
        if top > lo:
            if top - lo > 1:
                _sort_by_key(key, bc, bj, lo, top, scratch)
            depth += 1
            st_node[depth], st_cur[depth], st_hi[depth] = node, lo, top
    return made if reached == n else -1  # callsites on a parent cycle were never reached


def merge_paths(parent: np.ndarray, count: np.ndarray, frames: np.ndarray, leaves: list[np.ndarray],
                *, at: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]] | None:
    """The flame graph's name tree of a callsite forest (``count`` frames per callsite, ``frames``
    their name ids, CSR, outermost first), in pre-order with children by name id: (parent, name
    (-1 for the root), self weight per side from ``leaves`` (one or two per-callsite weights;
    none: no weights, an empty list of selfs)). ``at`` (int64, one per callsite), when given,
    receives the node of each callsite's last frame: where its samples' weight goes, so the
    same tree takes other weights without another walk.
    None (declined) for a callsite without frames, a parent out of range or on a cycle.

    The numpy twin is the level-wise build of :func:`polyprof.analysis.flame._build` (a sort per
    level, then Euler numbers and a reordering into pre-order); this walk makes the nodes in
    pre-order directly."""
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    count = np.ascontiguousarray(count, dtype=np.int64)
    frames = np.ascontiguousarray(frames, dtype=np.int64)
    n = parent.size
    if n and (int(count.min()) < 1 or int(parent.max()) >= n or int(parent.min()) < -1):
        return None
    if frames.size != int(count.sum()) or (frames.size and int(frames.min()) < 0):
        return None
    if at is not None and (at.dtype != np.int64 or at.shape != (n,) or not at.flags.c_contiguous):
        return None
    first = np.cumsum(count) - count
    cap = frames.size + 1
    out_parent, out_name = np.empty(cap, np.int64), np.empty(cap, np.int64)
    selfs = [np.zeros(cap, np.int64) for _ in leaves]
    leaf0 = np.ascontiguousarray(leaves[0], dtype=np.int64) if leaves else _NONE
    leaf1 = np.ascontiguousarray(leaves[1], dtype=np.int64) if len(leaves) > 1 else _NONE
    made = _merge_paths(parent, count, first, frames, leaf0, leaf1, out_parent, out_name,
                        selfs[0] if leaves else _NONE, selfs[-1] if len(leaves) > 1 else _NONE,
                        _NONE if at is None or not n else at)
    if made < 0:
        return None
    cut = (lambda x: x[:made]) if 2 * made >= cap else (lambda x: x[:made].copy())  # noqa: E731 - little unused room
    return cut(out_parent), cut(out_name), [cut(s) for s in selfs]


@njit(cache=True, nogil=True)
def _preorder_layout(parent, selfs, totals, width, start, depth, size, own_width):  # noqa: ANN001, ANN202, PLR0913
    """``own_width`` False: ``width`` is ``totals[0]`` (no self weight is negative), summed once."""
    n = parent.size
    sides = selfs.shape[0]
    for i in range(n):
        for k in range(sides):
            totals[k, i] = selfs[k, i]
        if own_width:
            width[i] = max(selfs[0, i], 0)
        size[i] = 1
    for i in range(n - 1, 0, -1):  # children after their parents: sums bottom-up in one pass
        p = parent[i]
        for k in range(sides):
            totals[k, p] += totals[k, i]
        if own_width:
            width[p] += width[i]
        size[p] += size[i]
    if not n:
        return
    # where the next child starts, per depth: in pre-order a node's children come right after
    # it and before its next sibling, so one slot per depth serves every parent in turn
    edge = np.zeros(64, np.int64)
    start[0], depth[0] = 0, 0
    for i in range(1, n):
        d = depth[parent[i]] + 1
        depth[i] = d
        if d + 1 >= edge.size:
            grown = np.zeros(2 * edge.size, np.int64)
            grown[:edge.size] = edge
            edge = grown
        if parent[i] == i - 1:  # the first child: start at the parent's edge
            edge[d] = start[i - 1]
        start[i] = edge[d]
        edge[d] += width[i]


def preorder_layout(parent: np.ndarray, selfs: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray,
                                                                            np.ndarray, np.ndarray]:
    """For a tree in pre-order (``parent[i] < i``) with self weights per side: (totals per side,
    width = subtree sums of the first side's positive self, left edges (children side by side
    from their parent's edge, in id order), depth, subtree size). The numpy twin is
    :func:`polyprof.model.tree.subtree_sums`, ``place_children`` and ``euler`` on its levels.

    Made small for the web view's graphs of millions of nodes: when no first-side self weight
    is negative, ``width`` *is* the first side's totals (one array, not two); depth and size
    are int32 below 2^31 nodes; an int32 ``parent`` is read as it is."""
    n = parent.size
    stacked = np.ascontiguousarray(selfs[0], dtype=np.int64).reshape(1, n) if len(selfs) == 1 else \
        np.ascontiguousarray(np.stack(selfs), dtype=np.int64)
    totals = np.empty_like(stacked)
    own_width = bool(n) and int(stacked[0].min()) < 0
    width = np.empty(n, np.int64) if own_width else totals[0]
    start = np.empty(n, np.int64)
    small = _ids_dtype(n)
    depth, size = np.empty(n, small), np.empty(n, small)
    _preorder_layout(_ids(parent), stacked, totals, width, start, depth, size, own_width)
    sides = list(totals)
    return sides, width if own_width else sides[0], start, depth, size


def _ids_dtype(n: int) -> np.dtype:
    """The dtype of node ids and counts for ``n`` nodes: int32 while they fit."""
    return np.dtype(np.int32 if n < np.iinfo(np.int32).max else np.int64)


def _ids(parent: np.ndarray) -> np.ndarray:
    """``parent`` as the kernels read it: int32 or int64 as it is (no copy of millions of rows)."""
    if parent.dtype in (np.int32, np.int64):
        return np.ascontiguousarray(parent)
    return np.ascontiguousarray(parent, dtype=np.int64)


@njit(cache=True, nogil=True)
def _keep(parent, keep, new_id, new_parent, size):  # noqa: ANN001, ANN202
    n = parent.size
    k = 0
    for i in range(n):
        if keep[i]:
            p = parent[i]
            if p >= 0 and not keep[p]:
                return -1
            new_id[i] = k
            new_parent[k] = new_id[p] if p >= 0 else -1
            k += 1
    for j in range(k):
        size[j] = 1
    for j in range(k - 1, 0, -1):
        if new_parent[j] >= 0:
            size[new_parent[j]] += size[j]
    return k


def preorder_keep(parent: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The kept nodes of a tree in pre-order (``keep`` closed under ancestors) as a tree of their
    own: (parent, subtree size) renumbered in the same order (int32 below 2^31 nodes); None when
    an ancestor is not kept."""
    n = int(np.count_nonzero(keep))
    small = _ids_dtype(parent.size)
    new_parent, size = np.empty(n, small), np.empty(n, small)
    if _keep(_ids(parent), np.ascontiguousarray(keep, dtype=np.bool_), np.empty(parent.size, small),
             new_parent, size) < 0:
        return None
    return new_parent, size


@njit(cache=True, nogil=True)
def _compact(x, keep):  # noqa: ANN001, ANN202
    k = 0
    for i in range(x.size):
        if keep[i]:
            x[k] = x[i]
            k += 1
    return k


def compact(x: np.ndarray, keep: np.ndarray) -> np.ndarray | None:
    """``x[keep]`` written over the front of ``x`` (int64, 1-D), returned as a view of it: no
    second array of millions of rows. None when ``x`` is not such an array."""
    if x.dtype != np.int64 or x.ndim != 1 or not x.flags.c_contiguous or keep.dtype != np.bool_:
        return None
    return x[:_compact(x, keep)]


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: multiplicative hashing


@njit(cache=True, nogil=True)
def _rehash(slot, key, found, bits):  # noqa: ANN001, ANN202
    """Place the groups 0..found-1 (by ``key``) in ``slot[:2**bits]``, cleared first."""
    shift = np.uint64(64 - bits)
    mask = (1 << bits) - 1
    slot[:1 << bits] = -1
    for g in range(found):
        h = np.int64((np.uint64(key[g]) * _GOLDEN) >> shift)
        while slot[h] >= 0:
            h = (h + 1) & mask
        slot[h] = g


@njit(cache=True, nogil=True)
def _group_level(parent, name_of, cur, up, w, n, width, hint, nxt, key, kt, prov, slot):  # noqa: ANN001, ANN202, PLR0913
    """One level of merging paths: items 0..n-1 (node ``cur[i]`` of the tree, merged parent
    ``up[i]``, weight ``w[i]``) grouped by (up, name of cur) in a hash table, no sort of the
    items: ``prov[i]`` its group (ids in order of first appearance), ``key[g]`` the group's
    ``up * width + name``, ``kt[g]`` its summed weight; ``nxt[i]`` the parent of ``cur[i]``
    (read with its name: one visit of the node per level). ``slot``: the table's room (a power
    of two >= 2n), used as far as the groups need (``hint``: the last level's count), so that
    a level of few groups stays in cache. Returns the number of groups.

    Also compiled into :mod:`polyprof.analysis._sandwich_compiled`'s kernel: numba's cache
    keys that one by its own file, so an edit here must touch that file too (else its cached
    machine code keeps the old grouping)."""
    bits = 4
    while (1 << bits) < 2 * min(n, max(hint, 8)):
        bits += 1
    slot[:1 << bits] = -1
    shift = np.uint64(64 - bits)
    mask = (1 << bits) - 1
    found = 0
    for i in range(n):
        c = cur[i]
        nxt[i] = parent[c]
        k = up[i] * np.int64(width) + name_of[c]
        h = np.int64((np.uint64(k) * _GOLDEN) >> shift)
        while True:
            g = slot[h]
            if g < 0 or key[g] == k:
                break
            h = (h + 1) & mask
        if g < 0:
            g = found
            slot[h] = g
            key[g], kt[g] = k, 0
            found += 1
            if 2 * found > 1 << bits:  # half full: twice the room
                bits += 1
                shift = np.uint64(64 - bits)
                mask = (1 << bits) - 1
                _rehash(slot, key, found, bits)
        prov[i] = g
        kt[g] += w[i]
    return found


@njit(cache=True, nogil=True)
def _merged_root(w, m_parent, m_name, m_total, bounds):  # noqa: ANN001, ANN202
    """Node 0 of a tree of merged paths (the root, with every path's weight): the first level."""
    m_parent[0], m_name[0], m_total[0] = -1, -1, 0
    for i in range(w.size):
        m_total[0] += w[i]
    bounds[0], bounds[1] = 0, 1


def table_room(n: int) -> int:
    """The size of :func:`_group_level`'s table for up to ``n`` items: a power of two >= 2n."""
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@njit(cache=True, nogil=True)
def _reversed_paths(parent, name_of, cur, w, tail, threshold, width, m_parent, m_name, m_total, m_self, bounds, slot):  # noqa: ANN001, ANN202, PLR0913
    """Merge the paths from ``cur`` up to (not including) node 0 of a tree, one level per step:
    items with equal (merged parent, name) become one node (:func:`_group_level`), nodes
    lighter than ``threshold`` stop their items. ``tail`` (empty: none): each item's last
    node, where its path goes on from node 0 (> 0; 0: it ends there). Returns (nodes made,
    levels), or (-1, 0) when the output arrays are full."""
    n = cur.size
    up = np.zeros(n, np.int64)
    nxt = np.empty_like(cur)
    key, kt = np.empty(n, np.int64), np.empty(n, np.int64)
    prov = np.empty(n, np.int32)  # ids < n: int32 halves the largest temporaries
    cap = m_parent.size
    tails = tail.size > 0
    _merged_root(w, m_parent, m_name, m_total, bounds)
    made, levels, found = 1, 1, 1
    while n:
        found = _group_level(parent, name_of, cur, up, w, n, width, found, nxt, key, kt, prov, slot)
        order = np.arange(found)
        if found > 1:
            _radix(key, order, 0, found)
        final = np.full(found, -1, np.int64)
        if made + found > cap:
            return -1, 0
        for r in range(found):  # ids in (parent, name) order, the light ones left out
            d = order[r]
            if threshold == 0 or abs(kt[d]) >= threshold:
                final[d] = made
                m_parent[made], m_name[made], m_total[made] = key[d] // width, key[d] % width, kt[d]
                made += 1
        if made > bounds[levels]:
            levels += 1
            bounds[levels] = made
        k = 0
        for i in range(n):
            mid = final[prov[i]]
            nx = nxt[i]
            if nx <= 0 and tails and mid >= 0 and tail[i] > 0:  # on to its last node
                nx = tail[i]
                tail[i] = 0
            if nx <= 0:  # the graph's root (node 0) is no caller
                if mid >= 0:
                    m_self[mid] += w[i]
                continue
            if mid < 0:
                continue
            cur[k], w[k], up[k] = nx, w[i], mid
            if tails:
                tail[k] = tail[i]
            k += 1
        n = k
    return made, levels


def reversed_paths(parent: np.ndarray, name_of: np.ndarray, nodes: np.ndarray, weight: np.ndarray,
                   threshold: int | None, tail: np.ndarray | None = None) -> tuple[np.ndarray, ...] | None:
    """The callers tree of :func:`polyprof.analysis.sandwich._callers` (its numpy twin, an
    interned level per step): (parent, name, self, total, level bounds) of the merged reversed
    paths from ``nodes`` (each carrying its ``weight``, not 0) towards the root; ``tail``: each
    one's last node, where its path goes on from the root (> 0; 0: none; a node whose parent
    is the root)."""
    cur = np.ascontiguousarray(nodes, dtype=np.int64)  # copied per attempt (the kernel consumes them)
    w = np.ascontiguousarray(weight, dtype=np.int64)
    last = np.zeros(0, np.int64) if tail is None else np.ascontiguousarray(tail, dtype=np.int64)
    # a flame graph's int32 columns as they are: a copy of each is 24 MB per 3M nodes
    name_of, parent = (x if x.dtype in (np.int32, np.int64) and x.flags.c_contiguous else
                       np.ascontiguousarray(x, dtype=np.int64) for x in (name_of, parent))
    if (name_of.size and int(name_of.min()) < 0) or cur.size >= np.iinfo(np.int32).max:
        return None  # the kernel's per-level ids are int32
    width = int(name_of.max(initial=0)) + 1
    cap = 16 * cur.size + 64  # pages are touched only as nodes are made
    slot = np.empty(table_room(cur.size), np.int32)
    while True:
        m_parent, m_name, m_total = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
        m_self, bounds = np.zeros(cap, np.int64), np.zeros(cap + 2, np.int64)
        made, levels = _reversed_paths(parent, name_of, cur.copy(), w.copy(), last.copy(), threshold or 0, width,
                                       m_parent, m_name, m_total, m_self, bounds, slot)
        if made >= 0:
            return (m_parent[:made].copy(), m_name[:made].copy(), m_self[:made].copy(), m_total[:made].copy(),
                    bounds[:levels + 1].copy())
        cap *= 4
