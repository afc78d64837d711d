"""Which samples a store query is about: the cohort, and the SQL that reduces it.

A :class:`Cohort` is a ``--where`` predicate on ``profiles`` plus an optional
time window (``--from``/``--to``, absolute). :func:`select` evaluates the
predicate (checked by :mod:`polyprof.store.where`) to the selected profile
rows of one sample type and :func:`reduce_sql` writes the one query the
engine runs over ``samples``: filter (sample type, day partitions of the
selected profiles, time window) joined to the selection, GROUP BY the keys an
analysis needs (the leaf callsite; labels, pid/tid, time or cpu when a
filter or report needs them), sum the values. Positive and negative values
are summed apart, so the sum of absolute values (pprof's 100%) survives.

The sample type is ``--sample-index`` when given (a type name, or a number:
the type's index in its source profile), else the type that is the default
of most selected profiles. Units of one family (microseconds and
nanoseconds) are scaled to the finest, as ``go tool pprof`` merges them.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from polyprof.errors import OptionsError
from polyprof.model import units
from polyprof.model.profile import ValueType
from polyprof.store.layout import schema
from polyprof.store.where import check_where

__all__ = ["Cohort", "Selection", "parse_time", "reduce_sql", "select"]

_SELECT_COLUMNS = ("profile_id", "sample_type", "sample_unit", "type_index", "is_default", "day", "time_nanos",
                   "duration", "period", "period_type", "period_unit", "format", "n_samples", "total")


def parse_time(value: Any) -> int | None:
    """ns since the epoch from an int (ns), a datetime, or text: ISO date/time (UTC unless
    it says otherwise) or a number with unit s/ms/us/ns since the epoch."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
        return int(stamp.timestamp() * 1e9)
    text = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ns|us|ms|s)", text)
    if m:
        return int(float(m.group(1)) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)])
    try:
        stamp = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise OptionsError(f"bad time {text!r}: use an ISO date or time (2024-05-01, 2024-05-01T12:00) "
                           "or seconds since the epoch with a unit (1714550400s)") from None
    return parse_time(stamp)


@dataclass(frozen=True)
class Cohort:
    """A selection of profiles: ``where`` (SQL predicate on profiles) and a time window."""

    where: str | None = None
    time_from: Any = None
    time_to: Any = None

    def window(self) -> tuple[int | None, int | None]:
        return parse_time(self.time_from), parse_time(self.time_to)

    def sql(self) -> str:
        """The condition on ``profiles`` rows: the checked ``where`` and overlap with the window."""
        conditions = [f"({check_where(self.where, profile_columns())})"] if self.where else []
        start, end = self.window()
        if start is not None:  # profiles overlapping the window; samples are cut in reduce_sql
            conditions.append(f"time_nanos + COALESCE(duration, 0) >= {start}")
        if end is not None:
            conditions.append(f"time_nanos < {end}")
        return " AND ".join(conditions) or "TRUE"

    def describe(self) -> str:
        parts = [self.where] if self.where else []
        start, end = self.window()
        if start is not None or end is not None:
            parts.append(f"time in [{self.time_from or ''}, {self.time_to or ''})")
        return " and ".join(parts) or "all profiles"


@dataclass
class Selection:
    """The selected profiles of one sample type and how to reduce their samples."""

    cohort: Cohort
    rows: Any                      # Arrow table of profiles rows (_SELECT_COLUMNS + scale)
    sample_type: ValueType         # the unit values are expressed in after scaling
    days: list[str]
    scaled: bool                   # units differ: values are multiplied by the row's scale
    everything: bool               # every profile of this sample type: no join needed
    all_types: list[ValueType] = field(default_factory=list)

    @property
    def profile_ids(self) -> Any:
        return self.rows.column("profile_id")


def profile_columns() -> set[str]:
    return set(schema("profiles").names)


def select(engine: Any, cohort: Cohort, sample_index: str | int | None = None) -> Selection:
    """Evaluate ``cohort`` to the profile rows of one sample type (see the module doc)."""
    rows = engine.query(f"SELECT {', '.join(_SELECT_COLUMNS)} FROM profiles WHERE {cohort.sql()}")
    if not rows.num_rows:
        raise OptionsError(f"no profile in the store matches {cohort.describe()}")
    vt, mask = _sample_type(rows, sample_index)
    chosen = rows.filter(mask)
    target, scales = _units(vt, chosen)
    import pyarrow as pa

    chosen = chosen.append_column("scale", pa.array([scales[u] for u in chosen.column("sample_unit").to_pylist()],
                                                    pa.int64()))
    days = sorted(set(chosen.column("day").to_pylist()))
    start, end = cohort.window()
    everything = not cohort.where and start is None and end is None
    return Selection(cohort, chosen, ValueType(vt, target), days, len(scales) > 1, everything,
                     _all_types(rows))


