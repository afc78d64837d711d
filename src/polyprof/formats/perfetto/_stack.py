"""The transport-neutral ``StackSample`` packet (TracePacket 135, 2026): one profile per (stream, process).

A stream is a sequence's ``source`` (from ``stack_sample_defaults``) with its
primary counter and followers. Each packet is one sample; every context,
callstack and counter descriptor may come inline, as an iid into the
sequence's interned data, or from the defaults, as trace processor resolves
them. Weights are per sample (not running totals). Kept: time (packet
timestamp), pid/tid (task context), cpu (execution context), labels
``cpu_mode``, ``unwind_error``, ``async_context`` (its name, kind and
parent's name) and ``thread_name``. Sample types: ``samples/count``, the
primary counter, then followers, with trace processor's unit names mapped to
pprof's (``ns`` -> ``nanoseconds``). Inline callstack frames have no
mapping. A pid, tid or cpu column holds -1 for a sample without that
context. Counter descriptors' multipliers and scopes are not kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._clock import wrap64
from polyprof.formats.perfetto._sequence import Sequence, text
from polyprof.model.profile import Label

if TYPE_CHECKING:
    from polyprof.formats.perfetto._context import Context

__all__ = ["StackSampleCollector"]

_UNITS = ("count", "nanoseconds", "cycles", "instructions", "bytes", "page-faults", "cache-misses",
          "cache-references", "branch-misses", "count")
_MODES = (None, "user", "kernel", "hypervisor", "guest_user", "guest_kernel")
TASK, EXECUTION, COUNTER, ASYNC = 48, 49, 50, 51


_KINDS = {TASK: "TaskContext", EXECUTION: "ExecutionContext", COUNTER: "CounterDescriptor",
          ASYNC: "AsyncContextDescriptor"}


def _entry(s: Sequence, table: int, iid: int) -> Any:
    """The interned StackSample context or descriptor ``iid`` of the sequence's generation, or None."""
    s.gen.flush()
    raw = s.gen.tables.raw[table].get(iid)
    return None if raw is None else S.messages()[f"StackSample.{_KINDS[table]}"].FromString(raw)


