"""Compiled twin of :func:`polyprof.analysis.labels._framed_paths`'s fill (numba, no compiler needed).

The numpy form walks the paths one depth at a time for all (stack, labelset)
groups at once: a whole-array step per depth. Here each group's new stack is
written in one walk up its callsites, leaf frames and root frames around it
(the same CSR, a differential test checks it). Imported only for work large
enough to pay for numba (``labels._kernels``).
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

__all__ = ["Marks", "covered", "fill_paths", "framed_tree", "group_marks", "grouped_by_masks", "grouped_graph",
           "marked_rows"]


@njit(cache=True, nogil=True)
def _fill(stack, ls, parent, location, lmap, offsets, leaf, leaf_own, root, root_own, flat):
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


#: The graph's first capacity in nodes: ROOM[0] per node of the name tree, plus ROOM[1] (the
#: benchmark pprof's grouped graph has 3.7 per node; more is grown, tests shrink it).
ROOM = [4, 1024]


@njit(cache=True, nogil=True)
def _grouped(parent, name, node, weight, bounds, group_name, mark, todo, scratch, used, cols, wide, state, end):
    # per node of the name tree, side by side (one cache line per random visit): self, width,
    # the next child's left edge, the graph's node id
    at_node = scratch
    o_name, o_parent, o_depth, o_size = cols[0], cols[1], cols[2], cols[3]
    o_self, o_total, o_start = wide[0], wide[1], wide[2]
    cap = o_name.size
    made, offset = state[1], state[2]
    for g in range(state[0], end):
        k = 0
        top = 0
        for s in range(bounds[g], bounds[g + 1]):  # the group's nodes with samples
            v = node[s]
            if mark[v] == 0:
                mark[v] = 1
                at_node[v, 0] = 0
                at_node[v, 1] = 0
                todo[k] = v
                k += 1
                top = max(top, v)
            at_node[v, 0] += weight[s]
        for j in range(k):  # and their ancestors
            v = parent[todo[j]]
            while v >= 0 and mark[v] == 0:
                mark[v] = 1
                at_node[v, 0] = 0
                at_node[v, 1] = 0
                todo[k] = v
                k += 1
                v = parent[v]
        if k == 0:
            continue
        # pre-order (parents before children, children by name): a scan of the marks when they
        # are dense, else a sort; walked backwards, each node's width is complete when its
        # parent takes it
        if 24 * k > top:
            m = k
            for v in range(top, -1, -1):
                if mark[v]:
                    mark[v] = 0
                    m -= 1
                    todo[m] = v
                    w = at_node[v, 0] + at_node[v, 1]
                    at_node[v, 1] = w
                    if parent[v] >= 0:
                        at_node[parent[v], 1] += w
            ids = todo[:k]
        else:
            ids = np.sort(todo[:k])
            for j in range(k - 1, -1, -1):
                v = ids[j]
                mark[v] = 0
                w = at_node[v, 0] + at_node[v, 1]
                at_node[v, 1] = w
                if parent[v] >= 0:
                    at_node[parent[v], 1] += w
        if at_node[ids[0], 1] < 1:
            continue
        if made + k > cap:  # the caller grows the columns and calls again from this group
            state[0], state[1], state[2] = g, made, offset
            return False
        first = made
        for j in range(k):
            v = ids[j]
            w = at_node[v, 1]
            if w < 1:
                continue
            if j == 0:  # the name tree's root: the group's label frame, under the graph's root
                at, up, nm, d = offset, 0, group_name[g], 1
            else:
                p = parent[v]
                up = at_node[p, 3]
                at, nm, d = at_node[p, 2], name[v], o_depth[up] + 1
                at_node[p, 2] += w
            at_node[v, 2] = at
            at_node[v, 3] = made
            used[nm] = True
            o_name[made], o_parent[made], o_depth[made], o_size[made] = nm, up, d, 1
            o_self[made], o_total[made], o_start[made] = at_node[v, 0], w, at
            made += 1
        for i in range(made - 1, first, -1):  # subtree sizes: the group's rows (recent: in cache)
            o_size[o_parent[i]] += o_size[i]
        offset += at_node[ids[0], 1]
    state[0], state[1], state[2] = end, made, offset
    return True


def grouped_graph(parent: np.ndarray, name: np.ndarray, node: np.ndarray, weight: np.ndarray, bounds: np.ndarray,
                  group_name: np.ndarray, root_name: int,
                  n_names: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """A flame graph split by groups of samples under one root, complete (every node of width
    at least 1), in pre-order: its columns (name id, parent, depth, subtree size as int32; self,
    total, left edge as int64) and which name ids occur. ``parent``/``name``: a name tree in
    pre-order (children by name), node 0 its root; ``node``/``weight``: every sample's node and
    weight (none negative), sorted by group, group ``g`` at ``bounds[g]:bounds[g + 1]``, the
    groups in name order; ``group_name``: each group's name id (the node its tree's root becomes),
    ``root_name``: the root's; ids below ``n_names``. Each group costs the nodes on its samples'
    paths to the root, not the whole tree. The columns are made with room to spare (untouched
    pages cost no memory) and given back in place at the end."""
    node = np.ascontiguousarray(node, dtype=np.int64)
    weight = np.ascontiguousarray(weight, dtype=np.int64)
    bounds, group_name = bounds.astype(np.int64), group_name.astype(np.int32)
    groups = bounds.size - 1
    # the groups in parts of about equal samples, one thread each (the kernel lets the GIL go)
    parts = max(1, min(THREADS[0], groups, os.cpu_count() or 1))
    cuts = np.searchsorted(bounds, np.linspace(0, bounds[-1], parts + 1)[1:-1]) if parts > 1 else np.zeros(0, np.int64)
    edges = [0, *sorted({min(max(int(c), 1), groups - 1) for c in cuts}), groups] if parts > 1 else [0, groups]
    edges = sorted(set(edges))
    made = [_part(parent, name, node, weight, bounds, group_name, root_name, n_names, lo, hi, first=lo == 0)
            for lo, hi in itertools.pairwise(edges)] if len(edges) <= 2 else None
    if made is None:
        with ThreadPoolExecutor(len(edges) - 1) as pool:
            made = list(pool.map(lambda span: _part(parent, name, node, weight, bounds, group_name, root_name,
                                                    n_names, span[0], span[1], first=span[0] == 0),
                                 itertools.pairwise(edges)))
    (cols, used, rows, width), rest = made[0], made[1:]
    total = rows + sum(r for _, _, r, _ in rest)
    if total > cols[0].size:
        cols = tuple(_grown(x, rows, total) for x in cols)
    for more, more_used, more_rows, more_width in rest:  # each part after the ones before it
        name_, parent_, depth, size, self_, total_, start = more
        at = slice(rows, rows + more_rows)
        cols[0][at], cols[2][at], cols[3][at] = name_[:more_rows], depth[:more_rows], size[:more_rows]
        cols[4][at], cols[5][at] = self_[:more_rows], total_[:more_rows]
        np.add(start[:more_rows], width, out=cols[6][at])
        np.add(parent_[:more_rows], rows, out=cols[1][at])
        cols[1][at][depth[:more_rows] == 1] = 0  # the groups' nodes hang from the root
        used |= more_used
        rows += more_rows
        width += more_width
        del more
    for x in cols:  # the room to spare given back in place (no copy of the graph)
        x.resize(rows, refcheck=False)
    cols[5][0] = width
    cols[3][0] = rows
    return cols, used


#: Threads making the grouped graph at most (each holds 40 bytes per node of the name tree).
THREADS = [2]


def _part(parent: np.ndarray, name: np.ndarray, node: np.ndarray, weight: np.ndarray, bounds: np.ndarray,
          group_name: np.ndarray, root_name: int, n_names: int, lo: int, hi: int,
          *, first: bool) -> tuple[tuple[np.ndarray, ...], np.ndarray, int, int]:
    """Groups ``lo:hi`` of :func:`grouped_graph`: their nodes' columns (after the root when
    ``first``; parents numbered from the part's first row, the groups' own nodes at depth 1),
    the name ids used, the rows made and the width of the groups."""
    n = parent.size
    scratch = np.zeros((n, 4), np.int64)
    todo = np.empty(n, np.int64)
    mark = np.zeros(n, np.uint8)
    used = np.zeros(n_names, np.bool_)
    cap = ROOM[0] * n + ROOM[1]
    cols = tuple(np.empty(cap, np.int32) for _ in range(4)) + tuple(np.empty(cap, np.int64) for _ in range(3))
    if first:
        used[root_name] = True
        for x, value in zip(cols, (root_name, -1, 0, 1, 0, 0, 0)):
            x[0] = value
    state = np.array([lo, 1 if first else 0, 0], np.int64)
    while not _grouped(parent, name, node, weight, bounds, group_name, mark, todo, scratch, used, cols[:4], cols[4:],
                       state, hi):
        cap *= 2
        cols = tuple(_grown(x, int(state[1]), cap) for x in cols)
    return cols, used, int(state[1]), int(state[2])


def _grown(x: np.ndarray, made: int, cap: int) -> np.ndarray:
    out = np.empty(cap, x.dtype)
    out[:made] = x[:made]
    return out


#: :func:`grouped_by_masks` holds each node's groups as bits of this many 64-bit words at most
#: (more groups: :func:`grouped_graph`, which costs each group its own nodes).
MASK_WORDS = 4

_ONE = np.uint64(1)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_BIT_AT = np.zeros(64, np.int64)  # a lowest set bit's position from its de Bruijn product
for _b in range(64):
    _BIT_AT[((1 << _b) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _b


@njit(cache=True, nogil=True)
def _marks(parent, node, weight, group, words, n_groups):
    # each node's groups (a bit per group whose samples pass through it with weight), its
    # depth, and the rows of each group (its nodes)
    n = parent.size
    mask = np.zeros((n, words), np.uint64)
    for s in range(node.size):
        if weight[s] > 0:
            g = group[s]
            mask[node[s], g >> 6] |= _ONE << np.uint64(g & 63)
    for v in range(n - 1, 0, -1):  # pre-order: a node's parent comes before it
        for w in range(words):
            mask[parent[v], w] |= mask[v, w]
    depth = np.zeros(n, np.int32)
    count = np.zeros(n_groups, np.int64)
    for v in range(n):
        if v:
            depth[v] = depth[parent[v]] + 1
        _count_bits(mask, v, count)
    return mask, depth, count


@njit(cache=True, nogil=True, inline="always")
def _count_bits(mask, v, count):
    # count[g] += 1 for each group bit g set in row v of ``mask``
    for w in range(mask.shape[1]):
        m = mask[v, w]
        while m:
            low = m & (~m + _ONE)
            count[w * 64 + _BIT_AT[(low * _DEBRUIJN) >> np.uint64(58)]] += 1
            m ^= low


@njit(cache=True, nogil=True)
def _by_node(node, weight, n):
    # the samples with weight bucketed by node (a counting sort): node v's at first[v]:first[v + 1]
    # (positions below 2**31: the caller checks)
    first = np.zeros(n + 1, np.int32)
    for s in range(node.size):
        if weight[s] > 0:
            first[node[s] + 1] += 1
    for v in range(n):
        first[v + 1] += first[v]
    fill = first[:-1].copy()
    order = np.empty(first[n], np.int32)
    for s in range(node.size):
        if weight[s] > 0:
            order[fill[node[s]]] = s
            fill[node[s]] += 1
    return first, order


@njit(cache=True, nogil=True)
def _rows(parent, name, lookup, weight, group, mask, depth, first, order, nxt, last, group_name, lo, hi, used,
          cols, wide):
    # groups lo:hi: each (group, node) row at its place (nodes in pre-order, so each group's rows
    # are too), then their widths and subtree sizes backwards (children after their parent);
    # the groups' own rows, whose parent is the root, are summed into it by the caller. A node's
    # name in the graph: lookup[name[v]]
    n, words = mask.shape
    o_name, o_parent, o_size = cols[0], cols[1], cols[3]
    o_self, o_total = wide[0], wide[1]
    acc = np.zeros(hi, np.int64)
    begin = nxt[lo]
    span = np.zeros(words, np.uint64)  # the bits of groups lo:hi (others are not visited)
    for g in range(lo, hi):
        span[g >> 6] |= _ONE << np.uint64(g & 63)
    w_lo, w_hi = lo >> 6, min(words, (hi + 63) >> 6)
    for v in range(n):
        mine = False  # a node without these groups' bits has none of their rows or samples
        for w in range(w_lo, w_hi):
            if mask[v, w] & span[w]:
                mine = True
                break
        if not mine:
            continue
        for k in range(first[v], first[v + 1]):
            g = group[order[k]]
            if lo <= g < hi:
                acc[g] += weight[order[k]]
        d = depth[v]
        for w in range(w_lo, w_hi):
            m = mask[v, w] & span[w]
            while m:
                low = m & (~m + _ONE)
                g = w * 64 + _BIT_AT[(low * _DEBRUIJN) >> np.uint64(58)]
                m ^= low
                row = nxt[g]
                nxt[g] += 1
                if v == 0:  # the name tree's root: the group's label frame, under the graph's root
                    nm, up = group_name[g], 0
                else:
                    nm, up = lookup[name[v]], last[g, d - 1]
                # the row of each group's latest node per depth: a node's parent row in its group
                # (the nodes between a parent and its child in pre-order are all below the parent)
                last[g, d] = row
                used[nm] = True
                o_name[row], o_parent[row], o_self[row] = nm, up, acc[g]
                acc[g] = 0
    end = nxt[hi - 1] if hi > lo else begin
    for i in range(end - 1, begin - 1, -1):
        o_total[i] += o_self[i]
        o_size[i] += 1
        if o_parent[i] > 0:
            o_total[o_parent[i]] += o_total[i]
            o_size[o_parent[i]] += o_size[i]


@njit(cache=True, nogil=True)
def _layout(cols, wide, begin, end, deepest):
    # rows begin:end (whole groups, their own rows placed): depths and left edges forwards, the
    # next child's edge per depth of the path
    o_parent, o_depth = cols[1], cols[2]
    o_total, o_start = wide[1], wide[2]
    edge = np.zeros(deepest + 3, np.int64)
    for i in range(begin, end):
        if o_parent[i] == 0:
            d = 1
            at = o_start[i]
        else:
            d = o_depth[o_parent[i]] + 1
            at = edge[d]
            edge[d] += o_total[i]
        o_depth[i] = d
        o_start[i] = at
        edge[d + 1] = at


#: Threads making the rows of :func:`grouped_by_masks` (each its share of the groups).
MASK_THREADS = [2]


def grouped_by_masks(parent: np.ndarray, name: np.ndarray, lookup: np.ndarray, node: np.ndarray, weight: np.ndarray,
                     group: np.ndarray, group_name: np.ndarray, root_name: int,
                     n_names: int) -> tuple[tuple[np.ndarray, ...], np.ndarray] | None:
    """:func:`grouped_graph`'s graph (the same columns and used names) from every sample's node,
    weight and group (``group``: unsorted, ids into ``group_name``), node ``v`` named
    ``lookup[name[v]]`` (the name tree's own ids, not a mapped copy of them); None for more than
    64 x :data:`MASK_WORDS` groups, a tree deeper than its nodes per group, or 2**31 samples. Each
    node holds its
    groups as bits, set from the samples and passed up to the parents in one backward pass; one
    forward pass over the nodes then writes each (group, node) row at its place, a backward and
    a forward pass over the rows sum the widths and lay them out, the groups in parts of about
    equal rows, one thread each (the kernels let the GIL go). Its cost is the name tree and the
    graph's rows, in sequential passes; besides the graph (made at its exact size) it holds 8
    bytes per node and group word, 16 per node at most (depths, buckets, latest rows) and 4 per
    sample with weight."""
    marks = group_marks(parent, node, weight, group, group_name.size)
    if marks is None:
        return None
    return marked_rows(marks, parent, name, lookup, weight, group, group_name, root_name, n_names, 0,
                       group_name.size, keep=False)


class Marks:
    """What :func:`group_marks` sets once for :func:`marked_rows`: each node's groups as bits, its
    depth, the samples with weight bucketed by node, each group's rows (``count``), the latest
    row of each group per depth (scratch), the deepest depth."""

    def __init__(self, mask: np.ndarray, depth: np.ndarray, count: np.ndarray, first: np.ndarray,
                 order: np.ndarray, deepest: int) -> None:
        self.mask, self.depth, self.count, self.first, self.order, self.deepest = mask, depth, count, first, order, deepest
        self.last: np.ndarray | None = None


def group_marks(parent: np.ndarray, node: np.ndarray, weight: np.ndarray, group: np.ndarray,
                groups: int) -> Marks | None:
    """The marks :func:`marked_rows` makes the grouped graph's rows from (``weight`` int64; see
    :func:`grouped_by_masks`), their ``count``: each group's rows; None where that graph is not
    made by masks."""
    words = max(1, -(-groups // 64))
    if words > MASK_WORDS or not groups or node.size >= 2**31:
        return None
    with ThreadPoolExecutor(2) as pool:  # the marks and the samples' buckets side by side
        marked = pool.submit(_marks, parent, node, weight, group, words, groups)
        first, order = _by_node(node, weight, parent.size)
        mask, depth, count = marked.result()
    deepest = int(depth.max(initial=0))
    if groups * (deepest + 1) > max(parent.size, 1 << 16):
        return None
    return Marks(mask, depth, count, first, order, deepest)


def marked_rows(marks: Marks, parent: np.ndarray, name: np.ndarray, lookup: np.ndarray, weight: np.ndarray,
                group: np.ndarray, group_name: np.ndarray, root_name: int, n_names: int, lo: int, hi: int,
                *, keep: bool = True) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The grouped graph of groups ``lo:hi`` alone (:func:`grouped_by_masks`'s of their samples:
    the root, then their rows) from ``marks``, and the names it uses; ``keep``: the marks serve
    further calls (else their scratch is let go once the rows are written)."""
    groups = group_name.size
    count = marks.count
    nxt = np.ones(groups, np.int64)  # each group's first row (those of lo:hi from 1)
    np.cumsum(count[lo:hi - 1], out=nxt[lo + 1:hi])
    nxt[lo + 1:hi] += 1
    rows = 1 + int(count[lo:hi].sum())
    cols = tuple(np.zeros(rows, np.int32) if k == 3 else np.empty(rows, np.int32) for k in range(4))
    wide = (np.empty(rows, np.int64), np.zeros(rows, np.int64), np.empty(rows, np.int64))
    parts = max(1, min(MASK_THREADS[0], hi - lo, os.cpu_count() or 1))
    cuts = np.searchsorted(nxt[lo:hi], np.linspace(1, rows, parts + 1)[1:-1]) + lo
    edges = sorted({lo, hi, *(min(max(int(c), lo + 1), hi - 1) for c in cuts)})
    spans = list(itertools.pairwise(edges))
    if marks.last is None:
        marks.last = np.zeros((groups, marks.deepest + 1), np.int64)
    labels = group_name.astype(np.int32)
    starts = nxt.copy()
    used = [np.zeros(n_names, np.bool_) for _ in spans]
    depth, deepest = marks.depth, marks.deepest

    def rows_of(k: int) -> None:
        a, b = spans[k]
        _rows(parent, name, lookup, weight, group, marks.mask, depth, marks.first, marks.order, nxt, marks.last,
              labels, a, b, used[k], cols, wide)

    def layout(k: int) -> None:
        a, b = spans[k]
        _layout(cols, wide, int(starts[a]), int(starts[b]) if b < hi else rows, deepest)

    _each(rows_of, len(spans))
    if not keep:  # dropped once the rows are made
        marks.mask = marks.first = marks.order = marks.last = None  # type: ignore[assignment]
    o_name, o_parent, o_depth, o_size = cols
    o_self, o_total, o_start = wide
    o_name[0], o_parent[0], o_depth[0], o_self[0], o_start[0] = root_name, -1, 0, 0, 0
    own = starts[lo:hi][count[lo:hi] > 0]  # the groups' own rows (under the root), in order: their left edges
    o_total[0] = int(o_total[own].sum())
    o_size[0] = rows
    o_start[own[1:]] = np.cumsum(o_total[own[:-1]])
    o_start[own[:1]] = 0
    _each(layout, len(spans))
    seen = np.logical_or.reduce(used)
    seen[root_name] = True
    return cols + wide, seen


