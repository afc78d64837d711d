"""``sandwich``: the callers and the callees of one function as two flame graphs (speedscope's view).

Both come from a complete flame graph (:class:`~polyprof.analysis.flameview.FlameIndex`)
of the same options, so their numbers agree with it exactly:

``callees``
    every subtree rooted at an *outermost* node named ``name`` (one with no
    ancestor of that name), merged by their paths of names below it: the
    root's one child is the function, its total the function's cum
    (recursion counted once, as ``top``), and below it whatever it called.
``callers``
    for every node named ``name``, the samples whose *innermost* frame of
    that name it is (its total minus the totals of the nearest nodes of the
    name below it), placed on the reversed path from it to the root: the
    function first, then its caller, its caller's caller... So each sample
    counts once, widths add up to the function's cum, and the children of
    the function are its direct callers.

Names are report names at the graph's granularity (what ``top`` lists).
Lost: nothing; both trees keep every node (they are views of the graph).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

# The flame graph's own wrapping; layout by the tree kernels the flame graph uses.
from polyprof.analysis.flame import FlameTree, NameColumn, _finish
from polyprof.analysis.flameview import FlameIndex, _outermost
from polyprof.analysis.result import Result
from polyprof.analysis.stacks import CompiledTwin
from polyprof.errors import OptionsError
from polyprof.model import tree

__all__ = ["Graph", "SandwichResult", "Walk", "callee_side", "inverted_graph", "inverted_paths", "name_code", "sandwich",
           "subtree_callees", "with_callers"]


@dataclass(repr=False)
class SandwichResult(Result):
    """The callers and callees graphs of ``name``; ``flat``/``cum`` as in ``top``.
    Tables: ``callers`` and ``callees`` (the two graphs' nodes, as FlameTree's)."""

    TABLES: ClassVar[tuple[str, ...]] = ("callers", "callees")

    name: str
    flat: int
    cum: int
    total: int        # the whole graph's total (the 100% of every share)
    callers: FlameTree
    callees: FlameTree
    # a cut callers tree (``sandwich(max_nodes=)``): every node's id and subtree size in the complete
    # one (FlameIndex(callers, complete=...) answers with them)
    callers_complete: tuple[np.ndarray, np.ndarray] | None = None

    def _columns(self, table: str) -> dict[str, Any]:
        return (self.callers if table == "callers" else self.callees)._columns("nodes")

    def _summary(self) -> str:
        return f"{self.name!r}, flat={self.flat}, cum={self.cum}, {len(self.callers)}/{len(self.callees)} nodes"


def sandwich(index: FlameIndex, name: str, *, min_fraction: float = 0.0, max_nodes: int = 0) -> SandwichResult:
    """Callers and callees of the nodes named ``name`` in the flame graph ``index``.

    ``min_fraction`` > 0 merges paths narrower than that fraction of the
    function's cum as they are built (a view's resolution): their weight stays
    in their parent's total, drawn as its hidden width. The inverted paths of
    a function called from millions of places would otherwise outnumber the
    graph's own nodes.

    ``max_nodes`` > 0 with ``min_fraction`` 0 (a view that will draw the widest
    ``max_nodes`` of the complete callers tree, ``FlameIndex.slice(max_nodes=)``):
    with the compiled kernels, the callers tree is made only down to a width that
    still holds those, each cut node's narrower children kept as nodes (so every
    direct caller is there) and the complete tree's node ids and subtree sizes in
    ``callers_complete``. Lost: the nodes under the cut ones (counted, not made).
    """
    code = name_code(index, name)
    t = index.tree
    graph = Graph(t.parent, t.depth, index.name_id, t.self, t.total, index.size,
                  t.width is t.total and not t.dropped)
    flat, cum, threshold, callees, cur, weight = callee_side(index, graph, code, min_fraction)
    return with_callers(index, name, (flat, cum, callees), cur, weight, threshold, max_nodes,
                        Walk(t.parent, index.name_id, t.depth))


def name_code(index: FlameIndex, name: str) -> int:
    """``name``'s id in ``index`` (OptionsError for a name the graph does not hold)."""
    try:
        return index.distinct.index(name)
    except ValueError:
        raise OptionsError(f"no frame named {{fn}}={name[:200]!r} in this flame graph (filters or the "
                           "granularity may have removed it)", options=("fn",)) from None


