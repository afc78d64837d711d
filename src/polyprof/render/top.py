"""Render a TopResult as pprof-style text or as JSON for scripts."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable

from polyprof.analysis.result import ProfileSummary
from polyprof.analysis.top import TopResult
from polyprof.render import units

__all__ = ["profile_header", "report_header", "top_json", "top_text", "value_formatter"]


def profile_header(p: ProfileSummary, sample_type: str, sample_unit: str, total: int, fmt) -> list[str]:  # noqa: ANN001
    """The lines pprof prints above a report (File, Type, Time, Duration...)."""
    out = []
    if p.merged_from:  # several profiles merged: name each (polyprof.selection)
        out.append("File: " + ", ".join(p.merged_from))
    else:
        if p.file:
            out.append("File: " + os.path.basename(p.file))
        if p.build_id:
            out.append("Build ID: " + p.build_id)
    out.extend(c for c in p.comments if not c.startswith("#"))
    if sample_type:
        out.append("Type: " + sample_type)
    if p.doc_url:
        out.append("Doc: " + p.doc_url)
    if p.time_nanos:
        t = _dt.datetime.fromtimestamp(p.time_nanos / 1e9, tz=_dt.timezone.utc)
        hour = t.hour % 12 or 12
        out.append(f"Time: {t.strftime('%b')} {t.day}, {t.year} at {hour}:{t.minute:02d}"
                   f"{'am' if t.hour < 12 else 'pm'} (UTC)")
    if p.duration_nanos:
        duration = units.label(p.duration_nanos, "nanoseconds")
        nanos, unit = units.scale(total, sample_unit, "nanoseconds")
        ratio = f"({units.percentage(int(nanos), p.duration_nanos)})" if unit == "ns" and nanos else ""
        out.append(f"Duration: {duration}, Total samples = {fmt(total)} {ratio}")  # pprof keeps the space
    return out


def report_header(p: ProfileSummary, sample_type, total: int, fmt, shown_flat: int,  # noqa: ANN001
                  shown: int, node_count: int, active_filters: list[str], *,
                  dropped: tuple[int, int] = (0, 0), dropped_edges: tuple[int, int] = (0, 0)) -> list[str]:
    """pprof's report labels: profile header, active filters, "Showing nodes ...",
    "Dropped N nodes (cum <= X)" for ``dropped`` = (count, cutoff), the same for edges."""
    lines = profile_header(p, sample_type.type, sample_type.unit, total, fmt)
    if active_filters:
        lines.append("Active filters:")
        lines.extend("   " + (f[:80] + "…" if len(f) > 80 else f) for f in active_filters)
    lines.append(f"Showing nodes accounting for {fmt(shown_flat)}, "
                 f"{units.percentage(shown_flat, total).strip()} of {fmt(total)} total")
    if total:
        for (count, cutoff), what, limit in ((dropped, "node", "cum"), (dropped_edges, "edge", "freq")):
            if count > 0:
                lines.append(f"Dropped {count} {what}{'s' if count > 1 else ''} ({limit} <= {fmt(cutoff)})")
        if 0 < shown < node_count:
            lines.append(f"Showing top {shown} nodes out of {node_count}")
    return lines


def value_formatter(rows, total: int, unit: str, *, exact: bool = False,  # noqa: ANN001
                    out_unit: str = "minimum") -> Callable[[int], str]:
    """How a report prints values. ``out_unit`` "minimum" (pprof's default): one unit for
    the whole table, chosen as pprof's selectOutputUnit does from ``rows`` (anything with
    ``flat`` and ``cum``) and the total; "auto": each value in its own best unit; else that
    unit (``--unit ms``). ``exact`` keeps raw values in the sample type's own unit."""
    if exact:
        out_unit = unit
    elif out_unit == "minimum":
        nonzero = [abs(row.flat) or abs(row.cum) for row in rows if row.flat or row.cum]
        out_unit = units.output_unit(min(nonzero, default=0), total, unit) or unit
    return lambda v: units.scaled_label(v, unit, out_unit)


def top_text(r: TopResult, *, exact: bool = False) -> str:
    """pprof's ``-top`` text. ``exact`` prints raw values in the type's own unit."""
    fmt = value_formatter(r.rows, r.total, r.sample_type.unit, exact=exact, out_unit=r.unit)
    lines = report_header(r.summary, r.sample_type, r.total, fmt, r.shown_flat, len(r.rows), r.node_count,
                          r.active_filters, dropped=(r.dropped_nodes, r.node_cutoff))
    lines.append(f"{'flat':>10} {'flat':>5}% {'sum':>5}% {'cum':>10} {'cum':>5}%")
    running = 0
    for row in r.rows:
        running += row.flat
        inl = " " + row.inline if row.inline else ""
        lines.append(f"{fmt(row.flat):>10} {units.percentage(row.flat, r.total)} "
                     f"{units.percentage(running, r.total)} {fmt(row.cum):>10} "
                     f"{units.percentage(row.cum, r.total)}  {row.name}{inl}")
    return "\n".join(lines) + "\n"


def top_json(r: TopResult) -> dict:
    """``{"sample_type", "unit", "total", "node_count", "rows": [{"name", "flat", "cum", ...}]}``
    in raw units; each row also has the node's identity fields and its percentages
    (``TopRow``), and ``inline`` only when set."""
    return {
        "sample_type": r.sample_type.type,
        "unit": r.sample_type.unit,
        "total": r.total,
        "node_count": r.node_count,
        "granularity": r.granularity,
        **({"active_filters": r.active_filters} if r.active_filters else {}),
        "rows": [_row_json(row) for row in r.to_records()],
    }


def _row_json(row: dict) -> dict:
    if not row["inline"]:
        del row["inline"]
    return row