@njit(cache=True, nogil=True)
def _covered(parent, name, hits):
    out = np.zeros(parent.size, np.bool_)
    for v in range(parent.size):  # pre-order: a node's parent comes before it
        out[v] = (name[v] >= 0 and hits[name[v]]) or (parent[v] >= 0 and out[parent[v]])
    return out


def covered(parent: np.ndarray, name: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """Per node of a name tree in pre-order (``parent``; ``name``: ids, -1 for none): whether it
    or an ancestor has a name of ``hits`` (a flag per name id), in one forward pass."""
    return _covered(parent, name, hits)


def _each(work: Any, parts: int) -> None:
    """``work(k)`` for every part ``k``, in threads when there are several."""
    if parts == 1:
        work(0)
        return
    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(work, range(parts)))


@njit(cache=True, nogil=True)
def _framed_marks(parent, location, lmap, stack, frame, words, n_frames):
    # each callsite's depth and frames (a bit per frame whose groups pass through it); ok 0 when
    # the callsites are not in pre-order with siblings by increasing mapped location (as the
    # interner numbers them), or the groups' stacks are not sorted
    n = parent.size
    depth = np.zeros(n, np.int32)
    mask = np.zeros((n, words), np.uint64)
    count = np.zeros(n_frames, np.int64)
    path = np.empty(n + 1, np.int32)
    youngest = np.full(n + 1, -1, np.int32)  # each callsite's latest child so far (n: the roots')
    top = -1
    for v in range(n):
        up = parent[v]
        while top >= 0 and path[top] != up:
            top -= 1
        if up >= 0 and top < 0:
            return mask, depth, count, 0, 0
        top += 1
        path[top] = v
        depth[v] = top
        k = up if up >= 0 else n
        if youngest[k] >= 0 and lmap[location[youngest[k]]] >= lmap[location[v]]:
            return mask, depth, count, 0, 0
        youngest[k] = v
    deepest = int(depth.max()) if n else 0
    for i in range(stack.size):
        if i and stack[i] < stack[i - 1]:
            return mask, depth, count, 0, 0
        if stack[i] >= 0:
            f = frame[i]
            mask[stack[i], f >> 6] |= _ONE << np.uint64(f & 63)
    for v in range(n - 1, -1, -1):
        if parent[v] >= 0:
            for w in range(words):
                mask[parent[v], w] |= mask[v, w]
    for v in range(n):
        _count_bits(mask, v, count)
    return mask, depth, count, deepest, 1


