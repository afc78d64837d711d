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

__all__ = ["SandwichResult", "inverted_graph", "sandwich"]


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
    t = index.tree
    try:
        code = index.distinct.index(name)
    except ValueError:
        raise OptionsError(f"no frame named {{fn}}={name[:200]!r} in this flame graph (filters or the "
                           "granularity may have removed it)", options=("fn",)) from None
    nodes = np.flatnonzero(index.name_id == code)
    outer = _outermost(nodes, index.size)
    cum = int(t.total[outer].sum())
    threshold = max(int(np.ceil(min_fraction * abs(cum))), 1) if min_fraction > 0 else None
    members = _ranges(outer, index.size[outer])
    where = _positions(members, t.parent.size)
    per_node = np.zeros(nodes.size, dtype=np.int64)
    if outer.size == nodes.size and t.width is t.total and not t.dropped:
        # no recursion, no negative weight (the layout's width is its totals), nothing pruned
        # but nodes of width 0 (which weigh 0): a subtree's self weights sum to its top's total,
        # no array of every member
        per_node[:] = t.total[nodes]
    elif outer.size == nodes.size:  # no recursion: each subtree belongs to its top (node i of nodes)
        np.add.at(per_node, np.repeat(np.arange(nodes.size), index.size[outer]), t.self[members])
    else:
        inner = _innermost_owner(t.parent, members, where, index.name_id == code)
        np.add.at(per_node, _positions(nodes, t.parent.size)[inner], t.self[members])
        del inner
    # one side at a time, each side's temporaries let go before the other's (the server's peak)
    callees = _tree(_callees(index, outer, members, where, threshold), index)
    del members, where
    flat = int(t.self[nodes].sum())
    live = per_node != 0
    cur, weight = nodes[live], per_node[live]
    del nodes, outer, per_node, live
    if threshold is None and max_nodes > 0 and not (weight < 0).any() and \
            (view := _callers_view(index, cur, weight, max_nodes)) is not None:
        return SandwichResult(name, flat, cum, t.root_total, view[0], callees, view[1])
    callers = _tree(_callers(index, cur, weight, threshold), index)
    return SandwichResult(name, flat, cum, t.root_total, callers, callees)


def inverted_graph(index: FlameIndex, *, min_fraction: float = 0.0) -> FlameTree | None:
    """The inverted (bottom-up) flame graph of the complete graph ``index``: every node's self
    weight carried up its reversed path and merged by names, as ``flame_tree(inverted=True)``
    builds from the callsites (the same nodes, numbers and child order; tests compare them).
    ``min_fraction`` > 0 merges nodes narrower than that fraction of the total as they are
    built (their weight stays in their parent's total: a view's hidden width). None for a
    diff or negative weights (``flame_tree`` builds those), or without the compiled kernels."""
    t = index.tree
    fast = tree.compiled(len(t))
    if t.is_diff or not len(t) or bool((t.self < 0).any()) or fast is None:
        return None
    nodes = np.flatnonzero(t.self[1:]) + 1  # the root's self is the stacks without frames
    threshold = max(int(np.ceil(min_fraction * t.root_total)), 1) if min_fraction > 0 else 0
    got = fast.reversed_paths(t.parent, index.name_id, nodes, t.self[nodes], threshold)
    if got is None:
        return None
    m = _Merged(*got)
    m.total[0] += int(t.self[0])
    m.self[0] += int(t.self[0])
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


def _callees(index: FlameIndex, outer: np.ndarray, members: np.ndarray, where: np.ndarray,
             threshold: int | None) -> _Merged:
    """Subtrees of ``outer`` merged by their paths of names (``members``: their nodes, at ``where``)."""
    t = index.tree
    cum = int(t.total[outer].sum())
    merge = _Merge(len(index.distinct), cum, threshold)
    if not outer.size:
        return merge.finish([])
    # level 0, the outermost nodes, all of one name under the root: one node, the function's cum
    first = merge.level(np.zeros(1, dtype=np.int64), index.name_id[outer[:1]], np.array([cum], dtype=np.int64))
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
        merged[lv] = merge.level(up, index.name_id[members[lv]], t.total[members[lv]])
        selfs.append((merged[lv], t.self[members[lv]]))
    return merge.finish(selfs)


def _callers(index: FlameIndex, nodes: np.ndarray, weight: np.ndarray, threshold: int | None) -> _Merged:
    """Reversed paths from ``nodes`` to the root, each carrying its ``weight`` (not 0), merged."""
    t = index.tree
    cur, w = nodes, weight
    # at a view's resolution (a threshold) a level has few distinct nodes: one compiled pass per
    # level hashing (parent, name) beats sorting the items; without one, the sorts do
    fast = tree.compiled(cur.size) if threshold else None
    got = fast.reversed_paths(t.parent, index.name_id, cur, w, threshold) if fast is not None else None
    if got is not None:
        return _Merged(*got)
    merge = _Merge(len(index.distinct), int(w.sum()), threshold)
    up = np.zeros(cur.size, dtype=np.int64)
    ends = []
    while cur.size:
        ids = merge.level(up, index.name_id[cur], w)
        nxt = t.parent[cur]
        done = nxt <= 0  # the graph's root (id 0) is no caller
        ends.append((ids[done], w[done]))
        go = ~done & (ids >= 0)
        cur, w, up = nxt[go], w[go], ids[go]
    return merge.finish(ends)


_view_kernel = CompiledTwin("polyprof.analysis._sandwich_compiled")


def _callers_view(index: FlameIndex, nodes: np.ndarray, weight: np.ndarray,
                  max_nodes: int) -> tuple[FlameTree, tuple[np.ndarray, np.ndarray]] | None:
    """The callers tree cut where it still holds its ``max_nodes`` widest nodes (see
    :mod:`polyprof.analysis._sandwich_compiled`), with each node's id and subtree size in the
    complete tree; None without the compiled kernel (then the complete tree is made)."""
    t = index.tree
    kernel = _view_kernel(int(t.depth[nodes].sum()))  # the complete tree's items: the work it saves
    if kernel is None or not nodes.size:
        return None
    threshold = max(int(weight.sum()) // (4 * max_nodes), 1)
    while True:
        got = kernel.caller_view(t.parent, index.name_id, t.depth, nodes, weight, threshold)
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
