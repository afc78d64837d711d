"""Render a TreeResult (``tree``/``peek``) as pprof-style text or as JSON."""

from __future__ import annotations

import dataclasses

from polyprof.analysis.result import NodeFields
from polyprof.analysis.tree import TreeEdge, TreeNode, TreeResult
from polyprof.render import units
from polyprof.render.top import report_header, value_formatter

__all__ = ["tree_json", "tree_text"]

_SEPARATOR = "-" * 58 + "+" + "-" * 13
_LEGEND = "      flat  flat%   sum%        cum   cum%   calls calls% + context \t \t "


def tree_text(r: TreeResult, *, exact: bool = False) -> str:
    """pprof's ``-tree`` (or ``-peek``) text. ``exact`` prints raw values in the type's unit."""
    fmt = value_formatter(r.nodes, r.total, r.sample_type.unit, exact=exact, out_unit=r.unit)
    lines = report_header(r.summary, r.sample_type, r.total, fmt, r.shown_flat, len(r.nodes), r.node_count,
                          r.active_filters, dropped=(r.dropped_nodes, r.node_cutoff))
    lines += [_SEPARATOR, _LEGEND]
    running = 0
    for node in r.selected:
        lines.append(_SEPARATOR)
        lines.extend(_edge_line(e, node.cum, fmt) for e in node.callers)
        running += node.flat
        lines.append(f"{fmt(node.flat):>10} {units.percentage(node.flat, r.total)} "
                     f"{units.percentage(running, r.total)} {fmt(node.cum):>10} "
                     f"{units.percentage(node.cum, r.total)}                | {node.name}")
        lines.extend(_edge_line(e, node.cum, fmt) for e in node.callees)
    if r.nodes:
        lines.append(_SEPARATOR)
    return "\n".join(lines) + "\n"


def _edge_line(e: TreeEdge, cum: int, fmt) -> str:  # noqa: ANN001
    inline = " (inline)" if e.inline else ""
    return f"{fmt(e.weight):>50} {units.percentage(e.weight, cum)} |   {e.name}{inline}"


def tree_json(r: TreeResult) -> dict:
    """``{"sample_type", "unit", "total", "nodes": [{"name", "flat", "cum", "callers", "callees"}]}``."""
    return {
        "sample_type": r.sample_type.type,
        "unit": r.sample_type.unit,
        "total": r.total,
        "node_count": r.node_count,
        "granularity": r.granularity,
        "active_filters": r.active_filters,
        "nodes": [_node_json(n) for n in r.selected],
    }


def _node_json(n: TreeNode) -> dict:
    def edge(e: TreeEdge) -> dict:
        return {"name": e.name, "weight": e.weight, **({"inline": True} if e.inline else {})}

    fields = {f.name: getattr(n, f.name) for f in dataclasses.fields(NodeFields)}
    return {**fields, "flat": n.flat, "cum": n.cum, "flat_percent": n.flat_percent, "cum_percent": n.cum_percent,
            "callers": [edge(e) for e in n.callers], "callees": [edge(e) for e in n.callees]}
