"""The flame graph grouped by one label key (``--tagroot KEY``) from the profile's name tree.

``filters.apply(p, tagroot=KEY)`` gives every sample a pseudo-frame named
after its value of ``KEY`` at the root of its stack (:func:`labels.label_frames`):
new callsites for every (stack, value) pair, then a new name tree of them.
Its complete flame graph (what ``polyprof serve`` holds for the labels
panel's "group by") is the profile's own name tree (:class:`FlameShape`, cached
by the web view) weighed once per value, each under a node of that value's
name, the values in name order. :func:`grouped_flame` builds that graph in
one compiled pass over the samples sorted by value: each value costs the
nodes on its samples' paths to the root, not a walk over the callsites.

Same graph as ``flame_tree(filters.apply(p, o), o, min_fraction=0, max_nodes=0)``
(tests compare every column); None where it does not apply, and the caller
takes that route.
"""

from __future__ import annotations

import dataclasses

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
)
from polyprof.analysis.graph import node_map
from polyprof.analysis.labels import label_frames
from polyprof.analysis.nodes import NodeMap
from polyprof.analysis.options import Options
from polyprof.analysis.stacks import CompiledTwin
from polyprof.model.profile import Profile, SampleTable

__all__ = ["MAX_GROUPS", "applies", "grouped_flame"]

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
    if not applies(o) or shape is None or shape.drops or not shape.fits(p, o):
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
    sample_group = of_set[s.labelset]
    order = np.argsort(sample_group.astype(np.int16) if len(groups) < 2**15 else sample_group, kind="stable")
    bounds = np.zeros(len(groups) + 1, np.int64)
    np.cumsum(np.bincount(sample_group, minlength=len(groups)), out=bounds[1:])
    node = np.zeros(len(s), np.int64)
    node[has] = shape.at[s.stack[has]]
    lookup = np.array([gid[x] for x in shape.names] + [gid[ROOT_NAME]], dtype=np.int64)
    mapped = lookup[shape.name].astype(np.int32)
    group_ids = np.array([gid[x] for x in groups], dtype=np.int64)
    cols, used_names = fast.grouped_graph(shape.parent, mapped, node[order], values[order], bounds, group_ids,
                                          gid[ROOT_NAME], len(table))
    # each sample's node name in the graph (the group's own node: samples at the tree's root)
    sample_name = np.where(node > 0, mapped[node], group_ids[sample_group])
    del node, order, sample_group
    ids, parent, depth, size, selfs, total, start = cols
    flame = FlameTree(names=NameColumn(table, ids), name_ids=ids, name_table=table, subtree_size=size,
                      parent=parent, depth=depth, self=selfs, total=total, start=start, width=total,
                      sample_type=vt, dropped=0, min_width=1)
    flame.active_filters = tuple(filters.legend(o))
    # the leaf hint needs the graph only when one name holds most self weight (by the samples)
    by_name = np.bincount(sample_name, weights=values, minlength=len(table))
    top = int(np.argmax(by_name)) if by_name.size else 0
    if total[0] > 0 and by_name[top] / int(total[0]) >= 0.5:
        mine = np.flatnonzero(ids == top)  # the nodes of that name: all the hint reads
        mine = mine[mine > 0]
        flame.hint = _leaf_hint(table, ids[mine].astype(np.int64), selfs[mine], int(total[0]))
    wanted = {table[k] for k in np.flatnonzero(used_names).tolist()}
    labels = wanted & set(frame_names)
    flame.identity = {**_identity(wanted - labels, [(p, shape.nodes)]), **_identity(labels, [framed])}
    return flame


def _frame_names(p: Profile, o: Options, used: np.ndarray) -> tuple[tuple[Profile, NodeMap], list[str]]:
    """The name of the label frame :func:`label_frames` gives each labelset of ``used``, as a
    flame node at ``o``'s granularity: label_frames itself on a profile of one sample without a
    stack per labelset and no other tables; and that profile with its node map."""
    n = used.size
    tiny = dataclasses.replace(
        p, strings=[""], functions=type(p.functions)(), mappings=type(p.mappings)(),
        locations=type(p.locations)(), lines=type(p.lines)(), callsites=type(p.callsites)(),
        samples=SampleTable(stack=np.full(n, -1, np.int32), values=np.zeros((n, len(p.sample_types)), np.int64),
                            labelset=used.astype(np.int32)))
    framed, _ = label_frames(tiny, o.tagroot, None, o.unit)
    nodes = node_map(framed, o.granularity, inlines=not o.noinlines)
    loc = framed.callsites.location[framed.samples.stack].astype(np.int64)
    entry = nodes.loc_nodes[nodes.loc_start[loc]]
    return (framed, nodes), [nodes.names[k] for k in entry.tolist()]

