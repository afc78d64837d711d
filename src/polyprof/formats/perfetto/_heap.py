"""heapprofd ``ProfilePacket`` dumps: one profile per (process, heap, dump).

A dump may span several packets (``continued``) and its samples may come
before the callstacks they use, so samples wait until the packet that ends
the dump, then resolve against the packet's own tables (legacy, kept across
the continued packets) or else the sequence's interned data.

Values are interpreted as trace processor does. Every (process, heap,
callstack source) is a series of cumulative counters; a value that goes
down is malformed and ignored (counted). A dump's profile holds, for every
stack of that process and heap seen so far, the latest cumulative values:

``alloc_objects``/``alloc_space``  allocations since profiling started
``inuse_objects``/``inuse_space``  not yet freed (the default type)
``freed_objects``/``freed_space``  freed since profiling started

These are ``traceconv profile``'s "Total" and "Unreleased" views under
pprof's Go names. Dump-at-max dumps give the unfreed values at the peak
(the count only from producers whose counts are correct, as trace
processor decides); the ART heap records no frees. Sample times are the
dump time (MONOTONIC_COARSE converted to trace time); the window start is in
``duration_nanos``. Client errors, flags and process stats of a dump are in
the profile's ``heapprofd`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polyprof.formats.limits import check_int64
from polyprof.formats.perfetto._clock import wrap64
from polyprof.formats.perfetto._sequence import Generation, Sequence, text

if TYPE_CHECKING:
    from polyprof.formats.perfetto._reader import TraceReader

__all__ = ["Dump", "HeapCollector", "HEAP_TYPES"]

HEAP_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
              ("inuse_space", "bytes"), ("freed_objects", "count"), ("freed_space", "bytes")]
ART_HEAP = "com.android.art"
_FLAGS = ("from_startup", "rejected_concurrent", "disconnected", "buffer_overran", "buffer_corrupted",
          "hit_guardrail")
_STATS = ("unwinding_errors", "heap_samples", "map_reparses", "total_unwinding_time_us",
          "client_spinlock_blocked_us")


@dataclass
class Dump:
    """One (process, heap, dump): latest cumulative values per stack node."""

    pid: int
    heap: str
    end_raw: int
    start_raw: int | None
    facts: dict[str, Any]
    values: dict[int, list[int]] = field(default_factory=dict)


class _SeqHeap:
    """Heap-dump state of one sequence: in-packet tables and samples waiting for the dump's end."""

    def __init__(self) -> None:
        self.tables = Generation(-1)
        self.pending: dict[tuple[int, str, int], tuple[Dump, list[tuple]]] = {}
        self.prev_index: int | None = None


