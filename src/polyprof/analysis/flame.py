"""Flame-graph trees: callsites merged by node name, with self and total weights.

A flame node is a path of report names from the root (``go tool pprof``
names at ``options.granularity``, inlined functions as nodes of their own
unless ``noinlines``). Callsites whose paths have the same names merge, so
two call sites of ``f`` from ``main`` at different addresses are one node.
Recursion is not collapsed: a flame graph shows every level.

The tree is computed with numpy one *flame depth* at a time: every
(callsite, inline line) pair knows its depth, all pairs of one depth are
interned together (:func:`polyprof.model.tree.intern_paths`), so the cost is
a sort per level, not a dictionary lookup per frame.

Nodes come in pre-order with children sorted by name (``flamegraph.pl``'s
order). ``start`` is a node's left edge and ``width`` its extent, in weight
units, so renderers only scale. Huge trees are pruned: nodes narrower than
``min_fraction`` of the root, or beyond the ``max_nodes`` widest, are left
out (their weight still counts in their ancestors) and ``dropped`` says how
many.

With ``base`` the same names are looked up in a second profile; its
weights (``base_self``/``base_total``) let a renderer colour growth and
shrinkage by normalised share. Widths always come from the new profile, so
code that vanished entirely is not drawn (its base weight is in
``base_only``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeAlias, overload

import numpy as np

from polyprof.analysis import filters, stacks
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import node_map, sum_by_stack
from polyprof.analysis.nodes import NodeMap
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import NodeFields, Result, node_fields
from polyprof.model import tree
from polyprof.model.profile import Profile, ValueType

__all__ = ["DEFAULT_MAX_NODES", "DEFAULT_MIN_FRACTION", "FlameShape", "FlameTree", "NameColumn", "flame_shape",
           "flame_tree", "name_pass", "prune"]

DEFAULT_MIN_FRACTION = 1e-5
DEFAULT_MAX_NODES = 30_000
ROOT_NAME = "root"


class NameColumn(Sequence[str]):
    """Every node's name, looked up in a table of distinct names on access: a graph of
    millions of nodes does not hold (nor build) a list of millions of references."""

    __slots__ = ("ids", "table")

    def __init__(self, table: list[str], ids: np.ndarray) -> None:
        self.table, self.ids = table, ids

    def __len__(self) -> int:
        return int(self.ids.size)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self.table[k] for k in self.ids[i].tolist()]
        return self.table[int(self.ids[i])]

    def __iter__(self) -> Iterator[str]:
        table = self.table
        return (table[k] for k in self.ids.tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"NameColumn({list(self[:5])}{'...' if len(self) > 5 else ''})"

    def distinct(self) -> set[str]:
        """The names that occur."""
        used = np.bincount(self.ids, minlength=len(self.table)) > 0 if self.ids.size else np.zeros(0, bool)
        return {self.table[k] for k in np.flatnonzero(used).tolist()}


@dataclass(repr=False)
class FlameTree(Result):
    """A flame graph as columns; row 0 is the root, rows are in pre-order.

    Its table (``to_pandas()``) has one row per node: ``name``, ``parent``,
    ``depth``, ``self``, ``total``, ``start``, ``width`` (and ``base_self``,
    ``base_total`` for a diff), then the identity fields of the report node
    the name stands for (:class:`~polyprof.analysis.result.NodeFields`).
    """

    TABLES: ClassVar[tuple[str, ...]] = ("nodes",)

    names: Sequence[str]    # a NameColumn from flame_tree
    parent: np.ndarray      # int32 (int64 past 2**31 nodes), -1 for the root
    depth: np.ndarray       # root = 0
    self: np.ndarray        # weight of samples whose stack ends here ("flat")
    total: np.ndarray       # weight of samples through here ("cum")
    start: np.ndarray       # left edge, in weight units
    width: np.ndarray       # extent, in weight units (total without negative parts)
    sample_type: ValueType
    base_self: np.ndarray | None = None
    base_total: np.ndarray | None = None
    dropped: int = 0        # nodes left out by pruning
    min_width: int = 0      # narrowest width kept (weight units)
    base_only: int = 0      # base weight on nodes absent from the new profile (diff)
    active_filters: tuple[str, ...] = ()  # ``name=value`` of the filters applied (pprof's legend)
    inverted: bool = False  # callers above their callees: root, then leaf functions, then their callers
    hint: str = ""          # advice for the reader (most weight in leaves spread over many paths)
    #: Identity fields (NodeFields keywords) of the report node each name stands for.
    identity: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``names`` as ids into ``name_table`` (distinct names), and each node's subtree size
    #: (itself included): what views of the graph index by, so they need not re-hash names.
    name_ids: np.ndarray | None = None
    name_table: list[str] | None = None
    subtree_size: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.names)

    def _columns(self, table: str) -> dict[str, Any]:
        cols: dict[str, Any] = {"name": list(self.names), "parent": self.parent, "depth": self.depth,
                                "self": self.self, "total": self.total, "start": self.start, "width": self.width}
        if self.base_self is not None and self.base_total is not None:
            cols.update(base_self=self.base_self, base_total=self.base_total)
        blank: dict[str, Any] = {}
        ident = [self.identity.get(name, blank) for name in self.names]
        for key, default in NodeFields(name="").__dict__.items():
            if key != "name":
                cols[key] = [i.get(key, default) for i in ident]
        return cols

    def _summary(self) -> str:
        diff = ", diff" if self.is_diff else ""
        return f"{self.sample_type}, {len(self)} nodes, total={self.root_total}, dropped={self.dropped}{diff}"

    @property
    def root_total(self) -> int:
        return int(self.total[0]) if len(self) else 0

    @property
    def base_root_total(self) -> int:
        return int(self.base_total[0]) if self.base_total is not None and len(self) else 0

    @property
    def is_diff(self) -> bool:
        return self.base_total is not None

    def lines(self) -> list[str]:
        """A readable dump, one node per line: indentation, name, self, total (and base)."""
        out = []
        bs, bt = self.base_self, self.base_total
        for i in range(len(self)):
            base = f" base {int(bs[i])}/{int(bt[i])}" if bs is not None and bt is not None else ""
            out.append(f"{'  ' * int(self.depth[i])}{self.names[i]}  self {int(self.self[i])} "
                       f"total {int(self.total[i])}{base}")
        return out


@dataclass
class _Side:
    """One profile's callsites, expanded into (callsite, line) pairs with global name ids."""

    parent: np.ndarray     # callsite parent (-1 = root)
    count: np.ndarray      # frames per callsite (outermost first)
    frames: np.ndarray     # global name id of every pair, CSR by callsite
    leaf: np.ndarray       # weight of samples ending at each callsite
    empty: int             # weight of samples with an empty stack
    sample_type: ValueType


