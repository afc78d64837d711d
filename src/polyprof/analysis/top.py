"""``top``: flat and cumulative weight per node, as ``go tool pprof -top`` computes it.

Rows are sorted as pprof sorts them (flat, then name, then cum; cum first
with ``cum``), nodes with zero flat and cum are left out, and pprof's
trimming applies (:mod:`polyprof.analysis.trim`): by default nodes under
0.5% of the total are dropped and every other row is shown. Recursion counts
once in cum; inlined functions are rows of their own, marked "(inline)" when
every call into them that survives the edge fraction is inlined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import node_map
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.reshape_view import ReshapeView
from polyprof.analysis.result import NodeFields, ProfileSummary, Result, node_fields, percent
from polyprof.analysis.trim import report_column, report_graph
from polyprof.model.profile import Profile, ValueType

__all__ = ["TopResult", "TopRow", "top"]


@dataclass(frozen=True, kw_only=True)
class TopRow(NodeFields):
    """One node of the table: its identity fields, weights and percentages of the total."""

    flat: int
    cum: int
    flat_percent: float = 0.0
    sum_percent: float = 0.0   # running sum of flat, down to this row
    cum_percent: float = 0.0
    inline: str = ""  # "", "(inline)" or "(partial-inline)"


@dataclass(repr=False)
class TopResult(Result):
    """The rows of ``top`` with what a report header needs; ``to_pandas()`` gives the table."""

    ROW: ClassVar[type] = TopRow

    sample_type: ValueType
    total: int                 # before filtering: the 100% of every percentage
    rows: list[TopRow]
    node_count: int            # nodes left after the node fraction, before nodecount
    summary: ProfileSummary = field(default_factory=ProfileSummary)
    active_filters: list[str] = field(default_factory=list)
    granularity: str = "functions"
    dropped_nodes: int = 0     # nodes under the node fraction ("Dropped N nodes")
    node_cutoff: int = 0       # their cum limit, relative to ``total`` as pprof prints it
    unit: str = "minimum"      # the unit values are printed in (Options.unit)

    @property
    def shown_flat(self) -> int:
        return sum(r.flat for r in self.rows)

    def _summary(self) -> str:
        return f"{self.sample_type}, total={self.total}, {len(self.rows)} of {self.node_count} nodes"


def top(src: Profile | FilterResult | ReshapeView, options: Options | None = None, **overrides: Any) -> TopResult:
    """The top table of ``src`` for ``options.sample_index`` (pprof's default type if unset).

    The filters of ``options`` are applied first (unless ``src`` is already a
    FilterResult, or the :class:`~polyprof.analysis.reshape_view.ReshapeView` of
    a hide or prune_from filter: the same table without the stacks remade);
    percentages stay relative to the total before filtering (after, with
    ``relative_percentages``). Keywords override fields of ``options``:
    ``top(p, nodecount=10, focus="sha256")``.
    """
    o = resolve(options, **overrides)
    inlines, names = not o.noinlines, o.symbolize != "none"
    if isinstance(src, ReshapeView):
        fr, nodes = src.result, src.nodes(o.granularity, inlines=inlines, names=names)
    else:
        fr = filters.prepare(src, o)
        nodes = node_map(fr.profile, o.granularity, inlines=inlines, names=names)
    p = fr.profile
    col = report_column(fr, o)
    inlined = np.zeros(len(nodes), dtype=bool)
    inlined[nodes.loc_nodes[nodes.loc_inlined]] = True  # only these can be marked
    g = report_graph(p, nodes, col.values, nodecount=o.count_for("top"), nodefraction=o.nodefraction,
                     edgefraction=o.edgefraction, by_cum=o.cum, divisor=col.divisor, callees_of=inlined)
    e = g.edges
    has_inline: set[int] = set(e.callee[e.inline].tolist())
    has_plain: set[int] = set(e.callee[~e.inline].tolist())
    marks = {n: "(partial-inline)" if n in has_plain else "(inline)" for n in has_inline}
    ident = node_fields(p, nodes, g.shown)
    rows = []
    running = 0
    for n in g.shown:
        f, c = int(g.flat[n]), int(g.cum[n])
        running += f
        rows.append(TopRow(**ident[n], flat=f, cum=c, flat_percent=percent(f, col.total),
                           sum_percent=percent(running, col.total), cum_percent=percent(c, col.total),
                           inline=marks.get(n, "")))
    return TopResult(col.sample_type, col.total, rows, g.node_count, ProfileSummary.of(p), fr.active,
                     o.granularity, g.dropped_nodes, col.cutoff(o.nodefraction), o.unit)
