"""Render a DiffResult as a text table or as JSON (for CI)."""

from __future__ import annotations

from collections.abc import Callable

from polyprof.analysis.diff import DiffResult, FunctionDiff
from polyprof.render import units

__all__ = ["diff_json", "diff_text", "formatter", "signed"]

_MEANING = {
    "none": "raw values",
    "total": "shares of each profile's total; deltas in percentage points",
    "rate": "per second of each profile's duration",
}


def _formatter(r: DiffResult) -> Callable[[float], str]:
    """Value formatting for ``r``'s normalisation (one unit for the whole table)."""
    if r.normalize == "total":
        return lambda v: f"{100.0 * v:.2f}%".replace("-0.00%", "0.00%")
    biggest = max(abs(r.norm(0, r.base_total)), abs(r.norm(1, r.new_total)), 1.0)
    smallest = min((abs(v) for f in r.functions for v in (r.norm(0, f.base_flat), r.norm(1, f.new_flat)) if v),
                   default=biggest)
    out_unit = units.output_unit(max(int(smallest), 1), int(biggest), r.unit)
    suffix = "/s" if r.normalize == "rate" else ""
    return lambda v: units.scaled_label(int(round(v)), r.unit, out_unit) + suffix


def _signed(text: str, value: float) -> str:
    return "+" + text if value > 0 and not text.startswith("-") else text


def diff_text(r: DiffResult, *, nodecount: int = 25, by: str = "function") -> str:
    """A table of the biggest changes: functions (flat and cum) and/or stacks."""
    fmt = _formatter(r)
    unit = r.sample_type.unit
    lines = [f"Type: {r.sample_type.type}",
             f"Totals: base {units.label(r.base_total, unit)}, new {units.label(r.new_total, unit)}"
             + (f" ({fmt(r.norm(0, r.base_total))} vs {fmt(r.norm(1, r.new_total))})" if r.normalize == "rate" else ""),
             f"Values: {_MEANING[r.normalize]}"]
    if r.active_filters:
        lines.append("Active filters:")
        lines.extend("   " + f for f in r.active_filters)
    if by in ("function", "both"):
        lines.extend(_function_lines(r, fmt, nodecount))
    if by in ("stack", "both"):
        lines.extend(_stack_lines(r, fmt, nodecount))
    return "\n".join(lines) + "\n"


def _shown(rows: list, nodecount: int) -> list:
    return rows if nodecount <= 0 else rows[:nodecount]


def _function_lines(r: DiffResult, fmt, nodecount: int) -> list[str]:  # noqa: ANN001
    rows = _shown(r.functions, nodecount)
    out = [f"Showing {len(rows)} of {len(r.functions)} functions, biggest change in flat first",
           f"{'base flat':>11} {'new flat':>11} {'delta':>11} {'base cum':>11} {'new cum':>11} {'delta':>11}  name"]
    for f in rows:
        d_flat, d_cum = r.delta(f.base_flat, f.new_flat), r.delta(f.base_cum, f.new_cum)
        out.append(f"{fmt(r.norm(0, f.base_flat)):>11} {fmt(r.norm(1, f.new_flat)):>11} "
                   f"{_signed(fmt(d_flat), d_flat):>11} {fmt(r.norm(0, f.base_cum)):>11} "
                   f"{fmt(r.norm(1, f.new_cum)):>11} {_signed(fmt(d_cum), d_cum):>11}  {f.name}")
    return out


def _stack_lines(r: DiffResult, fmt, nodecount: int) -> list[str]:  # noqa: ANN001
    rows = _shown(r.stacks, nodecount)
    out = [f"Showing {len(rows)} of {len(r.stacks)} stacks, biggest change first (root;...;leaf)",
           f"{'base':>11} {'new':>11} {'delta':>11}  stack"]
    for s in rows:
        d = r.delta(s.base, s.new)
        out.append(f"{fmt(r.norm(0, s.base)):>11} {fmt(r.norm(1, s.new)):>11} {_signed(fmt(d), d):>11}  "
                   + ";".join(s.frames))
    return out


def diff_json(r: DiffResult, *, nodecount: int = 0, by: str = "function",
              growth: list[FunctionDiff] | None = None, threshold: float | None = None) -> dict:
    """Every number of the diff: raw weights, normalised values, deltas and share changes.

    ``base``/``new``/``delta`` are normalised values; ``*_raw`` are in the
    sample type's unit; ``share_delta`` is in percentage points.
    """
    out: dict = {
        "sample_type": r.sample_type.type,
        "sample_unit": r.sample_type.unit,
        "normalize": r.normalize,
        "unit": r.unit if r.normalize != "rate" else f"{r.unit}/s",
        "base_total": r.base_total,
        "new_total": r.new_total,
        "active_filters": r.active_filters,
    }
    if by in ("function", "both"):
        out["functions"] = [r.function_record(f) for f in _shown(r.functions, nodecount)]
    if by in ("stack", "both"):
        out["stacks"] = [r.stack_record(s) for s in _shown(r.stacks, nodecount)]
    if threshold is not None:
        out["growth"] = {"threshold": threshold, "exceeded": [f.name for f in growth or []]}
    return out


#: Public names of the table's formatting, for other front ends (the web view's display text).
formatter = _formatter
signed = _signed