@njit(cache=True, nogil=True)
def _framed_fill(parent, location, lmap, stack, frame, frame_loc, mask, depth, start, deepest, out_parent,
                 out_location, out_depth, out_size, leaf):
    # each (frame, callsite) row at its place: a frame's root, then its callsites in the input's
    # order (pre-order, parents first); each group's leaf row; subtree sizes backwards
    n, words = mask.shape
    frames = frame_loc.size
    nxt = start + 1
    last = np.zeros((frames, deepest + 1), np.int64)
    cur = np.zeros(frames, np.int64)
    for f in range(frames):
        out_parent[start[f]], out_location[start[f]], out_depth[start[f]] = -1, frame_loc[f], 0
    g = 0
    while g < stack.size and stack[g] < 0:  # groups without a stack: their frame's root
        leaf[g] = start[frame[g]]
        g += 1
    for v in range(n):
        d = depth[v]
        loc = lmap[location[v]]
        for w in range(words):
            m = mask[v, w]
            while m:
                low = m & (~m + _ONE)
                f = w * 64 + _BIT_AT[(low * _DEBRUIJN) >> np.uint64(58)]
                m ^= low
                row = nxt[f]
                nxt[f] += 1
                out_parent[row] = last[f, d - 1] if d else start[f]
                out_location[row], out_depth[row] = loc, d + 1
                last[f, d] = row
                cur[f] = row
        while g < stack.size and stack[g] == v:
            leaf[g] = cur[frame[g]]
            g += 1
    for i in range(out_parent.size - 1, -1, -1):
        out_size[i] += 1
        if out_parent[i] >= 0:
            out_size[out_parent[i]] += out_size[i]


