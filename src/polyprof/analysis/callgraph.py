"""``graph``: the call graph ``go tool pprof -dot/-svg/-png`` draws, as data.

The node and edge rules are pprof's visual mode (``Report.newTrimmedGraph``
with the DOT output): the node fraction first; nodes are then ordered by an
*entropy score* that favours entry, leaf and branching nodes over
pass-through ones; ``nodecount`` counts a node's label boxes ("nodelets") as
nodes too; the edge fraction drops light calls; a residual call (one that
jumps over dropped nodes) is removed when another path joins the same two
nodes. Nodes carry their label tags: per label set (string labels joined as
pprof joins them) and per ``bytes`` value, with the flat and cum weight of
the samples carrying them; pprof draws up to four per node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters, tags
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import NodeMap, callsite_weights, node_map, node_weights, pairs
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import ProfileSummary, Result
from polyprof.analysis.trim import Edges, call_edges, report_column
from polyprof.model.profile import Profile, ValueType
from polyprof.model.units import scaled_label

__all__ = ["GraphNode", "GraphResult", "MAX_NODELETS", "Tag", "call_graph"]

#: pprof draws at most this many label boxes per node (and per label set's numbers).
MAX_NODELETS = 4


@dataclass
class Tag:
    """A label box of a node: a label set (or a ``bytes`` value) and its weights."""

    name: str
    flat: int = 0
    cum: int = 0
    value: int = 0      # numeric tags: the number, in ``unit``
    unit: str = ""


@dataclass
class GraphNode:
    name: str           # pprof's printable name
    function: str       # the node's fields, for the label pprof draws
    file: str
    line: int
    address: int
    objfile: str
    flat: int
    cum: int
    label_tags: list[Tag] = field(default_factory=list)
    numeric_tags: dict[str, list[Tag]] = field(default_factory=dict)  # label set -> bytes tags


@dataclass
class GraphEdge:
    caller: int  # index into GraphResult.nodes
    callee: int
    weight: int
    inline: bool
    residual: bool


@dataclass(repr=False)
class GraphResult(Result):
    """The call graph. Tables: ``nodes`` (one row per node, with its tags) and
    ``edges`` (caller and callee as node positions)."""

    ROW: ClassVar[type] = GraphNode
    TABLES: ClassVar[tuple[str, ...]] = ("nodes", "edges")

    sample_type: ValueType
    total: int
    nodes: list[GraphNode]        # in pprof's order (node ids are positions + 1)
    edges: list[GraphEdge]        # in pprof's order (heaviest first)
    node_count: int               # nodes left after the node fraction
    dropped_nodes: int
    dropped_edges: int
    node_cutoff: int
    edge_cutoff: int
    unit: str = "minimum"
    summary: ProfileSummary | None = None  # the profile's header facts (None: no header)
    active_filters: list[str] = field(default_factory=list)

    @property
    def shown_flat(self) -> int:
        return sum(n.flat for n in self.nodes)

    def _row_objects(self) -> list[GraphNode]:
        return self.nodes

    def _columns(self, table: str) -> dict[str, Any]:
        if table == "nodes":
            return super()._columns(table)
        return {f: [getattr(e, f) for e in self.edges] for f in GraphEdge.__dataclass_fields__}

    def _summary(self) -> str:
        return f"{self.sample_type}, total={self.total}, {len(self.nodes)} nodes, {len(self.edges)} edges"


def call_graph(src: Profile | FilterResult, options: Options | None = None, **overrides: Any) -> GraphResult:
    """The call graph of ``src`` (filters of ``options`` applied unless already; keywords
    override its fields), trimmed as ``go tool pprof -dot`` trims it (``nodecount``
    defaults to 80)."""
    o = resolve(options, **overrides)
    fr = filters.prepare(src, o)
    p = fr.profile
    col = report_column(fr, o)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines, names=o.symbolize != "none")
    w = callsite_weights(p, col.values)
    flat, cum = node_weights(p, nodes, w)
    live = (flat != 0) | (cum != 0)
    graph_total = int(flat[live].sum())
    node_cut = abs(int(float(graph_total) * o.nodefraction))
    edge_cut = abs(int(float(graph_total) * o.edgefraction))
    kept = live & (np.abs(cum) >= node_cut) if node_cut > 0 else live
    members = np.flatnonzero(kept).tolist()
    tagger = _Tagger(p, nodes, col.values, w)
    order = _entropy_order(nodes, flat, cum, members, _edges_over(p, nodes, w, members))
    count = o.count_for("graph")
    if count > 0:
        shown = _select(order, count, lambda n: tagger.count(n, node_cut))
        if len(shown) != len(order):
            order = _entropy_order(nodes, flat, cum, shown, _edges_over(p, nodes, w, shown))
    e = _edges_over(p, nodes, w, order)
    heavy = np.abs(e.weight) >= edge_cut
    dropped_edges = int((~heavy).sum())
    e = _without_redundant(e.select(heavy), order, nodes.names)
    if count > 0 and len(order) == len(members):
        dropped_edges = 0  # pprof trimmed these edges before its last count and never rebuilt the graph
    position = {n: i for i, n in enumerate(order)}
    out_nodes = [_node(nodes, n, flat, cum, tagger, node_cut) for n in order]
    edges = sorted((GraphEdge(position[a], position[b], wt, inl, res) for a, b, wt, inl, res in
                    zip(e.caller.tolist(), e.callee.tolist(), e.weight.tolist(), e.inline.tolist(),
                        e.residual.tolist())),
                   key=lambda x: (-abs(x.weight), nodes.names[order[x.caller]], nodes.names[order[x.callee]]))
    return GraphResult(col.sample_type, col.total, out_nodes, edges, len(members), int(live.sum()) - len(members),
                       dropped_edges, col.cutoff(o.nodefraction), col.cutoff(o.edgefraction), o.unit,
                       ProfileSummary.of(p), fr.active)


def _edges_over(p: Profile, nodes: NodeMap, w, members: list[int]) -> Edges:  # noqa: ANN001
    kept = np.zeros(len(nodes), dtype=bool)
    kept[members] = True
    return call_edges(p, nodes, w, kept)


def _entropy_order(nodes: NodeMap, flat: np.ndarray, cum: np.ndarray, members: list[int], e: Edges) -> list[int]:
    """pprof's EntropyOrder: |score| desc, name, |flat| desc, identity."""
    ins: dict[int, list[int]] = {}
    outs: dict[int, list[int]] = {}
    for a, b, wt in zip(e.caller.tolist(), e.callee.tolist(), e.weight.tolist()):
        outs.setdefault(a, []).append(wt)
        ins.setdefault(b, []).append(wt)
    score = {}
    for n in members:
        f, c = int(flat[n]), int(cum[n])
        s = 1.0 if n not in ins else _edge_entropy(ins[n], 0)
        s += 1.0 if n not in outs else _edge_entropy(outs[n], f)
        score[n] = _wrap64(_go_int64(s * float(c)) + f)
    names, infos = nodes.names, nodes.infos
    return sorted(members, key=lambda n: (-_abs64(score[n]), names[n], -abs(int(flat[n])), infos[n]))


