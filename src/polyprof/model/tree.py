"""Vectorized kernels on parent-pointer trees and segmented (CSR) arrays.

Every tree algorithm of polyprof lives here once: the callsite tree of a
profile, the tree a filter rebuilds and the flame graph's name tree all use
these. They work on plain numpy arrays (``parent[i]`` is -1 for a root),
one whole tree *level* per numpy call, never one node per Python step, so
trees of millions of nodes cost a few dozen vector operations per level.

Segments (CSR):

- :func:`segment_positions` — 0, 1, ... within each segment (the
  ``arange - repeat(cumsum - count)`` idiom);
- :func:`segment_owner` — the segment of every element;
- :func:`expand_chains` — every node of a tree as a chain of items (a
  callsite's inline frames), each item pointing at the item above it;
- :func:`run_starts` — where runs of equal values begin in a sorted array;
- :func:`exclusive_within_runs` — running sum restarting at every run.

Levels: a :class:`Level` holds the nodes of one depth ordered by parent, so
siblings are contiguous runs. :func:`tree_levels` groups any tree so;
the builder and the flame graph make them directly (their ids already come
level by level). On levels:

- :func:`subtree_sums` / :func:`add_subtree_sums` — sums pushed up to every
  ancestor (exact int64, one ``reduceat`` per level);
- :func:`place_children` — positions handed out top-down: pre-order
  numbering (extent = subtree size, step 1) and flame-graph left edges
  (extent = width, step 0);
- :func:`fill_down` / :func:`any_above` — values propagated down to
  descendants;
- :func:`euler` — pre-order entry and last-descendant position (Euler-tour
  intervals: ``b`` is in the subtree of ``a`` iff ``tin[a] <= tin[b] <= tout[a]``);
  :func:`outermost` uses them to count recursion once per stack.

Without levels: :func:`path_sums` (sum over a node and its ancestors, by
pointer jumping; depth is its special case); :func:`preorder_path_sums`
does the same in one running sum when ids are a pre-order.

Interning (hash-consing) one level at a time: :func:`sorted_runs` sorts keys
and marks the first of each run; :func:`intern_level` turns (parent, label)
pairs into node ids; :func:`intern_paths` interns whole paths level by level
(items that point at the item above them), which the filters' rebuild and the
flame graph use, and the builder's bulk stack interning uses the same
per-level step.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

import numpy as np

from polyprof.wire.vector import compiled_wanted, import_compiled

__all__ = [
    "Level", "add_subtree_sums", "any_above", "euler", "exclusive_within_runs", "expand_chains", "fill_down",
    "group_by_depth", "intern_level", "intern_paths", "outermost", "path_sums", "place_children",
    "preorder_path_sums", "run_starts", "segment_owner", "segment_positions", "sorted_runs", "subtree_sums",
    "tree_levels",
]


#: Items (nodes, path items) from which the compiled twins (:mod:`polyprof.model._tree_compiled`)
#: run: loading numba and its cached machine code costs 0.5-1.5 s of CPU once, and below this
#: size the numpy kernels take less than that (measured: pprof's ``large.cpu``, 426k callsites,
#: took 1.5 s of CPU for ``top`` with them against 0.75 s without).
COMPILED_FROM = 1 << 21
#: ... and from this size once they are loaded (an earlier tree of COMPILED_FROM items paid the
#: load, as the landing flame graph of a long-lived ``polyprof serve`` does): 200k-2M trees are then
#: 2-3x faster compiled.
COMPILED_WHEN_LOADED = 200_000
_compiled: ModuleType | None | bool = None  # the module once loaded; False: numba not available


def _kernels(size: int) -> ModuleType | None:
    """The compiled tree kernels when ``size`` items are worth them (and numba is there), else None.
    ``POLYPROF_KERNELS=numpy`` keeps numpy, ``=compiled`` uses them at any size (as for decoding)."""
    global _compiled
    if not compiled_wanted(size, COMPILED_WHEN_LOADED if isinstance(_compiled, ModuleType) else COMPILED_FROM):
        return None
    if _compiled is None:
        _compiled = import_compiled("polyprof.model._tree_compiled")
    return _compiled if isinstance(_compiled, ModuleType) else None


def compiled(size: int) -> ModuleType | None:
    """The compiled kernel module for work of ``size`` items (the rule above), or None: for
    callers whose numpy twin is a composition of these kernels (the flame graph's build)."""
    return _kernels(size)


# ---------------------------------------------------------------- segments

def segment_positions(counts: np.ndarray) -> np.ndarray:
    """Position of every element within its segment: ``[0..counts[0]), [0..counts[1]), ...`` concatenated."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def segment_owner(counts: np.ndarray) -> np.ndarray:
    """The segment index of every element (``i`` repeated ``counts[i]`` times)."""
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def expand_chains(parent: np.ndarray, count: np.ndarray,
                  order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every node of a tree becomes a chain of ``count[node]`` (>= 1) items:
    item k > 0 hangs under item k - 1 of its node, item 0 under the last item
    of the parent node (-1 under none). Chains are laid out one after another
    in ``order`` (default: node id order).

    Returns (node of every item, its place in the chain, the item above it,
    each node's first item). A callsite's inline frames, outermost first,
    make such a chain: flame graphs and viewer stack tables are built on it.
    """
    count = np.asarray(count, dtype=np.int64)
    fast = _kernels(count.size) if order is None else None
    got = fast.expand_chains(parent, count) if fast is not None else None
    if got is not None:
        owner, within, up, first = got
        return owner, within, up, first
    if order is None:
        first = np.cumsum(count) - count
        owner = segment_owner(count)
        within = segment_positions(count)
    else:
        laid = count[order]
        first = np.empty(count.size, dtype=np.int64)
        first[order] = np.cumsum(laid) - laid
        owner = order[segment_owner(laid)]
        within = segment_positions(laid)
    last = first + count - 1
    above = parent[owner]
    up = np.where(within > 0, np.arange(within.size, dtype=np.int64) - 1,
                  np.where(above >= 0, last[np.maximum(above, 0)], -1))
    return owner, within, up, first


def run_starts(values: np.ndarray) -> np.ndarray:
    """Indexes where a run of equal values begins (values grouped, e.g. sorted); [0] starts one if non-empty."""
    if not values.size:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))


