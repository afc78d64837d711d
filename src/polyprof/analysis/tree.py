"""``tree`` and ``peek``: every node with its callers and callees, as ``go tool pprof -tree/-peek``.

Nodes are ranked as in ``top`` and trimmed as pprof trims its graph
(:mod:`polyprof.analysis.trim`: node fraction, then ``nodecount``, default
80, then edge fraction); the call graph is built over the kept nodes only, so
an edge may jump over dropped nodes (pprof's "residual" edges). An edge's
weight is the weight of the samples whose stack makes that call at least
once; an edge is "inline" when every such call is an inlined one. Samples
with zero value add no edges, as in pprof.

``peek`` is the tree without any trimming (as pprof) whose printed entries
are the nodes matching a regular expression; totals still cover every node.
Percentages are relative to the total before filtering (pprof's default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import node_map
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import NodeFields, ProfileSummary, Result, node_fields, percent
from polyprof.analysis.trim import report_column, report_graph
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile, ValueType

__all__ = ["TreeEdge", "TreeNode", "TreeResult", "peek", "tree"]


@dataclass
class TreeEdge:
    """A call between two kept nodes, seen from one end."""

    name: str      # the caller (in ``callers``) or the callee (in ``callees``)
    weight: int
    inline: bool = False


@dataclass(frozen=True, kw_only=True)
class TreeNode(NodeFields):
    """A kept node: identity fields, weights, percentages and its callers and callees."""

    flat: int
    cum: int
    flat_percent: float = 0.0
    cum_percent: float = 0.0
    callers: list[TreeEdge] = field(default_factory=list)
    callees: list[TreeEdge] = field(default_factory=list)
    selected: bool = True  # peek: the name matched its regular expression


@dataclass(repr=False)
class TreeResult(Result):
    """The nodes of ``tree``/``peek``. Tables: ``nodes`` (one row per node, with
    its caller and callee lists) and ``edges`` (one row per call: caller,
    callee, weight, inline)."""

    ROW: ClassVar[type] = TreeNode
    TABLES: ClassVar[tuple[str, ...]] = ("nodes", "edges")

    sample_type: ValueType
    total: int                 # before filtering: the 100% of every percentage
    nodes: list[TreeNode]      # every kept node, in report order
    node_count: int            # nodes left after the node fraction, before nodecount
    summary: ProfileSummary = field(default_factory=ProfileSummary)
    active_filters: list[str] = field(default_factory=list)
    granularity: str = "functions"
    dropped_nodes: int = 0     # nodes under the node fraction ("Dropped N nodes")
    node_cutoff: int = 0       # their cum limit, relative to ``total`` as pprof prints it
    unit: str = "minimum"      # the unit values are printed in (Options.unit)

    @property
    def shown_flat(self) -> int:
        return sum(n.flat for n in self.nodes)

    @property
    def selected(self) -> list[TreeNode]:
        return [n for n in self.nodes if n.selected]

    def _columns(self, table: str) -> dict[str, Any]:
        if table == "nodes":
            return super()._columns(table)
        calls = [(n, e) for n in self.nodes for e in n.callees]  # every call once, in report order
        return {"caller": [n.name for n, _ in calls], "callee": [e.name for _, e in calls],
                "weight": [e.weight for _, e in calls], "inline": [e.inline for _, e in calls]}

    def _row_objects(self) -> list[TreeNode]:
        return self.nodes

    def _summary(self) -> str:
        shown = len(self.selected)
        sel = f", {shown} selected" if shown != len(self.nodes) else ""
        return f"{self.sample_type}, total={self.total}, {len(self.nodes)} of {self.node_count} nodes{sel}"


def tree(src: Profile | FilterResult, options: Options | None = None,
         symbol: re.Pattern[str] | None = None, **overrides: Any) -> TreeResult:
    """The call tree report of ``src`` (filters of ``options`` applied unless already).

    ``symbol`` (peek) marks the nodes whose name it matches as ``selected``.
    Keywords override fields of ``options``.
    """
    o = resolve(options, **overrides)
    fr = filters.prepare(src, o)
    p = fr.profile
    col = report_column(fr, o)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines, names=o.symbolize != "none")
    trim = symbol is None  # peek shows every node (pprof turns its trimming off)
    g = report_graph(p, nodes, col.values, nodecount=o.count_for("tree") if trim else 0,
                     nodefraction=o.nodefraction if trim else 0.0, edgefraction=o.edgefraction if trim else 0.0,
                     by_cum=o.cum, divisor=col.divisor)
    names = nodes.names
    ident = node_fields(p, nodes, g.shown)
    out = {n: TreeNode(**ident[n], flat=int(g.flat[n]), cum=int(g.cum[n]),
                       flat_percent=percent(int(g.flat[n]), col.total), cum_percent=percent(int(g.cum[n]), col.total),
                       selected=symbol is None or bool(symbol.search(names[n]))) for n in g.shown}
    e = g.edges
    for a, b, inl, wt in zip(e.caller.tolist(), e.callee.tolist(), e.inline.tolist(), e.weight.tolist()):
        out[b].callers.append(TreeEdge(names[a], wt, inl))
        out[a].callees.append(TreeEdge(names[b], wt, inl))
    for node in out.values():
        node.callers.sort(key=lambda e: (-abs(e.weight), e.name))
        node.callees.sort(key=lambda e: (-abs(e.weight), e.name))
    return TreeResult(col.sample_type, col.total, [out[n] for n in g.shown], g.node_count, ProfileSummary.of(p),
                      fr.active, o.granularity, g.dropped_nodes, col.cutoff(o.nodefraction) if trim else 0, o.unit)


def peek(src: Profile | FilterResult, regex: str, options: Options | None = None, **overrides: Any) -> TreeResult:
    """Callers and callees of the nodes whose name matches ``regex`` (every node is ranked).

    ``result.selected`` lists the matching nodes (empty when none matches).
    """
    try:
        symbol = re.compile(regex)
    except re.error as exc:
        raise OptionsError(f"peek: bad regular expression {regex!r}: {exc}") from None
    return tree(src, resolve(options, **overrides), symbol)