def _edge_entropy(weights: list[int], own: int) -> float:
    total = own + sum(abs(x) for x in weights if x > 0)
    if total == 0:
        return 0.0
    parts = [abs(x) / total for x in weights] + ([abs(own) / total] if own > 0 else [])
    return sum(-f * math.log2(f) if f > 0 else float("nan") for f in parts)  # Go: -0 * log2(0) is NaN


def _go_int64(x: float) -> int:
    """Go's ``int64(x)`` as pprof's amd64 build computes it: NaN (an edge of weight 0), the
    infinities and values out of range give math.MinInt64."""
    if math.isnan(x) or not -(2.0**63) <= x < 2.0**63:
        return -(1 << 63)
    return int(x)


def _wrap64(v: int) -> int:
    """``v`` wrapped to a Go int64."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _abs64(v: int) -> int:
    """pprof's abs64: the negation wraps, so abs64(math.MinInt64) stays negative."""
    return _wrap64(-v) if v < 0 else v


def _select(order: list[int], count: int, tags_of) -> list[int]:  # noqa: ANN001
    """pprof's selectTopNodes in visual mode: a node's label boxes count as nodes."""
    seen = 0
    for i, n in enumerate(order):
        seen += min(tags_of(n), MAX_NODELETS) + 1
        if seen >= count:
            return order[:i + 1]
    return order[:count]


def _without_redundant(e: Edges, order: list[int], names: list[str]) -> Edges:
    """pprof's RemoveRedundantEdges: drop a residual edge when its callee is still
    reachable from its caller through other edges (lightest first, per callee)."""
    alive = np.ones(len(e), dtype=bool)
    into: dict[int, list[int]] = {}
    for i, b in enumerate(e.callee.tolist()):
        into.setdefault(b, []).append(i)
    for n in reversed(order):
        incoming = sorted(into.get(n, []), key=lambda i: (-abs(int(e.weight[i])), names[int(e.caller[i])]))
        for i in reversed(incoming):
            if not e.residual[i]:
                break
            if alive[i] and _reachable(e, alive, into, int(e.caller[i]), n, skip=i):
                alive[i] = False
    return e.select(alive)


