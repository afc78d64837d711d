"""Writing a profile as a report-sample file (see the package docstring for what is kept)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.formats.simpleperf._framing import frame
from polyprof.formats.simpleperf._layout import SAMPLES, Layout, event_name, infer_events
from polyprof.formats.simpleperf._schema import ERROR_CODES, EXECUTION_TYPES
from polyprof.model.profile import Profile, ValueType
from polyprof.model.tree import segment_owner, segment_positions
from polyprof.wire.encode import Encoder

__all__ = ["encode"]

# Extras this writer turns back into records, or that the reader derives again.
_KEPT_EXTRAS = {"meta_info", "threads", "lost_situation", "lost_ratio", "unwinding_failures",
                "unsymbolized_frames", "offcpu", "frame_execution_types"}
_OWN_LABELS = {"thread_name", "unwinding_error", "unwinding_raw_error", "unwinding_error_addr"}
_RECORD = {"sample": 1, "lost": 2, "file": 3, "thread": 4, "meta_info": 5, "context_switch": 6}


def _record(kind: str, body: Encoder) -> bytes:
    return Encoder().message(_RECORD[kind], body).getvalue()


@dataclass
class _Plan:
    """Per Sample record: event id and event count (and source row); plus the event names and off-CPU times."""

    events: tuple[str, ...]
    event: np.ndarray
    count: np.ndarray
    offcpu: np.ndarray | None
    exact: bool
    rows: np.ndarray | None = None  # source row of each record; None = one record per row


def encode(p: Profile, options: WriteOptions) -> tuple[bytes, LossReport]:
    report = LossReport("simpleperf")
    plan = _plan(p, options, report)
    files = _Files(p, report)
    bodies: list[bytes] = []
    meta = _meta(p, plan)
    if meta is not None:
        bodies.append(_record("meta_info", meta))
    bodies.extend(_samples(p, plan, files, report))
    lost = p.extras.lost_situation
    if lost is not None:
        bodies.append(_record("lost", Encoder().varint_field(1, lost.sample_count, always=True)
                              .varint_field(2, lost.lost_count, always=True)))
    bodies.extend(files.records())
    bodies.extend(_threads(p, report))
    _profile_facts(p, report)
    for key in sorted(set(p.extras) - _KEPT_EXTRAS):
        report.add(f"format-specific fact not kept: {key}")
    return frame(bodies), report


def _profile_facts(p: Profile, report: LossReport) -> None:
    """What a report-sample file has no field for."""
    if p.time_nanos:
        report.add("profile start time (time_nanos) not kept: simpleperf keeps sample times only")
    if p.duration_nanos:
        report.add("profile duration not kept")
    if p.period:
        report.add(f"sampling period ({p.period} {p.period_type}) not kept")


# ---------------------------------------------------------------- events

def _plan(p: Profile, options: WriteOptions, report: LossReport) -> _Plan:
    layout = infer_events(p.sample_types)
    n = len(p.samples)
    if layout is not None and (layout.events or n == 0) and options.sample_index is None:
        return _exact_plan(layout, p.samples.values, report)
    if not p.sample_types:
        return _Plan(("event0",), np.zeros(n, np.int64), np.zeros(n, np.int64), None, False)
    return _general_plan(p, options, report)


def _general_plan(p: Profile, options: WriteOptions, report: LossReport) -> _Plan:
    """Any profile: each sample type but ``samples/count`` an event, the default first.

    A row standing for k samples (its ``samples/count``) becomes k records
    sharing its values; with several events, one record per event the row
    has a value for.
    """
    types, values, n = list(p.sample_types), p.samples.values, len(p.samples)
    samples = types.index(SAMPLES) if SAMPLES in types else None
    cols = _event_columns(p, options, samples, report)
    names, scales = _event_names(types, cols, report)
    vals = values[:, cols] * np.array(scales, dtype=np.int64) if cols else values[:, [] if samples is None else [samples]]
    _check_counts(vals, report)
    vals = np.maximum(vals, 0)
    m = vals.shape[1]
    present = np.ones((n, m), dtype=bool) if m == 1 else vals != 0
    if m > 1:
        present[~present.any(axis=1), 0] = True  # a row without values still counts as a sample
        if samples is not None:
            report.add("sample type samples/count read back as the number of Sample records (one per event "
                       "with a value); each event's own <event>_samples column keeps the source's counts")
    k = np.maximum(values[:, samples], 1) if samples is not None else np.ones(n, np.int64)
    if float(k.sum(dtype=np.float64)) > max(_MAX_EXPANSION * n, _MAX_RECORDS):  # (an int64 sum can wrap)
        report.add("values of samples/count not kept: rows standing for several samples written as one "
                   "sample (too many to write one record each)", int((k > 1).sum()))
        k = np.ones(n, np.int64)
    reps = np.where(present, k[:, None], 0).ravel()
    pair = segment_owner(reps)
    step = segment_positions(reps)
    q, r = np.divmod(vals.ravel()[pair], reps[pair])
    count = q + (step < r)
    return _Plan(tuple(names), pair % m, count, None, False, pair // m)


_MAX_EXPANSION = 16  # records per row on average, beyond which rows are not split into samples
_MAX_RECORDS = 1 << 16  # ... unless there are fewer than this: a few bytes of counts must not cost seconds
_CPU_TIME = {"cpu", "cpu-time", "cpu_time", "cputime"}
_NS = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": 1_000_000, "seconds": 1_000_000_000}


def _event_columns(p: Profile, options: WriteOptions, samples: int | None, report: LossReport) -> list[int]:
    """The value columns written as events, the default type first (simpleperf's default is its first event)."""
    types = p.sample_types
    if options.sample_index is not None:
        chosen = p.sample_index(options.sample_index)
        for i, vt in enumerate(types):
            if i not in (chosen, samples):
                report.add(f"sample type {vt} not written (--sample-index chose {types[chosen]})")
        cols = [chosen] if chosen != samples else []
    else:
        cols = [i for i in range(len(types)) if i != samples]
    default = p.default_index()
    if default in cols and cols[0] != default:
        cols.remove(default)
        cols.insert(0, default)
        report.add(f"sample types reordered: the default type {types[default]} becomes the first event")
    elif default == samples and cols:
        report.add("default sample type samples/count not kept: simpleperf's default is its first event")
    if not cols:
        report.add("sample types: reading adds events/count (the sample count as an event)")
    return cols


def _event_names(types: list[ValueType], cols: list[int], report: LossReport) -> tuple[list[str], list[int]]:
    """Event name and value scale per column: CPU time becomes cpu-clock (in nanoseconds), other types keep
    their name (and unit, as ``name(unit)`` when simpleperf would read another unit); wall time is never
    called cpu-clock."""
    if not cols:
        return ["events"], [1]
    taken = {types[c].type for c in cols}
    names, scales = [], []
    for c in cols:
        vt = types[c]
        if vt.type.lower() in _CPU_TIME and vt.unit in _NS and "cpu-clock" not in taken:
            taken.add("cpu-clock")
            names.append("cpu-clock")
            scales.append(_NS[vt.unit])
            how = "simpleperf's CPU-time event" + (", values converted to nanoseconds" if vt.unit != "nanoseconds"
                                                    else "")
            report.rename(vt, ValueType("cpu-clock", "nanoseconds"), how)
        else:
            names.append(event_name(vt))
            scales.append(1)
    return names, scales


def _exact_plan(layout: Layout, values: np.ndarray, report: LossReport) -> _Plan:
    n = len(values)
    k = len(layout.events)
    if layout.per_event_samples:
        marks = values[:, [layout.sample_column(e) for e in range(k)]] != 0
        event = marks.argmax(axis=1) if n else np.zeros(0, np.int64)
        report.add("rows with samples of several event types written as one sample of the first",
                   int((marks.sum(axis=1) > 1).sum()))
    else:
        event = np.zeros(n, np.int64)
    counts = values[:, [layout.count_column(e) for e in range(k)]]
    count = counts[np.arange(n), event] if n else np.zeros(0, np.int64)
    report.add("rows standing for several samples written as one sample", int((values[:, 0] > 1).sum()))
    _check_counts(count, report)
    offcpu = None
    if layout.offcpu:
        offcpu = values[:, layout.offcpu_column].copy()
        wrong = (event == 0) & (offcpu != 0)
        report.add("off-cpu values on on-CPU samples not written", int(wrong.sum()))
        offcpu[wrong] = 0
    return _Plan(layout.events, event.astype(np.int64), np.maximum(count, 0), offcpu, True)


def _check_counts(count: np.ndarray, report: LossReport) -> None:
    report.add("negative values written as event count 0", int((count < 0).sum()))


def _meta(p: Profile, plan: _Plan) -> Encoder | None:
    meta = p.extras.get("meta_info")
    unnamed = all(e == f"event{i}" for i, e in enumerate(plan.events))
    if not isinstance(meta, dict):
        if plan.exact and unnamed:
            return None  # the source had no MetaInfo record either
        meta = {}
    e = Encoder()
    for name in plan.events:
        e.string_field(1, name, always=True)
    for field, key in ((2, "app_package_name"), (3, "app_type"), (4, "android_sdk_version"),
                       (5, "android_build_type")):
        if isinstance(meta.get(key), str):
            e.string_field(field, meta[key], always=True)
    if "trace_offcpu" in meta or plan.offcpu is not None:
        e.bool_field(6, bool(meta.get("trace_offcpu", plan.offcpu is not None)), always=True)
    return e


# ---------------------------------------------------------------- samples

def _samples(p: Profile, plan: _Plan, files: "_Files", report: LossReport) -> list[bytes]:
    s = p.samples
    if s.cpu is not None:
        report.add("sample cpu column not written", len(s))
    time = s.time.tolist() if s.time is not None else None
    tid = s.tid.tolist() if s.tid is not None else None
    stacks = s.stack.tolist()
    labelsets = s.labelset.tolist()
    event = plan.event.tolist()
    count = plan.count.tolist()
    off = plan.offcpu.tolist() if plan.offcpu is not None else None
    if off is not None and (time is None or tid is None):
        report.add("off-cpu times not written (they need the time and tid columns)", sum(1 for x in off if x > 0))
        off = None
    chains: dict[int, bytes] = {}
    label_bytes: dict[int, bytes] = {}
    out = []
    rows = plan.rows.tolist() if plan.rows is not None else range(len(s))
    for rec, i in enumerate(rows):
        chain = chains.get(stacks[i])
        if chain is None:
            chain = chains[stacks[i]] = files.chain(stacks[i])
        extra = label_bytes.get(labelsets[i])
        if extra is None:
            extra = label_bytes[labelsets[i]] = _label_fields(p, labelsets[i], report)
        e = Encoder()
        if time is not None:
            e.varint_field(1, time[i], always=True)
        if tid is not None:
            e.varint_field(2, tid[i], always=True)
        e.raw(chain).varint_field(4, count[rec], always=True).varint_field(5, event[rec], always=True).raw(extra)
        if off is not None and off[i] > 0 and tid is not None and time is not None:
            out.append(_switch(False, time[i], tid[i]))
            out.append(_record("sample", e))
            out.append(_switch(True, time[i] + off[i], tid[i]))
        else:
            out.append(_record("sample", e))
    return out


def _switch(on: bool, time: int, tid: int) -> bytes:
    body = Encoder().bool_field(1, on, always=True).varint_field(2, time, always=True)
    return _record("context_switch", body.varint_field(3, tid & 0xFFFFFFFF, always=True))


def _label_fields(p: Profile, labelset: int, report: LossReport) -> bytes:
    labels = {lb.key: lb for lb in p.labelsets[labelset]}
    for key in sorted(set(labels) - _OWN_LABELS):
        report.add(f"label {key} not written")
    u = Encoder()
    raw = labels.get("unwinding_raw_error")
    if raw is not None and raw.num is not None:
        u.varint_field(1, raw.num, always=True)
    addr = labels.get("unwinding_error_addr")
    if addr is not None and addr.num is not None:
        u.varint_field(2, addr.num, always=True)
    code = labels.get("unwinding_error")
    if code is not None and code.str is not None:
        number = _error_number(code.str)
        if number is None:
            report.add(f"unwinding_error label {code.str!r} not written (unknown error code)")
        else:
            u.varint_field(3, number, always=True)
    if not any(k in labels for k in ("unwinding_raw_error", "unwinding_error_addr", "unwinding_error")):
        return b""
    return Encoder().message(6, u).getvalue()


def _error_number(name: str) -> int | None:
    if name in ERROR_CODES:
        return ERROR_CODES.index(name)
    tail = name.removeprefix("ERROR_")
    return int(tail) if tail.isdigit() else None


# ---------------------------------------------------------------- files

class _Files:
    """File ids per mapping (0, 1, ... in mapping order), symbols per file in first-use order."""

    def __init__(self, p: Profile, report: LossReport) -> None:
        self.p = p
        self.report = report
        self.paths = [p.mapping_file(m) for m in range(len(p.mappings))]
        self.symbols: list[dict[tuple[str, str], int]] = [{} for _ in self.paths]
        self.unmapped: int | None = None
        self.entries: dict[int, bytes] = {}
        self.exec_types = self._exec_types(p.extras.get("frame_execution_types"))
        mp = p.mappings
        odd = (mp.start != 0) | (mp.limit != 0) | (mp.offset != 0) | (mp.build_id != 0)
        report.add("mapping address ranges, offsets and build ids not written", int(odd.sum()))

    @staticmethod
    def _exec_types(table: Any) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        if not isinstance(table, dict):
            return out
        for path, kinds in table.items():
            for name, addrs in (kinds.items() if isinstance(kinds, dict) else ()):
                if name in EXECUTION_TYPES:
                    for a in addrs:
                        out[(path, int(a, 16))] = EXECUTION_TYPES.index(name)
        return out

    def _file_id(self, mapping: int) -> int:
        if mapping >= 0:
            return mapping
        if self.unmapped is None:
            self.unmapped = len(self.paths)
            self.paths.append("")
            self.symbols.append({})
        return self.unmapped

    def entry(self, loc: int) -> bytes:
        got = self.entries.get(loc)
        if got is not None:
            return got
        p = self.p
        fid = self._file_id(int(p.locations.mapping[loc]))
        vaddr = int(p.locations.address[loc])
        etype = self.exec_types.get((self.paths[fid], vaddr), 0)
        rows = p.locations.lines_of(loc)
        if len(rows) > 1:
            self.report.add("inlined frames written as separate callchain entries", len(rows) - 1)
        parts = [self._one(fid, vaddr, self._symbol(fid, r), etype) for r in rows]
        got = self.entries[loc] = b"".join(parts) if parts else self._one(fid, vaddr, -1, etype)
        return got

    def _symbol(self, fid: int, row: int) -> int:
        p = self.p
        fn = int(p.lines.function[row])
        if p.lines.line[row] or p.lines.column[row]:
            self.report.add("source line numbers not written")
        if fn < 0:
            return -1
        f = p.functions
        if f.filename[fn] or f.start_line[fn]:
            self.report.add("function source files and start lines not written")
        key = (p.strings[f.name[fn]], p.strings[f.system_name[fn]])
        table = self.symbols[fid]
        return table.setdefault(key, len(table))

    @staticmethod
    def _one(fid: int, vaddr: int, sid: int, etype: int) -> bytes:
        e = Encoder().varint_field(1, vaddr, always=True).varint_field(2, fid, always=True)
        e.varint_field(3, sid, always=True).varint_field(4, etype)
        return Encoder().message(3, e).getvalue()

    def chain(self, node: int) -> bytes:
        return b"".join([self.entry(loc) for loc in self.p.callsites.path(node)])

    def records(self) -> list[bytes]:
        out = []
        for fid, path in enumerate(self.paths):
            e = Encoder().varint_field(1, fid, always=True).string_field(2, path, always=True)
            symbols = list(self.symbols[fid])
            for name, _ in symbols:
                e.string_field(3, name, always=True)
            if any(system for _, system in symbols):
                for _, system in symbols:
                    e.string_field(4, system, always=True)
            out.append(_record("file", e))
        return out


# ---------------------------------------------------------------- threads

def _threads(p: Profile, report: LossReport) -> list[bytes]:
    """Thread records: those the reader listed, then one per sampled tid (with its pid and name)."""
    rows = [(t.tid, 0 if t.pid is None else t.pid, t.name) for t in p.extras.threads]
    known = {t for t, _, _ in rows}
    s = p.samples
    if s.pid is not None and s.tid is None:
        report.add("sample pid column not written (simpleperf keeps a pid per thread, and there are no tids)",
                   len(s))
    if s.tid is not None and (s.pid is not None or len(p.labelsets) > 1):
        # Threads without pid and name need no record, unless none has one: the reader makes
        # a pid column only when the file has Thread records.
        bare = s.pid is not None and not rows
        for i in np.unique(s.tid, return_index=True)[1].tolist():
            tid = int(s.tid[i])
            pid = int(s.pid[i]) if s.pid is not None else 0
            name = next((lb.str for lb in p.labelsets[int(s.labelset[i])] if lb.key == "thread_name"), None)
            if tid not in known and (pid or name is not None or bare):
                rows.append((tid, pid, name))
                known.add(tid)
    out = []
    for tid, pid, name in rows:
        e = Encoder().varint_field(1, tid & 0xFFFFFFFF, always=True).varint_field(2, pid & 0xFFFFFFFF, always=True)
        if name is not None:
            e.string_field(3, name, always=True)
        out.append(_record("thread", e))
    return out
