"""Turning what a read collected into profiles, with the read options applied.

Selections: ``pid`` and ``tid`` keep samples of those processes / threads
(heap dumps and allocation streams have no thread, so ``tid`` leaves them
out); ``heap`` keeps heap dumps of that heap (and allocation streams of that
``heap_id``); ``time_range`` is relative to the start of the trace (its
earliest sample or dump time) and keeps samples with start <= time < end
(heap dumps by their dump time). ``ReadOptions.extra["aggregate"]`` sums
samples with the same stack, process, thread, cpu and labels and drops their
times, for very large traces.

Every profile gets ``profile_labels`` (kind, pid, and event or heap) so
``polyprof.read`` can merge several, the trace's warnings (what was
skipped or repaired), and ``time_nanos`` as wall-clock time when the trace
has a REALTIME clock snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from polyprof.errors import OptionsError
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._catalog import Emitter
from polyprof.formats.perfetto._chrome import ALLOC_TYPES
from polyprof.formats.perfetto._heap import HEAP_TYPES, Dump
from polyprof.formats.perfetto._perf import PerfConfig, remap_in_place
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import distinct, factorize_rows
from polyprof.model.compact import is_constant_view
from polyprof.model.memory import release_free_memory
from polyprof.model.profile import Label, Profile

if TYPE_CHECKING:
    from polyprof.formats.perfetto._reader import TraceReader

__all__ = ["build_profiles", "sort_by_time_in_place"]

_OPTIONAL = ("time", "pid", "tid", "cpu")


def build_profiles(r: "TraceReader") -> list[Profile]:
    r.heap.finish(list(r.seqs.values()))
    r.release_interned()  # every stack is in the catalog now
    perf, chrome, allocs = r.perf.columns(), r.chrome.columns(), r.allocs.columns()
    stacks = r.stack_samples.columns()
    dumps = r.heap.dumps
    ends = r.trace_times(np.array([d.end_raw for d in dumps], dtype=np.int64), np.ones(len(dumps), bool),
                         np.full(len(dumps), r.clock_index(S.MONOTONIC_COARSE, 0), dtype=np.int32))
    starts = [None if d.start_raw is None else int(r.trace_times(
        np.array([d.start_raw], np.int64), np.ones(1, bool),
        np.array([r.clock_index(S.MONOTONIC_COARSE, 0)], np.int32))[0]) for d in dumps]
    times = [c["time"] for c in (perf, chrome, allocs, stacks) if c is not None] + [ends]
    origin = min((int(t.min()) for t in times if t.size), default=0)
    window = _window(r, origin)
    warnings = [f"{what}: {n}" for what, n in sorted(r.stats.items()) if n]
    if r.catalog.frame_kinds:
        warnings.append(f"frame kind annotations not kept: {r.catalog.frame_kinds}")
    out: list[Profile] = []
    for d, end, start in zip(dumps, ends.tolist(), starts):
        if _keep_dump(r, d, end, window):
            out.append(_heap_profile(r, d, end, start))
    if perf is not None:
        out += _perf_profiles(r, perf, window)
    if chrome is not None:
        out += _chrome_profiles(r, chrome, window)
    if allocs is not None:
        out += _alloc_profiles(r, allocs, window)
    if stacks is not None:
        out += _stack_sample_profiles(r, stacks, window)
    for p in out:
        p.warnings = list(warnings)
    apply_profile_facts(r.profile_facts, out)
    return out


def apply_profile_facts(facts: dict[str, Any], profiles: list[Profile]) -> None:
    """Profile facts a polyprof-written trace keeps in its ``polyprof.profile`` metadata.

    A trace has no field for the default sample type, or for the start time
    and duration of a profile without sample times; polyprof's writer puts
    them in a ChromeEventBundle metadata entry (which trace processor shows
    in its ``metadata`` table). The default applies to every profile that
    has a sample type of that name.
    """
    default = facts.get("default_sample_type")
    for p in profiles:
        if isinstance(default, str) and any(vt.type == default for vt in p.sample_types):
            p.default_sample_type = default
        for key in ("time_nanos", "duration_nanos"):
            if isinstance(facts.get(key), int) and not isinstance(facts[key], bool):
                setattr(p, key, facts[key])


def _window(r: "TraceReader", origin: int) -> tuple[int | None, int | None]:
    tr = r.options.time_range
    if not tr or tr == (None, None):
        return None, None
    if r.options.extra.get("aggregate"):
        raise OptionsError("a time range needs sample times; it cannot be combined with the aggregate option")
    lo, hi = tr
    return (None if lo is None else origin + lo), (None if hi is None else origin + hi)


def _in_window(t: np.ndarray, window: tuple[int | None, int | None]) -> np.ndarray:
    keep = np.ones(t.size, dtype=bool)
    if window[0] is not None:
        keep &= t >= window[0]
    if window[1] is not None:
        keep &= t < window[1]
    return keep


def _keep_dump(r: "TraceReader", d: Dump, end: int, window: tuple[int | None, int | None]) -> bool:
    return r.options.tid is None and bool(_in_window(np.array([end]), window)[0])


def _select(r: "TraceReader", cols: dict[str, np.ndarray], window: tuple[int | None, int | None],
            has_tid: bool = True) -> np.ndarray:
    keep = _in_window(cols["time"], window)
    if r.options.pid is not None:
        keep &= np.isin(cols["pid"], list(r.options.pid))
    if r.options.tid is not None:
        keep &= np.isin(cols["tid"], list(r.options.tid)) if has_tid else False
    return keep


def _wall_clock(r: "TraceReader", t: int) -> int:
    wall = r.clocks.to_clock(t, S.REALTIME)
    return wall if wall is not None and wall > 0 else 0


def _new_builder(types: list[tuple[str, str]], default: str, labels: dict[str, Any],
                 compact: bool = False) -> ProfileBuilder:
    b = ProfileBuilder("perfetto", compact=compact)
    b.set_sample_types(types)
    b.meta.default_sample_type = default
    b.meta.extras.profile_labels = labels
    return b


def _finish(r: "TraceReader", b: ProfileBuilder, cols: dict[str, np.ndarray], rows: np.ndarray | slice,
            labelsets: np.ndarray, present: tuple[str, ...], consume: bool = False) -> Profile:
    """Add the samples ``rows`` of ``cols`` (sorted by time) and finish the profile
    (``rows`` a ``slice(None)``: every row, taken without copies when in time order;
    ``consume``: no other profile needs ``cols``, whose columns may then be overwritten: sorted
    in place, the stacks mapped in place)."""
    if r.options.extra.get("aggregate"):
        return _finish_aggregated(r, b, cols, rows, labelsets, present)
    n = cols["stack"].size
    if not isinstance(rows, slice) and rows.size == n and (n == 0 or (rows[0] == 0 and (np.diff(rows) == 1).all())):
        rows = slice(None)
    order: np.ndarray | None = None if isinstance(rows, slice) else rows  # None: every row, in order
    t = cols["time"][rows] if "time" in present else None
    if t is not None and (t[1:] < t[:-1]).any():
        if consume and isinstance(rows, slice):  # every row, which no other profile needs
            others = [cols[k] for k in ("stack", "values", *present) if k != "time"]
            sort_by_time_in_place(cols["time"], others + [labelsets])
        else:
            order = (np.arange(n) if order is None else order)[np.argsort(t, kind="stable")]
    pick = (lambda col: col) if order is None else (lambda col: col[order])  # no copies for a one-profile trace
    em = Emitter(r.catalog, b)
    optional = {k: pick(cols[k]) for k in _OPTIONAL if k in present}
    # Every row in order: the catalog stack column is the caller's to give up (a one-profile trace).
    stacks = em.callsites(pick(cols["stack"]), in_place=order is None and consume)
    b.add_samples_bulk(stacks, pick(cols["values"]), pick(labelsets), **optional)
    if em.mapping_offsets():
        b.meta.extras["mapping_offsets"] = em.mapping_offsets()
    if t is not None and t.size:
        t = pick(cols["time"])
        b.meta.time_nanos = _wall_clock(r, int(t[0]))
        b.meta.duration_nanos = int(t[-1] - t[0])
    return b.finish(check=False)


def sort_by_time_in_place(time: np.ndarray, columns: list[np.ndarray], window: int = 1 << 18,
                          chunk: int = 1 << 16) -> None:
    """Sort the rows of ``time`` and ``columns`` by time, in place, as a stable sort would.

    A trace's samples are rarely in time order (traced_perf writes each cpu's buffer in turn,
    so cpus interleave a few buffers apart), but rarely far out of it. So the rows are sorted
    one window at a time: after a window is sorted, its rows up to the earliest time of the
    rows after it are in their final place, and the rest start the next window (the window
    doubles while it places fewer than half its rows, so each row is sorted a bounded number
    of times; a trace written twice over ends as one window). Each column is
    permuted through a copy of one window, not of the column (a whole-column sort held a
    second copy of every column at the peak: 1419 MB for 13M samples)."""
    n = time.size
    if n < 2:
        return
    columns = [c for c in columns if not is_constant_view(c)]  # one value in every row: no permutation changes it
    # later[c]: the earliest time from row c * chunk on (the rows after a window are never
    # sorted before it is, so these stay true)
    later = np.minimum.accumulate(np.minimum.reduceat(time, np.arange(0, n, chunk))[::-1])[::-1]

    def earliest_after(hi: int) -> int:
        c = -(-hi // chunk)
        head = time[hi:min(c * chunk, n)]
        if c >= later.size:
            return int(head.min())
        return min(int(later[c]), int(head.min())) if head.size else int(later[c])

    lo, size = 0, window
    while lo < n:
        hi = min(lo + size, n)
        part = time[lo:hi]
        if (part[1:] < part[:-1]).any():
            order = np.argsort(part, kind="stable")
            for col in [time, *columns]:
                if col.ndim == 1:
                    col[lo:hi] = col[lo:hi][order]
                else:
                    for j in range(col.shape[1]):
                        col[lo:hi, j] = col[lo:hi, j][order]
            del order
        if hi == n:
            return
        placed = int(np.searchsorted(part, earliest_after(hi), side="right"))
        if placed == hi - lo:
            size = window
        elif 2 * placed < hi - lo:  # (a window kept for few rows would sort the same rows again)
            size *= 2
        lo += placed


def _finish_aggregated(r: "TraceReader", b: ProfileBuilder, cols: dict[str, np.ndarray], rows: np.ndarray | slice,
                       labelsets: np.ndarray, present: tuple[str, ...]) -> Profile:
    keys = [cols["stack"][rows], labelsets[rows]] + [cols[k][rows] for k in ("pid", "tid", "cpu") if k in present]
    inverse, first = factorize_rows(keys, in_order=True)  # rows in order of first sight
    uniq = np.stack([k[first] for k in keys], axis=1)
    values = np.zeros((uniq.shape[0], cols["values"].shape[1]), dtype=np.int64)
    np.add.at(values, inverse, cols["values"][rows])
    em = Emitter(r.catalog, b)
    optional = {k: uniq[:, 2 + i] for i, k in enumerate(k for k in ("pid", "tid", "cpu") if k in present)}
    b.add_samples_bulk(em.callsites(uniq[:, 0]), values, uniq[:, 1].astype(np.int32), **optional)
    if em.mapping_offsets():
        b.meta.extras["mapping_offsets"] = em.mapping_offsets()
    b.meta.extras["aggregated_samples"] = int(values[:, 0].sum()) if values.size else 0
    return b.finish(check=False)


def _labelsets(b: ProfileBuilder, combo: np.ndarray, sets: list[tuple[Label, ...]],
               in_place: bool = False) -> np.ndarray:
    """The builder's label set of each sample's combination ``combo`` (``in_place``: written over
    ``combo``, an int32 column nothing else needs)."""
    model = np.array([b.labelset(s) if s else 0 for s in sets], dtype=np.int32)
    if not combo.size:
        return np.zeros(0, dtype=np.int32)
    return remap_in_place(model, combo) if in_place and combo.dtype == np.int32 else model[combo]


def _heap_profile(r: "TraceReader", d: Dump, end: int, start: int | None) -> Profile:
    labels: dict[str, Any] = {"kind": "heap", "pid": d.pid, "heap": d.heap, "dump_time": end}
    if d.pid in r.processes:
        labels["process_name"] = r.processes[d.pid]
    b = _new_builder(HEAP_TYPES, "inuse_space", labels)
    facts = dict(d.facts, dump_time=end)
    b.meta.extras["heapprofd"] = facts
    nodes = d.nodes
    cols = {"stack": nodes, "values": d.values,
            "time": np.full(nodes.size, end, dtype=np.int64), "pid": np.full(nodes.size, d.pid, dtype=np.int64)}
    p = _finish(r, b, cols, slice(None), np.zeros(nodes.size, dtype=np.int32), ("time", "pid"))
    p.time_nanos = _wall_clock(r, start if start is not None else end)
    p.duration_nanos = end - start if start is not None else 0
    return p


def _perf_profiles(r: "TraceReader", cols: dict[str, np.ndarray], window: tuple) -> list[Profile]:
    keep = _select(r, cols, window)
    combo, sets = r.perf.labels(cols, r.thread_names)
    out = []
    present = tuple(k for k in _OPTIONAL if cols[f"has_{'ts' if k == 'time' else k}"].any())
    pids = cols["pid"] if "pid" in present else np.zeros(cols["pid"].size, np.int64)
    every = bool(keep.all())  # the usual case: no copies of whole columns to select nothing
    configs = distinct(cols["config"] if every else cols["config"][keep]).tolist()
    for config in configs:
        cfg = r.perf.configs[config]
        in_cfg = keep if len(configs) == 1 else keep & (cols["config"] == config)
        in_pids = distinct(pids if every and len(configs) == 1 else pids[in_cfg]).tolist()
        for pid in in_pids:
            mine = in_cfg if len(in_pids) == 1 else in_cfg & (pids == pid)
            whole = bool(mine.all())  # the trace's only profile: its columns are taken, not copied
            rows: np.ndarray | slice = slice(None) if whole else np.flatnonzero(mine)
            del mine
            labels: dict[str, Any] = {"kind": "perf", "event": cfg.timebase[0]}
            if "pid" in present:
                labels["pid"] = pid
                if pid in r.processes:
                    labels["process_name"] = r.processes[pid]
            types = cfg.sample_types()
            b = _new_builder(types, "samples", labels, compact=True)  # millions of samples in a long recording
            _perf_meta(r, b, cfg, config, cols, rows)
            labelsets = _labelsets(b, combo, sets, in_place=whole)
            if whole:  # what only the selection and the metadata needed goes before the peak
                del combo, in_cfg, keep, pids
                for key in [k for k in cols if k not in ("stack", "values", *_OPTIONAL)]:
                    del cols[key]
                release_free_memory()
            sub = dict(cols, values=_value_columns(cols["values"], cfg.columns()))
            out.append(_finish(r, b, sub, rows, labelsets, present, consume=whole))
            del sub, labelsets
    return out


def _value_columns(values: np.ndarray, columns: list[int]) -> np.ndarray:
    """The value columns of one configuration, in sample-type order (a view when they are in order)."""
    if columns == list(range(len(columns))):
        return values[:, :len(columns)]
    return values[:, columns]


def _perf_meta(r: "TraceReader", b: ProfileBuilder, cfg: Any, config: int, cols: dict[str, np.ndarray],
               rows: np.ndarray | slice) -> None:
    meta = b.meta
    meta.period_type = b.profile.sample_types[cfg.columns().index(1)]
    if cfg.interval[0] == "period":
        meta.period = cfg.interval[1]
    elif cfg.interval[0] == "frequency" and cfg.timebase[1] == "nanoseconds" and cfg.interval[1]:
        meta.period = 1_000_000_000 // cfg.interval[1]
    meta.extras["perf_event"] = cfg.describe()
    if config in r.perf.lost:
        meta.extras.kernel_records_lost = {str(c): n for c, n in sorted(r.perf.lost[config].items())}
    if config in r.perf.events:
        meta.extras["profiler_events"] = dict(sorted(r.perf.events[config].items()))
    found = {}
    for col, names in (("skip", S.SKIP_REASONS), ("unwind", S.UNWIND_ERRORS)):
        vals, counts = _counts(cols[col][rows])
        found[col] = {(names[v] if v < len(names) else f"value_{v}"): int(c)
                      for v, c in zip(vals.tolist(), counts.tolist()) if v >= 0}
    if found["skip"]:
        meta.extras.samples_skipped = found["skip"]
    if found["unwind"]:
        meta.extras.unwind_errors = found["unwind"]


def _counts(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(col, return_counts=True)`` of an enum column (-1: absent), by a bincount when small."""
    low, high = (int(col.min()), int(col.max())) if col.size else (0, -1)
    if low == high:  # the usual case (no unwind errors, no skips): no pass that widens the column
        return col[:1].astype(np.int64), np.array([col.size], dtype=np.int64)
    if col.size and -1 <= low and high < 4096:
        counts = np.zeros(high + 2, dtype=np.int64)
        for at in range(0, col.size, 1 << 20):  # bincount widens to intp: a block at a time
            counts += np.bincount(col[at:at + (1 << 20)].astype(np.int16) + 1, minlength=high + 2)
        vals = np.flatnonzero(counts)
        return vals - 1, counts[vals]
    return np.unique(col, return_counts=True)