class HeapCollector:
    """Accumulates heap dumps; values per series and the finished dumps."""

    def __init__(self, reader: "TraceReader") -> None:
        self.r = reader
        self.dumps: list[Dump] = []
        self._series: dict[tuple, list[int]] = {}  # series -> latest [ac, as, fc, fs]
        self._by_heap: dict[tuple[int, str], dict[int, list[tuple]]] = {}  # (pid, heap) -> node -> series

    def packet(self, pp: Any, s: Sequence) -> None:
        st = s.heap = s.heap or _SeqHeap()
        if st.prev_index is None and pp.index != 0 or st.prev_index is not None and pp.index != st.prev_index + 1:
            self.r.stats["heapprofd packets missing (index gap)"] += 1
        st.prev_index = pp.index
        _take_tables(st.tables, pp)
        wanted, wanted_heap = self.r.options.pid, self.r.options.heap
        for d in pp.process_dumps:
            check_int64("ProcessHeapSamples.pid", d.pid)
            heap = text(d.heap_name, self.r.stats) if d.heap_name else "unknown"
            if wanted is not None and d.pid not in wanted or wanted_heap and heap != wanted_heap:
                continue
            key = (d.pid, heap, d.timestamp)
            entry = st.pending.get(key)
            if entry is None:
                dump = Dump(d.pid, heap, wrap64(d.timestamp),
                            wrap64(d.start_timestamp) if d.HasField("start_timestamp") else None, _facts(d))
                entry = st.pending[key] = (dump, [])
            trusted_count = d.orig_sampling_interval_bytes > 0
            entry[1].extend(_sample(h, trusted_count) for h in d.samples)
        if not pp.continued:
            self.finalize(s)

    def finalize(self, s: Sequence) -> None:
        st = s.heap
        for dump, samples in st.pending.values():
            self._commit(dump, samples, st, s)
        st.pending = {}
        st.tables = Generation(-1)

    def _commit(self, dump: Dump, samples: list[tuple], st: _SeqHeap, s: Sequence) -> None:
        art = dump.heap == ART_HEAP
        nodes = self._by_heap.setdefault((dump.pid, dump.heap), {})
        for iid, values in samples:
            node, source = self._stack(iid, st, s)
            key = (dump.pid, dump.heap, s.id, source, iid, node)
            prev = self._series.get(key)
            if prev is not None and any(v < p for v, p in zip(values, prev)):
                self.r.stats["heap samples whose cumulative values went down (ignored, as trace processor)"] += 1
                continue
            if prev is None:
                nodes.setdefault(node, []).append(key)
            self._series[key] = [values[0], values[1], 0 if art else values[2], 0 if art else values[3]]
        for node, keys in nodes.items():
            total = [0, 0, 0, 0]
            for k in keys:
                for j, v in enumerate(self._series[k]):
                    total[j] += v
            if any(total):
                ac, asz, fc, fs = total
                dump.values[node] = [ac, asz, ac - fc, asz - fs, fc, fs]
        self.dumps.append(dump)

    def _stack(self, iid: int, st: _SeqHeap, s: Sequence) -> tuple[int, int]:
        """(trie node, source): the dump's own tables first, else the interned data of its sequence.

        In-packet tables share the interned layout, except that every string
        (names, paths, build ids) comes from their one ``strings`` table.
        """
        if iid in st.tables.callstacks:
            return self.r.resolver.stack(st.tables, iid), -1
        return self.r.resolver.stack(s.gen, iid), s.gen.key

    def finish(self) -> None:
        """Commit dumps whose last packet never came (trace processor drops them; we keep them)."""
        for s in self.r.seqs.values():
            if s.heap is not None and s.heap.pending:
                self.r.stats["heap dumps not finalized by the end of the trace (kept)"] += len(s.heap.pending)
                self.finalize(s)


def _take_tables(tables: Generation, pp: Any) -> None:
    for e in pp.strings:
        for table in tables.strings.values():
            table.setdefault(e.iid, e.str)
    tables.take_profile_tables(pp.mappings, pp.frames, pp.callstacks)


def _sample(h: Any, trusted_count: bool) -> tuple[int, tuple[int, int, int, int]]:
    """(callstack iid, (alloc count, alloc size, free count, free size)) of a HeapSample."""
    names: tuple[str, ...]
    if h.HasField("self_max"):
        values = (h.self_max_count if trusted_count else 0, h.self_max, 0, 0)
        names = ("self_max_count", "self_max")
    else:
        values = (h.alloc_count, h.self_allocated, h.free_count, h.self_freed)
        names = ("alloc_count", "self_allocated", "free_count", "self_freed")
    for name, v in zip(names, values):
        check_int64(f"HeapSample.{name}", v)
    return h.callstack_id, values


def _facts(d: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name in _FLAGS:
        if getattr(d, name):
            facts[name] = True
    if d.client_error:
        facts["client_error"] = ("none", "hit_timeout", "invalid_stack_bounds")[d.client_error] \
            if 0 <= d.client_error < 3 else f"error_{d.client_error}"
    for name in ("sampling_interval_bytes", "orig_sampling_interval_bytes"):
        if getattr(d, name):
            facts[name] = getattr(d, name)
    if any(h.HasField("self_max") for h in d.samples):
        facts["dump_at_max"] = True
    if d.HasField("stats"):
        stats = {name: getattr(d.stats, name) for name in _STATS if getattr(d.stats, name)}
        if stats:
            facts["process_stats"] = stats
    return facts
