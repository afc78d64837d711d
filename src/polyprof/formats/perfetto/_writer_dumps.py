"""Writing heap dumps, Chrome samples and allocation streams.

Heap profiles become one heapprofd dump (``ProfilePacket``, split into
``continued`` packets of a few thousand samples, interned data alongside):
values are summed per stack (a dump holds one sample per callstack) and
written as cumulative allocated / freed bytes and counts; a profile with
only pprof's ``inuse_*`` and ``alloc_*`` gets its freed values as their
difference. The dump time, window, flags and stats come from the
``heapprofd`` extra. Chrome profiles become one sequence per thread with a
ThreadDescriptor and StreamingProfilePackets (times rounded to the
microsecond the format holds). Allocation streams become StreamingAllocation
and StreamingFree packets, one per event.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polyprof.formats.loss import LossReport
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._chrome import ALLOC_TYPES
from polyprof.formats.perfetto._heap import ART_HEAP, HEAP_TYPES
from polyprof.formats.perfetto._intern import Interner
from polyprof.formats.perfetto._writer import (
    SERVICE_SEQ,
    Out,
    clock_snapshot,
    label_table,
    mapping_extras,
    process_tree,
    str_label,
)
from polyprof.model.profile import Profile
from polyprof.wire.encode import Encoder

__all__ = ["write_other"]

HEAP_SEQ, FIRST_THREAD_SEQ, ALLOC_SEQ = 3, 100, 4
_CHUNK = 4096
_FLAGS = ("from_startup", "rejected_concurrent", "disconnected", "buffer_overran", "buffer_corrupted",
          "hit_guardrail")
_FLAG_FIELDS = {"from_startup": 3, "rejected_concurrent": 4, "disconnected": 6, "buffer_overran": 7,
                "buffer_corrupted": 8, "hit_guardrail": 10}
_STAT_FIELDS = {"unwinding_errors": 1, "heap_samples": 2, "map_reparses": 3, "total_unwinding_time_us": 5,
                "client_spinlock_blocked_us": 6}


def write_other(kind: str, p: Profile, out: Out, report: LossReport) -> None:
    if kind == "heap":
        _write_heap(p, out, report)
    elif kind == "chrome":
        _write_chrome(p, out, report)
    else:
        _write_allocs(p, out, report)


def _processes(p: Profile) -> dict[int, str]:
    labels = p.extras.profile_labels
    if "process_name" in labels and "pid" in labels:
        return {int(labels["pid"]): str(labels["process_name"])}
    return {}


def _single(p: Profile, col: np.ndarray | None, key: str, report: LossReport) -> int:
    """The one value of a per-profile column (pid), else the profile label, else 0."""
    label = p.extras.profile_labels.get(key)
    if col is not None and col.size:
        values = np.unique(col)
        if values.size > 1:
            report.add(f"several values of {key} in one heap dump (first kept)", int(values.size) - 1)
        return int(values[0])
    return int(label) if label is not None else 0


def _heap_values(p: Profile, report: LossReport) -> np.ndarray:
    """(n, 4) alloc count, alloc bytes, free count, free bytes per sample."""
    index = {vt.type: i for i, vt in enumerate(p.sample_types)}
    for vt in p.sample_types:
        if (vt.type, vt.unit) not in HEAP_TYPES:
            report.add(f"sample type not kept in a heap dump: {vt.type}/{vt.unit}")
    v = p.samples.values
    # int64 whatever the values' type: alloc - inuse and inuse + freed of int32 columns would wrap
    col = lambda name: v[:, index[name]].astype(np.int64, copy=False) if name in index else None  # noqa: E731
    out = np.zeros((len(p.samples), 4), dtype=np.int64)
    for j, (kind, unit) in enumerate((("objects", 0), ("space", 1))):
        alloc, inuse, freed = col(f"alloc_{kind}"), col(f"inuse_{kind}"), col(f"freed_{kind}")
        if alloc is None:
            alloc = inuse + (freed if freed is not None else 0) if inuse is not None else np.zeros(len(v), np.int64)
        if freed is None:
            freed = alloc - inuse if inuse is not None else np.zeros(len(v), np.int64)
        if inuse is not None and (inuse != alloc - freed).any():
            report.add(f"inuse_{kind} values that are not alloc - freed (recomputed)")
        out[:, unit] = alloc
        out[:, 2 + unit] = freed
    if (out < 0).any():
        report.add("negative heap values (written as 0)", int((out < 0).sum()))
    return np.maximum(out, 0)


def _write_heap(p: Profile, out: Out, report: LossReport) -> None:
    labels = p.extras.profile_labels
    facts = p.extras.get("heapprofd", {})
    values = _heap_values(p, report)
    keys = {lb.key for i in np.unique(p.samples.labelset).tolist() for lb in p.labelsets[i]}
    if keys:
        report.add(f"sample labels not kept in a heap dump: {', '.join(sorted(keys))}")
    stacks, first, inverse = np.unique(p.samples.stack, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # stacks in sample order (a dump lists them as first seen)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    stacks, inverse = stacks[order], rank[inverse.reshape(-1)]
    if stacks.size < len(p.samples):
        report.add("samples with the same stack (summed in the dump)", len(p.samples) - int(stacks.size))
    summed = np.zeros((stacks.size, 4), dtype=np.int64)
    np.add.at(summed, inverse.reshape(-1), values)
    if not summed.any(axis=1).all():
        report.add("samples with all-zero values (not kept)", int((~summed.any(axis=1)).sum()))
    heap = str(labels.get("heap", "unknown"))
    if heap == ART_HEAP and summed[:, 2:].any():
        report.add("frees on the ART heap (not recorded for it)")
    t = p.samples.time
    end = int(facts.get("dump_time", labels.get("dump_time", int(t[0]) if t is not None and t.size else 0)))
    start = end - p.duration_nanos if p.duration_nanos else None
    base = min(end, start if start is not None else end, 0)
    anchor = start if start is not None else end
    clock_snapshot(out, anchor, base, S.MONOTONIC_COARSE, p.time_nanos)
    pid = _single(p, p.samples.pid, "pid", report)
    process_tree(out, _processes(p), {})
    out.packet(Encoder().varint_field(S.F_SEQ_ID, HEAP_SEQ)
               .varint_field(S.F_SEQUENCE_FLAGS, S.SEQ_INCREMENTAL_STATE_CLEARED).getvalue())
    interner = Interner(p, report, mapping_extras(p))
    header = _dump_header(pid, heap, end - base, None if start is None else start - base, facts)
    dump_max = bool(facts.get("dump_at_max"))
    chunks = max(1, -(-stacks.size // _CHUNK))
    for k in range(chunks):
        dump = Encoder().raw(header if k == 0 else _dump_header(pid, heap, end - base, None if start is None
                                                                else start - base, facts, first=False))
        for node, (ac, asz, fc, fs) in zip(stacks[k * _CHUNK:(k + 1) * _CHUNK].tolist(),
                                             summed[k * _CHUNK:(k + 1) * _CHUNK].tolist()):
            sample = Encoder().varint_field(1, interner.callstack(node))
            if dump_max:
                sample.varint_field(8, asz, always=True).varint_field(9, ac, always=True)
            else:
                sample.varint_field(2, asz, always=True).varint_field(3, fs, always=True)
                sample.varint_field(5, ac, always=True).varint_field(6, fc, always=True)
            dump.message(2, sample)
        pp = Encoder().message(5, dump).varint_field(6, 1 if k + 1 < chunks else 0).varint_field(7, k, always=True)
        pkt = Encoder().varint_field(S.F_SEQ_ID, HEAP_SEQ).varint_field(S.F_SEQUENCE_FLAGS,
                                                                         S.SEQ_NEEDS_INCREMENTAL_STATE)
        interned = interner.take()
        if interned:
            pkt.message(S.F_INTERNED_DATA, interned)
        out.packet(pkt.message(S.F_PROFILE_PACKET, pp).getvalue())
    _symbols(out, interner)


def _dump_header(pid: int, heap: str, end: int, start: int | None, facts: dict[str, Any],
                 first: bool = True) -> bytes:
    e = Encoder().varint_field(1, pid, always=True)
    for name in _FLAGS:
        e.bool_field(_FLAG_FIELDS[name], bool(facts.get(name)))
    e.varint_field(9, end, always=True)
    if heap != "unknown":
        e.string_field(11, heap)
    e.varint_field(12, int(facts.get("sampling_interval_bytes", 0)))
    e.varint_field(13, int(facts.get("orig_sampling_interval_bytes", 0)))
    error = facts.get("client_error")
    if error:
        names = ("none", "hit_timeout", "invalid_stack_bounds")
        e.varint_field(14, names.index(error) if error in names else int(str(error).split("_")[-1]))
    if start is not None:
        e.varint_field(15, start, always=True)
    stats = facts.get("process_stats") if first else None
    if stats:
        se = Encoder()
        for name, field in _STAT_FIELDS.items():
            se.varint_field(field, int(stats.get(name, 0)))
        e.message(5, se)
    return e.getvalue()


def _symbols(out: Out, interner: Interner) -> None:
    for body in interner.symbols():
        out.packet(Encoder().message(S.F_MODULE_SYMBOLS, body).varint_field(S.F_SEQ_ID, SERVICE_SEQ).getvalue())


def _write_chrome(p: Profile, out: Out, report: LossReport) -> None:
    s = p.samples
    if (s.values != 1).any():
        report.add("Chrome sample values other than 1 (each sample counts once)", int((s.values != 1).sum()))
    names = label_table(p, report, {"thread_name": str_label, "process_priority": lambda lb: lb.num})
    times = s.time if s.time is not None else np.zeros(len(s), np.int64)
    if s.time is None:
        report.add("sample times (Chrome samples need them; written as 0)")
    if (times % 1000).any():
        report.add("sample times rounded to microseconds", int((times % 1000 != 0).sum()))
    # Chrome's sample clock may not go negative: shift it by a whole number of
    # microseconds through the snapshot when some times are below zero.
    base = min(int(times.min()) // 1000 * 1000, 0) if len(s) else 0
    if (p.time_nanos or base < 0) and len(s):
        clock_snapshot(out, int(times.min()), base, S.MONOTONIC, p.time_nanos)
    pids = s.pid if s.pid is not None else np.zeros(len(s), np.int64)
    tids = s.tid if s.tid is not None else np.zeros(len(s), np.int64)
    process_tree(out, _processes(p), {})
    order = np.lexsort((times, tids))
    for k, tid in enumerate(np.unique(tids).tolist()):
        rows = order[tids[order] == tid]
        _chrome_thread(p, out, report, FIRST_THREAD_SEQ + k, rows, times - base, pids, tid, names)


def _chrome_thread(p: Profile, out: Out, report: LossReport, seq: int, rows: np.ndarray, times: np.ndarray,
                   pids: np.ndarray, tid: int, names: list[dict[str, Any]]) -> None:
    s = p.samples
    us = times[rows] // 1000
    pid = int(pids[rows[0]])
    thread_names = {names[i]["thread_name"] for i in np.unique(s.labelset[rows]).tolist()
                    if "thread_name" in names[i]}
    td = Encoder().varint_field(1, pid, always=True).varint_field(2, tid, always=True)
    if thread_names:
        td.string_field(5, sorted(thread_names)[0])
        if len(thread_names) > 1:
            report.add("threads with several names (first kept)")
    td.varint_field(6, int(us[0]), always=True)
    out.packet(Encoder().varint_field(S.F_SEQ_ID, seq).varint_field(S.F_SEQUENCE_FLAGS,
                                                                     S.SEQ_INCREMENTAL_STATE_CLEARED)
               .message(S.F_THREAD_DESCRIPTOR, td).getvalue())
    interner = Interner(p, report, mapping_extras(p))
    prev = int(us[0])
    for r, t in zip(rows.tolist(), us.tolist()):
        sp = Encoder().varint_field(1, interner.callstack(int(s.stack[r])), always=True)
        sp.varint_field(2, t - prev, always=True)
        sp.varint_field(3, int(names[int(s.labelset[r])].get("process_priority", 0)))
        prev = t
        pkt = Encoder().varint_field(S.F_SEQ_ID, seq).varint_field(S.F_SEQUENCE_FLAGS, S.SEQ_NEEDS_INCREMENTAL_STATE)
        interned = interner.take()
        if interned:
            pkt.message(S.F_INTERNED_DATA, interned)
        out.packet(pkt.message(S.F_STREAMING_PROFILE, sp).getvalue())
    _symbols(out, interner)


def _write_allocs(p: Profile, out: Out, report: LossReport) -> None:
    s = p.samples
    if [tuple(vt) for vt in p.sample_types] != ALLOC_TYPES:
        report.add("sample types of an allocation stream other than its own (written as allocations)")
    names = label_table(p, report, {"heap_id": lambda lb: lb.num, "address": lambda lb: lb.num})
    times = s.time if s.time is not None else np.zeros(len(s), np.int64)
    base = min(int(times.min()) if times.size else 0, 0)
    clock_snapshot(out, int(times.min()) if times.size else 0, base, S.MONOTONIC_COARSE, p.time_nanos)
    process_tree(out, _processes(p), {})
    pids = s.pid if s.pid is not None else np.zeros(len(s), np.int64)
    values = s.values
    for r in range(len(s)):
        fields = names[int(s.labelset[r])]
        address = int(fields.get("address", 0)) & ((1 << 64) - 1)
        heap_id = int(fields.get("heap_id", 0))
        pkt = Encoder().varint_field(S.F_SEQ_ID, ALLOC_SEQ).varint_field(79, int(pids[r]), always=True)
        t = int(times[r]) - base
        if values.shape[1] > 3 and values[r, 3]:
            body = Encoder().unpacked_field(1, [address]).unpacked_field(2, [heap_id])
            pkt.varint_field(S.F_TIMESTAMP, t, always=True).varint_field(S.F_CLOCK_ID, S.MONOTONIC_COARSE)
            out.packet(pkt.message(S.F_STREAMING_FREE, body).getvalue())
        else:
            v = [int(x) for x in values[r, :3]] if values.shape[1] >= 3 else [1, 0, 0]
            body = Encoder().unpacked_field(1, [address]).unpacked_field(2, [v[1]]).unpacked_field(3, [v[2]])
            body.unpacked_field(4, [t]).unpacked_field(5, [heap_id])
            out.packet(pkt.message(S.F_STREAMING_ALLOCATION, body).getvalue())
