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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

# The flame graph's own level-wise kernels (sums up a level at a time, pre-order layout, pruning).
from polyprof.analysis.flame import FlameTree, _finish, _layout, _sum_up
from polyprof.analysis.flameview import FlameIndex, _outermost
from polyprof.analysis.result import Result
from polyprof.errors import OptionsError

__all__ = ["SandwichResult", "sandwich"]


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

    def _columns(self, table: str) -> dict[str, Any]:
        return (self.callers if table == "callers" else self.callees)._columns("nodes")

    def _summary(self) -> str:
        return f"{self.name!r}, flat={self.flat}, cum={self.cum}, {len(self.callers)}/{len(self.callees)} nodes"


def sandwich(index: FlameIndex, name: str) -> SandwichResult:
    """Callers and callees of the nodes named ``name`` in the flame graph ``index``."""
    t = index.tree
    try:
        code = index.distinct.index(name)
    except ValueError:
        raise OptionsError(f"no frame named {{fn}}={name[:200]!r} in this flame graph (filters or the "
                           "granularity may have removed it)", options=("fn",)) from None
    nodes = np.flatnonzero(index.name_id == code)
    outer = _outermost(nodes, index.size)
    members = _ranges(outer, index.size[outer])
    inner = _innermost_owner(t.parent, members, index.name_id == code)
    per_node = np.zeros(nodes.size, dtype=np.int64)
    np.add.at(per_node, np.searchsorted(nodes, inner), t.self[members])
    callees = _callees(index, outer, members)
    callers = _callers(index, nodes, per_node)
    return SandwichResult(name, int(t.self[nodes].sum()), int(t.total[outer].sum()), t.root_total,
                          _tree(callers, index), _tree(callees, index))


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The ids start..start+length-1 of every range, concatenated."""
    total = int(lengths.sum())
    offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _innermost_owner(parent: np.ndarray, members: np.ndarray, named: np.ndarray) -> np.ndarray:
    """For every member (pre-order, whole subtrees of outermost named nodes): its nearest
    ancestor-or-self that is named. Parents come before children, so one pass in id order
    per depth would do; a vectorized pointer jump over the members does the same."""
    owner = np.where(named[members], members, parent[members])
    pos = np.searchsorted(members, owner)
    todo = np.flatnonzero(~named[owner])
    while todo.size:
        owner[todo] = owner[pos[todo]]
        pos[todo] = np.searchsorted(members, owner[todo])
        todo = todo[~named[owner[todo]]]
    return owner


@dataclass
class _Merged:
    """A merged tree, level by level: ids of a level are contiguous and sorted by parent."""

    parent: np.ndarray
    name: np.ndarray
    self: np.ndarray
    levels: np.ndarray


def _intern(steps: Iterator[tuple[np.ndarray, np.ndarray]], n_names: int,
            ids: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge items level by level under one root. ``steps`` yields, per level, the index of
    each item's parent item in the previous level's items and each item's name id; the
    merged id of every item of a level is appended to ``ids`` before the next level is
    asked for. Returns the merged tree's parents, names and level bounds."""
    parents, names, levels = [np.array([-1])], [np.array([-1])], [0, 1]
    prev = np.zeros(1, dtype=np.int64)
    made = 1
    for up, name in steps:
        uniq, inverse = np.unique(prev[up] * n_names + name, return_inverse=True)
        prev = made + inverse.reshape(-1)
        ids.append(prev)
        parents.append(uniq // n_names)
        names.append(uniq % n_names)
        made += uniq.size
        levels.append(made)
    return np.concatenate(parents), np.concatenate(names), np.array(levels, dtype=np.int64)


def _callees(index: FlameIndex, outer: np.ndarray, members: np.ndarray) -> _Merged:
    """Subtrees of ``outer`` merged by their paths of names (``members``: their nodes)."""
    t = index.tree
    top = outer[np.searchsorted(outer, members, side="right") - 1]
    rel = t.depth[members] - t.depth[top]
    order = np.argsort(rel, kind="stable")
    bounds = np.searchsorted(rel[order], np.arange(int(rel.max(initial=0)) + 2))
    levels = [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]
    where = np.zeros(members.size, dtype=np.int64)  # position of each member within its level
    for lv in levels:
        where[lv] = np.arange(lv.size)
    parent_pos = np.searchsorted(members, t.parent[members])
    steps = ((np.zeros(lv.size, dtype=np.int64) if d == 0 else where[parent_pos[lv]], index.name_id[members[lv]])
             for d, lv in enumerate(levels))
    ids: list[np.ndarray] = []
    parent, name, bounds_out = _intern(steps, len(index.distinct), ids)
    selfw = np.zeros(parent.size, dtype=np.int64)
    for lv, merged in zip(levels, ids):
        np.add.at(selfw, merged, t.self[members[lv]])
    return _Merged(parent, name, selfw, bounds_out)


def _callers(index: FlameIndex, nodes: np.ndarray, weight: np.ndarray) -> _Merged:
    """Reversed paths from ``nodes`` to the root, each carrying its ``weight``, merged."""
    t = index.tree
    ids: list[np.ndarray] = []
    ends: list[tuple[np.ndarray, np.ndarray]] = []

    def steps() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        cur, w = nodes[weight != 0], weight[weight != 0]
        up = np.zeros(cur.size, dtype=np.int64)
        while cur.size:
            yield up, index.name_id[cur]
            nxt = t.parent[cur]
            done = nxt <= 0  # the graph's root (id 0) is no caller
            ends.append((ids[-1][done], w[done]))
            up = np.flatnonzero(~done)
            cur, w = nxt[up], w[up]

    parent, name, levels = _intern(steps(), len(index.distinct), ids)
    selfw = np.zeros(parent.size, dtype=np.int64)
    for at, w in ends:
        np.add.at(selfw, at, w)
    return _Merged(parent, name, selfw, levels)


def _tree(m: _Merged, index: FlameIndex) -> FlameTree:
    """A merged tree laid out and wrapped as the flame graph lays out its own."""
    total = _sum_up(m.self, m.parent, m.levels)
    width = _sum_up(np.maximum(m.self, 0), m.parent, m.levels)
    size = _sum_up(np.ones(m.parent.size, dtype=np.int64), m.parent, m.levels)
    pre, start = _layout(m.parent, m.levels, width, size)
    depth = np.repeat(np.arange(len(m.levels) - 1, dtype=np.int64), np.diff(m.levels))
    t = index.tree
    tree = _finish((index.distinct, m.name), m.parent, depth, [m.self], [total], width, start, pre,
                   t.sample_type, 0.0, 0)
    tree.active_filters = t.active_filters
    tree.identity = {n: t.identity[n] for n in set(tree.names) if n in t.identity}
    return tree
