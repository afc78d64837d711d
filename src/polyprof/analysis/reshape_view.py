"""A ``hide`` or ``prune_from`` filter's profile with its stacks left as they were, for ``top``.

:func:`polyprof.analysis.filters.apply` remakes the callsite tree of a hide
or prune_from filter (:func:`polyprof.analysis.stacks.rebuild`: equal paths
merged, millions of new callsites on a large profile; two thirds of the web
view's top table of such a filter on the benchmark pprof). A top table does
not need that: its numbers are sums over every sample's path of report nodes
(flat on the innermost node, cum once per node, an edge's weight once per
call), which merging equal paths does not change. So the view keeps the
input's callsites, moves every sample to the callsite its remade stack ends
at, and has the lines rewritten as ``apply`` rewrites them (the filter's plan:
:func:`~polyprof.analysis.filters.hide_plan`,
:func:`~polyprof.analysis.filters.prune_plan`); a location hide leaves without
lines vanishes from every stack, so the report nodes of the view
(:meth:`ReshapeView.nodes`) list none for it and the analyses pass over its
callsites. ``top(view)`` gives the table of ``top(filters.apply(...))``
(tests/test_reshape_view.py compares them on files and random profiles).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from polyprof.analysis import filters, stacks
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.nodes import NodeMap, node_map
from polyprof.analysis.options import Options

__all__ = ["ReshapeView", "reshape_view", "top_source"]

#: The filters :func:`~polyprof.analysis.filters.apply` records before ``hide`` (the order
#: of :meth:`FilterResult.unmatched`).
_BEFORE_HIDE = ("pid", "tid", "thread", "time_range", "ignore", "focus")


@dataclass
class ReshapeView:
    """The profile of a hide or prune_from filter on its input's callsites.

    ``result.profile`` has the rewritten lines and the moved samples of
    ``filters.apply``'s profile (the same samples in the same order, the same
    ``matched``, ``active`` and ``rows``), but the input's callsite tree (its
    arrays, in a table object of the view's own);
    ``vanished`` marks the locations every stack leaves out. Only for
    analyses that take their report nodes from :meth:`nodes` (``top``).
    """

    result: FilterResult
    vanished: np.ndarray  # per location: left out of every stack (left without lines)

    def nodes(self, granularity: str, *, inlines: bool = True, names: bool = True) -> NodeMap:
        """The report nodes of the filtered profile, with none listed for the vanished locations."""
        nodes = node_map(self.result.profile, granularity, inlines=inlines, names=names)
        if not self.vanished.any():
            return nodes
        per_loc = np.diff(nodes.loc_start)
        kept = ~np.repeat(self.vanished, per_loc)
        loc_start = np.zeros_like(nodes.loc_start)
        np.cumsum(np.where(self.vanished, 0, per_loc), out=loc_start[1:])
        return dataclasses.replace(nodes, loc_start=loc_start, loc_nodes=nodes.loc_nodes[kept],
                                   loc_inlined=nodes.loc_inlined[kept], entry_dup=nodes.entry_dup[kept])


def reshape_view(selected: FilterResult, o: Options) -> ReshapeView | None:
    """The view of ``o``'s hide or prune_from filter, from ``selected``: the input filtered by
    every other filter of ``o`` (``filters.apply(p, filters.without(o, kind))``). None where the
    view does not apply: another filter remakes the stacks
    (:func:`~polyprof.analysis.filters.name_tree_filter`), relative percentages of negative
    values (their total nets equal stacks out first, and the view's equal paths are not one
    stack), or a hide with a tagignore (``apply`` says whether the label filters matched among
    the samples the hide left, and ``selected`` lacks the ones tagignore took)."""
    kind = filters.name_tree_filter(o)
    p = selected.profile
    if kind is None or (o.relative_percentages and bool((p.samples.values < 0).any())) or (
            kind == "hide" and o.tagignore):
        return None
    cs = p.callsites
    vanished = np.zeros(len(p.locations), dtype=bool)
    stack, kept = p.samples.stack, np.ones(len(p.samples), dtype=bool)
    if kind == "hide":
        line_keep, vanished, hit = filters.hide_plan(p, o)
        if vanished.any():  # each sample ends at its callsite's nearest ancestor-or-self that stays
            stack = np.append(stacks.nearest(cs, ~vanished[cs.location]).astype(np.int32), -1)[stack]
        kept = stack >= 0  # samples left without frames, and without a stack, are dropped
        matched = {k: v for k, v in selected.matched.items() if k in _BEFORE_HIDE}
        matched = {**matched, "hide": hit, **selected.matched}
        if "tagfocus" in matched:  # apply's tagfocus looks at the samples the hide left: these
            matched["tagfocus"] = bool(kept.any())
    else:
        plan = filters.prune_plan(p, o)
        line_keep = np.ones(len(p.lines), dtype=bool)
        if plan is not None:
            line_keep, stack = plan
        matched = {**selected.matched, "prune_from": plan is not None}
    q = p if line_keep.all() else stacks.rewrite_lines(p, line_keep)[0]
    # the input's callsite arrays in a table of the view's own: what an analysis caches on the
    # table (``top``'s Euler intervals, 61 MB on the large pprof) goes with the view
    q = stacks.take_samples(q, kept, stack)  # a new Profile
    q.callsites = copy.copy(cs)
    rows = selected.rows if kept.all() else selected.rows[kept]
    return ReshapeView(FilterResult(q, selected.original, filters.legend(o), matched, rows), vanished)


def top_source(o: Options, filtered: Callable[[Options], FilterResult]) -> ReshapeView | FilterResult:
    """What ``top`` reads for ``o``: the view of its hide or prune_from, made from
    ``filtered(filters.without(o, kind))`` (the input filtered by the other filters: the CLI's
    ``filters.apply``, the web view's cached copies), where it applies; else ``filtered(o)``."""
    kind = filters.name_tree_filter(o)
    view = reshape_view(filtered(filters.without(o, kind)), o) if kind is not None else None
    return view if view is not None else filtered(o)