def _thread_combo(r: "TraceReader", cols: dict[str, np.ndarray], extra: list[np.ndarray],
                  names: list[str]) -> tuple[np.ndarray, list[tuple[Label, ...]]]:
    """Label combinations of thread name (by tid) and extra numeric label columns."""
    tids = cols["tid"] if "tid" in cols else np.zeros(cols["pid"].size, np.int64)
    inverse, first = factorize_rows([tids, *extra])
    uniq = np.stack([c[first] for c in (tids, *extra)], axis=1)
    sets = []
    for row in uniq.tolist():
        labels = []
        if "tid" in cols and row[0] in r.thread_names:
            labels.append(Label("thread_name", str=r.thread_names[row[0]]))
        labels += [Label(name, num=v) for name, v in zip(names, row[1:]) if v or name != "process_priority"]
        sets.append(tuple(labels))
    return inverse, sets


def _chrome_profiles(r: "TraceReader", cols: dict[str, np.ndarray], window: tuple) -> list[Profile]:
    keep = _select(r, cols, window)
    combo, sets = _thread_combo(r, cols, [cols["priority"]], ["process_priority"])
    out = []
    for pid in np.unique(cols["pid"][keep]).tolist():
        rows = np.nonzero(keep & (cols["pid"] == pid))[0]
        labels: dict[str, Any] = {"kind": "chrome", "pid": pid}
        if pid in r.processes:
            labels["process_name"] = r.processes[pid]
        b = _new_builder([("samples", "count")], "samples", labels)
        out.append(_finish(r, b, cols, rows, _labelsets(b, combo, sets), ("time", "pid", "tid")))
    return out


