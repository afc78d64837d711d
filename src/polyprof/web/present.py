"""Results as the page receives them: the CLI's JSON plus display text, flame slices as arrays.

Values are formatted here, on the server, with the same functions the text
reports use (pprof's unit choice and percentages, :mod:`polyprof.render.units`),
so the page shows exactly what ``polyprof top`` prints and never formats or
sums a number itself. Flame slices go out compactly: one array per column
and a table of the distinct names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polyprof.analysis.diff import DiffResult
from polyprof.analysis.flameview import FlameIndex, FlameSlice, SearchResult
from polyprof.analysis.top import TopResult
from polyprof.model.profile import ValueType
from polyprof.render import units
from polyprof.render.diff import diff_json, formatter, signed
from polyprof.render.top import top_json, value_formatter

__all__ = ["diff_payload", "node_json", "pct", "search_json", "slice_json", "top_payload", "value_text"]


def pct(value: int | float, total: int | float) -> str:
    """A percentage as the reports print it (``12.34%``)."""
    return units.percentage(int(value), int(total)).strip()


def value_text(value: int | float, unit: str) -> str:
    """One value in pprof's automatic unit (``1.20s``, ``3.50MB``, ``12``)."""
    return units.label(int(value), unit)


def top_payload(r: TopResult) -> dict[str, Any]:
    """``polyprof top --format json`` plus, per row, ``text``: the cells as ``polyprof top`` prints them."""
    out = top_json(r)
    fmt = value_formatter(r.rows, r.total, r.sample_type.unit)
    running = 0
    for row, rec in zip(r.rows, out["rows"]):
        running += row.flat
        rec["text"] = {"flat": fmt(row.flat), "flat_percent": pct(row.flat, r.total),
                       "sum_percent": pct(running, r.total), "cum": fmt(row.cum),
                       "cum_percent": pct(row.cum, r.total)}
    out["header"] = {"shown_flat": fmt(r.shown_flat), "shown_percent": pct(r.shown_flat, r.total),
                     "total": fmt(r.total)}
    return out


def search_json(s: SearchResult | None, unit: str) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"regex": s.regex, "matched": s.matched, "total": s.total, "share": s.share,
            "share_text": pct(s.matched, s.total), "matched_text": value_text(s.matched, unit),
            "zoom_matched": s.zoom_matched, "zoom_total": s.zoom_total,
            "zoom_share_text": pct(s.zoom_matched, s.zoom_total), "names": s.names}


def slice_json(s: FlameSlice, index: FlameIndex, vt: ValueType) -> dict[str, Any]:
    """A flame slice: columns as arrays (``name`` indexes ``names``), the path to its root, totals."""
    t = index.tree
    cols = {k: (v.astype(np.int8) if v.dtype == bool else v).tolist() for k, v in s.columns.items()}
    if s.base_graph_total is not None:
        # the diff colour: change of each node's share of its profile's total, in points
        new = s.columns["total"] / s.graph_total if s.graph_total else np.zeros(len(s))
        old = s.columns["base_total"] / s.base_graph_total if s.base_graph_total else np.zeros(len(s))
        cols["change"] = np.round(100.0 * (new - old), 6).tolist()
    return {
        "sample_type": vt.type, "unit": vt.unit, "root": s.root, "names": s.names, "nodes": cols,
        "path": [{"id": a, "name": d["name"], "total": d["total"]} for a, d in
                 ((a, index.details(a, path=False)) for a in s.path)],
        "graph_total": s.graph_total, "graph_total_text": value_text(s.graph_total, vt.unit),
        "graph_nodes": len(index), "merged": s.merged, "min_width": s.min_width,
        "min_width_text": value_text(s.min_width, vt.unit),
        "base_graph_total": s.base_graph_total, "inverted": bool(getattr(t, "inverted", False)),
        "active_filters": list(t.active_filters), "search": search_json(s.search, vt.unit),
    }


def node_json(index: FlameIndex, node: int, vt: ValueType, *, path: bool = True) -> dict[str, Any]:
    """One node's details with display text: flat (self) and cum (total), shares, diff change."""
    d = index.details(node, path=path)
    t = index.tree
    total = t.root_total
    unit = vt.unit
    d["text"] = {"self": value_text(d["self"], unit), "self_percent": pct(d["self"], total),
                 "total": value_text(d["total"], unit), "total_percent": pct(d["total"], total)}
    if "base_total" in d:
        base_root = t.base_root_total
        new_share = d["total"] / total if total else 0.0
        old_share = d["base_total"] / base_root if base_root else 0.0
        d["share_change"] = 100.0 * (new_share - old_share)
        d["text"].update(base_self=value_text(d["base_self"], unit), base_total=value_text(d["base_total"], unit),
                         base_total_percent=pct(d["base_total"], base_root),
                         share_change=f"{d['share_change']:+.2f} points")
    return d


def diff_payload(r: DiffResult, *, nodecount: int, by: str) -> dict[str, Any]:
    """``polyprof diff --format json`` plus, per function, ``text``: the cells as ``polyprof diff`` prints them."""
    out = diff_json(r, nodecount=nodecount, by=by)
    fmt = formatter(r)
    for rec in out.get("functions", []):
        rec["text"] = {k: fmt(rec[k]) for k in ("base_flat", "new_flat", "base_cum", "new_cum")}
        rec["text"].update({k: signed(fmt(rec[k]), rec[k]) for k in ("delta_flat", "delta_cum")})
        rec["text"]["flat_share_delta"] = f"{rec['flat_share_delta']:+.2f}"
        rec["text"]["cum_share_delta"] = f"{rec['cum_share_delta']:+.2f}"
    for rec in out.get("stacks", []):
        rec["text"] = {"base": fmt(rec["base"]), "new": fmt(rec["new"]), "delta": signed(fmt(rec["delta"]), rec["delta"])}
    unit = r.sample_type.unit
    out["totals_text"] = {"base": value_text(r.base_total, unit), "new": value_text(r.new_total, unit)}
    return out