def _weights(p: Profile, o: Options) -> tuple[np.ndarray, np.ndarray, ValueType]:
    """Every sample's value in the ``sample_index`` column, which samples have a stack, the column's type."""
    index = p.sample_index(o.sample_index)
    values = p.samples.values[:, index] if p.sample_types else np.zeros(len(p.samples), np.int64)
    vt = p.sample_types[index] if p.sample_types else ValueType("", "")
    return values, p.samples.stack >= 0, vt


def _side(p: Profile, o: Options) -> tuple[_Side, NodeMap, np.ndarray]:
    """The callsites of ``p`` as pairs; its report nodes and their node id per pair."""
    values, _, vt = _weights(p, o)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    leaf, empty = sum_by_stack(p.samples.stack, values, len(p.callsites))
    loc = p.callsites.location.astype(np.int64)
    first = nodes.loc_start[loc]
    count = nodes.loc_start[loc + 1] - first
    owner = tree.segment_owner(count)
    # node_map lists a location's lines innermost first; a flame path wants outermost first
    local = nodes.loc_nodes[first[owner] + count[owner] - 1 - tree.segment_positions(count)]
    side = _Side(p.callsites.parent.astype(np.int64), count, local, leaf, empty, vt)
    return side, nodes, local


def _merge_sides(sides: list[_Side]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """One callsite forest of all sides: parent, count, frames (CSR), side of each callsite
    (None for one side: all its own)."""
    if len(sides) == 1:
        return sides[0].parent, sides[0].count, sides[0].frames, None
    parents, counts, frames, owner = [], [], [], []
    offset = 0
    for k, s in enumerate(sides):
        parents.append(np.where(s.parent >= 0, s.parent + offset, -1))
        counts.append(s.count)
        frames.append(s.frames)
        owner.append(np.full(s.parent.size, k, dtype=np.int64))
        offset += s.parent.size
    return (np.concatenate(parents), np.concatenate(counts), np.concatenate(frames),
            np.concatenate(owner))


def _build(parent: np.ndarray, count: np.ndarray, frames: np.ndarray,
           n_names: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tree.Level]]:
    """Flame nodes of the merged forest: (node parent, node name, node of each
    callsite's last pair, the levels of the node tree). Node 0 is the root;
    every (callsite, line) pair is a path item one flame level below the pair
    before it (the previous line, or the parent callsite's last line)."""
    owner, j, up, pair_start = tree.expand_chains(parent, count)
    # Flame depth of a callsite's outermost pair: the pairs of all its ancestors.
    depth = (tree.path_sums(parent, count) - count)[owner] + j
    order, bounds = tree.group_by_depth(depth)
    node_of, node_parent, node_name, starts = tree.intern_paths(up, frames, order, bounds, n_names)
    # Shift past the root: node 0 holds every path.
    node_parent = np.concatenate(([-1], node_parent + 1))
    level_start = [0] + [s + 1 for s in starts]
    levels = [tree.Level.of(slice(lo, hi), node_parent[lo:hi]) for lo, hi in itertools.pairwise(level_start)]
    return node_parent, np.concatenate(([-1], node_name)), node_of[pair_start + count - 1] + 1, levels


#: Every node's (pre-order entry, last descendant's entry), or a function making them.
Order: TypeAlias = tuple[np.ndarray, np.ndarray] | Callable[[], tuple[np.ndarray, np.ndarray]]


