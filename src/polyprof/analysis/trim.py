"""The report graph ``go tool pprof`` prints: nodes and edges after its trimming rules.

pprof builds the full graph, then (``Report.newTrimmedGraph``):

1. drops nodes whose |cum| is below ``nodefraction`` x the graph's flat sum
   ("Dropped N nodes (cum <= X)"); calls through dropped nodes become
   *residual* edges that jump over them;
2. sorts the rest (flat, name, cum; or cum, name, flat with ``-cum``; an
   entropy score for drawings) and keeps the first ``nodecount``;
3. drops edges whose |weight| is below ``edgefraction`` x that sum.

Flat and cum of a kept node never change when other nodes are dropped, so
they are computed once; only the edges are computed over the final node set.
An edge's weight is the weight of the samples making that call, each sample
counted once; it is inline when every such call is inlined, residual when
one jumps over dropped nodes. With ``mean`` the printed flat and cum are
divided by the sample counts (sample type 0), as pprof's ``-mean``; the
trimming still uses the undivided values, as pprof does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import NodeMap, Weights, calls, callsite_weights, node_weights, ranked
from polyprof.analysis.options import Options
from polyprof.model.merge import BASE_LABEL, compact
from polyprof.model.profile import Profile, ValueType
from polyprof.model.tree import outermost

__all__ = ["Edges", "ReportColumn", "ReportGraph", "call_edges", "report_column", "report_graph"]


@dataclass
class ReportColumn:
    """The values a report shows and the 100% of its percentages, as pprof's report options."""

    values: np.ndarray              # per sample of the filtered profile
    divisor: np.ndarray | None      # per sample, with ``mean``: the sample counts
    sample_type: ValueType          # "mean_" + type with ``mean``
    total: int

    def cutoff(self, fraction: float) -> int:
        """What pprof prints in "Dropped N nodes (cum <= X)": the fraction of the report total."""
        return abs(int(float(self.total) * fraction))


def report_column(fr: FilterResult, o: Options) -> ReportColumn:
    """The report's values and total for ``o`` (sample index, mean, relative percentages).

    The total is pprof's ``computeTotal``: the sum of absolute values before
    filtering (after, with ``relative_percentages``), only over the base
    samples when a ``-diff_base`` is present, divided by the summed counts
    with ``mean``.
    """
    index, values, vt, _ = fr.column(o.sample_index)
    p = fr.profile
    divisor = p.samples.values[:, 0] if o.mean and len(p.sample_types) else None
    if o.mean:
        vt = ValueType("mean_" + vt.type, vt.unit)
    src = p if o.relative_percentages else fr.original
    return ReportColumn(values, divisor, vt, _total(src, index, o.mean))


def _total(p: Profile, index: int, mean: bool) -> int:
    if not len(p.sample_types) or not len(p.samples):
        return 0
    if (p.samples.values[:, index] < 0).any():
        # pprof sums equal samples before it takes absolute values: a sample and its
        # negated base counterpart (-base) cancel out
        p = compact(p)
    v = np.abs(p.samples.values[:, index], dtype=np.int64)
    d = p.samples.values[:, 0] if mean else np.zeros(0, dtype=np.int64)
    base = _base_samples(p)
    if base is not None and v[base].sum() > 0:
        v = v[base]
        d = d[base] if mean else d
    total, div = int(v.sum()), int(d.sum())
    return int(total / div) if div else total


def _base_samples(p: Profile) -> np.ndarray | None:
    """Mask of the samples labelled as a diff base, or None when there are none.

    Labels still deferred by a reader are not decoded for this (it would cost
    label-heavy profiles a third of their time); ``-diff_base`` profiles made
    by polyprof have theirs decoded."""
    if p.is_deferred("labelsets"):
        return None
    marked = [any(lab.key == BASE_LABEL for lab in labels) for labels in p.labelsets]
    if not any(marked):
        return None
    return np.asarray(marked, dtype=bool)[p.samples.labelset]


@dataclass
class Edges:
    """Edges between report nodes (arrays of node ids and weights, one row per edge)."""

    caller: np.ndarray
    callee: np.ndarray
    inline: np.ndarray
    weight: np.ndarray
    residual: np.ndarray

    @classmethod
    def empty(cls) -> Edges:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z.astype(bool), z, z.astype(bool))

    def __len__(self) -> int:
        return len(self.caller)

    def select(self, mask: np.ndarray) -> Edges:
        return Edges(self.caller[mask], self.callee[mask], self.inline[mask], self.weight[mask],
                     self.residual[mask])