class StackSampleCollector:
    """Resolves StackSample packets as they arrive; the columns are built into profiles at the end."""

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self.streams: list[tuple] = []  # (source, primary (name, unit), followers)
        self._stream_index: dict[tuple, int] = {}
        self.label_sets: list[tuple[Label, ...]] = [()]
        self._label_index: dict[tuple[Label, ...], int] = {(): 0}
        self._rows: list[tuple] = []

    def _descriptor(self, d: Any) -> tuple[str, str]:
        unit = _UNITS[d.unit] if 0 < d.unit < len(_UNITS) else (text(d.unit_str, self.ctx.stats) or "count")
        return text(d.name, self.ctx.stats), unit

    def _interned(self, s: Sequence, table: int, iid: int, what: str) -> Any:
        msg = _entry(s, table, iid)
        if msg is None:
            self.ctx.stats[f"interning: missing stack sample {what} iid"] += 1
        return msg

    def packet(self, pkt: Any, s: Sequence) -> None:
        ss = pkt.stack_sample
        defaults = s.defaults.stack_sample_defaults if s.defaults is not None and \
            s.defaults.HasField("stack_sample_defaults") else None
        task = ss.task_context if ss.HasField("task_context") else \
            self._interned(s, TASK, ss.task_context_iid, "task context") if ss.HasField("task_context_iid") else None
        exe = ss.execution_context if ss.HasField("execution_context") else \
            self._interned(s, EXECUTION, ss.execution_context_iid, "execution context") \
            if ss.HasField("execution_context_iid") else None
        stream = self._stream(ss, s, defaults)
        weights = [ss.primary_weight] + list(ss.follower_weights)[:len(self.streams[stream][2])]
        labels = self._labels(ss, s, task, exe)
        clock = self.ctx.times.clock_index(pkt.timestamp_clock_id or s.clock, s.id)
        self._rows.append((stream, task.pid if task is not None and task.HasField("pid") else -1,
                           task.tid if task is not None and task.HasField("tid") else -1,
                           exe.cpu if exe is not None and exe.HasField("cpu") else -1,
                           self._stack(ss, s), wrap64(pkt.timestamp), pkt.HasField("timestamp"), clock,
                           labels, weights))

    def _stream(self, ss: Any, s: Sequence, defaults: Any) -> int:
        primary: tuple[str, str] = ("", "count")
        if ss.HasField("primary_descriptor"):
            primary = self._descriptor(ss.primary_descriptor)
        elif ss.HasField("primary_descriptor_iid"):
            d = self._interned(s, COUNTER, ss.primary_descriptor_iid, "counter descriptor")
            primary = self._descriptor(d) if d is not None else primary
        elif defaults is not None and defaults.HasField("primary_descriptor"):
            primary = self._descriptor(defaults.primary_descriptor)
        followers = [self._descriptor(d) for d in ss.follower_descriptors]
        if not followers:
            for iid in ss.follower_descriptor_iids:
                d = self._interned(s, COUNTER, iid, "counter descriptor")
                followers.append(self._descriptor(d) if d is not None else (f"counter_{iid}", "count"))
        if not followers and defaults is not None:
            followers = [self._descriptor(d) for d in defaults.follower_descriptors]
        source = text(defaults.source, self.ctx.stats) if defaults is not None else ""
        key = (source, primary, tuple(followers))
        idx = self._stream_index.get(key)
        if idx is None:
            idx = self._stream_index[key] = len(self.streams)
            self.streams.append(key)
        return idx

    def _stack(self, ss: Any, s: Sequence) -> int:
        if ss.HasField("callstack_iid"):
            return self.ctx.resolver.stack(s.gen, ss.callstack_iid)
        if not ss.HasField("callstack"):
            return -1
        cat, stats = self.ctx.catalog, self.ctx.stats
        return cat.stack([cat.frame(-1, 0, text(f.function_name, stats), text(f.source_file, stats), f.line_number)
                          for f in ss.callstack.frames])

    def _labels(self, ss: Any, s: Sequence, task: Any, exe: Any) -> int:
        labels = []
        if exe is not None and 0 < exe.mode < len(_MODES):
            labels.append(Label("cpu_mode", str=_MODES[exe.mode]))
        if ss.HasField("unwind_error"):
            labels.append(Label("unwind_error", str=text(ss.unwind_error, self.ctx.stats)))
        if task is not None and task.async_id:
            labels += self._async(s, task.async_id)
        key = tuple(labels)
        idx = self._label_index.get(key)
        if idx is None:
            idx = self._label_index[key] = len(self.label_sets)
            self.label_sets.append(key)
        return idx

    def _async(self, s: Sequence, iid: int) -> list[Label]:
        d = self._interned(s, ASYNC, iid, "async context")
        if d is None:
            return [Label("async_context", num=iid)]
        out = [Label("async_context", str=text(d.name, self.ctx.stats))]
        if d.kind:
            out.append(Label("async_kind", str=text(d.kind, self.ctx.stats)))
        parent = _entry(s, ASYNC, d.parent_iid) if d.parent_iid and d.parent_iid != iid else None
        if parent is not None:
            out.append(Label("async_parent", str=text(parent.name, self.ctx.stats)))
        return out

    def columns(self) -> dict[str, np.ndarray] | None:
        if not self._rows:
            return None
        rows, self._rows = self._rows, []
        width = 1 + max(len(self.streams[r[0]][2]) for r in rows) + 1
        cols = {name: np.array([r[k] for r in rows], dtype=np.int64)
                for k, name in enumerate(("stream", "pid", "tid", "cpu", "stack", "ts"))}
        has_ts = np.array([r[6] for r in rows], dtype=bool)
        clock = np.array([r[7] for r in rows], dtype=np.int32)
        cols["labelset"] = np.array([r[8] for r in rows], dtype=np.int64)
        values = np.zeros((len(rows), width), dtype=np.int64)
        values[:, 0] = 1
        for i, r in enumerate(rows):
            values[i, 1:1 + len(r[9])] = [wrap64(w) for w in r[9]]
        cols["values"] = values
        cols["time"] = self.ctx.times.trace_times(cols["ts"], has_ts, clock)
        return cols