@dataclass
class _Layout:
    """The name tree of all sides: per node its parent, name id (-1: the root), self and total
    weight per side, width, left edge, depth; ``order`` is every node's (pre-order entry, last
    descendant's entry), or a function making them (nodes in pre-order: rarely needed, and two
    arrays of millions of rows at the build's peak), and ``preordered`` says the nodes are in
    pre-order already."""

    parent: np.ndarray
    name: np.ndarray
    selfs: list[np.ndarray]
    totals: list[np.ndarray]
    width: np.ndarray
    start: np.ndarray
    depth: np.ndarray
    order: Order
    preordered: bool = False
    owns_names: bool = True   # False: ``name`` is a cached tree's (copied before it is written)


def _preorder(size: np.ndarray) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """The order of nodes in pre-order with subtree sizes ``size``, made when asked."""
    def make() -> tuple[np.ndarray, np.ndarray]:
        pre = np.arange(size.size, dtype=np.int64)
        return pre, pre + size - 1
    return make


def _order(order: Order) -> tuple[np.ndarray, np.ndarray]:
    return order() if callable(order) else order


def _layout(sides: list[_Side], n_names: int) -> _Layout:
    """The name tree of the sides' callsites: one compiled depth-first walk making the nodes in
    pre-order (large trees, numba installed), else numpy level by level (:func:`_build`). The
    two give the same tree (tests/test_tree_compiled.py compares them)."""
    parent, count, frames, owner = _merge_sides(sides)
    fast = tree.compiled(frames.size)
    if fast is not None:
        forest = [parent, count, frames]
        del parent, count, frames, owner
        merged = _walked(fast, forest, [s.leaf for s in sides], [s.empty for s in sides])
        if merged is not None:
            return merged
        parent, count, frames = forest
        owner = None if len(sides) == 1 else np.repeat(np.arange(len(sides)), [s.parent.size for s in sides])
    node_parent, node_name, leaf_node, levels = _build(parent, count, frames, n_names)
    selfs = []
    for k, side in enumerate(sides):
        s = np.zeros(node_parent.size, dtype=np.int64)
        np.add.at(s, leaf_node if owner is None else leaf_node[owner == k], side.leaf)
        s[0] += side.empty
        selfs.append(s)
    del leaf_node, owner, parent, count, frames  # room for the graph's nodes
    totals = [tree.subtree_sums(s, levels) for s in selfs]
    width = tree.subtree_sums(np.maximum(selfs[0], 0), levels)
    order = tree.euler(levels, node_parent.size)
    start = tree.place_children(width, levels, 0)
    depth = tree.segment_owner(np.array([lv.parent.size for lv in levels]))
    return _Layout(node_parent, node_name, selfs, totals, width, start, depth, order)


def _walked(fast: Any, forest: list[np.ndarray], leaves: list[np.ndarray], empties: list[int]) -> _Layout | None:
    """The compiled layout of a callsite forest (``forest``: parent, count, frames, as
    :func:`merge_paths <polyprof.model._tree_compiled.merge_paths>` takes them) whose callsites
    are the sides' in turn (``leaves``: each side's weight per callsite of its own): each
    side's weights padded onto the whole forest, the name tree walked, each side's samples
    without a stack (``empties``) put on the root, then :func:`_laid`. On success ``forest``
    is emptied (its arrays let go before the layout); None when the walk declines."""
    sizes = [x.size for x in leaves]
    padded = [leaves[0]] if len(leaves) == 1 else [  # each side's weights on the merged forest
        np.concatenate([x if i == k else np.zeros(m, np.int64) for i, (x, m) in enumerate(zip(leaves, sizes))])
        for k in range(len(leaves))]
    made = fast.merge_paths(*forest, padded)
    del padded
    if made is None:
        return None
    forest.clear()
    node_parent, node_name, selfs = made
    for s, empty in zip(selfs, empties):
        s[0] += empty
    return _laid(fast, node_parent, node_name, selfs, owns_names=True)


def _laid(fast: Any, parent: np.ndarray, name: np.ndarray, selfs: list[np.ndarray], *, owns_names: bool) -> _Layout:
    """The compiled layout of a name tree in pre-order (``parent``, ``name``) weighed with
    ``selfs``; ``owns_names``: ``name`` is a temporary :func:`_finish` may write into, not a
    cached tree's (then it is copied only if every node is kept)."""
    totals, width, start, depth, size = fast.preorder_layout(parent, selfs)
    return _Layout(parent, name, selfs, totals, width, start, _narrow(depth), _preorder(_narrow(size)), True,
                   owns_names)


