"""Render a ListResult as ``go tool pprof -list`` text."""

from __future__ import annotations

from polyprof.analysis.source import ListResult
from polyprof.render import units

__all__ = ["list_text"]


def list_text(r: ListResult, *, unit: str = "minimum") -> str:
    """pprof's ``-list`` text: per routine a header, then flat, cum, line number and source."""
    def fmt(v: int) -> str:
        return units.scaled_label(v, r.sample_type.unit, unit)

    def dot(v: int) -> str:
        return "." if v == 0 else fmt(v)

    out = [f"Total: {fmt(r.total)}"]
    out += [f"No source information for {name}" for name in r.unsourced]
    for rt in r.routines:
        out.append(f"ROUTINE ======================== {rt.function} in {rt.file}")
        out.append(f"{fmt(rt.flat):>10} {fmt(rt.cum):>10} (flat, cum) {units.percentage(rt.cum, r.total)} of Total")
        if rt.error:
            out.append(f" Error: {rt.error}")
            continue
        out += [f"{dot(x.flat):>10} {dot(x.cum):>10} {x.line:6d}:{x.text}" for x in rt.lines]
    return "\n".join(out) + "\n"
