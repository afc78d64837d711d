"""Render a QualityReport as text or JSON."""

from __future__ import annotations

import dataclasses

from polyprof.analysis.validate import QualityReport
from polyprof.render import units

__all__ = ["validate_json", "validate_text"]


def _share(part: int, whole: int) -> str:
    return units.percentage(part, whole).strip() if whole else "-"


def validate_text(r: QualityReport) -> str:
    """A short report: one line per check, then frames per mapping."""
    unit = r.sample_type.unit
    lines = [f"Format:            {r.source_format or '?'}, {r.samples} samples, "
             f"{r.sample_type.type or 'no sample type'} total {units.label(r.total, unit)}"]
    if r.lost is None:
        lines.append("Lost samples:      not reported")
    else:
        kept = r.lost.get("kept")
        of = f" of {kept + r.lost['lost']} ({_share(r.lost['lost'], kept + r.lost['lost'])})" if kept is not None else ""
        lines.append(f"Lost samples:      {r.lost['lost']}{of}")
    if r.unwind_errors:
        detail = ", ".join(f"{k} {v}" for k, v in r.unwind_errors.items())
        weight = f", {_share(r.unwind_weight, r.total)} of the weight" if r.unwind_weight else ""
        lines.append(f"Unwinding errors:  {sum(r.unwind_errors.values())} samples{weight} ({detail})")
    else:
        lines.append("Unwinding errors:  none reported")
    if r.skipped:
        detail = ", ".join(f"{k} {v}" for k, v in r.skipped.items())
        lines.append(f"Skipped samples:   {sum(r.skipped.values())} kept without a stack walk ({detail})")
    at = f" (they stop at the {r.stack_limit}-frame limit)" if r.stack_limit else ""
    lines.append(f"Truncated stacks:  {r.truncated} samples, {_share(r.truncated_weight, r.total)} of the weight{at}"
                 if r.truncated else "Truncated stacks:  none found")
    lines.append(f"Empty stacks:      {r.empty_stacks} samples, {_share(r.empty_weight, r.total)} of the weight"
                 if r.empty_stacks else "Empty stacks:      none")
    bad = [f"{n} {what}" for what, n in r.invalid.items() if n]
    lines.append("Invalid references: " + ("; ".join(bad) if bad else "none"))
    partial = [m for m in r.mappings if m.unsymbolized]
    whole = len(r.mappings) - len(partial)
    if partial:
        lines.append("Unsymbolized frames by mapping (leaf weight: share of the samples ending in the "
                     "mapping that end on one):")
        lines.append(f"{'unsymbolized':>12} {'frames':>8} {'leaf weight':>12}  mapping")
        for m in partial:
            lines.append(f"{m.unsymbolized:>12} {m.frames:>8} "
                         f"{_share(m.unsymbolized_leaf_weight, m.leaf_weight):>12}  {m.mapping}")
    lines.append(f"Symbolized:        every frame in {whole} mapping(s)" if whole or not partial
                 else "Symbolized:        no mapping is fully symbolized")
    done = [m for m in r.mappings if m.symbolized_before is not None]
    if done:
        lines.append("Symbolized by polyprof (frames with names before -> now):")
        lines.extend(f"{m.symbolized_before:>12} -> {m.frames - m.unsymbolized} of {m.frames}  {m.mapping}"
                     for m in done)
    lines.extend(f"Warning: {w}" for w in r.warnings)
    problems = r.problems()
    lines.append("Verdict: " + ("; ".join(problems) if problems else "no problems found"))
    return "\n".join(lines) + "\n"


def validate_json(r: QualityReport) -> dict:
    out = dataclasses.asdict(r)
    out["sample_type"] = {"type": r.sample_type.type, "unit": r.sample_type.unit}
    out["problems"] = r.problems()
    return out