def flame_tree(profile: Profile | FilterResult, options: Options | None = None,
               base: Profile | FilterResult | None = None, *, min_fraction: float = DEFAULT_MIN_FRACTION,
               max_nodes: int = DEFAULT_MAX_NODES, inverted: bool = False, shape: FlameShape | None = None,
               base_shape: FlameShape | None = None, **overrides: Any) -> FlameTree:
    """The flame graph of ``profile`` (``base`` adds the weights for a diff colouring).

    The filters set in ``options`` apply to both profiles (a FilterResult is
    taken as already filtered); keywords override its fields. ``max_nodes``
    0 means no cap. ``inverted`` turns every stack around (leaf first): the
    functions with self weight sit on the root and their callers above them,
    so a hot leaf reached through many paths is one wide frame. ``shape``
    (:func:`flame_shape` of the unfiltered profile) saves the walk over the
    callsites when the filters only selected samples; it changes no number. With ``base``,
    ``shape`` and ``base_shape`` (each side's) merge the two name trees instead of the callsites.
    A ``hide`` or ``prune_from`` filter on an unfiltered ``profile`` takes :func:`name_pass` where it applies.
    """
    o = resolve(options, **overrides)
    hid = name_pass(profile, o, shape) if base is None and not inverted and isinstance(profile, Profile) else None
    if hid is not None:  # a hide or prune_from filter's graph from the name tree: no callsites remade
        new, shape = hid
    else:
        new = filters.prepare(profile, o)
    old = filters.prepare(base, o) if base is not None else None
    if old is None and not inverted and (shape is None or not shape.fits(new.profile, o)):
        shape = flame_shape(new.profile, o)  # None: small, or the compiled walk declines
    weighed = shape.weigh(new.profile, o) if old is None and not inverted and shape is not None else None
    paired = (_weigh_pair((shape, base_shape), (new.profile, old.profile), o)
              if old is not None and not inverted and shape is not None and base_shape is not None else None)
    if weighed is not None and shape is not None:
        laid, vt = weighed
        names, maps = shape.names, [shape.nodes]
    elif paired is not None and shape is not None and base_shape is not None:
        laid, vt, names = paired
        maps = [shape.nodes, base_shape.nodes]
    else:
        sides, names, maps, _ = _named_sides([new.profile] + ([old.profile] if old is not None else []), o)
        if inverted:
            sides = [_inverted(side) for side in sides]
        laid = _layout(sides, max(len(names), 1))
        vt = sides[0].sample_type
        del sides  # room for the graph's nodes
    node_name, selfs, totals = laid.name, laid.selfs, laid.totals
    hint = "" if inverted else _leaf_hint(names, node_name, selfs[0], int(totals[0][0]) if totals[0].size else 0)
    flame = _finish((names, node_name), laid.parent, laid.depth, selfs, totals, laid.width, laid.start,
                    laid.order, vt, min_fraction, max_nodes, preordered=laid.preordered, owns_names=laid.owns_names)
    flame.active_filters = tuple(new.active)
    flame.inverted = inverted
    flame.hint = hint
    wanted = flame.names.distinct() if isinstance(flame.names, NameColumn) else set(flame.names)
    flame.identity = _identity(wanted, [(prep.profile, m) for prep, m in
                                                   zip([new] + ([old] if old is not None else []), maps)])
    return flame


def _named_sides(profiles: list[Profile],
                 o: Options) -> tuple[list[_Side], list[str], list[NodeMap], list[np.ndarray]]:
    """Each profile's side with frames as ids into the returned names (sorted, shared by all
    sides), each one's report nodes, and the id in names of each of its report nodes."""
    results = [_side(p, o) for p in profiles]
    sides = [r[0] for r in results]
    names = sorted(set().union(*(r[1].names for r in results)))
    gid = {name: i for i, name in enumerate(names)}
    lookups = []
    for side, (_, local_nodes, local) in zip(sides, results):
        lookups.append(np.array([gid[x] for x in local_nodes.names], dtype=np.int64))
        side.frames = lookups[-1][local] if local.size else local
    return sides, names, [r[1] for r in results], lookups


def _tables(p: Profile) -> tuple[Any, ...]:
    """What a profile's name tree is made of (everything but the samples)."""
    return p.callsites, p.locations, p.lines, p.functions, p.mappings, p.strings


