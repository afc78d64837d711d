"""Writing a profile as a Perfetto trace, the way Perfetto's own producers do.

The kind comes from ``profile_labels["kind"]`` when this reader made the
profile, else from the sample types (pprof heap names -> heap dump, anything
else -> perf samples). Every sequence starts with
``SEQ_INCREMENTAL_STATE_CLEARED``; packets that use interned data carry
``SEQ_NEEDS_INCREMENTAL_STATE``; repeated scalars the schema leaves unpacked
are written unpacked. A ClockSnapshot anchors the trace clock (BOOTTIME) to
wall-clock time when the profile has ``time_nanos``, and to a shifted clock
when some times are negative (packet timestamps are unsigned). A
ProcessTree carries process and thread names. Packets are written as they
are made, so memory stays small.

PerfSample profiles: ``samples/count`` is implicit when every sample counts
1, else a follower event named ``samples`` (read back as the sample count,
not as a second column); the first other column is the timebase event and
the rest are followers, in the profile's order, written as running totals
per cpu. A type that is not a perf counter is named after itself, with
``(unit)`` appended when no counter has its unit (``wall(microseconds)``).
The default sample type, start time and duration go in a ChromeEventBundle
metadata entry ``polyprof.profile`` (JSON), which the reader applies. Labels
``cpu_mode``, ``unwind_error``, ``sample_skipped`` and ``thread_name`` map to
their fields. Anything else (other labels, negative values, more processes
than one profile reads back as) is in the loss report.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

import numpy as np

from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._intern import Interner
from polyprof.model.profile import Profile
from polyprof.model.units import with_unit
from polyprof.wire.encode import Encoder, varint

__all__ = ["Out", "write_trace"]

SERVICE_SEQ, DATA_SEQ = 1, 2
_KNOWN_EXTRAS = {"profile_labels", "perf_event", "kernel_records_lost", "profiler_events", "samples_skipped",
                 "unwind_errors", "heapprofd", "mapping_offsets"}
_UNIT_COUNTER = {"nanoseconds": 1, "cycles": 10, "instructions": 11, "count": 20}
_BY_NAME = {v: k for k, v in S.PERF_COUNTERS.items()}
SAMPLES = ("samples", "count")


class Out:
    """Buffered ``0A len packet`` records."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.buf = bytearray()

    def packet(self, body: bytes | bytearray) -> None:
        self.buf += b"\x0a"
        self.buf += varint(len(body))
        self.buf += body
        if len(self.buf) > 1 << 20:
            self.flush()

    def flush(self) -> None:
        self.fh.write(bytes(self.buf))
        self.buf.clear()


def kind_of(p: Profile) -> str:
    kind = p.extras.profile_labels.get("kind")
    if kind in ("perf", "heap", "chrome", "heap_stream", "stack_sample"):
        return kind
    names = {vt.type for vt in p.sample_types}
    return "heap" if names & {"inuse_space", "alloc_space", "inuse_objects", "alloc_objects"} else "perf"


def write_trace(p: Profile, fh: BinaryIO, options: WriteOptions) -> LossReport:
    report = LossReport("perfetto")
    for key in sorted(set(p.extras) - _KNOWN_EXTRAS):
        report.add(f"format-specific fact not kept: {key}")
    for what in ("drop_frames", "keep_frames", "doc_url"):
        if getattr(p, what):
            report.add(f"profile {what} not kept")
    if p.comments:
        report.add("comments not kept", len(p.comments))
    out = Out(fh)
    profile_facts(out, p)
    kind = kind_of(p)
    if kind == "perf":
        PerfWriter(p, out, report).write()
    elif kind == "stack_sample":
        from polyprof.formats.perfetto._writer_stack import write_stack_samples

        write_stack_samples(p, out, report)
    else:
        from polyprof.formats.perfetto._writer_dumps import write_other

        write_other(kind, p, out, report)
    out.flush()
    return report


def profile_facts(out: Out, p: Profile) -> None:
    """The facts a trace has no field for, as ChromeEventBundle metadata (see ``_build.apply_profile_facts``)."""
    facts: dict[str, Any] = {}
    if p.sample_types:
        facts["default_sample_type"] = p.sample_types[p.default_index()].type
    for key in ("time_nanos", "duration_nanos"):
        if getattr(p, key):
            facts[key] = int(getattr(p, key))
    if not facts:
        return
    item = Encoder().string_field(1, S.POLYPROF_METADATA).string_field(2, json.dumps(facts, sort_keys=True))
    bundle = Encoder().message(2, item)
    out.packet(Encoder().message(S.F_CHROME_EVENTS, bundle).varint_field(S.F_SEQ_ID, SERVICE_SEQ).getvalue())


