"""Per-event streams: Chrome's ``StreamingProfilePacket`` and heapprofd's streaming allocations.

Chrome samples (one profile per process, ``samples/count``): a sample's time
is the sequence's ThreadDescriptor ``reference_timestamp_us`` plus the
running sum of ``timestamp_delta_us`` (carried across packets until the next
descriptor), taken as CLOCK_MONOTONIC and converted to trace time; its
process and thread are the descriptor's. Labels: ``thread_name`` and
``process_priority`` (when reported). A time that overflows or goes negative
ends the packet, as in trace processor (counted); a callstack without a delta
is counted and dropped with the rest of its packet.

Streaming allocations (one profile per producer pid): every allocation and
free is a sample with an empty stack (the packets carry none), labels
``heap_id`` and ``address``; types ``alloc_objects``, ``alloc_space``,
``sampled_alloc_space`` and ``freed_objects``. Allocation times are
MONOTONIC_COARSE; frees take their packet's time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._clock import wrap64
from polyprof.formats.perfetto._sequence import Sequence

if TYPE_CHECKING:
    from polyprof.formats.perfetto._context import Context

__all__ = ["ALLOC_TYPES", "AllocCollector", "ChromeCollector"]

_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)
ALLOC_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("sampled_alloc_space", "bytes"),
               ("freed_objects", "count")]


def _saturate(value: int) -> int:
    return max(_I64_MIN, min(_I64_MAX, value))


class ChromeCollector:
    """Resolves Chrome sample times and stacks as packets arrive."""

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self._cols: dict[str, list[int]] = {k: [] for k in ("pid", "tid", "time", "stack", "priority")}

    @staticmethod
    def reference(us: int) -> int:
        return _saturate(us * 1000)

    def packet(self, sp: Any, s: Sequence) -> None:
        stats = self.ctx.stats
        if s.chrome_ns is None:
            stats["Chrome samples without a ThreadDescriptor time base (times start at 0)"] += 1
            s.chrome_ns = 0
        t = s.chrome_ns
        if t < 0:
            stats["Chrome sample packets with an invalid (overflowing) time"] += 1
            return
        iids, deltas = list(sp.callstack_iid), list(sp.timestamp_delta_us)
        if len(iids) > len(deltas):
            stats["Chrome callstacks without a timestamp delta (dropped)"] += len(iids) - len(deltas)
        c = self._cols
        pid, tid = (s.pid or 0), (s.tid or 0)
        for k, delta in enumerate(deltas):
            t = _saturate(t + _saturate(delta * 1000))
            if t < 0:
                stats["Chrome sample packets with an invalid (overflowing) time"] += 1
                break
            if k < len(iids):
                c["pid"].append(pid)
                c["tid"].append(tid)
                c["time"].append(t)
                c["stack"].append(self.ctx.resolver.stack(s.gen, iids[k]))
                c["priority"].append(sp.process_priority)
        s.chrome_ns = t

    def columns(self) -> dict[str, np.ndarray] | None:
        c = self._cols
        if not c["time"]:
            return None
        cols = {k: np.array(v, dtype=np.int64) for k, v in c.items()}
        n = cols["time"].size
        clock = np.full(n, self.ctx.times.clock_index(S.MONOTONIC, 0), dtype=np.int32)
        cols["time"] = self.ctx.times.trace_times(cols["time"], np.ones(n, dtype=bool), clock)
        cols["values"] = np.ones((n, 1), dtype=np.int64)
        return cols


class AllocCollector:
    """Streaming allocations and frees as samples without stacks."""

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self._cols: dict[str, list[int]] = {k: [] for k in ("pid", "time", "has_time", "clock", "heap_id",
                                                             "address", "kind", "size", "sample_size")}

    def packet(self, pkt: Any, s: Sequence) -> None:
        c = self._cols
        pid = pkt.trusted_pid
        if pkt.HasField("streaming_allocation"):
            a = pkt.streaming_allocation
            n = len(a.address)
            clock = self.ctx.times.clock_index(S.MONOTONIC_COARSE, 0)
            for i in range(n):
                c["pid"].append(pid)
                has = i < len(a.clock_monotonic_coarse_timestamp)
                c["time"].append(wrap64(a.clock_monotonic_coarse_timestamp[i]) if has else 0)
                c["has_time"].append(has)
                c["clock"].append(clock)
                c["heap_id"].append(a.heap_id[i] if i < len(a.heap_id) else 0)
                c["address"].append(a.address[i])
                c["kind"].append(0)
                c["size"].append(a.size[i] if i < len(a.size) else 0)
                c["sample_size"].append(a.sample_size[i] if i < len(a.sample_size) else 0)
        if pkt.HasField("streaming_free"):
            fr = pkt.streaming_free
            clock = self.ctx.times.clock_index(pkt.timestamp_clock_id or s.clock, s.id)
            for i in range(len(fr.address)):
                c["pid"].append(pid)
                c["time"].append(wrap64(pkt.timestamp))
                c["has_time"].append(pkt.HasField("timestamp"))
                c["clock"].append(clock)
                c["heap_id"].append(fr.heap_id[i] if i < len(fr.heap_id) else 0)
                c["address"].append(fr.address[i])
                c["kind"].append(1)
                c["size"].append(0)
                c["sample_size"].append(0)

    def columns(self) -> dict[str, np.ndarray] | None:
        c = self._cols
        if not c["pid"]:
            return None
        cols = {k: np.array(v, dtype=np.uint64 if k == "address" else np.int64) for k, v in c.items()}
        cols["time"] = self.ctx.times.trace_times(cols["time"], cols["has_time"].astype(bool), cols["clock"])
        n = cols["pid"].size
        values = np.zeros((n, 4), dtype=np.int64)
        alloc = cols["kind"] == 0
        values[alloc, 0] = 1
        values[alloc, 1] = cols["size"][alloc]
        values[alloc, 2] = cols["sample_size"][alloc]
        values[~alloc, 3] = 1
        cols["values"] = values
        cols["stack"] = np.full(n, -1, dtype=np.int64)
        return cols
