"""Sample labels as pprof's tag filters and reports see them.

- :func:`num_label_units`: the unit of every numeric label key (the first
  unit seen, else one inferred from the key, as pprof does);
- :func:`compile_filter`: a ``--tagfocus``/``--tagignore`` expression as a
  predicate over a label set;
- :func:`sample_numbers`: a per-sample number from a sample column or, when
  the column is absent, from a numeric label of the same name;

The ``tags`` report itself is :mod:`polyprof.analysis.tags_report`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model import units
from polyprof.model.profile import Label, Profile

__all__ = ["LabelPredicate", "compile_filter", "num_label_units", "sample_numbers"]

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
