"""Render a TracesResult as pprof's ``-traces`` text or as JSON."""

from __future__ import annotations

from collections.abc import Iterator

from polyprof.analysis.traces import LabelGroup, TracesResult
from polyprof.render import units
from polyprof.render.top import profile_header

__all__ = ["traces_json", "traces_lines"]

_SEPARATOR = "-----------+-------------------------------------------------------"


def traces_lines(r: TracesResult) -> Iterator[str]:
    """The lines of pprof's ``-traces`` report (streamed: profiles can have many samples)."""
    unit, out = r.sample_type.unit, r.unit
    yield from profile_header(r.summary, r.sample_type.type, unit, r.total,
                              lambda v: units.scaled_label(v, unit, out))
    stack_text = [_stack_lines(frames) for frames in r.stacks]
    label_text = [_label_lines(groups) for groups in r.labels]
    for s, ls, v in zip(r.sample_stack.tolist(), r.sample_labels.tolist(), r.sample_value.tolist()):
        yield _SEPARATOR
        yield from label_text[ls]
        first, rest = stack_text[s]
        yield f"{units.scaled_label(v, unit, out):>10}   {first}"
        yield from rest
    yield _SEPARATOR


def _stack_lines(frames) -> tuple[str, list[str]]:  # noqa: ANN001
    names = [f.name + (" (inline)" if f.inline else "") for f in frames]
    return names[0], [f"{'':>10}   {n}" for n in names[1:]]


def _label_lines(groups: tuple[LabelGroup, ...]) -> list[str]:
    strs = sorted(f"{g.key:>10}:  {' '.join(str(v) for v in g.values)}" for g in groups if not g.numeric)
    nums = sorted(f"{g.key:>10}:  {' '.join(units.label(int(v), g.unit) for v in g.values)}"
                  for g in groups if g.numeric)
    return strs + nums


def traces_json(r: TracesResult) -> dict:
    """``{"sample_type", "unit", "total", "stacks": [[{"name", "inline"}]], "samples": [...]}``.

    Each sample names its stack by index (stacks are listed once, leaf first).
    """
    def labels(groups: tuple[LabelGroup, ...]) -> dict:
        return {g.key: list(g.values) for g in groups}

    label_json = [labels(g) for g in r.labels]
    return {
        "sample_type": r.sample_type.type,
        "unit": r.sample_type.unit,
        "total": r.total,
        "active_filters": r.active_filters,
        "stacks": [[{"name": f.name, **({"inline": True} if f.inline else {})} for f in frames]
                   for frames in r.stacks],
        "samples": [{"stack": s, "value": v, **({"labels": label_json[ls]} if label_json[ls] else {})}
                    for s, ls, v in zip(r.sample_stack.tolist(), r.sample_labels.tolist(),
                                        r.sample_value.tolist())],
    }