@dataclass
class ReportGraph:
    """The trimmed graph of one report; node ids index ``nodes``."""

    nodes: NodeMap
    flat: np.ndarray            # per node, as printed (divided with mean)
    cum: np.ndarray
    shown: list[int]            # kept nodes in report order
    node_count: int             # nodes left after the node fraction (pprof's origCount)
    dropped_nodes: int          # nodes under the node fraction
    node_cutoff: int            # pprof's cutoffs, in the sample type's unit
    edge_cutoff: int
    edges: Edges = field(default_factory=Edges.empty)
    dropped_edges: int = 0


def report_graph(p: Profile, nodes: NodeMap, values: np.ndarray, *, nodecount: int, nodefraction: float,
                 edgefraction: float, by_cum: bool = False, divisor: np.ndarray | None = None,
                 want_edges: bool = True, callees_of: np.ndarray | None = None) -> ReportGraph:
    """pprof's trimmed graph of ``values`` (one per sample) over ``nodes``.

    ``want_edges=False`` skips the edges; ``callees_of`` (bool per node) limits
    them to edges into those nodes (``top`` only needs the inline marks).
    """
    w = callsite_weights(p, values)
    flat, cum = node_weights(p, nodes, w)
    live = (flat != 0) | (cum != 0)
    graph_total = int(flat[live].sum())
    node_cut = abs(int(float(graph_total) * nodefraction))
    edge_cut = abs(int(float(graph_total) * edgefraction))
    kept = live
    if node_cut > 0:
        kept = live & (np.abs(cum) >= node_cut)
    order = ranked(nodes, flat, cum, kept, by_cum)
    shown = order[:nodecount] if nodecount > 0 else order
    shown_flat, shown_cum = flat, cum
    if divisor is not None:
        dw = callsite_weights(p, divisor)
        dflat, dcum = node_weights(p, nodes, dw)
        shown_flat, shown_cum = _divide(flat, dflat), _divide(cum, dcum)
    g = ReportGraph(nodes, shown_flat, shown_cum, shown, len(order), int(live.sum()) - len(order),
                    node_cut, edge_cut)
    if want_edges:
        final = np.zeros(len(nodes), dtype=bool)
        final[shown] = True
        e = call_edges(p, nodes, w, final, callees_of)
        heavy = np.abs(e.weight) >= edge_cut
        g.edges, g.dropped_edges = e.select(heavy), int((~heavy).sum())
    return g


def _divide(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Go's int64 division (truncating toward zero) where ``d`` is not 0, else ``a``."""
    safe = np.where(d == 0, 1, d)
    q = np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(safe)
    return np.where(d == 0, a, q)


def call_edges(p: Profile, nodes: NodeMap, w: Weights, kept: np.ndarray,
               callees: np.ndarray | None = None) -> Edges:
    """Every edge between ``kept`` nodes (into ``callees`` only, when given).

    The calls are :func:`polyprof.analysis.graph.calls`; an edge's weight is
    the weight of the samples making that call, each counted once.
    """
    pc, caller, callee, inline, residual = calls(p, nodes, w, kept, callees)
    if not pc.size:
        return Edges.empty()
    key = caller * np.int64(len(nodes) + 1) + callee
    uniq, pair = np.unique(key, return_inverse=True)
    pair = pair.reshape(-1)
    plain = np.bincount(pair, weights=~inline, minlength=uniq.size) > 0
    weight, jumps = _once_per_stack(p, pair, pc, w.subtree, residual, uniq.size)
    return Edges(uniq // (len(nodes) + 1), uniq % (len(nodes) + 1), ~plain, weight, jumps)


def _once_per_stack(p: Profile, group: np.ndarray, pc: np.ndarray, subtree: np.ndarray, residual: np.ndarray,
                    size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: sum of ``subtree`` over occurrences with no occurrence of the group above
    them, and whether any such occurrence is residual."""
    out = np.zeros(size, dtype=np.int64)
    tin, tout = p.callsites.euler()
    order = np.argsort(group * np.int64(len(p.callsites) + 1) + tin[pc], kind="stable")
    sites, grp = pc[order], group[order]
    top = outermost(grp, sites, tin, tout)
    np.add.at(out, grp[top], subtree[sites[top]])
    jumps = np.bincount(grp[top], weights=residual[order][top], minlength=size) > 0
    return out, jumps
