"""Plain-text renderings of Arrow tables and store facts for the terminal (``polyprof store``)."""

from __future__ import annotations

import csv
import io
from typing import Any

__all__ = ["arrow_csv", "arrow_text", "info_text", "json_default"]


def json_default(value: Any) -> Any:
    """JSON for what engines return beyond JSON's types: Decimal sums, timestamps, bytes."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list) and value and isinstance(value[0], tuple):  # a map column
        return ", ".join(f"{k}={v}" for k, v in value)
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def arrow_text(table: Any, limit: int = 0) -> str:
    """Aligned columns; at most ``limit`` rows (0 = all) with a note of what was left out."""
    rows = table.slice(0, limit).to_pylist() if limit else table.to_pylist()
    names = table.column_names
    cells = [[_cell(r[n]) for n in names] for r in rows]
    widths = [max([len(n)] + [min(len(c[i]), 60) for c in cells]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip()]
    for c in cells:
        lines.append("  ".join((v if len(v) <= 60 else v[:57] + "...").ljust(w) for v, w in zip(c, widths)).rstrip())
    if limit and table.num_rows > limit:
        lines.append(f"... {table.num_rows - limit} more row(s) (--limit 0 shows all)")
    lines.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(lines)


def arrow_csv(table: Any) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(table.column_names)
    for r in table.to_pylist():
        w.writerow([_cell(r[n]) for n in table.column_names])
    return out.getvalue().rstrip("\n")


def info_text(info: Any) -> str:
    """``polyprof store info`` for people."""
    lines = [
        f"Store:        {info.path} (schema {info.schema_version}, generation {info.generation})",
        f"Size:         {info.bytes / 2**20:.1f} MiB in {info.files} files",
        f"Sources:      {info.sources} files, {info.profiles} profiles, {info.samples} sample rows",
        f"Time span:    {info.time_first or '?'} .. {info.time_last or '?'}",
        "Formats:      " + ", ".join(f"{k} ({v})" for k, v in info.formats.items()),
        "Sample types:",
    ]
    for t in info.sample_types:
        lines.append(f"  {t['sample_type']}/{t['sample_unit']}: {t['profiles']} profiles, "
                     f"{t['samples']} samples, total {t['total']}")
    for title, values in (("Apps", info.apps), ("Versions", info.versions)):
        if values:
            lines.append(f"{title + ':':<14}" + ", ".join(f"{k} ({v})" for k, v in values.items()))
    if info.labels:
        lines.append("Labels:")
        for key, values in info.labels.items():
            lines.append(f"  {key}: " + ", ".join(f"{k} ({v})" for k, v in values.items()))
    lines.append("Dictionaries: " + ", ".join(f"{k} {v}" for k, v in info.dictionaries.items()))
    return "\n".join(lines)