@dataclass
class Graph:
    """The columns of a complete graph (or of the part holding a function's subtrees, in the
    graph's pre-order) the callees read: ``exact``: its widths are its totals, nothing pruned."""

    parent: np.ndarray
    depth: np.ndarray
    name_id: np.ndarray
    self: np.ndarray
    total: np.ndarray
    size: np.ndarray
    exact: bool


@dataclass
class Walk:
    """The tree the callers' paths climb (names as the graph's ids, depths), and each path's
    ``tail`` (see ``reversed_paths``; None: the paths end at the root)."""

    parent: np.ndarray
    name_id: np.ndarray
    depth: np.ndarray
    tail: np.ndarray | None = None


def callee_side(index: FlameIndex, g: Graph, code: int, min_fraction: float) -> tuple[
        int, int, int | None, FlameTree, np.ndarray, np.ndarray]:
    """(flat, cum, threshold, callees tree) of name ``code`` in graph ``g`` (names and layout as
    ``index``'s), and the callers' nodes and weights (see :func:`sandwich`)."""
    nodes = np.flatnonzero(g.name_id == code)
    outer = _outermost(nodes, g.size)
    cum = int(g.total[outer].sum())
    threshold = max(int(np.ceil(min_fraction * abs(cum))), 1) if min_fraction > 0 else None
    members = _ranges(outer, g.size[outer])
    where = _positions(members, g.parent.size)
    per_node = np.zeros(nodes.size, dtype=np.int64)
    if outer.size == nodes.size and g.exact:
        # no recursion, no negative weight (the layout's width is its totals), nothing pruned
        # but nodes of width 0 (which weigh 0): a subtree's self weights sum to its top's total,
        # no array of every member
        per_node[:] = g.total[nodes]
    elif outer.size == nodes.size:  # no recursion: each subtree belongs to its top (node i of nodes)
        np.add.at(per_node, np.repeat(np.arange(nodes.size), g.size[outer]), g.self[members])
    else:
        inner = _innermost_owner(g.parent, members, where, g.name_id == code)
        np.add.at(per_node, _positions(nodes, g.parent.size)[inner], g.self[members])
        del inner
    # one side at a time, each side's temporaries let go before the other's (the server's peak)
    callees = _tree(_callees(index, g, outer, members, where, threshold), index)
    del members, where
    flat = int(g.self[nodes].sum())
    live = per_node != 0
    return flat, cum, threshold, callees, nodes[live], per_node[live]


def with_callers(index: FlameIndex, name: str, side: tuple[int, int, FlameTree], cur: np.ndarray,
                 weight: np.ndarray, threshold: int | None, max_nodes: int, walk: Walk) -> SandwichResult:
    """The sandwich of ``name`` in ``index``: its (flat, cum, callees) ``side`` and the callers
    tree of ``weight`` carried up ``walk`` from ``cur`` (see :func:`sandwich`)."""
    flat, cum, callees = side
    t = index.tree
    if threshold is None and max_nodes > 0 and not (weight < 0).any() and \
            (view := _callers_view(index, cur, weight, max_nodes, walk)) is not None:
        return SandwichResult(name, flat, cum, t.root_total, view[0], callees, view[1])
    callers = _tree(_callers(index, cur, weight, threshold, walk), index)
    return SandwichResult(name, flat, cum, t.root_total, callers, callees)


def inverted_graph(index: FlameIndex, *, min_fraction: float = 0.0, work: int = 0) -> FlameTree | None:
    """The inverted (bottom-up) flame graph of the complete graph ``index``: every node's self
    weight carried up its reversed path and merged by names, as ``flame_tree(inverted=True)``
    builds from the callsites (the same nodes, numbers and child order; tests compare them).
    ``min_fraction`` > 0 merges nodes narrower than that fraction of the total as they are
    built (their weight stays in their parent's total: a view's hidden width). None for a
    diff or negative weights (``flame_tree`` builds those), or without the compiled kernels
    (for ``work`` items, or the graph's nodes if more: what the other route would cost)."""
    t = index.tree
    if t.is_diff or not len(t) or bool((t.self < 0).any()):
        return None
    nodes = np.flatnonzero(t.self[1:]) + 1  # the root's self is the stacks without frames
    return inverted_paths(index, t.parent, index.name_id, nodes, t.self[nodes], None, int(t.self[0]),
                          min_fraction=min_fraction, size=max(len(t), work))


