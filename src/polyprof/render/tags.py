"""Render a TagsResult as ``go tool pprof -tags`` text or as JSON."""

from __future__ import annotations

from polyprof.analysis.tags_report import TagsResult
from polyprof.render import units

__all__ = ["align_right", "tags_json", "tags_text"]


def tags_text(r: TagsResult) -> str:
    """pprof's ``-tags`` text: per key its total, then each value's weight and share."""
    unit = r.sample_type.unit
    totals = r.key_totals()

    def scaled(v: int) -> str:
        value, u = units.scale(v, unit, "minimum")
        return f"{value:.1f}{u}"

    lines: list[list[str]] = []
    for key, total in totals.items():
        lines.append([f"{key}:", f" Total {scaled(total)}"])
        for row in (x for x in r.rows if x.key == key):
            share = f" ({units.percentage(row.weight, total)})" if total > 0 else ""
            lines.append([" ", f"{scaled(row.weight)}{share}:", f" {row.value}"])
        lines.append([""])
    return align_right(lines)


def align_right(lines: list[list[str]]) -> str:
    """Go's ``tabwriter`` with AlignRight and padding 1: each line's cells but the last are
    right-aligned in columns; a column's width is set by the run of adjacent lines that
    have a cell in it (the last cell of a line is free text)."""
    widths: list[list[int]] = [[0] * (len(cells) - 1) for cells in lines]
    column = 0
    while True:
        rows = [i for i, cells in enumerate(lines) if len(cells) - 1 > column]
        if not rows:
            break
        start = prev = rows[0]
        for i in [*rows[1:], None]:
            if i is None or i != prev + 1:
                width = max(len(lines[j][column]) for j in range(start, prev + 1)) + 1
                for j in range(start, prev + 1):
                    widths[j][column] = width
                start = i if i is not None else start
            prev = i if i is not None else prev
        column += 1
    out = []
    for cells, ws in zip(lines, widths):
        out.append("".join(c.rjust(w) for c, w in zip(cells, ws)) + cells[-1])
    return "\n".join(out) + "\n"


def tags_json(r: TagsResult) -> dict:
    """``{"sample_type", "unit", "keys": [{"key", "total", "values": [{"value", "weight"}]}]}``."""
    totals = r.key_totals()
    return {"sample_type": r.sample_type.type, "unit": r.sample_type.unit,
            "keys": [{"key": k, "total": t,
                      "values": [{"value": x.value, "weight": x.weight, **({"numeric": True} if x.numeric else {})}
                                 for x in r.rows if x.key == k]} for k, t in totals.items()]}
