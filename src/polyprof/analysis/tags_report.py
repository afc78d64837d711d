"""``tags``: every label key and value with the weight of the samples
carrying it, as ``go tool pprof -tags`` lists them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.options import Options
from polyprof.analysis.result import Result
from polyprof.analysis.tags import num_label_units
from polyprof.model import units
from polyprof.model.profile import Profile, ValueType

__all__ = ["TagRow", "TagsResult", "tag_report"]


@dataclass(frozen=True)
class TagRow:
    """One label value: its key, the value as pprof prints it (numbers scaled in
    their unit, e.g. ``1kB``) and the summed weight of the samples carrying it."""

    key: str
    value: str
    weight: int
    numeric: bool = False


@dataclass(repr=False)
class TagsResult(Result):
    """``go tool pprof -tags``: rows grouped by key (keys by name), values by |weight|
    then name. A sample adds its weight once per value it carries. ``to_pandas()``
    etc. give one row per (key, value)."""

    ROW: ClassVar[type | None] = TagRow

    sample_type: ValueType
    rows: list[TagRow]

    def key_totals(self) -> dict[str, int]:
        """Each key's total (the 100% of its values' percentages), in row order."""
        out: dict[str, int] = {}
        for row in self.rows:
            out[row.key] = out.get(row.key, 0) + row.weight
        return out


def tag_report(src: Profile | FilterResult, options: Options | None = None) -> TagsResult:
    """Every label of ``src`` (filters of ``options`` applied unless already) with its weight."""
    o = options or Options()
    fr = filters.prepare(src, o)
    p = fr.profile
    _, values, vt, _ = fr.column(o.sample_index)
    per_set = np.zeros(len(p.labelsets), dtype=np.int64)
    used = np.zeros(len(p.labelsets), dtype=bool)
    if len(values):
        located = p.samples.stack >= 0  # pprof drops samples without locations before any report
        np.add.at(per_set, p.samples.labelset[located], values[located])
        used[p.samples.labelset[located]] = True  # label sets of filtered-out samples stay in the table
    unit_of = num_label_units(p)
    weights: dict[tuple[str, str, bool], int] = {}
    for labels, weight, live in zip(p.labelsets, per_set.tolist(), used.tolist()):
        if not live:
            continue
        for lab in labels:
            numeric = lab.str is None
            text = (units.scaled_label(lab.num or 0, unit_of.get(lab.key, lab.key), "minimum") if numeric
                    else lab.str or "")
            key = (lab.key, text, numeric)
            weights[key] = weights.get(key, 0) + weight
    rows = sorted((TagRow(k, v, w, n) for (k, v, n), w in weights.items()),
                  key=lambda r: (r.key, -abs(r.weight), r.value))
    return TagsResult(vt, rows)