def inverted_paths(index: FlameIndex, parent: np.ndarray, name_id: np.ndarray, nodes: np.ndarray,
                   weight: np.ndarray, tail: np.ndarray | None, root_self: int, *, min_fraction: float,
                   size: int) -> FlameTree | None:
    """The inverted graph of ``index`` from the paths of a tree (``parent``, names ``name_id`` of
    ``index``'s): ``weight`` carried from each of ``nodes`` to the root (and on to its node of
    ``tail``, see ``reversed_paths``), ``root_self`` the root's; see :func:`inverted_graph`.
    None without the compiled kernels for ``size`` nodes."""
    fast = tree.compiled(size)
    if fast is None:
        return None
    t = index.tree
    threshold = max(int(np.ceil(min_fraction * t.root_total)), 1) if min_fraction > 0 else 0
    got = fast.reversed_paths(parent, name_id, nodes, weight, threshold, tail)
    if got is None:
        return None
    m = _Merged(*got)
    m.total[0] += root_self
    m.self[0] += root_self
    out = _tree(m, index)
    out.inverted = True
    return out


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The ids start..start+length-1 of every range, concatenated."""
    total = int(lengths.sum())
    offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _positions(ids: np.ndarray, n: int) -> np.ndarray:
    """Where each node id of ``0..n-1`` is in ``ids`` (-1: absent): one lookup array, where a
    binary search of millions of queries per step cost seconds."""
    small = np.int32 if n < np.iinfo(np.int32).max else np.int64  # 3M of them per lookup
    where = np.full(n, -1, dtype=small)
    where[ids] = np.arange(ids.size, dtype=small)
    return where


def _innermost_owner(parent: np.ndarray, members: np.ndarray, where: np.ndarray, named: np.ndarray) -> np.ndarray:
    """For every member (pre-order, whole subtrees of outermost named nodes; ``where``: their
    positions): its nearest ancestor-or-self that is named, by pointer jumping over the members."""
    owner = np.where(named[members], members, parent[members])
    pos = where[owner]
    todo = np.flatnonzero(~named[owner])
    while todo.size:
        owner[todo] = owner[pos[todo]]
        pos[todo] = where[owner[todo]]
        todo = todo[~named[owner[todo]]]
    return owner


class _Merge:
    """A tree of merged paths, built one level at a time under one root.

    Each level's items (paths reaching that level) say their parent's merged
    id, their name and their weight; items with equal (parent, name) become
    one node whose total is their summed weight. Nodes lighter than
    ``threshold`` are not made: their items stop (-1), their weight stays in
    the parent's total. Ids of a level are contiguous and sorted by parent,
    as the flame graph's level-wise kernels expect.
    """

    def __init__(self, n_names: int, total: int, threshold: int | None) -> None:
        self.n_names = np.int64(max(n_names, 1))
        self.threshold = threshold
        self.parent, self.name, self.total = [np.array([-1])], [np.array([-1])], [np.array([total])]
        self.levels = [0, 1]

    def level(self, up: np.ndarray, name: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Merged id of every item of the next level (-1 where its node is too light)."""
        # ids in (parent, name) order; the sort is skipped when the items come so (the callees
        # of one node: pre-order)
        inverse, parent, name = tree.intern_level(up, name, int(self.n_names), 0)
        total = np.zeros(parent.size, dtype=np.int64)
        np.add.at(total, inverse, weight)
        keep = np.abs(total) >= self.threshold if self.threshold else np.ones(parent.size, dtype=bool)
        made = self.levels[-1]
        ids = np.where(keep, made + np.cumsum(keep) - 1, -1)
        if not keep.any():
            return ids[inverse]  # nothing this deep is wide enough: no (empty) level
        self.parent.append(parent[keep])
        self.name.append(name[keep])
        self.total.append(total[keep])
        self.levels.append(made + int(keep.sum()))
        return ids[inverse]

    def finish(self, selfs: list[tuple[np.ndarray, np.ndarray]]) -> _Merged:
        """The tree, with self weights added at (merged ids, weights) pairs."""
        parent = np.concatenate(self.parent)
        own = np.zeros(parent.size, dtype=np.int64)
        for at, w in selfs:
            live = at >= 0
            np.add.at(own, at[live], w[live])
        return _Merged(parent, np.concatenate(self.name), own, np.concatenate(self.total),
                       np.array(self.levels, dtype=np.int64))


