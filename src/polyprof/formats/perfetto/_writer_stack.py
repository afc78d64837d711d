"""Writing StackSample profiles (``profile_labels["kind"] == "stack_sample"``) back as StackSample packets.

One sequence: a packet that clears its state and carries
``stack_sample_defaults`` (source, primary counter, followers), then one
packet per sample with its timestamp, task context (pid, tid), execution
context (cpu, mode), interned callstack, weights and unwind error. Async
context labels become interned async context descriptors. Other labels are
in the loss report.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polyprof.formats.loss import LossReport
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._intern import Interner
from polyprof.formats.perfetto._writer import (
    DATA_SEQ,
    Out,
    clock_snapshot,
    label_table,
    mapping_extras,
    process_tree,
    str_label,
    threads_from_labels,
    times_plan,
)
from polyprof.model.profile import Profile
from polyprof.wire.encode import Encoder

__all__ = ["write_stack_samples"]

_UNITS = {"nanoseconds": 1, "cycles": 2, "instructions": 3, "bytes": 4, "page-faults": 5, "cache-misses": 6,
          "cache-references": 7, "branch-misses": 8, "count": 9}
_MODES = {"user": 1, "kernel": 2, "hypervisor": 3, "guest_user": 4, "guest_kernel": 5}


def _descriptor(vt: Any) -> Encoder:
    e = Encoder().string_field(2, vt.type, always=True)
    if vt.unit in _UNITS:
        return e.varint_field(3, _UNITS[vt.unit])
    return e.string_field(4, vt.unit)


def write_stack_samples(p: Profile, out: Out, report: LossReport) -> None:
    s = p.samples
    labels = p.extras.profile_labels
    if not p.sample_types or tuple(p.sample_types[0]) != ("samples", "count") or (s.values[:, 0] != 1).any():
        report.add("sample types: the first must be samples/count, one per sample (others kept as weights)")
    names = label_table(p, report, {"cpu_mode": lambda lb: _MODES.get(lb.str), "unwind_error": str_label,
                                    "thread_name": str_label, "async_context": str_label, "async_kind": str_label,
                                    "async_parent": str_label})
    times, base = times_plan(p, report)
    if times is not None and (base < 0 or p.time_nanos):
        anchor = int(times.min()) if times.size else 0
        clock_snapshot(out, anchor, base, S.MONOTONIC if base < 0 else None, p.time_nanos)
    processes = {int(labels["pid"]): str(labels["process_name"])} if "process_name" in labels else {}
    process_tree(out, processes, threads_from_labels(p, s.tid, s.pid, names, report))
    defaults = Encoder().bytes_field(1, str(labels.get("source", "")).encode("utf-8", errors="surrogatepass"))
    defaults.message(2, _descriptor(p.sample_types[1]) if len(p.sample_types) > 1 else Encoder())
    for vt in p.sample_types[2:]:
        defaults.message(3, _descriptor(vt))
    tpd = Encoder().message(100, defaults)
    if base < 0:
        tpd.varint_field(58, S.MONOTONIC)
    out.packet(Encoder().varint_field(S.F_SEQ_ID, DATA_SEQ).varint_field(S.F_SEQUENCE_FLAGS,
                                                                         S.SEQ_INCREMENTAL_STATE_CLEARED)
               .message(S.F_DEFAULTS, tpd).getvalue())
    _samples(p, out, report, names, times, base)


def _samples(p: Profile, out: Out, report: LossReport, names: list[dict[str, Any]], times: np.ndarray | None,
             base: int) -> None:
    s = p.samples
    interner = Interner(p, report, mapping_extras(p))
    asyncs: dict[tuple[str, str], int] = {}
    order = np.argsort(times, kind="stable") if times is not None else np.arange(len(s))
    if times is not None and (np.diff(times) < 0).any():
        report.add("samples reordered by time")
    for i in order.tolist():
        fields = names[int(s.labelset[i])]
        ss = Encoder()
        task = Encoder()
        for col, number in ((s.pid, 2), (s.tid, 3)):
            if col is not None and int(col[i]) >= 0:
                task.varint_field(number, int(col[i]), always=True)
        extra = Encoder()
        if "async_context" in fields:
            task.varint_field(4, _async(fields, asyncs, extra))
        if len(task):
            ss.message(1, task)
        exe = Encoder()
        if s.cpu is not None and int(s.cpu[i]) >= 0:
            exe.varint_field(2, int(s.cpu[i]), always=True)
        exe.varint_field(3, fields.get("cpu_mode") or 0)
        if len(exe):
            ss.message(3, exe)
        if s.stack[i] >= 0:
            ss.varint_field(6, interner.callstack(int(s.stack[i])), always=True)
        if "unwind_error" in fields:
            ss.string_field(7, fields["unwind_error"], always=True)
        weights = [max(int(v), 0) for v in s.values[i, 1:].tolist()]
        if weights:
            ss.varint_field(11, weights[0], always=True)
        if len(weights) > 1:
            ss.packed_field(14, weights[1:])
        pkt = Encoder()
        if times is not None:
            pkt.varint_field(S.F_TIMESTAMP, int(times[i]) - base, always=True)
        pkt.varint_field(S.F_SEQ_ID, DATA_SEQ)
        interned = interner.take() + extra.getvalue()
        if interned:
            pkt.varint_field(S.F_SEQUENCE_FLAGS, S.SEQ_NEEDS_INCREMENTAL_STATE).message(S.F_INTERNED_DATA, interned)
        out.packet(pkt.message(S.F_STACK_SAMPLE, ss).getvalue())
    for body in interner.symbols():
        out.packet(Encoder().message(S.F_MODULE_SYMBOLS, body).varint_field(S.F_SEQ_ID, 1).getvalue())


def _async(fields: dict[str, Any], known: dict[tuple[str, str], int], interned: Encoder) -> int:
    """iid of the async context named in the labels, interning it (and its parent) when new."""
    def intern(name: str, kind: str, parent: int) -> int:
        key = (name, kind)
        if key not in known:
            known[key] = len(known) + 1
            d = Encoder().varint_field(1, known[key]).string_field(2, name, always=True).string_field(3, kind)
            interned.message(51, d.varint_field(4, parent))
        return known[key]
    parent = intern(fields["async_parent"], "", 0) if "async_parent" in fields else 0
    return intern(fields["async_context"], fields.get("async_kind", ""), parent)