@dataclass(eq=False, repr=False)
class FlameShape:
    """A profile's flame-graph name tree without weights: the nodes in pre-order, children by
    name, and the node each callsite's samples weigh on.

    Filters that only select samples (focus, ignore, tagfocus, pid, thread,
    time_range, ...) keep the profile's callsite tables, so their flame graph
    is this tree with other weights (nodes left without weight are pruned as
    always): :func:`flame_tree` then sums the samples onto ``at`` instead of
    walking millions of callsites again. ``polyprof serve`` keeps one per
    input. Made only where the compiled walk runs (large trees, numba); it
    holds the profile's tables (no copy), 8 bytes per node and 4 per callsite.
    """

    tables: tuple[Any, ...]   # _tables() of the profile it was made of (compared by identity)
    view: tuple[str, bool]    # (granularity, inlines): what the nodes are
    names: list[str]
    nodes: NodeMap
    parent: np.ndarray        # per node (int32): its parent, -1 for the root (node 0)
    name: np.ndarray          # per node (int32): id in ``names``, -1 for the root
    at: np.ndarray            # per callsite (int32): the node of its last frame (-1: dropped)
    named: np.ndarray         # per node of ``nodes`` (int64): its id in ``names`` (-1: hidden)
    #: Made by :meth:`hiding`: samples at -1 and samples without a stack are dropped (pprof's hide).
    drops: bool = False

    def fits(self, p: Profile, o: Options) -> bool:
        """``p`` (a filtered profile) has the tables this shape was made of, viewed as ``o`` asks."""
        return self.view == (o.granularity, not o.noinlines) and all(
            x is y for x, y in zip(self.tables, _tables(p), strict=True))

    def weigh(self, p: Profile, o: Options) -> tuple[_Layout, ValueType] | None:
        """The layout of ``p``'s samples on this tree (``p`` fits it), and their value type;
        None when the compiled kernels are off (``POLYPROF_KERNELS=numpy``)."""
        fast = tree.compiled(len(self.at))
        if fast is None:
            return None
        selfs, vt = self.selfs([p], o)
        return _laid(fast, self.parent, self.name, selfs, owns_names=False), vt

    def selfs(self, profiles: list[Profile], o: Options) -> tuple[list[np.ndarray], ValueType]:
        """Each profile's self weight per node of this tree (the profiles fit it; the root holds
        samples without a stack, unless :attr:`drops`), and the first one's value type."""
        out, vts = [], []
        for p in profiles:
            values, _, vt = _weights(p, o)
            sums, empty = sum_by_stack(p.samples.stack, values, self.parent.size, at=self.at)
            if not self.drops:
                sums[0] += empty
            out.append(sums)
            vts.append(vt)
        return out, vts[0]


    def hiding(self, p: Profile, o: Options) -> FlameShape | None:
        """This tree with the frames ``o.hide`` removes taken out of every path (their children
        merged into their parent), weighing like ``filters.apply(p, hide=...)``'s remade stacks:
        samples whose frames are all hidden, and samples without a stack, are dropped. ``p`` has
        this shape's tables. None where hiding is not a matter of node names: a granularity
        other than functions with inlines, a location whose lines are not its nodes, a name
        the regex hides in one place and not in another, or the compiled kernels are off."""
        nodes = self.nodes
        fast = tree.compiled(len(self.at))
        if fast is None or not self._lines_are_nodes(p):
            return None
        hidden_name = self._hidden_names(filters.hidden_lines(p, o))
        if hidden_name is None:
            return None
        hidden = np.append(False, hidden_name[self.name[1:]])
        up = self.parent.astype(np.int64)  # becomes each node's nearest kept proper ancestor
        todo = np.flatnonzero(hidden[np.maximum(up, 0)] & (up >= 0))
        while todo.size:  # pointer doubling (the root is kept: no chain runs past it)
            up[todo] = up[up[todo]]
            todo = todo[hidden[up[todo]]]
        keep = np.flatnonzero(~hidden)[1:]  # pre-order: a kept parent comes before its children
        rank = np.cumsum(~hidden) - 2        # kept node -> its row in the forest below (root: -1)
        name_id = np.cumsum(~hidden_name) - 1
        at = np.empty(keep.size, np.int64)
        made = fast.merge_paths(rank[up[keep]], np.ones(keep.size, np.int64), name_id[self.name[keep]], [], at=at)
        if made is None:
            return None
        node_of = np.full(self.parent.size, -1, np.int64)  # every old node -> its new node (-1: gone)
        node_of[keep] = at
        lost = np.flatnonzero(hidden)
        node_of[lost] = np.where(up[lost] > 0, node_of[up[lost]], -1)
        small = self.parent.dtype
        return FlameShape(self.tables, self.view, [n for n, h in zip(self.names, hidden_name.tolist()) if not h],
                          nodes, made[0].astype(small), made[1].astype(small), node_of[self.at].astype(small),
                          np.where((self.named < 0) | hidden_name[self.named], -1, name_id[self.named]), True)

    def pruning(self, p: Profile, o: Options) -> FlameShape | None:
        """This tree with every callsite's samples moved up to the innermost frame of its path
        that ``o.prune_from`` matches (the stack cut below it), weighing like
        ``filters.apply(p, prune_from=...)``'s remade stacks; no sample is dropped. ``p`` has
        this shape's tables. None where that is not a matter of node names (as :meth:`hiding`)."""
        if tree.compiled(len(self.at)) is None or not self._lines_are_nodes(p):
            return None
        matched = self._hidden_names(filters.pruned_lines(p, o))
        if matched is None:
            return None
        hit = np.append(False, matched[self.name[1:]])
        n = self.parent.size
        up = stacks.nearest_compiled(self.parent, hit)  # the nearest hit at or above (nodes are a pre-order)
        if up is None:
            return None
        node_of = np.where(up >= 0, up, np.arange(n))  # no hit above: the stack stays whole
        at = np.where(self.at >= 0, node_of[np.maximum(self.at, 0)], -1).astype(self.at.dtype)
        return FlameShape(self.tables, self.view, self.names, self.nodes, self.parent, self.name, at, self.named,
                          self.drops)

    def _lines_are_nodes(self, p: Profile) -> bool:
        """Every inline line of ``p`` (with this shape's tables) is one node of the functions
        view with inlines: what the name passes need to decide by lines."""
        return self.view == ("functions", True) and np.array_equal(self.nodes.loc_start, p.locations.line_start)

    def _hidden_names(self, line_hidden: np.ndarray) -> np.ndarray | None:
        """Per name of this shape: whether the hidden lines (``line_hidden``, aligned with
        the node map's entries) hide it; None when some of its lines are hidden and others not."""
        nodes = self.nodes
        entry = self.named[nodes.loc_nodes]
        if entry.size and int(entry.min()) < 0:
            return None
        n = len(self.names)
        hit = np.bincount(entry[line_hidden], minlength=n)
        if ((hit > 0) & (hit < np.bincount(entry, minlength=n))).any():
            return None
        return hit > 0