@dataclass
class _Merged:
    """A merged tree, level by level (see :class:`_Merge`)."""

    parent: np.ndarray
    name: np.ndarray
    self: np.ndarray
    total: np.ndarray
    levels: np.ndarray


def _callees(index: FlameIndex, t: Graph, outer: np.ndarray, members: np.ndarray, where: np.ndarray,
             threshold: int | None) -> _Merged:
    """Subtrees of ``outer`` in ``t`` merged by their paths of names (``members``: their nodes, at
    ``where``)."""
    cum = int(t.total[outer].sum())
    merge = _Merge(len(index.distinct), cum, threshold)
    if not outer.size:
        return merge.finish([])
    # level 0, the outermost nodes, all of one name under the root: one node, the function's cum
    first = merge.level(np.zeros(1, dtype=np.int64), t.name_id[outer[:1]], np.array([cum], dtype=np.int64))
    selfs = [(first, np.array([t.self[outer].sum()], dtype=np.int64))]
    merged = np.full(members.size, -1, dtype=np.int64)
    merged[where[outer]] = first[0]
    below = np.ones(members.size, dtype=bool)
    below[where[outer]] = False
    below = np.flatnonzero(below)  # positions (in members) of the nodes under the outermost ones
    at = members[below]
    top = outer[np.searchsorted(outer, at, side="right") - 1]
    order, bounds = tree.group_by_depth(t.depth[at] - t.depth[top])  # depth 0: none
    del at, top
    for d in range(1, len(bounds) - 1):
        lv = below[order[bounds[d]:bounds[d + 1]]]
        up = merged[where[t.parent[members[lv]]]]
        lv, up = lv[up >= 0], up[up >= 0]  # below a merged-away node: already counted in it
        if not lv.size:
            break
        merged[lv] = merge.level(up, t.name_id[members[lv]], t.total[members[lv]])
        selfs.append((merged[lv], t.self[members[lv]]))
    return merge.finish(selfs)


def subtree_callees(index: FlameIndex, g: Graph, top: int, threshold: int | None) -> FlameTree:
    """The callees tree of the function whose only node in tree ``g`` (pre-order, no node of weight
    0) is ``top``, none of its name below: :func:`_callees` of that one subtree, which merges
    nothing (a node's children have distinct names), so its nodes at least ``threshold`` wide
    as they are, level by level in (parent, name) order, without an array per member."""
    end = top + int(g.size[top])
    floor = 1 if threshold is None else threshold
    rows = top + np.flatnonzero(np.abs(g.total[top:end]) >= floor)  # closed under parents (totals shrink down)
    cum = int(g.total[top])
    merge = _Merge(len(index.distinct), cum, None)
    made = np.full(rows.size, -1, np.int64)
    rows_up = np.searchsorted(rows, g.parent[rows])  # each row's parent's position (the top's: unused)
    order, bounds = tree.group_by_depth(g.depth[rows] - g.depth[top])
    selfs = []
    for d in range(len(bounds) - 1):
        lv = np.sort(order[bounds[d]:bounds[d + 1]])
        up = np.zeros(lv.size, np.int64) if d == 0 else made[rows_up[lv]]
        weight = np.array([cum], np.int64) if d == 0 else g.total[rows[lv]]
        made[lv] = merge.level(up, g.name_id[rows[lv]], weight)
        selfs.append((made[lv], g.self[rows[lv]]))
    return _tree(merge.finish(selfs), index)