def _alloc_profiles(r: "TraceReader", cols: dict[str, np.ndarray], window: tuple) -> list[Profile]:
    keep = _select(r, cols, window, has_tid=False)
    if r.options.heap:
        keep &= np.array([str(h) == r.options.heap for h in cols["heap_id"].tolist()], dtype=bool)
    combo, sets = _thread_combo(r, {"pid": cols["pid"]}, [cols["heap_id"], cols["address"].view(np.int64)],
                                ["heap_id", "address"])
    out = []
    for pid in np.unique(cols["pid"][keep]).tolist():
        rows = np.nonzero(keep & (cols["pid"] == pid))[0]
        labels: dict[str, Any] = {"kind": "heap_stream", "pid": pid}
        if pid in r.processes:
            labels["process_name"] = r.processes[pid]
        b = _new_builder(ALLOC_TYPES, "alloc_space", labels)
        out.append(_finish(r, b, cols, rows, _labelsets(b, combo, sets), ("time", "pid")))
    return out


def _stack_sample_profiles(r: "TraceReader", cols: dict[str, np.ndarray], window: tuple) -> list[Profile]:
    keep = _select(r, cols, window)
    inverse, first = factorize_rows([cols["labelset"], cols["tid"]])
    uniq = np.stack([cols["labelset"][first], cols["tid"][first]], axis=1)
    sets = []
    for ls, tid in uniq.tolist():
        name = r.thread_names.get(tid) if tid >= 0 else None
        sets.append(r.stack_samples.label_sets[ls] + ((Label("thread_name", str=name),) if name else ()))
    out = []
    for stream in np.unique(cols["stream"][keep]).tolist():
        source, primary, followers = r.stack_samples.streams[stream]
        cfg = PerfConfig(primary, followers)
        types = cfg.sample_types()
        in_stream = keep & (cols["stream"] == stream)
        for pid in np.unique(cols["pid"][in_stream]).tolist():
            rows = np.nonzero(in_stream & (cols["pid"] == pid))[0]
            labels: dict[str, Any] = {"kind": "stack_sample", "source": source, "event": primary[0]}
            if pid >= 0:
                labels["pid"] = pid
                if pid in r.processes:
                    labels["process_name"] = r.processes[pid]
            b = _new_builder(types, "samples", labels)
            present = ("time",) + tuple(k for k in ("pid", "tid", "cpu") if (cols[k][rows] >= 0).any())
            sub = dict(cols, values=_value_columns(cols["values"], cfg.columns()))
            out.append(_finish(r, b, sub, rows, _labelsets(b, inverse, sets), present))
    return out
