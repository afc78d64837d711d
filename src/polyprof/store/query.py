"""Cohort + Options -> the FilterResult every single-file analysis takes.

:func:`load` selects the profiles (:mod:`.cohort`), has the engine reduce
their samples with the keys the options need, rebuilds a Profile
(:mod:`.fold`) and applies the options' filters with
:func:`polyprof.analysis.filters.apply`, exactly as for one file:

- frame filters (focus, ignore, hide, show, show_from, prune_from) need only
  stacks;
- tag filters need labels and ``--pid``/``--tid`` need the pid/tid columns
  (or numeric labels): the reduction keeps them as grouping keys;
- ``--thread`` is pushed down: the distinct thread names of the selection
  are matched with Python's ``re`` (pprof semantics) and the reduction
  groups samples by whether their thread matched, so percentages stay
  relative to the whole selection as for one file;
- ``--time-range`` (relative to each profile's start) has no fleet meaning:
  the store selects by absolute time with the cohort's window instead.

:func:`merged_profile` rebuilds every sample type at once (for export): the
samples of all selected profiles, equal samples summed as ``go tool pprof``
does when it merges.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FILTERS, FilterResult
from polyprof.analysis.options import Options
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile, ValueType
from polyprof.store.cohort import Cohort, Selection, _literal, reduce_sql, select
from polyprof.store.fold import Dictionaries, ProfileMeta, build_profile

__all__ = ["TRACE_KEYS", "load", "merged_profile", "prefetch_pair"]

#: Grouping keys of ``traces``: samples differing in any of them print apart.
TRACE_KEYS = ("labelset_id", "ts", "pid", "tid", "cpu")


def load(engine: Any, dicts: Dictionaries, cohort: Cohort, options: Options | None = None, *,
         keys: tuple[str, ...] | None = None) -> FilterResult:
    """The cohort's samples as a filtered profile (see the module doc)."""
    o = options or Options()
    if o.time_range not in (None, (None, None)):
        raise OptionsError("--time-range is relative to one profile's start; for a store use --from/--to")
    sel = dicts.memo(("select", cohort.sql(), cohort.window(), o.sample_index),
                     lambda: select(engine, cohort, o.sample_index))
    o = dataclasses.replace(o, sample_index=None)  # the rebuilt profile has the one selected type
    keys = _keys(o) if keys is None else keys
    kept = _thread_predicate(engine, dicts, sel, o.thread) if o.thread else None
    reduced = _reduce(engine, dicts, sel, reduce_sql(sel, keys, kept, signed=dicts.signed_values,
                                                     rollup=not keys and not kept))
    cols = _columns(reduced, keys + (("kept",) if kept else ()))
    profile = build_profile(dicts, cols["callsite_id"], cols["value"], _meta(sel),
                            {k: cols[k] for k in keys if k in cols})
    if kept is None:
        return filters.apply(profile, o)
    return _with_pushed_thread(profile, cols["kept"].astype(bool), o)


def _keys(o: Options) -> tuple[str, ...]:
    """The sample columns the reduction keeps for the options' filters."""
    return (("labelset_id",) if o.tagfocus or o.tagignore or o.pid or o.tid else ()) + \
           (("pid", "tid") if o.pid or o.tid else ())