def mapping_extras(p: Profile) -> dict[tuple[str, str, int], tuple[int, int]]:
    """(file, build id, start) -> (start_offset, load_bias) kept by the reader in ``mapping_offsets``."""
    return {(f, b, int(start)): (int(so), int(lb)) for f, b, start, so, lb in p.extras.get("mapping_offsets", [])}


def clock_snapshot(out: Out, anchor: int, base: int, clock: int | None, wall: int) -> None:
    """A ClockSnapshot so that ``clock`` reads ``t - base`` at trace time ``t`` (all readings >= 0).

    ``wall`` is the wall-clock time (REALTIME) at trace time ``anchor``, if known.
    """
    at = max(anchor, 0)
    readings = {S.BOOTTIME: at}
    if clock is not None:
        readings[clock] = at - base
    if wall:
        readings[S.REALTIME] = max(wall + at - anchor, 0)
    e = Encoder()
    for cid, value in sorted(readings.items()):
        e.message(1, Encoder().varint_field(1, cid).varint_field(2, value, always=True))
    e.varint_field(2, S.BOOTTIME)
    out.packet(Encoder().message(S.F_CLOCK_SNAPSHOT, e).varint_field(S.F_SEQ_ID, SERVICE_SEQ).getvalue())


def process_tree(out: Out, processes: dict[int, str], threads: dict[int, tuple[int, str]]) -> None:
    if not processes and not threads:
        return
    e = Encoder()
    for pid, name in sorted(processes.items()):
        e.message(1, Encoder().varint_field(1, pid).string_field(3, name, always=True))
    for tid, (pid, name) in sorted(threads.items()):
        e.message(2, Encoder().varint_field(1, tid).string_field(2, name, always=True).varint_field(3, pid))
    out.packet(Encoder().message(S.F_PROCESS_TREE, e).varint_field(S.F_SEQ_ID, SERVICE_SEQ).getvalue())


def label_table(p: Profile, report: LossReport, known: dict[str, Any]) -> list[dict[str, Any]]:
    """Per label set: the labels with a wire home (``known``: key -> parser); others reported."""
    out = []
    for labels in p.labelsets:
        fields: dict[str, Any] = {}
        for lb in labels:
            parse = known.get(lb.key)
            value = parse(lb) if parse else None
            if value is None:
                report.add(f"sample labels not kept: {lb.key}")
            else:
                fields[lb.key] = value
        out.append(fields)
    return out


def enum_label(names: tuple[str, ...], prefix: str):  # noqa: ANN201
    def parse(lb: Any) -> int | None:
        if lb.str in names:
            return names.index(lb.str)
        if lb.str and lb.str.startswith(prefix) and lb.str[len(prefix):].isdigit():
            return int(lb.str[len(prefix):])
        return None
    return parse


def str_label(lb: Any) -> str | None:
    return lb.str


def times_plan(p: Profile, report: LossReport) -> tuple[np.ndarray | None, int]:
    """Sample times and the shift that makes them unsigned (0 when none is needed)."""
    t = p.samples.time
    if t is None:  # time_nanos and duration are kept by profile_facts
        return None, 0
    base = min(int(t.min()), 0) if t.size else 0
    return t, base


def threads_from_labels(p: Profile, tids: np.ndarray | None, pids: np.ndarray | None,
                        names: list[dict[str, Any]], report: LossReport) -> dict[int, tuple[int, str]]:
    threads: dict[int, tuple[int, str]] = {}
    ls = p.samples.labelset
    for i in np.unique(ls).tolist():
        name = names[i].get("thread_name")
        if name is None:
            continue
        rows = np.nonzero(ls == i)[0]
        if tids is None:
            report.add("thread_name labels without a tid column", rows.size)
            continue
        for tid, pid in {(int(tids[r]), int(pids[r]) if pids is not None else 0) for r in rows.tolist()}:
            if threads.setdefault(tid, (pid, name))[1] != name:
                report.add("threads with several names (first kept)")
    return threads


