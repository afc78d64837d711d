"""``info``: what a profile holds, as one plain dict (text and JSON render it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from polyprof.model.profile import Profile

__all__ = ["info"]


def info(p: Profile) -> dict[str, Any]:
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
    return {
        "format": p.source_format,
        "sample_types": [{"type": vt.type, "unit": vt.unit, "total": totals[i], "default": i == default}
                         for i, vt in enumerate(p.sample_types)],
        "samples": len(s),
        "stacks": int(stacks),
        "callsites": len(p.callsites),
        "locations": len(p.locations),
        "functions": len(p.functions),
        "mappings": len(p.mappings),
        "max_depth": int(p.callsites.depth().max()) + 1 if len(p.callsites) else 0,
        "period_type": str(p.period_type) if p.period_type else None,
        "period": p.period,
        "time_nanos": p.time_nanos,
        "duration_nanos": p.duration_nanos,
        "comments": list(p.comments),
        "labels": dict(sorted(label_keys.items())),
        "columns": columns,
        "drop_frames": p.drop_frames,
        "keep_frames": p.keep_frames,
        "doc_url": p.doc_url,
        "extras": p.extras,
        "warnings": list(p.warnings),
    }


def _range(col: np.ndarray) -> dict[str, int]:
    if not col.size:
        return {"min": 0, "max": 0, "distinct": 0}
    return {"min": int(col.min()), "max": int(col.max()), "distinct": int(np.unique(col).size)}