def name_pass(profile: Profile, o: Options, shape: FlameShape | None = None,
              selected: FilterResult | None = None) -> tuple[FilterResult, FlameShape] | None:
    """A ``hide`` or ``prune_from`` filter of ``o`` as a flame graph needs it without remaking
    the callsites: the samples the other filters select (``selected``: ``profile`` filtered by
    ``o`` without that filter, when the caller has it cached) with ``o``'s legend, and
    ``profile``'s name tree (``shape``, made when missing) with the hidden frames taken out
    (:meth:`FlameShape.hiding`) or the samples moved up to the pruning frame
    (:meth:`FlameShape.pruning`). None where that does not apply: another filter remakes the
    stacks (:func:`filters.name_tree_filter`), the name tree is not made (small trees), or the
    filter is not a matter of node names. Same graph as ``filters.apply``'s (tests compare)."""
    kind = filters.name_tree_filter(o)
    if kind is None:
        return None
    if shape is None or not shape.fits(profile, o):
        shape = flame_shape(profile, o)
    made = None if shape is None else shape.hiding(profile, o) if kind == "hide" else shape.pruning(profile, o)
    if made is None:
        return None
    if selected is None:
        selected = filters.apply(profile, filters.without(o, kind))
    if not made.fits(selected.profile, o):  # (cannot happen: the other filters select samples only)
        return None
    return replace(selected, active=filters.legend(o)), made


def _weigh_pair(shapes: tuple[FlameShape, FlameShape], profiles: tuple[Profile, Profile],
                o: Options) -> tuple[_Layout, ValueType, list[str]] | None:
    """The diff layout of two profiles (new, base) from their name trees: the two trees merged
    by name as one forest of one-frame nodes, each weighed with its profile's samples, as
    :func:`_layout` merges the callsites; and the value type and names. None when a shape does
    not fit its profile, drops samples, or the compiled kernels are off."""
    if any(sh.drops or not sh.fits(p, o) for sh, p in zip(shapes, profiles, strict=True)):
        return None
    fast = tree.compiled(sum(len(sh.parent) for sh in shapes))
    if fast is None:
        return None
    if shapes[0] is shapes[1]:  # one input's tables on both sides: its tree is the merged one
        selfs, vt = shapes[0].selfs(list(profiles), o)
        return _laid(fast, shapes[0].parent, shapes[0].name, selfs, owns_names=False), vt, shapes[0].names
    names = sorted(set(shapes[0].names).union(shapes[1].names))
    gid = {name: i for i, name in enumerate(names)}
    parents, frames, leaves, empties, offset, vts = [], [], [], [], 0, []
    for sh, p in zip(shapes, profiles, strict=True):
        lookup = np.array([gid[x] for x in sh.names], dtype=np.int64)
        up = sh.parent[1:].astype(np.int64) - 1  # the roots left out: their children become roots
        parents.append(np.where(up >= 0, up + offset, -1))
        frames.append(lookup[sh.name[1:]])
        weights, side_vt = sh.selfs([p], o)
        leaves.append(weights[0][1:])
        empties.append(int(weights[0][0]))
        vts.append(side_vt)
        offset += len(sh.parent) - 1
    forest = [np.concatenate(parents), np.ones(offset, np.int64), np.concatenate(frames)]
    del parents, frames
    laid = _walked(fast, forest, leaves, empties)
    return None if laid is None else (laid, vts[0], names)


def flame_shape(profile: Profile, options: Options | None = None, **overrides: Any) -> FlameShape | None:
    """The weightless name tree of ``profile``'s flame graphs at ``options``' granularity (see
    :class:`FlameShape`); None where flame_tree builds without it (small trees: numpy)."""
    o = resolve(options, **overrides)
    if tree.compiled(len(profile.callsites)) is None:
        return None
    sides, names, maps, lookups = _named_sides([profile], o)
    side = sides[0]
    fast = tree.compiled(side.frames.size)
    at = np.empty(side.parent.size, np.int64)
    made = fast.merge_paths(side.parent, side.count, side.frames, [], at=at) if fast is not None else None
    if made is None:
        return None
    small = np.int32 if side.frames.size < np.iinfo(np.int32).max else np.int64
    return FlameShape(_tables(profile), (o.granularity, not o.noinlines), names, maps[0],
                      made[0].astype(small), made[1].astype(small), at.astype(small), lookups[0])