def prefetch_pair(engine: Any, dicts: Dictionaries, cohorts: tuple[Cohort, Cohort],
                  options: Options | None = None) -> None:
    """Reduce the samples of two cohorts (a diff's base and new) in one scan of ``samples``,
    grouped by side, and remember each side as :func:`load` would have reduced it alone.

    Nothing happens when the two would not reduce alike (different sample types or time
    windows, a pushed-down ``--thread``); :func:`load` then reduces each side itself.
    """
    o = options or Options()
    if o.thread or cohorts[0].window() != cohorts[1].window():
        return
    sels = [dicts.memo(("select", c.sql(), c.window(), o.sample_index), lambda c=c: select(engine, c, o.sample_index))
            for c in cohorts]
    if _type_name(sels[0]) != _type_name(sels[1]) or sels[0].sample_type != sels[1].sample_type:
        return
    keys = _keys(o)
    todo = [(sel, reduce_sql(sel, keys, signed=dicts.signed_values, rollup=not keys)) for sel in sels]
    todo = [(sel, sql) for sel, sql in todo if not dicts.has(("reduce", sql, _digest(sel)))]
    if len(todo) < 2:
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    both = pa.concat_tables([sel.rows.select(["profile_id", "sample_type", "time_nanos", "scale"]).append_column(
        "side", pa.array(np.full(sel.rows.num_rows, i, np.int8))) for i, (sel, _) in enumerate(todo)])
    days = sorted(set(sels[0].days) | set(sels[1].days))
    pair = dataclasses.replace(sels[0], rows=both, days=days, scaled=sels[0].scaled or sels[1].scaled,
                               everything=False)
    engine.register("sel", both)
    reduced = engine.query(reduce_sql(pair, keys, side=True, signed=dicts.signed_values, rollup=not keys))
    side = reduced.column("side")
    for i, (sel, sql) in enumerate(todo):
        part = reduced.filter(pc.equal(side, i))
        dicts.memo(("reduce", sql, _digest(sel)), lambda part=part: part.drop_columns(["side"]))


def _type_name(sel: Selection) -> str:
    return str(sel.rows.column("sample_type")[0].as_py())


def _digest(sel: Selection) -> bytes:
    import hashlib

    return hashlib.blake2b(sel.rows.column("profile_id").to_numpy().tobytes(), digest_size=16).digest()


def _register(engine: Any, sel: Selection) -> None:
    engine.register("sel", sel.rows.select(["profile_id", "time_nanos", "scale"]))


def _reduce(engine: Any, dicts: Dictionaries, sel: Selection, sql: str) -> Any:
    """Run a query over the selection ``sel`` (registered as ``sel``), remembered per selection."""
    def run() -> Any:
        _register(engine, sel)
        return engine.query(sql)

    return dicts.memo(("reduce", sql, _digest(sel)), run)


def _thread_predicate(engine: Any, dicts: Dictionaries, sel: Selection, regex: str) -> str:
    try:
        rx = re.compile(regex)
    except re.error as exc:
        raise OptionsError(f"--thread: bad regular expression {regex!r}: {exc}") from None
    sql = reduce_sql(sel).split(" FROM ", 1)[1].split(" GROUP BY ", 1)[0]
    threads = _reduce(engine, dicts, sel, f"SELECT DISTINCT s.thread FROM {sql}")
    names = [r for r in threads.column(0).to_pylist() if r is not None]
    if not names:
        raise OptionsError("--thread: the selected profiles have no thread names")
    hits = sorted(n for n in names if rx.search(n))
    return f"s.thread IN ({', '.join(_literal(n) for n in hits)})" if hits else "FALSE"


def _columns(reduced: Any, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Reduced rows as numpy columns, in a fixed order (engines return rows in any order),
    with each group's positive and negative sums as separate rows."""
    def col(name: str) -> np.ndarray:
        c = reduced.column(name)
        if c.null_count == len(c):
            return None  # type: ignore[return-value]
        if c.type.id == 1:  # boolean (the pushed-down "kept" flag)
            c = c.cast("int8")
        return c.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)

    cols = {name: col(name) for name in ("callsite_id", *keys)}
    cols = {k: v for k, v in cols.items() if v is not None}
    pos, neg = col("pos"), col("neg")
    n = reduced.num_rows
    pos = pos if pos is not None else np.zeros(n, np.int64)
    neg = neg if neg is not None else np.zeros(n, np.int64)
    rows = np.concatenate([np.flatnonzero(pos), np.flatnonzero(neg)])
    value = np.concatenate([pos[pos != 0], neg[neg != 0]])
    order = np.lexsort([value] + [cols[k][rows] for k in reversed(list(cols))])
    out = {k: v[rows][order] for k, v in cols.items()}
    out["value"] = value[order]
    return out


