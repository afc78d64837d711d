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

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import node_map
from polyprof.analysis.options import Options
from polyprof.analysis.trim import report_column, report_graph
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile, ValueType

__all__ = ["TreeEdge", "TreeNode", "TreeResult", "peek", "tree"]


@dataclass
class TreeEdge:
    name: str      # the caller (in ``callers``) or the callee (in ``callees``)
    weight: int
    inline: bool = False


@dataclass
class TreeNode:
    name: str
    flat: int
    cum: int
    callers: list[TreeEdge] = field(default_factory=list)
    callees: list[TreeEdge] = field(default_factory=list)
    selected: bool = True  # peek: the name matched its regular expression


@dataclass
class TreeResult:
    sample_type: ValueType
    total: int                 # before filtering: the 100% of every percentage
    nodes: list[TreeNode]      # every kept node, in report order
    node_count: int            # nodes left after the node fraction, before nodecount
    profile: Profile = field(repr=False)
    active_filters: list[str] = field(default_factory=list)
    dropped_nodes: int = 0     # nodes under the node fraction ("Dropped N nodes")
    node_cutoff: int = 0       # their cum limit, relative to ``total`` as pprof prints it
    unit: str = "minimum"      # the unit values are printed in (Options.unit)

    @property
    def shown_flat(self) -> int:
        return sum(n.flat for n in self.nodes)

    @property
    def selected(self) -> list[TreeNode]:
        return [n for n in self.nodes if n.selected]


def tree(src: Profile | FilterResult, options: Options | None = None,
         symbol: re.Pattern[str] | None = None) -> TreeResult:
    """The call tree report of ``src`` (filters of ``options`` applied unless already)."""
    o = options or Options()
    fr = filters.prepare(src, o)
    p = fr.profile
    col = report_column(fr, o)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines, names=o.symbolize != "none")
    trim = symbol is None  # peek shows every node (pprof turns its trimming off)
    g = report_graph(p, nodes, col.values, nodecount=o.count_for("tree") if trim else 0,
                     nodefraction=o.nodefraction if trim else 0.0, edgefraction=o.edgefraction if trim else 0.0,
                     by_cum=o.cum, divisor=col.divisor)
    names = nodes.names
    out = {n: TreeNode(names[n], int(g.flat[n]), int(g.cum[n]),
                       selected=symbol is None or bool(symbol.search(names[n]))) for n in g.shown}
    e = g.edges
    for a, b, inl, wt in zip(e.caller.tolist(), e.callee.tolist(), e.inline.tolist(), e.weight.tolist()):
        out[b].callers.append(TreeEdge(names[a], wt, inl))
        out[a].callees.append(TreeEdge(names[b], wt, inl))
    for node in out.values():
        node.callers.sort(key=lambda e: (-abs(e.weight), e.name))
        node.callees.sort(key=lambda e: (-abs(e.weight), e.name))
    return TreeResult(col.sample_type, col.total, [out[n] for n in g.shown], g.node_count, p, fr.active,
                      g.dropped_nodes, col.cutoff(o.nodefraction) if trim else 0, o.unit)


def peek(src: Profile | FilterResult, regex: str, options: Options | None = None) -> TreeResult:
    """Callers and callees of the nodes whose name matches ``regex`` (every node is ranked)."""
    try:
        symbol = re.compile(regex)
    except re.error as exc:
        raise OptionsError(f"peek: bad regular expression {regex!r}: {exc}") from None
    return tree(src, options, symbol)