def _identity(wanted: set[str], sides: list[tuple[Profile, NodeMap]]) -> dict[str, dict[str, Any]]:
    """Identity fields of the first node named like each of ``wanted`` (new side first)."""
    out: dict[str, dict[str, Any]] = {}
    for p, nodes in sides:
        first: dict[str, int] = {}
        for n, name in enumerate(nodes.names):
            if name in wanted and name not in out:
                first.setdefault(name, n)
        out.update((nodes.names[n], f) for n, f in node_fields(p, nodes, list(first.values())).items())
    return out


def _inverted(side: _Side) -> _Side:
    """``side`` with every stack turned around: one chain per leaf callsite, leaf first,
    equal prefixes merged. Built one inverted depth at a time for all stacks at once
    (a sort per depth), like the normal tree."""
    start = np.concatenate(([0], np.cumsum(side.count)))
    leaves = np.flatnonzero(side.leaf)
    weight = side.leaf[leaves]
    cur = leaves.copy()                       # the callsite each stack is in
    pos = side.count[cur] - 1                 # its frame there (innermost = last)
    node = np.full(leaves.size, -1, dtype=np.int64)
    parents, frames, ends = [], [], []
    made, empty = 0, side.empty
    n_frames = int(side.frames.max(initial=0)) + 2
    while cur.size:
        while True:  # step over callsites without frames (and past the root)
            up = (cur >= 0) & (pos < 0)
            if not up.any():
                break
            cur[up] = side.parent[cur[up]]
            pos[up] = np.where(cur[up] >= 0, side.count[np.maximum(cur[up], 0)] - 1, 0)
        alive = cur >= 0
        gone = ~alive & (node >= 0)  # stacks that ran out of frames through frameless callsites
        if gone.any():
            ends.append((node[gone], weight[gone]))
        empty += int(weight[~alive & (node < 0)].sum())
        cur, pos, node, leaves, weight = cur[alive], pos[alive], node[alive], leaves[alive], weight[alive]
        if not cur.size:
            break
        frame = side.frames[start[cur] + pos]
        node, new_parent, new_frame = tree.intern_level(node, frame, n_frames, made)
        parents.append(new_parent)
        frames.append(new_frame)
        made += new_parent.size
        pos = pos - 1
        done = (pos < 0) & (side.parent[cur] < 0)
        if done.any():
            ends.append((node[done], weight[done]))
            cur, pos, node, leaves, weight = (x[~done] for x in (cur, pos, node, leaves, weight))
    leaf = np.zeros(made, dtype=np.int64)
    for at, w in ends:
        np.add.at(leaf, at, w)
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))  # noqa: E731
    return _Side(cat(parents), np.ones(made, dtype=np.int64), cat(frames), leaf, empty, side.sample_type)


def _leaf_hint(names: list[str], node_name: np.ndarray, self_weight: np.ndarray, total: int) -> str:
    """Advice when most weight is self weight of one function spread over many call paths
    (the normal flame graph then shows it only as many thin leaves)."""
    if total <= 0:
        return ""
    # the nodes with self weight (a fraction of millions of nodes: no full-size temporaries)
    weighed = np.flatnonzero(self_weight)
    weighed = weighed[node_name[weighed] >= 0]
    if not weighed.size:
        return ""
    name, weight = node_name[weighed], self_weight[weighed]
    by_name = np.bincount(name, weights=weight, minlength=len(names))
    top = int(np.argmax(by_name))
    paths = int(np.count_nonzero((name == top) & (weight > 0)))
    share = by_name[top] / total
    if share < 0.5 or paths < 10:
        return ""
    return (f"{share:.0%} of the weight is self time of {names[top]} spread over {paths:,} call paths: "
            "an inverted graph (--inverted, or 'callers' in the page) shows it as one frame")