def _all_types(rows: Any) -> list[ValueType]:
    pairs = zip(rows.column("sample_type").to_pylist(), rows.column("sample_unit").to_pylist())
    return [ValueType(t, u) for t, u in dict.fromkeys(pairs)]


def _sample_type(rows: Any, spec: str | int | None) -> tuple[str, Any]:
    import numpy as np

    types = np.array(rows.column("sample_type").to_pylist(), dtype=object)
    if spec is None or spec == "":
        votes = Counter(t for t, d in zip(types.tolist(), rows.column("is_default").to_pylist()) if d)
        votes = votes or Counter(types.tolist())
        name = min(votes, key=lambda t: (-votes[t], t))  # most profiles' default; ties by name
        return name, types == name
    if isinstance(spec, int) or str(spec).isdigit():
        index = np.array(rows.column("type_index").to_pylist())
        mask = index == int(spec)
        if not mask.any():
            raise OptionsError(f"--sample-index {spec}: no selected profile has that many sample types")
        names = sorted(set(types[mask].tolist()))
        if len(names) > 1:
            raise OptionsError(f"--sample-index {spec} names different types in the selection "
                               f"({', '.join(names)}); give the type by name")
        return names[0], mask
    mask = types == spec
    if not mask.any():
        raise OptionsError(f"unknown sample type {spec!r}; the selection has: {', '.join(sorted(set(types)))}")
    return str(spec), mask


def _units(sample_type: str, rows: Any) -> tuple[str, dict[str, int]]:
    present = sorted(set(rows.column("sample_unit").to_pylist()))
    target = present[0]
    for u in present[1:]:
        finer = units.finest(target, u)
        if finer is None:
            raise OptionsError(f"the selection has sample type {sample_type!r} in units that do not convert "
                               f"({', '.join(present)}); narrow --where to one of them")
        target = finer
    return target, {u: int(round(units.scale(1, u, target)[0])) if u != target else 1 for u in present}


#: Up to this many selected profiles, the reduce query also lists their ids: DuckDB filters the
#: scanned rows by the list (2-4x faster than probing the join with every row of the days read).
IN_LIST_PROFILES = 1000


def reduce_sql(sel: Selection, keys: tuple[str, ...] = (), kept: str | None = None, side: bool = False,
               signed: bool = True, rollup: bool = False) -> str:
    """The query summing the selected samples by leaf callsite (+ ``keys``).

    ``kept``: a boolean SQL expression on ``s`` grouped as column ``kept``
    (samples a pushed-down filter keeps). Reads the registered table ``sel``;
    ``side``: group by its ``side`` column too (two cohorts in one scan);
    ``signed``: values may be negative (else one plain sum, ``neg`` NULL);
    ``rollup``: read the ``rollup`` view (samples already summed by profile,
    stack and ts; see :mod:`polyprof.store.layout`), possible only without
    ``keys`` and ``kept``.
    """
    assert not (rollup and (keys or kept)), "the rollup has no labels, pids or threads"
    scale = " * p.scale" if sel.scaled else ""
    group = ["s.callsite_id", *(f"s.{k}" for k in keys), *(["p.side"] if side else [])]
    cols = list(group) + ([f"({kept}) AS kept"] if kept else [])
    where = [f"s.sample_type = {_literal(_type_name(sel))}"]
    join = ""
    if not sel.everything or sel.scaled:
        join = " JOIN sel p ON s.profile_id = p.profile_id"
        where.append(f"s.day IN ({', '.join(_literal(d) for d in sel.days)})")
        if sel.rows.num_rows <= IN_LIST_PROFILES:  # filtered in the scan, before the join
            where.append(f"s.profile_id IN ({', '.join(str(i) for i in sel.rows.column('profile_id').to_pylist())})")
    start, end = sel.cohort.window()
    if start is not None:
        where.append(f"COALESCE(s.ts, p.time_nanos) >= {start}")
    if end is not None:
        where.append(f"COALESCE(s.ts, p.time_nanos) < {end}")
    by = ", ".join(group + (["kept"] if kept else []))
    if rollup:
        sums = (f"SUM(s.pos{scale}) AS pos, SUM(s.neg{scale}) AS neg" if signed
                else f"SUM(s.pos{scale}) AS pos, CAST(NULL AS BIGINT) AS neg")
    else:
        sums = (f"SUM(s.value{scale}) FILTER (WHERE s.value > 0) AS pos, "
                f"SUM(s.value{scale}) FILTER (WHERE s.value < 0) AS neg"
                if signed else f"SUM(s.value{scale}) AS pos, CAST(NULL AS BIGINT) AS neg")
    return (f"SELECT {', '.join(cols)}, {sums} FROM {'rollup' if rollup else 'samples'} s{join} "
            f"WHERE {' AND '.join(where)} GROUP BY {by}")


def _type_name(sel: Selection) -> str:
    return sel.rows.column("sample_type")[0].as_py()


def _literal(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"