def _reachable(e: Edges, alive: np.ndarray, into: dict[int, list[int]], src: int, dst: int, skip: int) -> bool:
    seen, queue = {dst}, [dst]
    while queue:
        n = queue.pop(0)
        for i in into.get(n, []):
            if i == skip or not alive[i]:
                continue
            caller = int(e.caller[i])
            if caller == src:
                return True
            if caller not in seen:
                seen.add(caller)
                queue.append(caller)
    return False


def _node(nodes: NodeMap, n: int, flat: np.ndarray, cum: np.ndarray, tagger: _Tagger, cut: int) -> GraphNode:
    info = nodes.infos[n]
    label_tags, numeric = tagger.tags(n, cut)
    return GraphNode(nodes.names[n], info.name, info.file, info.lineno, info.address, info.objfile,
                     int(flat[n]), int(cum[n]), label_tags, numeric)


class _Tagger:
    """Label tags of nodes (computed for the nodes that need them only)."""

    def __init__(self, p: Profile, nodes: NodeMap, values: np.ndarray, w) -> None:  # noqa: ANN001
        self.p, self.nodes, self.values, self.w = p, nodes, values, w
        self._cache: dict[int, tuple[dict, dict]] = {}
        s = p.samples
        self.labelled = any(len(ls) for ls in p.labelsets)
        if not self.labelled:
            return
        units = tags.num_label_units(p)
        self.set_name = [_join(ls) for ls in p.labelsets]
        self.set_bytes = [[(lab.num or 0, units.get("bytes", "bytes")) for lab in ls
                           if lab.key == "bytes" and lab.str is None] for ls in p.labelsets]
        tin, _ = p.callsites.euler()
        self.sample_pos = np.where(s.stack >= 0, tin[np.maximum(s.stack, 0)], -1)
        leaf_loc = p.callsites.location[np.maximum(s.stack, 0)]
        self.sample_leaf = np.where(s.stack >= 0, nodes.loc_nodes[nodes.loc_start[leaf_loc]], -1)
        live = np.flatnonzero(w.nonzero > 0)
        pc, pn = pairs(nodes, live, p.callsites.location)
        self.occurrences = (pc, pn)

    def _weights(self, n: int) -> tuple[dict, dict]:
        if n in self._cache:
            return self._cache[n]
        tin, tout = self.p.callsites.euler()
        pc, pn = self.occurrences
        sites = np.unique(pc[pn == n])
        by_entry = np.argsort(tin[sites], kind="stable")
        lo, reach = tin[sites][by_entry], np.maximum.accumulate(tout[sites][by_entry])
        # Samples whose leaf lies in the subtree of an occurrence (each counted once).
        at = np.searchsorted(lo, self.sample_pos, side="right") - 1
        on = (at >= 0) & (self.sample_pos >= 0)
        on[on] = self.sample_pos[on] <= reach[at[on]]
        is_leaf = self.sample_leaf == n
        cum_by: dict[str, list] = {}
        num_by: dict[str, dict[str, Tag]] = {}
        sets = self.p.samples.labelset
        for kind, mask in (("cum", on), ("flat", is_leaf)):
            per_set = np.zeros(len(self.p.labelsets), dtype=np.int64)
            np.add.at(per_set, sets[mask], self.values[mask])
            for ls in np.flatnonzero(per_set).tolist():
                wt = int(per_set[ls])
                name = self.set_name[ls]
                if name:
                    tag = cum_by.setdefault(name, [Tag(name)])[0]
                    setattr(tag, kind, getattr(tag, kind) + wt)
                for value, unit in self.set_bytes[ls]:
                    label = scaled_label(value, unit, "minimum")
                    tag = num_by.setdefault(name, {}).setdefault(label, Tag(label, value=value, unit=unit))
                    setattr(tag, kind, getattr(tag, kind) + wt)
        result = ({k: v[0] for k, v in cum_by.items()}, num_by)
        self._cache[n] = result
        return result

    def tags(self, n: int, cut: int) -> tuple[list[Tag], dict[str, list[Tag]]]:
        """Label tags and numeric tags of node ``n`` with |flat| or |cum| >= ``cut``."""
        if not self.labelled:
            return [], {}
        by_name, numeric = self._weights(n)
        keep = lambda t: abs(t.flat) >= cut or abs(t.cum) >= cut  # noqa: E731
        return ([t for t in by_name.values() if keep(t)],
                {k: [t for t in v.values() if keep(t)] for k, v in numeric.items()})

    def count(self, n: int, cut: int) -> int:
        """pprof's countTags: the tags with a flat weight."""
        label_tags, numeric = self.tags(n, cut)
        return sum(1 for t in label_tags if t.flat) + sum(1 for ts in numeric.values() for t in ts if t.flat)


def _join(labels: tuple) -> str:  # noqa: ANN001
    """pprof's joinLabels: the string labels as sorted ``key:value`` lines."""
    return "\\n".join(sorted(f"{lab.key}:{lab.str}" for lab in labels if lab.str is not None))