def _by_entry(nodes: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """``nodes`` ordered by their pre-order positions ``pre`` (distinct, below ``len(pre) + 1``):
    a counting sort, linear where a comparison sort of millions of nodes takes a second."""
    slot = np.full(int(pre.max(initial=0)) + 1, -1, dtype=np.int64)
    slot[pre[nodes]] = nodes
    return slot[slot >= 0]


def prune(width: np.ndarray, min_fraction: float, max_nodes: int,
          pre: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Which nodes of a flame graph (node 0 its root) are drawn at a resolution: the one rule of
    :func:`flame_tree` and the web view's slices. Kept: the root, and the nodes at least
    ``min_fraction`` of the root's width and never of width 0; when that is more than
    ``max_nodes`` (> 0), the widest, ties going to the first in pre-order (``pre``: every node's
    pre-order number; None: ids are in pre-order). A node is never wider than its parent, so
    the kept nodes are closed under ancestors. Returns (kept mask, narrowest width kept)."""
    threshold = max(int(np.ceil(min_fraction * int(width[0]))), 1) if width.size else 1
    keep = width >= threshold
    keep[:1] = True
    if max_nodes > 0 and int(keep.sum()) > max_nodes:
        threshold = max(threshold, int(np.sort(width[keep])[::-1][max_nodes - 1]))
        keep = width >= threshold
        keep[:1] = True
        if int(keep.sum()) > max_nodes:  # ties at the threshold (ancestors come first in pre-order)
            ranked = np.flatnonzero(keep)
            keep[(ranked if pre is None else _by_entry(ranked, pre))[max_nodes:]] = False
    return keep, threshold


def _renumber(parent: np.ndarray, keep: np.ndarray, kept: np.ndarray | None, order: Order,
              preordered: bool) -> tuple[np.ndarray, np.ndarray]:
    """The kept nodes (``kept``: their ids in pre-order, None: ``keep``'s when the nodes are
    in pre-order; closed under ancestors) as a tree of their own: (parent, subtree size).
    Nodes already in pre-order take one compiled walk."""
    fast = tree.compiled(parent.size) if preordered else None
    compact = fast.preorder_keep(parent, keep) if fast is not None else None
    if compact is not None:
        return compact
    if kept is None:
        kept = np.flatnonzero(keep)
    pre, post = _order(order)
    new_id = np.full(parent.size, -1, dtype=np.int64)
    new_id[kept] = np.arange(kept.size)
    new_parent = np.where(parent[kept] >= 0, new_id[np.maximum(parent[kept], 0)], -1)
    del new_id
    if preordered and kept.size == parent.size:
        return new_parent, post - pre + 1
    # a subtree is the kept nodes of its Euler interval
    seen = np.zeros(int(post.max(initial=0)) + 2, dtype=np.int64)
    seen[pre[kept] + 1] = 1
    np.cumsum(seen, out=seen)
    return new_parent, seen[post[kept] + 1] - seen[pre[kept]]


def _finish(label, parent, depth, selfs, totals, width, start, order, vt,  # noqa: ANN001, PLR0913
            min_fraction: float, max_nodes: int, *, preordered: bool = False, owns_names: bool = True) -> FlameTree:
    """Prune, put in pre-order and wrap. ``label`` is (names, name id of every node, -1 for
    the root); ``order`` is every node's (pre-order entry, last descendant's entry);
    ``preordered``: the nodes are in pre-order already. The node arrays are the caller's
    temporaries: they may be reordered in place (the name ids only if ``owns_names``), and
    ``width`` may be ``totals[0]`` itself (no negative self weight: moved once)."""
    pre = None if preordered else _order(order)[0]
    keep, threshold = prune(width, min_fraction, max_nodes, pre)
    # kept nodes in pre-order, by position; in pre-order already: the mask says it (no array)
    kept = None if pre is None else _by_entry(np.flatnonzero(keep), pre)
    n_kept = int(np.count_nonzero(keep))
    dropped = int(np.count_nonzero(width > 0)) - int(np.count_nonzero(keep & (width > 0)))
    base_only = 0
    if len(selfs) > 1:
        gone = (width == 0) & (totals[1] != 0) & (parent >= 0) & (width[np.maximum(parent, 0)] > 0)
        base_only = int(totals[1][gone].sum())
    whole = n_kept == width.size
    new_parent, size = _renumber(parent, keep, kept, order, preordered)
    fast = tree.compiled(parent.size) if preordered else None

    def take(x: np.ndarray, owned: bool = True) -> np.ndarray:
        """The kept rows in pre-order; in place when most are kept (the arrays are the caller's
        temporaries), so a graph of millions of nodes is not held twice; a copy when few are
        (a view would hold the whole column); ``owned`` False: never written."""
        if whole and preordered:
            return x if owned else x.copy()
        few = 8 * n_kept < x.size
        moved = fast.compact(x, keep) if fast is not None and owned and not few else None
        if moved is not None:
            return moved
        if whole and owned:
            x[:] = x[kept]
            return x
        return x[keep] if kept is None else x[kept]

    table = list(label[0])
    root_id = next((i for i, x in enumerate(table) if x == ROOT_NAME), None)  # one id per distinct name
    if root_id is None:
        root_id = len(table)
        table.append(ROOT_NAME)
    ids = take(label[1], owns_names)
    ids[ids < 0] = root_id
    ids, size, new_parent = _narrow(ids), _narrow(size), _narrow(new_parent)
    total = take(totals[0])
    flame = FlameTree(
        names=NameColumn(table, ids),
        name_ids=ids, name_table=table, subtree_size=size, parent=new_parent,
        depth=_narrow(take(depth)), self=take(selfs[0]), total=total,
        start=take(start), width=total if width is totals[0] else take(width), sample_type=vt, dropped=dropped,
        min_width=threshold)
    if len(selfs) > 1:
        flame.base_self, flame.base_total = take(selfs[1]), take(totals[1])
        flame.base_only = base_only
    return flame


def _narrow(x: np.ndarray) -> np.ndarray:
    """``x`` (node ids, depths or counts of nodes: below the node count) as int32 when the
    values fit: a complete graph of millions of nodes is held by the web view, and these
    four columns were half of its 80 bytes per node. Weights stay int64."""
    if x.dtype == np.int32 or x.size >= np.iinfo(np.int32).max:
        return x
    return x.astype(np.int32)