class PerfWriter:
    """One PerfSample sequence for a time/event profile."""

    def __init__(self, p: Profile, out: Out, report: LossReport) -> None:
        self.p, self.out, self.report = p, out, report
        self.labels = p.extras.profile_labels

    def write(self) -> None:
        p, report = self.p, self.report
        s = p.samples
        values = s.values
        counters = self._counters()
        if p.period and p.period_type is not None and (
                not counters or tuple(p.sample_types[counters[0]]) != tuple(p.period_type)):
            report.add(f"sampling period ({p.period} {p.period_type}) not kept: "
                       "a trace holds the period of its timebase event only")
        if (values[:, counters] < 0).any() if counters else False:
            report.add("negative counter values (written as 0)", int((values[:, counters] < 0).sum()))
        names = label_table(p, report, {"cpu_mode": enum_label(S.CPU_MODES, "mode_"),
                                        "unwind_error": enum_label(S.UNWIND_ERRORS, "value_"),
                                        "sample_skipped": enum_label(S.SKIP_REASONS, "value_"),
                                        "thread_name": str_label})
        times, base = times_plan(p, report)
        pids = s.pid if s.pid is not None else None
        if pids is not None and np.unique(pids).size > 1:
            report.add("processes in one profile (read back as one profile per process)", int(np.unique(pids).size))
        self._header(times, base, names)
        self._defaults(counters, base)
        self._samples(counters, times, base, names)
        self._non_samples()

    def _counters(self) -> list[int]:
        """The value columns written as events: the timebase first, then the followers, in type order.

        ``samples/count`` is the implicit one-per-PerfSample count when every
        row is one sample; otherwise it is written as a follower named
        ``samples``, which the reader takes as the sample count.
        """
        p, report = self.p, self.report
        types = [tuple(vt) for vt in p.sample_types]
        samples = types.index(SAMPLES) if SAMPLES in types else None
        counters = [i for i in range(len(types)) if i != samples]
        if samples is None:
            report.add("sample types: reading adds samples/count (one per sample) as the first type")
        elif not (p.samples.values[:, samples] == 1).all():
            counters.append(samples)
        if samples not in (None, 0):
            report.add("sample types reordered: samples/count becomes the first type")
        return counters

    def _header(self, times: np.ndarray | None, base: int, names: list[dict[str, Any]]) -> None:
        p, s = self.p, self.p.samples
        if times is not None and (base < 0 or p.time_nanos):
            anchor = int(times.min()) if times.size else 0
            clock_snapshot(self.out, anchor, base, S.MONOTONIC if base < 0 else None, p.time_nanos)
        processes = {}
        pid_label = self.labels.get("pid")
        if "process_name" in self.labels and pid_label is not None:
            processes[int(pid_label)] = str(self.labels["process_name"])
        process_tree(self.out, processes, threads_from_labels(p, s.tid, s.pid, names, self.report))

    def _event(self, vt: Any, counter_field: int, name_field: int) -> Encoder:
        """A Timebase (fields 4, 10) or FollowerEvent (1, 4) for a sample type.

        A perf counter of that name and unit is written as itself; anything
        else as a counter of its unit (or a plain count) named after the type,
        with ``(unit)`` appended when the counter's unit is not the type's.
        """
        e = Encoder()
        counter = _BY_NAME.get((vt.type, vt.unit))
        if counter is None:
            counter = _UNIT_COUNTER.get(vt.unit, _UNIT_COUNTER["count"])
            e.string_field(name_field, with_unit(vt.type, vt.unit, S.PERF_COUNTERS[counter][1]))
        return e.varint_field(counter_field, counter, always=True)

    def _defaults(self, counters: list[int], base: int) -> None:
        p = self.p
        desc = p.extras.get("perf_event", {})
        pkt = Encoder().varint_field(S.F_SEQ_ID, DATA_SEQ).varint_field(S.F_SEQUENCE_FLAGS,
                                                                        S.SEQ_INCREMENTAL_STATE_CLEARED)
        if desc.get("legacy_defaults"):
            self.out.packet(pkt.getvalue())
            return
        if not counters:
            self.report.add("no counter column: reading adds a cpu-clock column of zeros")
        types = p.sample_types
        tb = self._event(types[counters[0]], 4, 10) if counters else Encoder().varint_field(4, 1)
        if desc.get("frequency"):
            tb.varint_field(2, int(desc["frequency"]))
        elif desc.get("period"):
            tb.varint_field(1, int(desc["period"]))
        elif desc.get("poll_period_ms"):
            tb.varint_field(6, int(desc["poll_period_ms"]))
        elif p.period and counters and p.period_type is not None and tuple(p.period_type) == tuple(types[counters[0]]):
            tb.varint_field(1, p.period)
        psd = Encoder().message(1, tb)
        for c in counters[1:]:
            psd.message(4, self._event(types[c], 1, 4))
        defaults = Encoder().message(12, psd)
        if base < 0:
            defaults.varint_field(58, S.MONOTONIC)
        pkt.message(S.F_DEFAULTS, defaults)
        self.out.packet(pkt.getvalue())

    def _samples(self, counters: list[int], times: np.ndarray | None, base: int,
                 names: list[dict[str, Any]]) -> None:
        p, s, out = self.p, self.p.samples, self.out
        interner = Interner(p, self.report, mapping_extras(p))
        order = np.argsort(times, kind="stable") if times is not None else np.arange(len(s))
        if times is not None and (np.diff(times) < 0).any():
            self.report.add("samples reordered by time")
        cols = {k: (getattr(s, k).tolist() if getattr(s, k) is not None else None) for k in ("pid", "tid", "cpu")}
        cpu = cols["cpu"]
        running: dict[int, np.ndarray] = {}
        # int64 whatever the values' type: each CPU's running counter sums them (int32 would wrap)
        vals = (np.maximum(s.values[:, counters], 0).astype(np.int64, copy=False) if counters
                else np.zeros((len(s), 0), np.int64))
        flags = varint(S.F_SEQUENCE_FLAGS << 3) + varint(S.SEQ_NEEDS_INCREMENTAL_STATE)
        seq = varint(S.F_SEQ_ID << 3) + varint(DATA_SEQ)
        fixed = [_fields_of(names[i]) for i in range(len(names))]
        stacks, labelsets = s.stack.tolist(), s.labelset.tolist()
        tlist = (times - base).tolist() if times is not None else None
        for i in order.tolist():
            c = cpu[i] if cpu is not None else 0
            run = running.get(c)
            run = running[c] = vals[i] if run is None else run + vals[i]
            ps = bytearray()
            if cpu is not None:
                ps += b"\x08" + varint(cpu[i])
            if cols["pid"] is not None:
                ps += b"\x10" + varint(cols["pid"][i])
            if cols["tid"] is not None:
                ps += b"\x18" + varint(cols["tid"][i])
            if stacks[i] >= 0:
                ps += b"\x20" + varint(interner.callstack(stacks[i]))
            mode, tail = fixed[labelsets[i]]
            ps += mode
            if counters:
                ps += b"\x30" + varint(int(run[0]))
                for v in run[1:].tolist():
                    ps += b"\x38" + varint(v)
            ps += tail
            pkt = bytearray(b"\x40" + varint(tlist[i]) if tlist is not None else b"")
            pkt += seq + flags
            interned = interner.take()
            if interned:
                pkt += b"\x62" + varint(len(interned)) + interned
            pkt += b"\x92\x04" + varint(len(ps)) + ps
            out.packet(pkt)
        for body in interner.symbols():
            out.packet(Encoder().message(S.F_MODULE_SYMBOLS, body).varint_field(S.F_SEQ_ID, SERVICE_SEQ).getvalue())

    def _non_samples(self) -> None:
        extras = self.p.extras
        for cpu, lost in sorted(extras.kernel_records_lost.items()):
            ps = Encoder().varint_field(1, int(cpu), always=True).varint_field(17, int(lost))
            self.out.packet(Encoder().varint_field(S.F_SEQ_ID, DATA_SEQ).message(S.F_PERF_SAMPLE, ps).getvalue())
        for event, count in sorted(extras.get("profiler_events", {}).items()):
            reason = 1 if event == "guardrail_stop" else 0
            for _ in range(int(count)):
                ps = Encoder().message(19, Encoder().varint_field(1, reason, always=True))
                self.out.packet(Encoder().varint_field(S.F_SEQ_ID, DATA_SEQ).message(S.F_PERF_SAMPLE, ps).getvalue())


def _fields_of(labels: dict[str, Any]) -> tuple[bytes, bytes]:
    """Encoded (cpu_mode, unwind_error + skipped reason) fields of a label set."""
    mode = b"\x28" + varint(labels["cpu_mode"]) if "cpu_mode" in labels else b""
    tail = b""
    if "unwind_error" in labels:
        tail += b"\x80\x01" + varint(labels["unwind_error"])
    if "sample_skipped" in labels:
        tail += b"\x90\x01" + varint(labels["sample_skipped"])
    return mode, tail
