"""The flame graph grouped by one label key (``--tagroot KEY``) from the profile's name tree.

``filters.apply(p, tagroot=KEY)`` gives every sample a pseudo-frame named
after its value of ``KEY`` at the root of its stack (:func:`labels.label_frames`):
new callsites for every (stack, value) pair, then a new name tree of them.
Its complete flame graph (what the labels panel's "group by" shows) is the
profile's own name tree (:class:`FlameShape`, cached
by the web view) weighed once per value, each under a node of that value's
name, the values in name order. :func:`grouped_flame` builds that graph in
a few compiled passes: each node of the tree learns which values' samples
pass through it (a bit per value), then every (value, node) row is written at
its place; the cost is the tree and the graph's rows, not a walk over new
callsites. A tree too small for the compiled kernels takes the label frames
on :func:`distinct_samples` (one sample per stack and label set) instead of
on a copy of every sample.

Same graph as ``flame_tree(filters.apply(p, o), o, min_fraction=0, max_nodes=0)``
(tests compare every column); None where it does not apply, and the caller
takes that route.

``polyprof serve`` holds it through :func:`grouped_index`: a large graph (11.0M
rows, 420 MB on the large benchmark pprof) as a :class:`GroupedIndex`, only its
rows at least :data:`RESOLUTION` of the total wide (253k, 28 MB), made a batch
of values at a time; a view that reaches below them makes that value's
complete subtree, and the search share is summed from the samples; its sandwich
and inverted graph are merged from the samples' paths on the name tree, each
path on to its value's row. Every answer is the complete graph's (tests
compare them).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.flame import (
    ROOT_NAME,
    FlameShape,
    FlameTree,
    NameColumn,
    _identity,
    _leaf_hint,
    _weights,
    flame_tree,
)
from polyprof.analysis.flameview import FlameIndex, FlameSlice, SearchResult, _outermost, missing_node
from polyprof.analysis.graph import node_map, sum_by
from polyprof.analysis.labels import label_frames
from polyprof.analysis.nodes import NodeMap
from polyprof.analysis.options import Options
from polyprof.analysis.sandwich import (
    Graph,
    SandwichResult,
    Walk,
    _innermost_owner,
    _positions,
    _ranges,
    callee_side,
    inverted_paths,
    name_code,
    subtree_callees,
    with_callers,
)
from polyprof.analysis.stacks import CompiledTwin
from polyprof.errors import OptionsError
from polyprof.model import tree
from polyprof.model.profile import Profile, SampleTable, ValueType

__all__ = ["MAX_GROUPS", "GroupedIndex", "applies", "distinct_samples", "grouped_flame", "grouped_index", "load_kernels",
           "stackless"]

#: More distinct values than this take the callsite route (each value's label frame is named
#: in Python; the graph's cost is its nodes either way).
MAX_GROUPS = 100_000

_kernels = CompiledTwin("polyprof.analysis._labels_compiled")


def applies(o: Options) -> bool:
    """``o`` groups by one label key and sets no other filter (those may match label frames)."""
    return bool(o.tagroot) and "," not in (o.tagroot or "") and not o.tagleaf and not any(
        getattr(o, name) not in (None, "", (), []) for name in filters.FILTERS)


def grouped_flame(p: Profile, o: Options, shape: FlameShape | None) -> FlameTree | None:
    """The complete flame graph of ``p`` grouped by ``o.tagroot`` (see the module doc), from
    ``shape`` (``p``'s name tree); None where it does not apply: other filters, several keys,
    no fitting shape, no compiled kernels, negative weights, a label frame named like a node
    of the tree, more than :data:`MAX_GROUPS` values."""
    if not applies(o):
        return None
    if shape is None:  # a small name tree (or no numba): the label frames on the distinct samples
        fewer = distinct_samples(p)
        return None if fewer is None else flame_tree(filters.apply(fewer, o), o, min_fraction=0, max_nodes=0)
    g = _grouping(p, o, shape)
    return None if g is None else _complete(g)


def grouped_index(p: Profile, o: Options, shape: FlameShape | None) -> FlameIndex | None:
    """The view of :func:`grouped_flame`'s graph the web view holds: the complete graph indexed
    while it has at most :data:`CUT_ROWS` rows, else a :class:`GroupedIndex` (its rows at least
    :data:`RESOLUTION` of the total wide, each value's complete subtree made when a request
    needs it). None where :func:`grouped_flame` does not apply."""
    if not applies(o):
        return None
    g = _grouping(p, o, shape) if shape is not None else None
    marks = None if g is None else g.fast.group_marks(g.shape.parent, g.node, g.values, g.group, g.group_ids.size)
    if g is None or marks is None or 1 + int(marks.count.sum()) <= CUT_ROWS[0]:
        del marks
        made = grouped_flame(p, o, shape) if g is None else _complete(g)
        return None if made is None else FlameIndex(made)
    return _cut(g, marks)


#: Grouped graphs of more rows than this are held at :data:`RESOLUTION` (:class:`GroupedIndex`;
#: the large benchmark pprof's is 11.0M rows, 420 MB complete; tests lower it).
CUT_ROWS = [1 << 21]

#: The rows of a :class:`GroupedIndex`: those at least this share of the total wide (and each
#: value's own), as the inverted graph's (``INVERTED_RESOLUTION``): a landing slice keeps
#: 1/4000 of its root's width, a page of 4,000 pixels 1/16,000.
RESOLUTION = 1e-5

#: Complete rows made at once while a :class:`GroupedIndex` is cut (the values in name order, a
#: batch of them at a time; a value with more rows is a batch of its own): the peak beside it.
BATCH_ROWS = [1 << 21]


@dataclasses.dataclass
class _Grouping:
    """What every part of the grouped graph is made from: each sample's node of the name tree,
    weight and group (value), the groups' and the root's name ids in ``table`` (the name tree's
    names and the label frames', sorted, the root's last), the name of most self weight."""

    p: Profile
    o: Options
    fast: Any
    shape: FlameShape
    vt: ValueType
    values: np.ndarray
    node: np.ndarray
    group: np.ndarray
    group_ids: np.ndarray
    lookup: np.ndarray
    table: list[str]
    root: int
    framed: tuple[Profile, NodeMap]
    frame_names: list[str]
    top: int
    hinted: bool


def _grouping(p: Profile, o: Options, shape: FlameShape) -> _Grouping | None:
    """The samples of ``p`` as groups on ``shape``, or None where the name tree's route does not
    apply (see :func:`grouped_flame`)."""
    if shape.drops or not shape.fits(p, o):
        return None
    fast = _kernels(len(shape.parent))
    if fast is None:
        return None
    values, has, vt = _weights(p, o)
    if values.size and int(values.min()) < 0:
        return None
    s = p.samples
    used = np.flatnonzero(np.bincount(s.labelset, minlength=len(p.labelsets))) if len(s) else np.zeros(0, np.int64)
    if used.size > MAX_GROUPS:
        return None
    framed, frame_names = _frame_names(p, o, used)
    if set(frame_names) & set(shape.names) or ROOT_NAME in frame_names:
        return None
    table = sorted(set(shape.names).union(frame_names))
    if ROOT_NAME not in table:
        table.append(ROOT_NAME)
    gid = {x: i for i, x in enumerate(table)}
    # groups: the distinct frame names in name order; each used labelset's group
    groups = sorted(set(frame_names))
    group_of = {x: g for g, x in enumerate(groups)}
    of_set = np.zeros(len(p.labelsets), np.int64)
    of_set[used] = [group_of[x] for x in frame_names]
    sample_group = of_set[s.labelset].astype(np.int32)
    node = np.zeros(len(s), np.int32)
    node[has] = shape.at[s.stack[has]]
    # each node's name in the graph: lookup[shape.name[v]] (the root's -1: the last)
    lookup = np.array([gid[x] for x in shape.names] + [gid[ROOT_NAME]], dtype=np.int32)
    group_ids = np.array([gid[x] for x in groups], dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.int64)
    # each sample's node name in the graph (the group's own node: samples at the tree's root)
    sample_name = np.where(node > 0, lookup[shape.name[node]], group_ids[sample_group])
    # the leaf hint needs the graph only when one name holds most self weight (by the samples)
    by_name = np.bincount(sample_name, weights=values, minlength=len(table))
    top = int(np.argmax(by_name)) if by_name.size else 0
    total = int(values.sum())
    hinted = bool(total > 0 and by_name[top] / total >= 0.5)
    return _Grouping(p, o, fast, shape, vt, values, node, sample_group, group_ids, lookup, table, gid[ROOT_NAME],
                     framed, frame_names, top, hinted)


def _complete(g: _Grouping) -> FlameTree:
    """The complete grouped graph of ``g``."""
    cols, used = _graph(g.fast, g.shape, g.lookup, g.node, g.values, g.group, g.group_ids, g.root, len(g.table))
    return _finish(g, cols, used, _hint_selfs(g, cols))


def _hint_selfs(g: _Grouping, cols: tuple[np.ndarray, ...]) -> np.ndarray | None:
    """The self weights of the rows of ``cols`` (a graph's columns) named ``g.top`` (the root's
    not), when the leaf hint needs them."""
    if not g.hinted:
        return None
    mine = np.flatnonzero(cols[0] == g.top)  # the nodes of that name: all the hint reads
    return cols[4][mine[mine > 0]]


def _finish(g: _Grouping, cols: tuple[np.ndarray, ...], used_names: np.ndarray,
            hint: np.ndarray | None) -> FlameTree:
    """The FlameTree of grouped-graph columns (name ids into ``g.table``, renumbered in place
    into the names of ``used_names``: those of the complete graph), its leaf hint from the self
    weights ``hint`` of the complete graph's rows named ``g.top``."""
    wanted = {g.table[k] for k in np.flatnonzero(used_names).tolist()}
    table, top = _held_names(g.table, used_names, cols[0], g.top)
    ids, parent, depth, size, selfs, total, start = cols
    flame = FlameTree(names=NameColumn(table, ids), name_ids=ids, name_table=table, subtree_size=size,
                      parent=parent, depth=depth, self=selfs, total=total, start=start, width=total,
                      sample_type=g.vt, dropped=0, min_width=1)
    flame.active_filters = tuple(filters.legend(g.o))
    if hint is not None:
        flame.hint = _leaf_hint(table, np.full(hint.size, top, np.int64), hint, int(total[0]))
    labels = wanted & set(g.frame_names)
    flame.identity = {**_identity(wanted - labels, [(g.p, g.shape.nodes)]), **_identity(labels, [g.framed])}
    return flame


def _batches(counts: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive groups of about :data:`BATCH_ROWS` rows together (a bigger group alone)."""
    out, lo, rows = [], 0, 0
    for k, c in enumerate(counts.tolist()):
        if rows and rows + c > BATCH_ROWS[0]:
            out.append((lo, k))
            lo, rows = k, 0
        rows += c
    if lo < counts.size:
        out.append((lo, counts.size))
    return out


def _part_graph(g: _Grouping, lo: int, hi: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The grouped graph of groups ``lo:hi`` alone (its root, then their rows)."""
    sel = (g.group >= lo) & (g.group < hi)
    return _graph(g.fast, g.shape, g.lookup, g.node[sel], g.values[sel], (g.group[sel] - lo).astype(np.int32),
                  g.group_ids[lo:hi], g.root, len(g.table))


def _cut(g: _Grouping, marks: Any) -> GroupedIndex:
    """The grouped graph's rows at least :data:`RESOLUTION` of its total wide and every group's
    own row, with their ids and subtree sizes in the complete graph, made a batch of groups at
    a time from ``marks`` (``_labels_compiled.group_marks``: each node's groups, set once), each
    batch's complete rows let go before the next is made."""
    counts = marks.count.astype(np.int64)
    groups = counts.size
    first = np.ones(groups + 1, np.int64)  # each group's first row in the complete graph
    np.cumsum(counts, out=first[1:])
    first[1:] += 1
    weight = sum_by(g.group, g.values, groups)
    left = np.zeros(groups + 1, np.int64)  # each group's left edge
    np.cumsum(weight, out=left[1:])
    total = int(left[-1])
    narrowest = max(int(np.ceil(RESOLUTION * total)), 1)
    used = np.zeros(len(g.table), np.bool_)
    used[g.root] = True
    # the root's row, then each batch's kept rows
    parts: list[list[np.ndarray]] = [[np.array([g.root], np.int32)], [np.array([-1], np.int32)],
                                     [np.array([0], np.int32)], [np.array([0], np.int64)],
                                     [np.array([0], np.int64)], [np.array([total], np.int64)],
                                     [np.array([0], np.int64)]]
    complete_ids, complete_sizes = [np.zeros(1, np.int64)], [np.array([int(first[-1])], np.int64)]
    hint: list[np.ndarray] = []
    made = 1
    for lo, hi in _batches(counts):
        cols, seen = g.fast.marked_rows(marks, g.shape.parent, g.shape.name, g.lookup, g.values, g.group,
                                        g.group_ids, g.root, len(g.table), lo, hi)
        used |= seen
        if (selfs := _hint_selfs(g, cols)) is not None:
            hint.append(selfs)
        name, parent, depth, size, self_, width, start = cols
        keep = (width >= narrowest) | (depth == 1)
        keep[0] = False
        at = np.flatnonzero(keep)
        up = parent[at]  # each kept row's parent (kept: a row is never wider than it), as a cut row
        up = np.where(up > 0, np.searchsorted(at, up) + made, 0).astype(np.int32)
        for k, x in enumerate((name[at], up, depth[at],
                               np.zeros(at.size, np.int32), self_[at], width[at], start[at] + left[lo])):
            parts[k].append(x)
        complete_ids.append(at + (first[lo] - 1))
        complete_sizes.append(size[at].astype(np.int64))
        made += at.size
        del cols, name, parent, depth, size, self_, width, start, keep, up
    del marks
    cols = tuple(np.concatenate(x) for x in parts)
    ids, sizes = np.concatenate(complete_ids), np.concatenate(complete_sizes)
    # each row's subtree in the cut graph: the rows whose ids are in its complete subtree
    cols[3][:] = np.searchsorted(ids, ids + sizes) - np.arange(ids.size)
    flame = _finish(g, cols, used, np.concatenate(hint) if hint else None)
    return GroupedIndex(flame, (ids, sizes), g, first, left, used)


def load_kernels(size: int) -> bool:
    """Load (or compile) the grouped graph's kernels now, as :func:`grouped_flame` calls them on
    a profile of ``size`` callsites, on a tiny tree with the same argument types, and the label
    frames' (``labels.label_frames``: the page's top table under a group by): numba loads a
    cached kernel on its first call (0.4 s), which the web view's labels panel spends before
    its group by is clicked. False when ``size`` stays on numpy."""
    fast = _kernels(size)
    if fast is None:
        return False
    fast.grouped_by_masks(np.array([-1, 0], np.int32), np.array([-1, 0], np.int32), np.array([0, 2], np.int32),
                          np.ones(1, np.int32), np.ones(1, np.int64), np.zeros(1, np.int32), np.array([1], np.int64),
                          2, 3)
    fast.covered(np.array([-1], np.int32), np.array([-1], np.int32), np.zeros(1, np.bool_))  # its search
    one = np.zeros(1, np.int64)
    fast.framed_tree(np.array([-1], np.int32), np.zeros(1, np.int32), one, one, one, one)
    return True


def distinct_samples(p: Profile) -> Profile | None:
    """``p`` with one sample per distinct (stack, label set), their values summed (exactly),
    and no time, pid, tid or cpu: every flame graph, top table or label frame of ``p`` that
    does not select samples by those is the same. Summed in chunks through a table of every
    (callsite, label set), so it holds no copy of the samples (a filter's label frames copied
    every column of them: 6.5M samples on the Perfetto benchmark); None when that table would
    have more rows than ``p`` has samples (then the samples are about as few)."""
    s = p.samples
    width = max(len(p.labelsets), 1)
    span = (len(p.callsites) + 1) * width
    if span > max(len(s), 1 << 16):
        return None
    count = np.zeros(span, np.int64)
    sums = np.zeros((len(p.sample_types), span), np.int64)
    for lo in range(0, len(s), _CHUNK):
        key = s.stack[lo:lo + _CHUNK].astype(np.int64)
        key += 1
        key *= width
        key += s.labelset[lo:lo + _CHUNK]
        count += np.bincount(key, minlength=span)
        for j, column in enumerate(sums):
            column += sum_by(key, s.values[lo:lo + _CHUNK, j], span)
    pairs = np.flatnonzero(count)
    table = SampleTable(stack=(pairs // width - 1).astype(np.int32), values=np.ascontiguousarray(sums[:, pairs].T),
                        labelset=(pairs % width).astype(np.int32))
    return dataclasses.replace(p, samples=table)


#: Samples summed per step by :func:`distinct_samples` (its keys and float sums stay small).
_CHUNK = 1 << 20


def _graph(fast: Any, shape: FlameShape, lookup: np.ndarray, node: np.ndarray, values: np.ndarray,
           sample_group: np.ndarray, group_ids: np.ndarray, root: int,
           n_names: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The grouped graph's columns and used names: each node's groups as bits (a few hundred
    groups at most), else each group's nodes in turn over the samples sorted by group."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    made = fast.grouped_by_masks(shape.parent, shape.name, lookup, node, values, sample_group, group_ids, root,
                                 n_names)
    if made is not None:
        return made
    groups = group_ids.size
    order = np.argsort(sample_group.astype(np.int16) if groups < 2**15 else sample_group, kind="stable")
    bounds = np.zeros(groups + 1, np.int64)
    np.cumsum(np.bincount(sample_group, minlength=groups), out=bounds[1:])
    mapped = lookup[shape.name]
    return fast.grouped_graph(shape.parent, mapped, node[order], values[order], bounds, group_ids, root, n_names)


def _held_names(table: list[str], used: np.ndarray, ids: np.ndarray, top: int) -> tuple[list[str], int]:
    """Only the names of ``table`` the graph holds (``used``), ``ids`` renumbered into them in
    place (in steps of :data:`_CHUNK`), and name ``top``'s new id: the name tree's names without
    weight left out, so a view indexes the graph by its own name ids (:class:`FlameIndex` made a
    second column of them, 4 bytes per node, when the table held names of no node)."""
    kept = np.flatnonzero(used)
    if kept.size == len(table):
        return table, top
    renumber = np.zeros(len(table), ids.dtype)
    renumber[kept] = np.arange(kept.size)
    for lo in range(0, ids.size, _CHUNK):
        ids[lo:lo + _CHUNK] = renumber[ids[lo:lo + _CHUNK]]
    return [table[k] for k in kept.tolist()], int(renumber[top])


def _frame_names(p: Profile, o: Options, used: np.ndarray) -> tuple[tuple[Profile, NodeMap], list[str]]:
    """The name of the label frame :func:`label_frames` gives each labelset of ``used``, as a
    flame node at ``o``'s granularity: label_frames itself on a profile of one sample without a
    stack per labelset and no other tables; and that profile with its node map."""
    framed, _ = label_frames(stackless(p, used, np.zeros((used.size, len(p.sample_types)), np.int64)),
                             o.tagroot, None, o.unit)
    nodes = node_map(framed, o.granularity, inlines=not o.noinlines)
    loc = framed.callsites.location[framed.samples.stack].astype(np.int64)
    entry = nodes.loc_nodes[nodes.loc_start[loc]]
    return (framed, nodes), [nodes.names[k] for k in entry.tolist()]


def stackless(p: Profile, used: np.ndarray, values: np.ndarray) -> Profile:
    """``p``'s label sets and sample types with one sample per labelset of ``used`` (its
    ``values`` row), without a stack, and no other tables: what :func:`label_frames` needs to
    name (and weigh) the label frames alone."""
    n = used.size
    return dataclasses.replace(
        p, strings=[""], functions=type(p.functions)(), mappings=type(p.mappings)(),
        locations=type(p.locations)(), lines=type(p.lines)(), callsites=type(p.callsites)(),
        samples=SampleTable(stack=np.full(n, -1, np.int32), values=values, labelset=used.astype(np.int32)))


class GroupedIndex(FlameIndex):
    """The grouped graph at a view's resolution (see :func:`grouped_index`): its rows at least
    :data:`RESOLUTION` of the total wide and every group's own (a cut tree, as
    ``FlameIndex(complete=...)``: ids and sizes are the complete graph's), and each group's
    complete subtree made when a request reaches below them (:attr:`parts`: a cache the web
    session sets). Every answer is the complete graph's (tests compare them):

    - a slice whose kept nodes are all made rows (its threshold is at least the narrowest made
      width, or more rows that wide than ``max_nodes``) is cut from the made rows; one under a
      group's row from that group's subtree; one at the root finer than that from the complete
      graph (:attr:`whole`, made on request);
    - a search's matched share from the samples (a sample is matched when its group's name, or
      the name of a node on its path in the name tree, matches), under a node below the groups'
      rows from the made rows when its subtree is all made, else from its group's subtree;
    - children and details from the made rows when they hold them, else from the group's subtree.

    The sandwich and the inverted graph, which need every node, are made from the samples on the
    name tree (:meth:`sandwich`, :meth:`inverted`: each path on to its group's row), not from the
    complete graph (``complete_index``, made where they do not apply: the root's name, no kernels).
    """

    def __init__(self, tree: FlameTree, complete: tuple[np.ndarray, np.ndarray], grouping: _Grouping,
                 first: np.ndarray, left: np.ndarray, used: np.ndarray) -> None:
        super().__init__(tree, complete)
        assert tree.name_ids is not None and tree.name_table is not None
        self.name_id, self.distinct = tree.name_ids, list(tree.name_table)  # the complete graph's names
        self.grouping = grouping
        self.first = first  # each group's first row in the complete graph (and the rows' end)
        self.left = left    # each group's left edge (and the total)
        self.used = used    # the complete graph's names, as a flag per name of grouping.table
        self.narrowest = max(int(np.ceil(RESOLUTION * tree.root_total)), 1)
        #: ``parts(g, make)``: group ``g``'s subtree, ``make()`` unless cached (the session's cache)
        self.parts: Callable[[int, Callable[[], FlameIndex]], FlameIndex] = lambda g, make: make()
        #: ``whole(make)``: the complete graph, ``make()`` unless cached
        self.whole: Callable[[Callable[[], FlameIndex]], FlameIndex] = lambda make: make()

    def held(self) -> list[Any]:
        """What this view holds of its own (a cache's weight): the made rows and their indexes,
        the samples' groups, nodes and weights (the name tree and the profile are the session's)."""
        g = self.grouping
        return [self.tree, self.complete, self.size, self.name_id, g.node, g.group, g.values, self.first, self.left]

    # ---------------------------------------------------------------- where a node is

    def check(self, node: int) -> int:
        """The position of made node ``node`` (OptionsError for one that was not made, and for no
        such node, as the complete graph says it)."""
        if not 0 <= node < len(self):
            raise missing_node(node, len(self))
        return super().check(node)

    def _made(self, node: int) -> int:
        """The position of node id ``node`` among the made rows, else -1."""
        ids = self.complete[0] if self.complete is not None else np.zeros(0, np.int64)
        at = int(np.searchsorted(ids, node)) if 0 <= node < len(self) else -1
        return at if 0 <= at < ids.size and int(ids[at]) == node else -1

    def _group(self, node: int) -> int:
        """The group whose subtree holds node id ``node`` (not the root)."""
        return int(np.searchsorted(self.first, node, side="right")) - 1

    def part(self, group: int) -> FlameIndex:
        """Group ``group``'s complete subtree under the graph's root, its rows' ids and sizes the
        complete graph's (cached by :attr:`parts`)."""
        return self.parts(group, lambda: self._make_part(group))

    def _make_part(self, group: int) -> FlameIndex:
        g, t = self.grouping, self.tree
        cols, _ = _part_graph(g, group, group + 1)
        renumber = np.zeros(len(g.table), cols[0].dtype)
        renumber[self.used] = np.arange(int(self.used.sum()), dtype=cols[0].dtype)
        name, parent, depth, size, selfs, total, start = cols
        name[:] = renumber[name]
        start[1:] += self.left[group]
        total[0] = t.root_total
        assert self.complete is not None
        ids = np.arange(name.size, dtype=np.int64) + (self.first[group] - 1)
        ids[0] = 0
        sizes = size.astype(np.int64)
        sizes[0] = self.complete[1][0]
        part = FlameTree(names=NameColumn(self.distinct, name), name_ids=name, name_table=self.distinct,
                         subtree_size=size, parent=parent, depth=depth, self=selfs, total=total, start=start,
                         width=total, sample_type=t.sample_type, dropped=0, min_width=1,
                         active_filters=t.active_filters, hint=t.hint, identity=t.identity)
        return FlameIndex(part, (ids, sizes))

    def _renumber(self) -> np.ndarray:
        """The complete graph's id of each name of ``grouping.table`` (0 for names it lacks)."""
        renumber = np.zeros(len(self.grouping.table), np.int32)
        renumber[self.used] = np.arange(int(self.used.sum()), dtype=np.int32)
        return renumber

    def _walk(self, depth: np.ndarray | None = None) -> Walk:
        """The tree every path of the complete graph climbs without it: the name tree (names as
        the complete graph's ids; ``depth``: its depths, else none), then one node per group under
        its root (each path's ``tail``, set by the caller: its group's); depths are those of the
        complete graph's rows."""
        g = self.grouping
        groups = self.left.size - 1
        parent = np.concatenate([g.shape.parent, np.zeros(groups, g.shape.parent.dtype)])
        names = self._renumber()[np.concatenate([g.lookup[g.shape.name], g.group_ids])]
        if depth is None:
            return Walk(parent, names, np.zeros(0, np.int32))
        deep = np.ones(parent.size, np.int32)  # a group's row: 1, a node under it one more than in the tree
        deep[:depth.size] += depth.astype(np.int32)
        return Walk(parent, names, deep)

    def _items(self, node: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The samples' weight summed per (node of the name tree ``node[sample]`` >= 0, group), as
        paths: (first node, weight, tail: the group's node of :meth:`_walk`), weight 0 left out;
        a path from the tree's root starts at its group's node."""
        g = self.grouping
        n, groups = len(g.shape.parent), self.left.size - 1
        on = node >= 0
        keys, at = np.unique(node[on].astype(np.int64) * groups + g.group[on], return_inverse=True)
        weight = sum_by(at.reshape(-1), g.values[on], keys.size)
        live = weight != 0
        keys, weight = keys[live], weight[live]
        first, group = keys // groups, keys % groups + n
        return np.where(first > 0, first, group), weight, np.where(first > 0, group, 0)

    def inverted(self, min_fraction: float) -> FlameTree | None:
        """The inverted graph of the complete grouped graph (``sandwich.inverted_graph`` of
        :meth:`complete_index`: the same nodes and numbers; tests compare every column) without
        it: each (node of the name tree, group)'s self weight carried up the name tree and on to
        its group's row. None where ``inverted_graph`` is (no compiled kernels)."""
        walk = self._walk()
        nodes, weight, tail = self._items(self.grouping.node)
        return inverted_paths(self, walk.parent, walk.name_id, nodes, weight, tail, 0, min_fraction=min_fraction,
                              size=len(self))

    def sandwich(self, name: str, *, min_fraction: float = 0.0, max_nodes: int = 0) -> SandwichResult | None:
        """``sandwich.sandwich`` of the complete grouped graph (the same result; tests compare every
        column) without it. A group's row: from its subtree (:meth:`part`). A name of the name
        tree: its callees from the subtrees of its outermost nodes in the tree weighed by every
        sample (merging by paths sums over the groups), its callers from each (innermost node,
        group)'s weight carried up the tree and on to the group's row. None for the root's name
        and without the compiled kernels (then the complete graph's)."""
        code = name_code(self, name)
        g = self.grouping
        n, fast = len(g.shape.parent), tree.compiled(len(self))
        if code == int(self.tree.name_ids[0]) or fast is None:  # type: ignore[index]
            return None
        mine = (self._renumber()[g.group_ids] == code) & self.used[g.group_ids]
        if (hit := np.flatnonzero(mine)).size:  # a group's row: its subtree alone
            t = self.part(int(hit[0])).tree
            assert t.name_ids is not None and t.subtree_size is not None
            side = callee_side(self, Graph(t.parent, t.depth, t.name_ids, t.self, t.total, t.subtree_size, True),
                               code, min_fraction)
            return with_callers(self, name, (side[0], side[1], side[3]), side[4], side[5], side[2], max_nodes,
                                Walk(t.parent, t.name_ids, t.depth))
        own = sum_by(g.node, g.values, n)
        layout = fast.preorder_layout(g.shape.parent, [own])  # totals, width (the totals), left edges, depth, size
        total, depth, size = layout[0][0], layout[3], layout[4]  # (depth and size int32)
        del layout
        names = self._renumber()[g.lookup[g.shape.name]]
        found = np.flatnonzero((names == code) & (total > 0))
        outer = _outermost(found, size)
        if found.size == 1:  # one node, no recursion (a program's main): its subtree as it is
            top = int(found[0])
            whole = Graph(g.shape.parent, depth, names, own, total, size, True)
            cum = int(total[top])
            threshold = max(int(np.ceil(min_fraction * abs(cum))), 1) if min_fraction > 0 else None
            callees = subtree_callees(self, whole, top, threshold)
            flat, end = int(own[top]), top + int(size[top])
            del whole, total, size, own, names
            inside = (g.node >= top) & (g.node < end)
            nodes, weight, tail = self._items(np.where(inside, top, -1))
            del inside
            walk = self._walk(depth)
            walk.tail = tail
            return with_callers(self, name, (flat, cum, callees), nodes, weight, threshold, max_nodes, walk)
        members = _ranges(outer, size[outer])
        members = members[total[members] > 0]
        # the graph of those subtrees alone (row 0 for the root), in the tree's pre-order; the
        # name tree's columns let go before its callees are merged (the server's peak)
        kid = np.concatenate([np.zeros(1, np.int64), members])
        row = _positions(kid, n)  # each node's row (-1: none; an outermost node's parent: the root's)
        parent = np.concatenate([[-1], np.maximum(row[g.shape.parent[members]], 0)]).astype(np.int32)
        before = np.cumsum(row >= 0, dtype=np.int32)  # the rows up to each node
        sizes = before[kid + size[kid] - 1] - before[kid] + 1
        del row, before
        part = Graph(parent, np.concatenate([np.zeros(1, np.int32), depth[members]]),
                     np.concatenate([names[:1], names[members]]), np.concatenate([[0], own[members]]),
                     np.concatenate([[int(total[0])], total[members]]), sizes, True)
        del total, size, own, names, sizes, parent
        flat, cum, threshold, callees, _, _ = callee_side(self, part, code, min_fraction)
        # each sample's innermost node of the name (-1: none), then the paths from those
        inner = np.full(n, -1, np.int32)
        if int(np.count_nonzero(part.name_id == code)) == outer.size:  # no recursion: each subtree's top
            inner[members] = np.repeat(outer, np.diff(np.append(np.searchsorted(members, outer), members.size)))
        else:
            rows = np.arange(1, kid.size)
            inner[members] = kid[_innermost_owner(part.parent, rows, _positions(rows, kid.size), part.name_id == code)]
            del rows
        del part, members, kid, outer
        nodes, weight, tail = self._items(inner[g.node])
        del inner
        walk = self._walk(depth)
        walk.tail = tail
        return with_callers(self, name, (flat, cum, callees), nodes, weight, threshold, max_nodes, walk)

    def complete_index(self) -> FlameIndex:
        """The complete grouped graph, indexed (made by :func:`grouped_flame`'s kernels; cached by
        :attr:`whole`)."""
        return self.whole(lambda: FlameIndex(_complete(self.grouping)))

    def _holder(self, node: int) -> tuple[FlameIndex, int]:
        """The index holding node id ``node`` (this one, else its group's subtree) and its position
        there; OptionsError for no such node."""
        at = self._made(node)
        if at >= 0 or not 0 < node < len(self):
            return self, self.check(node)
        part = self.part(self._group(node))
        return part, part.check(node)

    # ---------------------------------------------------------------- views

    def slice(self, root: int = 0, *, min_fraction: float = 1 / 4000, max_nodes: int = 40_000,
              search: str | None = None) -> FlameSlice:
        r = self._made(root)
        if r >= 0 and self._enough(r, min_fraction, max_nodes):
            cut = super().slice(root, min_fraction=min_fraction, max_nodes=max_nodes)
        elif root == 0:
            cut = self.complete_index().slice(root, min_fraction=min_fraction, max_nodes=max_nodes)
        else:  # a finer view under one group's row (or a node not made)
            if not 0 < root < len(self):
                self.check(root)  # no such node: its error
            cut = self.part(self._group(root)).slice(root, min_fraction=min_fraction, max_nodes=max_nodes)
        if search:
            found = self.search(search, root)
            rx = re.compile(search)
            hits = np.array([bool(rx.search(x)) for x in cut.names] + [False], dtype=bool)
            cut.columns["match"] = hits[cut.columns["name"]]
            cut.search = found
        return cut

    def _enough(self, r: int, min_fraction: float, max_nodes: int) -> bool:
        """Whether ``prune``'s kept nodes of made row ``r``'s subtree are all made rows: its
        threshold is at least the narrowest made width, or more made rows are that wide than
        ``max_nodes`` (then the ``max_nodes`` widest are among them)."""
        width = self.tree.width
        if max(int(np.ceil(min_fraction * int(width[r]))), 1) >= self.narrowest:
            return True
        wide = width[r:r + int(self.size[r])] >= self.narrowest
        return max_nodes > 0 and int(np.count_nonzero(wide)) > max_nodes

    def search(self, regex: str, root: int = 0) -> SearchResult:
        g = self.grouping
        try:
            rx = re.compile(regex)
        except re.error as exc:
            raise OptionsError(f"bad regular expression {{search}}={regex!r}: {exc}", options=("search",)) from None
        holder, at = self._holder(root)
        hits = np.array([bool(rx.search(x)) for x in g.table], dtype=bool)  # per name of the table
        total = self.tree.root_total
        if hits[g.root]:
            matched = by_group = None
        else:  # each group's matched weight: all of it, or its samples under a matching name tree node
            on_path = g.fast.covered(g.shape.parent, g.shape.name, hits[g.lookup[:-1]])
            hit = on_path[g.node]
            by_group = sum_by(g.group[hit], g.values[hit], self.left.size - 1)
            by_group = np.where(hits[g.group_ids], np.diff(self.left), by_group)
            matched = int(by_group.sum())
        t = holder.tree
        if matched is None:
            zoom = int(t.total[at])
        elif root == 0:
            zoom = matched
        elif t.depth[at] == 1 and not rx.search(t.names[at]):
            assert by_group is not None
            zoom = int(by_group[self._group(root)])
        elif holder is self and int(self.size[at]) != int(self.complete[1][at]):  # type: ignore[index]
            part = self.part(self._group(root))
            zoom = part._search(regex, part.check(root))[1].zoom_matched
        else:
            zoom = FlameIndex._search(holder, regex, at)[1].zoom_matched
        return SearchResult(regex, total if matched is None else matched, total, zoom, int(t.total[at]),
                            int(hits[self.used].sum()))

    def children(self, node: int) -> list[int]:
        at = self._made(node)
        if at >= 0:
            lo, hi = at + 1, at + int(self.size[at])
            kids = lo + np.flatnonzero(self.tree.parent[lo:hi] == at)
            assert self.complete is not None
            if int(self.complete[1][kids].sum()) + 1 == int(self.complete[1][at]):  # all of them made
                return super().children(node)
            return self.part(self._group(node)).children(node)
        return self._holder(node)[0].children(node)

    def details(self, node: int, *, path: bool = True) -> dict[str, Any]:
        holder = self._holder(node)[0]
        return FlameIndex.details(holder, node, path=path) if holder is self else holder.details(node, path=path)
