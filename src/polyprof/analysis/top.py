"""``top``: flat and cumulative weight per node, as ``go tool pprof -top`` computes it.

Rows are sorted as pprof sorts them (flat, then name, then cum), nodes with
zero flat and cum are left out, and ``nodefraction`` is 0: nothing is dropped
except by ``nodecount``. Recursion counts once in cum; inlined functions are
rows of their own, marked "(inline)" when every call into them is inlined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import callsite_weights, edges, node_map, node_weights, ranked
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import NodeFields, ProfileSummary, Result, node_fields, percent
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
    node_count: int            # nodes with any weight, before nodecount
    summary: ProfileSummary = field(default_factory=ProfileSummary)
    active_filters: list[str] = field(default_factory=list)
    granularity: str = "functions"

    @property
    def shown_flat(self) -> int:
        return sum(r.flat for r in self.rows)

    def _summary(self) -> str:
        return f"{self.sample_type}, total={self.total}, {len(self.rows)} of {self.node_count} nodes"


def top(src: Profile | FilterResult, options: Options | None = None, **overrides: Any) -> TopResult:
    """The top table of ``src`` for ``options.sample_index`` (pprof's default type if unset).

    The filters of ``options`` are applied first (unless ``src`` is already a
    FilterResult); percentages stay relative to the total before filtering.
    Keywords override fields of ``options``: ``top(p, nodecount=10, focus="sha256")``.
    """
    o = resolve(options, **overrides)
    fr = filters.prepare(src, o)
    p = fr.profile
    index = p.sample_index(o.sample_index)
    values = p.samples.values[:, index] if len(p.sample_types) else np.zeros(0, np.int64)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    w = callsite_weights(p, values)
    flat, cum = node_weights(p, nodes, w)
    order = ranked(nodes, flat, cum)
    shown = order if o.nodecount <= 0 else order[:o.nodecount]
    kept = np.zeros(len(nodes), dtype=bool)
    kept[shown] = True
    marks = _inline_marks(p, nodes, w, kept)
    vt = p.sample_types[index] if p.sample_types else ValueType("", "")
    total = fr.total(index) if p.sample_types else w.total
    ident = node_fields(p, nodes, shown)
    rows = []
    running = 0
    for n in shown:
        f, c = int(flat[n]), int(cum[n])
        running += f
        rows.append(TopRow(**ident[n], flat=f, cum=c, flat_percent=percent(f, total),
                           sum_percent=percent(running, total), cum_percent=percent(c, total),
                           inline=marks.get(n, "")))
    return TopResult(vt, total, rows, len(order), ProfileSummary.of(p), fr.active, o.granularity)


def _inline_marks(p: Profile, nodes, w, kept) -> dict[int, str]:  # noqa: ANN001
    # Only a node that is an inlined line somewhere can be marked.
    inlined = np.zeros(len(nodes), dtype=bool)
    inlined[nodes.loc_nodes[nodes.loc_inlined]] = True
    caller, callee, inline = edges(p, nodes, w, kept, callees=inlined)
    has_inline: set[int] = set(callee[inline].tolist())
    has_plain: set[int] = set(callee[~inline].tolist())
    return {n: "(partial-inline)" if n in has_plain else "(inline)" for n in has_inline}
