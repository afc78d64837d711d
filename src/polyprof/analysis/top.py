"""``top``: flat and cumulative weight per node, as ``go tool pprof -top`` computes it.

Rows are sorted as pprof sorts them (flat, then name, then cum; cum first
with ``cum``), nodes with zero flat and cum are left out, and pprof's
trimming applies (:mod:`polyprof.analysis.trim`): by default nodes under
0.5% of the total are dropped and every other row is shown. Recursion counts
once in cum; inlined functions are rows of their own, marked "(inline)" when
every call into them that survives the edge fraction is inlined.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters, label_groups
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import node_map, sum_by
from polyprof.analysis.nodes import NodeMap
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.reshape_view import ReshapeView
from polyprof.analysis.result import (
    NodeFields,
    ProfileSummary,
    Result,
    node_fields,
    percent,
)
from polyprof.analysis.trim import report_column, report_graph
from polyprof.model.profile import Profile, ValueType

__all__ = ["TopResult", "TopRow", "top", "top_root_labels"]


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


#: Options under which ``tagroot`` label frames could change a function row or its order:
#: name filters see the label frames (pprof adds them before any filter), ``tagshow``/``taghide``
#: and ``tagleaf`` change them, ``mean`` divides their cum.
_FRAME_SENSITIVE = ("focus", "ignore", "hide", "show", "show_from", "prune_from", "tagshow", "taghide", "tagleaf",
                    "mean")


def top_root_labels(plain: FilterResult, options: Options | None = None,
                    **overrides: Any) -> tuple[TopResult, bool] | None:
    """The table ``top`` gives for ``options`` (one ``tagroot`` key) from ``plain``, the input
    filtered by the same options without ``tagroot``; and whether any sample had the label
    (the ``tagroot`` filter's match). None where that is not provably the same table.

    A frame added at the root of every stack changes no function's flat or cum (not
    its leaf, and it is counted once per stack); the table gains one row per label
    value: cum the weight of its samples, flat 0 as long as no stack is empty. Those
    rows are ``top`` of the input with every stack emptied (one sample per label set),
    framed by the same :func:`~polyprof.analysis.labels.label_frames`. None when a
    filter could see the frames (:data:`_FRAME_SENSITIVE`), trimming could drop rows
    (nodecount, nodefraction), nodes are not functions, a label value is named as a
    function (their nodes could merge and their order tie), a sample has an empty
    stack (its frame would hold flat weight and the edge cut move), or a root frame's
    function is marked "(inline)" (the call from the label frame is not inlined).
    """
    o = resolve(options, **overrides)
    if (not o.tagroot or "," in o.tagroot or any(getattr(o, k) for k in _FRAME_SENSITIVE)
            or o.granularity != "functions" or o.symbolize == "none" or o.nodefraction != 0
            or o.count_for("top") != 0):
        return None
    p, orig = plain.profile, plain.original
    if (p.samples.stack < 0).any():
        return None
    # the label frames: every label set once, with the weight its kept samples have
    sets, sample_values = orig.samples.labelset, orig.samples.values
    kept = sets[plain.rows]  # rows: kept samples in ``orig``
    weight = np.zeros((len(orig.labelsets), sample_values.shape[1]), dtype=np.int64)
    for j in range(sample_values.shape[1]):  # exact int64 sums a chunk at a time (np.add.at of int32
        weight[:, j] = sum_by(kept, sample_values[plain.rows, j], len(orig.labelsets))  # into int64: a slow loop)
    del kept
    present = np.zeros(len(orig.labelsets), dtype=bool)
    present[sets] = True
    used = np.flatnonzero(present)
    stub = label_groups.stackless(orig, used, weight[used])
    unset: dict[str, Any] = {k: None for k in ("tagroot", *filters.FILTERS)}
    plain_o = dataclasses.replace(o, **unset)
    framed = filters.apply(stub, dataclasses.replace(plain_o, tagroot=o.tagroot))
    values, functions = top(framed, plain_o).rows, top(plain, o)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    # every label frame's name, weighed or not (a value whose samples sum to 0 has no row, but
    # its frame merges with a function of its name all the same)
    frames = set(node_map(framed.profile, o.granularity, inlines=not o.noinlines).names)
    if frames & set(nodes.names) or _root_inline(p, nodes, functions):
        return None
    first, second = ("cum", "flat") if o.cum else ("flat", "cum")

    def order(r: TopRow) -> tuple[int, str, int]:  # graph.ranked's (names differ: its last key never decides)
        return -abs(getattr(r, first)), r.name, -abs(getattr(r, second))

    values = sorted((dataclasses.replace(r, flat=0) for r in values), key=order)
    rows = list(heapq.merge(functions.rows, values, key=order))
    total, running = functions.total, 0
    for i, r in enumerate(rows):
        running += r.flat
        rows[i] = dataclasses.replace(r, flat_percent=percent(r.flat, total), sum_percent=percent(running, total),
                                      cum_percent=percent(r.cum, total))
    return dataclasses.replace(functions, rows=rows, node_count=functions.node_count + len(values)), \
        framed.matched["tagroot"]


def _root_inline(p: Profile, nodes: NodeMap, t: TopResult) -> bool:
    """Whether a node of a root frame of ``p`` is named as a row of ``t`` marked "(inline)"."""
    marked = {r.name for r in t.rows if r.inline == "(inline)"}
    if not marked:
        return False
    cs = p.callsites
    starts = nodes.loc_start
    return any(nodes.names[n] in marked for loc in np.unique(cs.location[cs.parent < 0]).tolist()
               for n in nodes.loc_nodes[starts[loc]:starts[loc + 1]].tolist())
