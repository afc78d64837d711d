"""The flame graph grouped by one label key (``--tagroot KEY``) from the profile's name tree.

``filters.apply(p, tagroot=KEY)`` gives every sample a pseudo-frame named
after its value of ``KEY`` at the root of its stack (:func:`labels.label_frames`):
new callsites for every (stack, value) pair, then a new name tree of them.
Its complete flame graph (what ``polyprof serve`` holds for the labels
panel's "group by") is the profile's own name tree (:class:`FlameShape`, cached
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
"""

from __future__ import annotations

import dataclasses
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
from polyprof.analysis.graph import node_map, sum_by
from polyprof.analysis.labels import label_frames
from polyprof.analysis.nodes import NodeMap
from polyprof.analysis.options import Options
from polyprof.analysis.stacks import CompiledTwin
from polyprof.model.profile import Profile, SampleTable

__all__ = ["MAX_GROUPS", "applies", "distinct_samples", "grouped_flame", "load_kernels", "stackless"]

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
    made = _graph(fast, shape, lookup, node, values, sample_group, group_ids, gid[ROOT_NAME], len(table))
    cols, used_names = made
    # each sample's node name in the graph (the group's own node: samples at the tree's root)
    sample_name = np.where(node > 0, lookup[shape.name[node]], group_ids[sample_group])
    del node, sample_group
    # the leaf hint needs the graph only when one name holds most self weight (by the samples)
    by_name = np.bincount(sample_name, weights=values, minlength=len(table))
    top = int(np.argmax(by_name)) if by_name.size else 0
    hinted = bool(cols[5][0] > 0 and by_name[top] / int(cols[5][0]) >= 0.5)
    del sample_name, by_name
    wanted = {table[k] for k in np.flatnonzero(used_names).tolist()}
    table, top = _held_names(table, used_names, cols[0], top)
    ids, parent, depth, size, selfs, total, start = cols
    flame = FlameTree(names=NameColumn(table, ids), name_ids=ids, name_table=table, subtree_size=size,
                      parent=parent, depth=depth, self=selfs, total=total, start=start, width=total,
                      sample_type=vt, dropped=0, min_width=1)
    flame.active_filters = tuple(filters.legend(o))
    if hinted:
        mine = np.flatnonzero(ids == top)  # the nodes of that name: all the hint reads
        mine = mine[mine > 0]
        flame.hint = _leaf_hint(table, ids[mine].astype(np.int64), selfs[mine], int(total[0]))
    labels = wanted & set(frame_names)
    flame.identity = {**_identity(wanted - labels, [(p, shape.nodes)]), **_identity(labels, [framed])}
    return flame


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