def framed_tree(parent: np.ndarray, location: np.ndarray, lmap: np.ndarray, stack: np.ndarray,
                frame: np.ndarray, frame_loc: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """The callsite tree the interner (:func:`~polyprof.model.bulk_stacks.intern_stacks`) makes of
    the paths of ``groups`` under one root label frame each, made without the paths: a group is
    a stack (``stack``, -1 for none, sorted) and a frame (``frame``: an index into ``frame_loc``,
    the frames' locations, increasing); its path is its frame, then the stack's locations from
    the root through ``lmap``. Where the input's callsites (``parent``, ``location``) are numbered
    as the interner numbers them (pre-order, siblings by increasing mapped location; ``lmap``
    keeps that order), the interned tree is each frame followed by the callsites its groups
    pass through, in the input's order: the same ids. Returns (leaf of each group, parent,
    location, depth, subtree size) as the interner's columns, or None where the input is not so
    numbered, for more than 64 x :data:`MASK_WORDS` frames, or 2**31 callsites."""
    frames = frame_loc.size
    words = max(1, -(-frames // 64))
    if words > MASK_WORDS or not frames:
        return None
    lmap = np.ascontiguousarray(lmap, dtype=np.int64)
    mask, depth, count, deepest, ok = _framed_marks(parent, location, lmap, stack, frame, words, frames)
    rows = int(count.sum()) + frames
    if not ok or rows >= 2**31:
        return None
    start = np.zeros(frames, np.int64)
    np.cumsum(count[:-1] + 1, out=start[1:])
    out = (np.empty(rows, np.int32), np.empty(rows, np.int32), np.empty(rows, np.int32), np.zeros(rows, np.int32))
    leaf = np.empty(stack.size, np.int32)
    _framed_fill(parent, location, lmap, stack, frame, np.ascontiguousarray(frame_loc, dtype=np.int64), mask, depth,
                 start, deepest, *out, leaf)
    return (leaf, *out)
