"""Sample labels as pprof's tag filters and reports see them.

- :func:`num_label_units`: the unit of every numeric label key (the first
  unit seen, else one inferred from the key, as pprof does);
- :func:`compile_filter`: a ``--tagfocus``/``--tagignore`` expression as a
  predicate over a label set;
- :func:`sample_numbers`: a per-sample number from a sample column or, when
  the column is absent, from a numeric label of the same name;
- :func:`tag_report`: every label key and value with the weight of the
  samples carrying it, as ``go tool pprof -tags`` lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model import units
from polyprof.model.profile import Label, Profile, ValueType

if TYPE_CHECKING:
    from polyprof.analysis.filters import FilterResult
    from polyprof.analysis.options import Options

__all__ = ["LabelPredicate", "TagRow", "TagsResult", "compile_filter", "num_label_units", "sample_numbers",
           "tag_report"]

LabelPredicate = Callable[[tuple[Label, ...]], bool]

_RANGE_PART = re.compile(r"([+-]?[0-9]+)([A-Za-z]+)?")


def num_label_units(p: Profile) -> dict[str, str]:
    """Unit of each numeric label key: first non-empty unit, else inferred from the key."""
    found: dict[str, str] = {}
    for labels in p.labelsets:
        for lab in labels:
            if lab.str is None:
                if lab.unit and not found.get(lab.key):
                    found[lab.key] = lab.unit
                else:
                    found.setdefault(lab.key, "")
    return {k: u or ("bytes" if k in ("alignment", "request") else k) for k, u in found.items()}


def compile_filter(name: str, value: str | None, p: Profile) -> LabelPredicate | None:
    """pprof's tag filter syntax (see :mod:`polyprof.analysis.filters`)."""
    if not value:
        return None
    key, _, expr = value.partition("=") if "=" in value else ("", "", value)
    numeric = _numeric_range(expr, name)
    if numeric is not None:
        return _numeric_predicate(key, numeric, num_label_units(p))
    try:
        regexes = [re.compile(part) for part in expr.split(",")]
    except re.error as exc:
        raise OptionsError(f"bad regular expression in {{{name}}}={value!r}: {exc}", options=(name,)) from None
    if key:
        return lambda labels: any(rx.search(lab.str) for lab in labels
                                  if lab.key == key and lab.str is not None for rx in regexes)
    return lambda labels: all(any(rx.search(f"{lab.key}:{lab.str}") for lab in labels if lab.str is not None)
                              for rx in regexes)


def _numeric_range(expr: str, name: str) -> Callable[[int, str], bool] | None:
    """A value test for 'V', 'V:', ':V' or 'LO:HI' (with units), or None if ``expr`` is not one."""
    parts = list(_RANGE_PART.finditer(expr))[:2]
    if not parts:
        return None
    lo, unit = _scaled(parts[0], None)
    first = parts[0].group(0)
    if len(parts) == 1:
        tests = {first: lambda v: v == lo, first + ":": lambda v: v >= lo, ":" + first: lambda v: v <= lo}
        test = tests.get(expr)
    else:
        hi, unit2 = _scaled(parts[1], unit)
        test = (lambda v: lo <= v <= hi) if expr == f"{first}:{parts[1].group(0)}" and unit2 == unit else None
    if test is None:
        return None

    def check(value: int, value_unit: str) -> bool:
        v, u = units.scale(value, value_unit, unit)
        return u == unit and test(v)

    return check


def _scaled(m: re.Match[str], unit: str | None) -> tuple[float, str]:
    suffix = m.group(2) or ""
    return units.scale(int(m.group(1)), suffix, suffix if unit is None else unit)


def _numeric_predicate(key: str, test: Callable[[int, str], bool], unit_of: dict[str, str]) -> LabelPredicate:
    def predicate(labels: tuple[Label, ...]) -> bool:
        return any(test(lab.num or 0, unit_of.get(lab.key, lab.key)) for lab in labels
                   if lab.str is None and (not key or lab.key == key))
    return predicate


def sample_numbers(p: Profile, name: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(values, present) of sample column ``name``, else of numeric label ``name``.

    ``(None, None)`` when neither exists. Samples without the label have
    ``present`` False (and value 0).
    """
    col = getattr(p.samples, name, None)
    if col is not None:
        return np.asarray(col, dtype=np.int64), np.ones(len(col), dtype=bool)
    per_set = [next((lab.num or 0 for lab in labels if lab.key == name and lab.str is None), None)
               for labels in p.labelsets]
    if all(v is None for v in per_set):
        return None, None
    has = np.array([v is not None for v in per_set], dtype=bool)
    vals = np.array([v or 0 for v in per_set], dtype=np.int64)
    ls = p.samples.labelset
    return vals[ls], has[ls]


# ---------------------------------------------------------------- the tags report

@dataclass(frozen=True)
class TagRow:
    """One label value: its key, the value as pprof prints it (numbers scaled in
    their unit, e.g. ``1kB``) and the summed weight of the samples carrying it."""

    key: str
    value: str
    weight: int
    numeric: bool = False


@dataclass
class TagsResult:
    """``go tool pprof -tags``: rows grouped by key (keys by name), values by |weight|
    then name. A sample adds its weight once per value it carries."""

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
    from polyprof.analysis import filters
    from polyprof.analysis.options import Options

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
            text = units.scaled_label(lab.num or 0, unit_of.get(lab.key, lab.key), "minimum") if numeric else lab.str
            key = (lab.key, text, numeric)
            weights[key] = weights.get(key, 0) + weight
    rows = sorted((TagRow(k, v, w, n) for (k, v, n), w in weights.items()),
                  key=lambda r: (r.key, -abs(r.weight), r.value))
    return TagsResult(vt, rows)