def _meta(sel: Selection) -> ProfileMeta:
    rows = sel.rows
    formats = set(rows.column("format").to_pylist())
    times = [t for t in rows.column("time_nanos").to_pylist() if t]
    durations = [d for d in rows.column("duration").to_pylist() if d]
    periods = [(t, u, p) for t, u, p in zip(rows.column("period_type").to_pylist(),
                                            rows.column("period_unit").to_pylist(),
                                            rows.column("period").to_pylist()) if t is not None]
    period_type, period = None, 0
    if periods:
        (ptype, punit), _ = Counter((t, u) for t, u, _ in periods).most_common(1)[0]
        period_type = ValueType(ptype, punit)
        period = max(p or 0 for t, u, p in periods if (t, u) == (ptype, punit))
    # The duration is the profiled time of the cohort (the sum), so --normalize rate
    # gives the rate per profiled second of the whole fleet.
    return ProfileMeta(sel.sample_type, formats.pop() if len(formats) == 1 else "store",
                       min(times) if times else 0, sum(durations), period_type, period)


def _with_pushed_thread(profile: Profile, kept: np.ndarray, o: Options) -> FilterResult:
    """Filter result of a profile whose samples ``kept`` passed the pushed-down --thread filter."""
    from polyprof.analysis.stacks import take_samples

    rest = filters.apply(take_samples(profile, kept), dataclasses.replace(o, thread=None))
    rest.original = profile
    rest.rows = np.flatnonzero(kept)[rest.rows]
    rest.matched = {"thread": bool(kept.any()), **rest.matched}
    rest.active = sorted(rest.active + [f"thread={o.thread}"], key=lambda a: FILTERS.index(a.split("=", 1)[0]))
    return rest


def merged_profile(engine: Any, dicts: Dictionaries, cohort: Cohort) -> Profile:
    """Every sample type of the cohort in one profile (equal samples summed; units aligned)."""
    first = select(engine, cohort)
    parts = []
    for sel in _type_order([select(engine, cohort, vt.type) for vt in first.all_types]):
        parts.append((sel, _reduce(engine, dicts, sel, reduce_sql(sel, TRACE_KEYS))))
    return _pivot(dicts, parts, first.sample_type.type)


def _type_order(sels: list[Selection]) -> list[Selection]:
    by_name: dict[str, Selection] = {}
    for sel in sels:
        by_name.setdefault(sel.sample_type.type, sel)
    rank = {name: min(s.rows.column("type_index").to_pylist()) for name, s in by_name.items()}
    return sorted(by_name.values(), key=lambda s: (rank[s.sample_type.type], s.sample_type.type))


def _pivot(dicts: Dictionaries, parts: list[tuple[Selection, Any]], default_type: str) -> Profile:
    keys = ("callsite_id", *TRACE_KEYS)
    present = [k for k in TRACE_KEYS if any(t.column(k).null_count < t.num_rows for _, t in parts)]
    blocks = []
    for i, (_, t) in enumerate(parts):
        mat = np.stack([t.column(k).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) for k in keys], 1)
        val = (t.column("pos").fill_null(0).to_numpy(zero_copy_only=False)
               + t.column("neg").fill_null(0).to_numpy(zero_copy_only=False)).astype(np.int64)
        blocks.append((mat, np.full(val.size, i), val))
    mat = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros((0, len(keys)), np.int64)
    uniq, inverse = np.unique(mat, axis=0, return_inverse=True)
    values = np.zeros((uniq.shape[0], len(parts)), dtype=np.int64)
    np.add.at(values, (inverse.reshape(-1), np.concatenate([b[1] for b in blocks])), np.concatenate([b[2] for b in blocks]))
    meta = dataclasses.replace(_meta(parts[0][0]), default_type=default_type,
                               duration_nanos=_span(parts[0][0]))
    types = [s.sample_type for s, _ in parts]
    keep = values.any(axis=1)  # all-zero samples are dropped, as pprof's merge does
    return build_profile(dicts, uniq[keep, 0], values[keep], meta,
                         {k: uniq[keep, 1 + TRACE_KEYS.index(k)] for k in present}, sample_types=types)


def _span(sel: Selection) -> int:
    """From the earliest start to the latest end, as merge combines durations."""
    rows = [(t, d or 0) for t, d in zip(sel.rows.column("time_nanos").to_pylist(),
                                        sel.rows.column("duration").to_pylist()) if t]
    if not rows:
        return max((d or 0 for d in sel.rows.column("duration").to_pylist()), default=0)
    return max(t + d for t, d in rows) - min(t for t, _ in rows)