def _callers(index: FlameIndex, nodes: np.ndarray, weight: np.ndarray, threshold: int | None,
             walk: Walk | None = None) -> _Merged:
    """Reversed paths from ``nodes`` up ``walk`` (``index``'s graph unless given) to the root, each
    carrying its ``weight`` (not 0), merged."""
    walk = walk or Walk(index.tree.parent, index.name_id, np.zeros(0, np.int32))  # (no depth read here)
    cur, w, tail = nodes, weight, walk.tail
    # at a view's resolution (a threshold) a level has few distinct nodes: one compiled pass per
    # level hashing (parent, name) beats sorting the items; without one, the sorts do
    fast = tree.compiled(cur.size) if threshold else None
    got = fast.reversed_paths(walk.parent, walk.name_id, cur, w, threshold, tail) if fast is not None else None
    if got is not None:
        return _Merged(*got)
    merge = _Merge(len(index.distinct), int(w.sum()), threshold)
    up = np.zeros(cur.size, dtype=np.int64)
    ends = []
    while cur.size:
        ids = merge.level(up, walk.name_id[cur], w)
        nxt = walk.parent[cur]
        if tail is not None:  # from the root on to each path's last node
            on = (nxt <= 0) & (tail > 0)
            nxt, tail = np.where(on, tail, nxt), np.where(on, 0, tail)
        done = nxt <= 0  # the graph's root (id 0) is no caller
        ends.append((ids[done], w[done]))
        go = ~done & (ids >= 0)
        cur, w, up = nxt[go], w[go], ids[go]
        tail = None if tail is None else tail[go]
    return merge.finish(ends)


_view_kernel = CompiledTwin("polyprof.analysis._sandwich_compiled")


def _callers_view(index: FlameIndex, nodes: np.ndarray, weight: np.ndarray, max_nodes: int,
                  walk: Walk) -> tuple[FlameTree, tuple[np.ndarray, np.ndarray]] | None:
    """The callers tree cut where it still holds its ``max_nodes`` widest nodes (see
    :mod:`polyprof.analysis._sandwich_compiled`), with each node's id and subtree size in the
    complete tree; None without the compiled kernel (then the complete tree is made)."""
    kernel = _view_kernel(int(walk.depth[nodes].sum()))  # the complete tree's items: the work it saves
    if kernel is None or not nodes.size:
        return None
    threshold = max(int(weight.sum()) // (4 * max_nodes), 1)
    while True:
        got = kernel.caller_view(walk.parent, walk.name_id, walk.depth, nodes, weight, threshold, walk.tail)
        if got is None:
            return None
        parent, name, own, total, count, levels = got
        # enough nodes at least ``threshold`` wide: the widest ``max_nodes`` are all made
        if threshold == 1 or int(np.count_nonzero(total >= threshold)) >= max_nodes:
            break
        threshold = max(threshold // 8, 1)
    size, first = _complete_numbers(parent, count, levels)
    out = _tree(_Merged(parent, name, own, total, levels), index)
    order = np.argsort(first, kind="stable")  # the made nodes keep the complete tree's pre-order
    return out, (first[order], size[order])


def _complete_numbers(parent: np.ndarray, count: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Subtree sizes and pre-order ids, in the complete tree, of a cut tree's nodes (level by
    level, ids in (parent, name) order as the layout orders children; ``count``: the nodes of
    the complete tree each node stands for, itself included)."""
    size = count.astype(np.int64)
    bounds = [int(x) for x in levels]
    for lo, hi in reversed(list(itertools.pairwise(bounds))[1:]):
        np.add.at(size, parent[lo:hi], size[lo:hi])
    first = np.zeros(size.size, dtype=np.int64)
    for lo, hi in list(itertools.pairwise(bounds))[1:]:
        p, sz = parent[lo:hi], size[lo:hi]
        before = np.cumsum(sz) - sz  # subtree sizes of the level's earlier nodes
        start = np.flatnonzero(np.concatenate(([True], p[1:] != p[:-1])))  # each parent's first child
        before -= np.repeat(before[start], np.diff(np.append(start, p.size)))
        first[lo:hi] = first[p] + 1 + before
    return size, first


def _tree(m: _Merged, index: FlameIndex) -> FlameTree:
    """A merged tree laid out and wrapped as the flame graph lays out its own."""
    width = np.maximum(m.total, 0)
    bounds = [int(x) for x in m.levels]
    levels = [tree.Level.of(slice(lo, hi), m.parent[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    order = tree.euler(levels, m.parent.size)
    start = tree.place_children(width, levels, 0)
    depth = np.repeat(np.arange(len(m.levels) - 1, dtype=np.int64), np.diff(m.levels))
    t = index.tree
    out = _finish((index.distinct, m.name), m.parent, depth, [m.self], [m.total], width, start, order,
                   t.sample_type, 0.0, 0)
    out.active_filters = t.active_filters
    used = out.names.distinct() if isinstance(out.names, NameColumn) else set(out.names)
    out.identity = {n: t.identity[n] for n in used if n in t.identity}
    return out