def exclusive_within_runs(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` before each element, restarting at every run start."""
    before = np.cumsum(values) - values  # running sum across all runs
    run_first = np.repeat(starts, np.diff(np.append(starts, values.size)))
    return before - before[run_first]


# ---------------------------------------------------------------- levels

class Level(NamedTuple):
    """The nodes of one depth, ordered by parent: ``nodes`` (ids, or a slice of
    consecutive ids), their ``parent`` (non-decreasing) and ``starts``, where
    each run of siblings begins."""

    nodes: np.ndarray | slice
    parent: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, nodes: np.ndarray | slice, parent: np.ndarray) -> Level:
        """A level from nodes whose parents are already non-decreasing."""
        return cls(nodes, parent, run_starts(parent))


def group_by_depth(depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indexes sorted by ``depth`` (stable) and where each depth begins:
    ``order[bounds[d]:bounds[d + 1]]`` have depth ``d`` (from 0 to the maximum)."""
    order = np.argsort(_small(depth), kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=-1)) + 2))
    return order, bounds


def _small(keys: np.ndarray) -> np.ndarray:
    """``keys`` in the narrowest integer type that holds them: NumPy's stable sort of 8/16-bit
    integers is a radix sort, several times faster than the merge sort of int64 (same order)."""
    if keys.size and keys.dtype.kind in "iu":
        lo, hi = int(keys.min()), int(keys.max())
        for kind in (np.uint8, np.int16):
            info = np.iinfo(kind)
            if info.min <= lo and hi <= info.max:
                return keys.astype(kind)
    return keys


def tree_levels(parent: np.ndarray, depth: np.ndarray) -> list[Level]:
    """Every node of the tree grouped into levels, roots first.

    Nodes of a depth are ordered by parent with a stable sort, skipped when
    they already are (pre-order ids are), so ties keep id order.
    """
    order, bounds = group_by_depth(depth)
    out = []
    for d in range(len(bounds) - 1):
        nodes = order[bounds[d]:bounds[d + 1]]
        par = parent[nodes]
        if par.size > 1 and (par[1:] < par[:-1]).any():
            by_parent = np.argsort(par, kind="stable")
            nodes, par = nodes[by_parent], par[by_parent]
        out.append(Level.of(nodes, par))
    return out


def add_subtree_sums(out: np.ndarray, levels: list[Level]) -> np.ndarray:
    """Add every node's value (row, for 2-D ``out``) to all its ancestors, in place; returns ``out``.

    Children are summed before parents, one ``reduceat`` per level (exact in
    the dtype of ``out``). Nodes outside ``levels`` pass nothing up.
    """
    fast = _kernels(out.shape[0])
    if fast is not None and fast.add_subtree_sums(out, levels) is not None:
        return out
    for lv in reversed(levels[1:]):
        if lv.parent.size:
            out[lv.parent[lv.starts]] += np.add.reduceat(out[lv.nodes], lv.starts, axis=0)
    return out


def subtree_sums(values: np.ndarray, levels: list[Level]) -> np.ndarray:
    """Sum of ``values`` over every node's subtree (int64; ``values`` n or n x k)."""
    return add_subtree_sums(np.array(values, dtype=np.int64, copy=True), levels)


def place_children(extent: np.ndarray, levels: list[Level], step: int,
                   parent_position: np.ndarray | None = None) -> np.ndarray:
    """Positions handed out top-down: roots side by side from 0, then each
    child at its parent's position + ``step`` + the extents of its earlier siblings.

    With ``extent`` = subtree sizes and ``step`` 1 this is the pre-order
    number of every node; with widths and step 0, a flame graph's left edges.
    ``parent_position``, if given, receives every non-root's parent's position (-1 for roots).
    """
    pos = np.zeros(extent.size, dtype=np.int64)
    if not levels:
        return pos
    roots = levels[0].nodes
    pos[roots] = np.cumsum(extent[roots]) - extent[roots]
    if parent_position is not None:
        parent_position[roots] = -1
    fast = _kernels(extent.size)
    if fast is not None and fast.place_children(extent, levels, step, pos, parent_position):
        return pos
    for lv in levels[1:]:
        above = pos[lv.parent]
        if parent_position is not None:
            parent_position[lv.nodes] = above
        pos[lv.nodes] = above + step + exclusive_within_runs(extent[lv.nodes], lv.starts)
    return pos


def euler(levels: list[Level], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pre-order entry position and the position of the last descendant of every node."""
    size = subtree_sums(np.ones(n, dtype=np.int64), levels)
    tin = place_children(size, levels, 1)
    return tin, tin + size - 1


def outermost(group: np.ndarray, node: np.ndarray, tin: np.ndarray, tout: np.ndarray) -> np.ndarray:
    """Occurrences (``group``, ``node``), sorted by group then by the node's
    pre-order entry ``tin`` (``tin``/``tout``: every node's Euler interval):
    True where no other occurrence of the same group lies above, i.e. where
    the node has no ancestor holding the group. Recursion then counts once
    per stack.

    One pass: an occurrence is outermost when it enters after every earlier
    occurrence of its group has closed (a running maximum of exits).
    """
    top = np.ones(group.size, dtype=bool)
    if group.size < 2:
        return top
    # One int64 key per occurrence, group above position, so groups never
    # interleave; positions fit in 32 bits (node ids are int32 in the model).
    base = group.astype(np.int64) << np.int64(32)
    reach = np.maximum.accumulate(base | tout[node])
    top[1:] = (base[1:] | tin[node[1:]]) > reach[:-1]
    return top


def fill_down(values: np.ndarray, parent: np.ndarray, levels: list[Level]) -> np.ndarray:
    """``values`` where a node's value is negative replaced by its nearest
    ancestor's non-negative value (-1 when none): a copy."""
    out = values.copy()
    for lv in levels[1:]:
        nodes = _ids(lv.nodes)
        missing = nodes[out[nodes] < 0]
        out[missing] = out[parent[missing]]
    return out


def _ids(nodes: np.ndarray | slice) -> np.ndarray:
    """Node ids of a level as an array."""
    return np.arange(nodes.start, nodes.stop, dtype=np.int64) if isinstance(nodes, slice) else nodes


def any_above(flag: np.ndarray, parent: np.ndarray, levels: list[Level]) -> np.ndarray:
    """Per node: ``flag`` holds on it or on an ancestor."""
    out = flag.astype(bool)  # a copy
    for lv in levels[1:]:
        out[lv.nodes] |= out[lv.parent]
    return out


def path_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over every node and its ancestors (int64), for any
    parent-pointer forest (no levels needed).

    Pointer jumping: each step adds the sum of the path segment above and
    doubles the jump, so log2(depth) whole-array steps rather than one per level
    (the compiled twin: one walk).
    """
    fast = _kernels(len(parent))
    got = fast.path_sums(parent, values) if fast is not None else None
    if got is not None:
        return got
    acc = np.array(values, dtype=np.int64, copy=True)
    up = parent.astype(np.int64)
    live = np.flatnonzero(up >= 0)
    while live.size:
        hop = up[live]
        acc[live] += acc[hop]  # fancy indexing reads acc[hop] as it was before this step
        up[live] = up[hop]
        live = live[up[live] >= 0]
    return acc


def preorder_path_sums(values: np.ndarray, size: np.ndarray) -> np.ndarray:
    """:func:`path_sums` when node ids are a pre-order (``size``: subtree sizes,
    so node ``c``'s subtree is the id range ``[c, c + size[c])``): each value is
    added over its range by two marks and one running sum, no tree walk."""
    values = np.asarray(values, dtype=np.int64)
    nodes = np.flatnonzero(values)  # usually few (inline frames): marks only there
    marks = np.zeros(values.size + 1, dtype=np.int64)
    np.add.at(marks, nodes, values[nodes])
    np.add.at(marks, nodes + size[nodes], -values[nodes])
    return np.cumsum(marks)[:-1]


# ---------------------------------------------------------------- interning

def sorted_runs(key: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Sort ``key`` stably and mark where each run of equal keys begins.

    Returns (order, or None when ``key`` was already sorted; the sorted keys;
    a bool per sorted key, True where a run begins). The sortedness test is
    one pass, far cheaper than a sort: level-wise interning often meets keys
    already in order.
    """
    fresh = np.empty(key.size, dtype=bool)
    if not key.size:
        return None, key, fresh
    fresh[0] = True
    np.greater(key[1:], key[:-1], out=fresh[1:])
    if key.size > 1 and not (fresh[1:] | (key[1:] == key[:-1])).all():
        order = np.argsort(key, kind="stable")
        key = key[order]
        np.greater(key[1:], key[:-1], out=fresh[1:])
        return order, key, fresh
    return None, key, fresh


def intern_level(parent: np.ndarray, label: np.ndarray, n_labels: int,
                 first_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node ids for (parent node or -1, label in [0, n_labels)) pairs: equal
    pairs share one id, new ids are ``first_id, first_id + 1, ...`` in
    (parent, label) order. Returns (id of each pair, parent and label of each new id)."""
    fast = _kernels(parent.size)
    got = fast.intern_level(parent, label, n_labels, first_id) if fast is not None else None
    if got is not None:
        return got
    width = np.int64(n_labels)
    key = (parent.astype(np.int64) + 1) * width + label
    order, key, fresh = sorted_runs(key)
    ids = np.cumsum(fresh, dtype=np.int64) + (first_id - 1)
    if order is not None:  # back from sorted order to the order of the pairs
        unsorted = np.empty_like(ids)
        unsorted[order] = ids
        ids = unsorted
    uniq = key[fresh]
    return ids, uniq // width - 1, uniq % width


def intern_paths(up: np.ndarray, label: np.ndarray, order: np.ndarray, bounds: np.ndarray,
                 n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Intern paths given item by item: item ``i`` has ``label[i]`` and hangs
    under item ``up[i]`` (-1: a root). ``order[bounds[d]:bounds[d+1]]`` are the
    items of depth ``d`` (their ``up`` items at depth d - 1).

    Items whose paths from the root have equal labels get one node. Returns
    (node of every item, -1 for items in no level; parent and label of every
    node; where each depth's nodes begin, with the end last). Node ids go level
    by level, ordered by parent within one, so :meth:`Level.of` applies to every
    ``slice(start[d], start[d + 1])``. (The compiled twin: counting sorts, no comparison sort.)
    """
    fast = _kernels(order.size)
    got = fast.intern_paths(up, label, order, bounds, n_labels) if fast is not None else None
    if got is not None:
        return got
    node_of = np.full(up.size + 1, -1, dtype=np.int64)  # index -1 reads the trailing -1
    parents, labels, starts = [], [], [0]
    for d in range(len(bounds) - 1):
        items = order[bounds[d]:bounds[d + 1]]
        ids, par, lab = intern_level(node_of[up[items]], label[items], n_labels, starts[-1])
        node_of[items] = ids
        parents.append(par)
        labels.append(lab)
        starts.append(starts[-1] + par.size)
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64))
    return node_of[:-1], cat(parents), cat(labels), starts
