"""``info``: what a profile holds, as plain data (text and JSON render it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis.result import Result
from polyprof.model.profile import Profile

__all__ = ["InfoResult", "SampleTypeInfo", "info", "symbolized_shares"]


@dataclass(frozen=True)
class SampleTypeInfo:
    type: str
    unit: str
    total: int
    default: bool


@dataclass(repr=False)
class InfoResult(Result):
    """Summary of a profile. ``as_dict()`` is the JSON of ``polyprof info``; the
    table (``to_pandas()``) is one row per sample type."""

    ROW: ClassVar[type] = SampleTypeInfo
    TABLES: ClassVar[tuple[str, ...]] = ("sample_types",)

    format: str
    sample_types: list[SampleTypeInfo]
    samples: int
    stacks: int
    callsites: int
    locations: int
    functions: int
    mappings: int
    max_depth: int
    period_type: str | None
    period: int
    time_nanos: int
    duration_nanos: int
    comments: list[str] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)       # label key -> samples carrying it
    columns: dict[str, dict[str, int]] = field(default_factory=dict)  # optional column -> min, max, distinct
    drop_frames: str = ""
    keep_frames: str = ""
    doc_url: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: per mapping: frames, frames with names now and before polyprof symbolized (None: it did not)
    symbolized: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Every field as plain JSON-compatible data."""
        return dataclasses.asdict(self)

    def _row_objects(self) -> list[SampleTypeInfo]:
        return self.sample_types

    def _summary(self) -> str:
        types = ", ".join(f"{t.type}/{t.unit}" for t in self.sample_types)
        return f"{self.format or '?'}, {self.samples} samples, [{types}]"


def info(p: Profile) -> InfoResult:
    """Summary of ``p``: types, totals, table sizes, time, comments, extras, warnings."""
    s = p.samples
    totals = p.totals()
    default = p.default_index() if p.sample_types else None
    label_keys: dict[str, int] = {}
    if len(s):
        used, counts = np.unique(s.labelset, return_counts=True)
        for ls, c in zip(used.tolist(), counts.tolist()):
            for key in {lb.key for lb in p.labelsets[ls]}:
                label_keys[key] = label_keys.get(key, 0) + c
    columns = {name: _range(getattr(s, name)) for name in s.OPTIONAL_COLUMNS if getattr(s, name) is not None}
    if "time" in columns and len(s):
        from polyprof.analysis.filters import time_origin

        # where --time-range counts from, so readers can show sample times relative to it
        columns["time"]["origin"] = time_origin(p, np.asarray(s.time, dtype=np.int64))
    stacks = np.unique(s.stack).size if len(s) else 0
    return InfoResult(
        format=p.source_format,
        sample_types=[SampleTypeInfo(vt.type, vt.unit, totals[i], i == default) for i, vt in enumerate(p.sample_types)],
        samples=len(s),
        stacks=int(stacks),
        callsites=len(p.callsites),
        locations=len(p.locations),
        functions=len(p.functions),
        mappings=len(p.mappings),
        max_depth=int(p.callsites.depth().max()) + 1 if len(p.callsites) else 0,
        period_type=str(p.period_type) if p.period_type else None,
        period=p.period,
        time_nanos=p.time_nanos,
        duration_nanos=p.duration_nanos,
        comments=list(p.comments),
        labels=dict(sorted(label_keys.items())),
        columns=columns,
        drop_frames=p.drop_frames,
        keep_frames=p.keep_frames,
        doc_url=p.doc_url,
        extras=p.extras,
        warnings=list(p.warnings),
        symbolized=symbolized_shares(p),
    )


def symbolized_shares(p: Profile) -> list[dict[str, Any]]:
    """Per mapping with frames: how many have function names now, and before symbolization
    (``before`` is None when the profile was not symbolized by polyprof)."""
    from polyprof.symbolize.apply import mapping_coverage

    earlier = {(e.get("file"), e.get("build_id")): e.get("symbolized_before")
               for e in p.extras.get("symbolization", {}).get("mappings", [])}
    rows = []
    for m, (frames, named) in sorted(mapping_coverage(p).items()):
        file, build = p.strings[p.mappings.filename[m]] or "?", p.strings[p.mappings.build_id[m]]
        rows.append({"mapping": file, "build_id": build, "frames": frames, "symbolized": named,
                     "share": f"{100 * named / frames:.1f}%", "before": earlier.get((file, build))})
    return rows


def _range(col: np.ndarray) -> dict[str, int]:
    if not col.size:
        return {"min": 0, "max": 0, "distinct": 0}
    return {"min": int(col.min()), "max": int(col.max()), "distinct": int(np.unique(col).size)}
