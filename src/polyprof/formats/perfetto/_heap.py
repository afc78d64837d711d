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

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import MalformedInputError
from polyprof.formats.limits import check_int64
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._clock import wrap64
from polyprof.formats.perfetto._sequence import Generation, Sequence
from polyprof.formats.perfetto._tables import PROFILE_PACKET, _Spans
from polyprof.model.columns import factorize_rows
from polyprof.wire import background
from polyprof.wire import vector as V

if TYPE_CHECKING:
    from polyprof.formats.perfetto._context import Context

__all__ = ["Dump", "HeapCollector", "HEAP_TYPES"]

HEAP_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
              ("inuse_space", "bytes"), ("freed_objects", "count"), ("freed_space", "bytes")]
ART_HEAP = "com.android.art"
_FLAGS = ("from_startup", "rejected_concurrent", "disconnected", "buffer_overran", "buffer_corrupted",
          "hit_guardrail")
_STATS = ("unwinding_errors", "heap_samples", "map_reparses", "total_unwinding_time_us",
          "client_spinlock_blocked_us")
# HeapSample fields: callstack_id, then the values of a plain sample and of a dump-at-max sample.
_CALLSTACK, _PLAIN, _AT_MAX, _MAX = 1, (5, 2, 6, 3), (9, 8), 8
_NAMES = {5: "alloc_count", 2: "self_allocated", 6: "free_count", 3: "self_freed", 9: "self_max_count",
          8: "self_max"}


@dataclass
class Dump:
    """One (process, heap, dump): latest cumulative values per stack (catalog stack, first-seen order)."""

    pid: int
    heap: str
    end_raw: int
    start_raw: int | None
    facts: dict[str, Any]
    nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    values: np.ndarray = field(default_factory=lambda: np.zeros((0, 6), dtype=np.int64))


class _SeqHeap:
    """Heap-dump state of one sequence: in-packet tables and samples waiting for the dump's end."""

    def __init__(self) -> None:
        self.tables = Generation(-1)
        self.pending: dict[tuple[int, str, int], tuple[Dump, list[tuple[np.ndarray, np.ndarray]]]] = {}
        self.prev_index: int | None = None


class _Series:
    """Every series (sequence, callstack source, iid, stack) of one (process, heap): latest values."""

    def __init__(self) -> None:
        self.keys = [np.zeros(0, dtype=np.int64) for _ in range(4)]
        self.values = np.zeros((0, 4), dtype=np.int64)
        self.node_order = np.zeros(0, dtype=np.int64)  # stacks in the order first seen

    def update(self, keys: list[np.ndarray], values: np.ndarray) -> int:
        """Take samples in order (a value going down is ignored); returns how many were ignored."""
        n_old = self.values.shape[0]
        # In order of first sight, the existing series (distinct rows, first) keep their numbers
        # 0..n_old-1 and new ones follow: a sample's group is its row.
        cols = [np.concatenate([a, b]) for a, b in zip(self.keys, keys)]
        seq, source = cols[0], cols[1]
        if source[0] >= 0 and (seq == seq[0]).all() and (source == source[0]).all():
            cols = [cols[2]]  # one generation's interned callstacks: the iid decides the stack (cached)
        group, first = _groups(cols)
        at = group[n_old:]
        if not n_old and first.size == at.size:  # the first samples, each its own series: as they are
            self.keys = keys
            self.values = values.copy()
            _, node_first = _groups([keys[3]])
            self.node_order = keys[3][node_first]
            return 0
        if first.size > n_old:  # new series, in order of first sight
            firsts = first[n_old:] - n_old
            self.keys = [np.concatenate([a, b[firsts]]) for a, b in zip(self.keys, keys)]
            self.values = np.concatenate([self.values, np.full((firsts.size, 4), -1, dtype=np.int64)])
            n_nodes = self.node_order.size
            _, node_first = _groups([np.concatenate([self.node_order, keys[3][firsts]])])
            self.node_order = np.concatenate([self.node_order, keys[3][firsts[node_first[n_nodes:] - n_nodes]]])
        if not at.size:
            return 0
        if int(np.bincount(at).max()) == 1:  # each series once: one round, no ranks
            if int(at.min()) >= n_old:  # every one new: no value to go down from
                self.values[at] = values
                return 0
            return self._round(at, values)
        ignored = 0
        rank = _rank(at)
        for r in range(int(rank.max()) + 1):  # repeated series: one round per repeat
            mine = np.flatnonzero(rank == r)
            ignored += self._round(at[mine], values[mine])
        return ignored

    def _round(self, rows: np.ndarray, values: np.ndarray) -> int:
        """Set the values of distinct series ``rows`` where none goes down; how many did."""
        prev = self.values[rows]
        down = (prev[:, 0] >= 0) & (values < prev).any(axis=1)
        self.values[rows[~down]] = values[~down]
        return int(down.sum())

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """(stacks with any value, their [alloc count, alloc size, free count, free size]) in first-seen order."""
        seen = self.values[:, 0] >= 0
        if self.node_order.size == seen.size and seen.all() and (self.keys[3] == self.node_order).all():
            total = self.values  # one series per stack, each in the order first seen: the totals
        else:
            nodes = self.keys[3][seen]
            where = _positions(self.node_order, nodes)
            total = np.zeros((self.node_order.size, 4), dtype=np.int64)
            if where.size and int(np.bincount(where).max()) == 1:  # one series per stack: no sums
                total[where] = self.values[seen]
            else:
                np.add.at(total, where, self.values[seen])
        keep = total.any(axis=1)
        if keep.all():  # (the usual dump: no copies of its 825k rows)
            return self.node_order, total
        return self.node_order[keep], total[keep]


def _groups(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``factorize_rows(cols, in_order=True)``; one strictly increasing column (a dump's callstack
    iids and their stacks as producers number them: every row its own group, in order) at once,
    where the factorization would try a hash table and then sort the rows."""
    if len(cols) == 1 and cols[0].size and bool((cols[0][1:] > cols[0][:-1]).all()):
        rows = np.arange(cols[0].size, dtype=np.int64)
        return rows, rows
    return factorize_rows(cols, in_order=True)


def _positions(order: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Where each of ``values`` is in ``order`` (distinct, holding every value): catalog stacks
    from -1 are dense, so a table by value (no sort of ``order``) when it is no wider than them."""
    if order.size and int(order.min()) >= -1 and int(order.max()) < 2 * order.size + 1024:
        at = np.empty(int(order.max()) + 2, dtype=np.int64)
        at[order + 1] = np.arange(order.size)
        return at[values + 1]
    pos = np.searchsorted(np.sort(order), values)
    return np.argsort(order, kind="stable")[pos]


def _rank(at: np.ndarray) -> np.ndarray:
    """How many earlier entries of ``at`` have the same value (0 for the first)."""
    order = np.argsort(at, kind="stable")
    sorted_at = at[order]
    start = np.flatnonzero(np.concatenate([[True], sorted_at[1:] != sorted_at[:-1]]))
    run = np.repeat(start, np.diff(np.append(start, at.size)))
    rank = np.empty(at.size, dtype=np.int64)
    rank[order] = np.arange(at.size) - run
    return rank


class HeapCollector:
    """Accumulates heap dumps; values per series and the finished dumps."""

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self.dumps: list[Dump] = []
        self._series: dict[tuple[int, str], _Series] = {}
        self._warm = False

    def _warm_later(self) -> None:
        """From the first dump of a large trace (compiled kernels) on, the kernels the rest of the
        read calls are loaded on a thread while it decodes (``_catalog_compiled.warm_calls``)."""
        self._warm = True
        if V.compiled():
            from polyprof.formats.perfetto._catalog_compiled import warm_calls

            background.warm_later(warm_calls, "polyprof-perfetto-warm")

    def packet(self, data: bytes, s: Sequence) -> None:
        """Take the ProfilePacket ``data`` of sequence ``s``."""
        st = s.heap = s.heap or _SeqHeap()
        if not self._warm:
            self._warm_later()
        try:  # the samples of every dump walked together in the packet's bytes
            pp, heaps, dump_samples = self._walked(data)
        except (MalformedInputError, DecodeError, _Decline):  # named by the per-dump path, as it always was
            pp, heaps, dump_samples = self._per_dump(data)
        if st.prev_index is None and pp.index != 0 or st.prev_index is not None and pp.index != st.prev_index + 1:
            self.ctx.stats["heapprofd packets missing (index gap)"] += 1
        st.prev_index = pp.index
        st.tables.tables.add_entries(pp, PROFILE_PACKET)
        for d, (heap, bad), (iids, values, at_max) in zip(pp.process_dumps, heaps, dump_samples):  # per dump
            if bad:
                self.ctx.stats["strings that were not valid UTF-8 (decoded with replacement)"] += 1
            if iids is None or values is None:  # a dump the options leave out
                continue
            key = (d.pid, heap, d.timestamp)
            entry = st.pending.get(key)
            if entry is None:
                dump = Dump(d.pid, key[1], wrap64(d.timestamp),
                            wrap64(d.start_timestamp) if d.HasField("start_timestamp") else None, _facts(d, at_max))
                entry = st.pending[key] = (dump, [])
            entry[1].append((iids, values))
        if not pp.continued:
            self.finalize(s)

    def _wanted(self, d: Any, heap: str) -> bool:
        """Whether dump ``d`` of heap ``heap`` is one the options ask for (its pid checked first)."""
        check_int64("ProcessHeapSamples.pid", d.pid)
        wanted, wanted_heap = self.ctx.options.pid, self.ctx.options.heap
        if wanted is not None and d.pid not in wanted:
            return False
        return not wanted_heap or heap == wanted_heap

    def _per_dump(self, data: bytes) -> tuple[Any, list[tuple[str, bool]], list[_DumpSamples]]:
        """The packet parsed with every sample as its own bytes, each dump's samples decoded on their own;
        with each dump's heap name (and whether it was not valid UTF-8)."""
        pp = S.messages()["ProfilePacketEntries"].FromString(data)  # entries stay bytes: decoded together
        heaps = [_heap_name(d.heap_name) for d in pp.process_dumps]
        out: list[_DumpSamples] = []
        for d, (heap, _) in zip(pp.process_dumps, heaps):
            if not self._wanted(d, heap):
                out.append((None, None, False))
                continue
            spans = _Spans.join(list(d.samples))
            out.append(_samples(spans.buf, spans.start, spans.start + spans.length,
                                d.orig_sampling_interval_bytes > 0))
        return pp, heaps, out

    def _walked(self, data: bytes) -> tuple[Any, list[tuple[str, bool]], list[_DumpSamples]]:
        """:meth:`_per_dump`'s answer with the samples of all dumps found and decoded in one walk
        of the packet's bytes; ``_Decline`` (or a walker error) where the answer could differ."""
        pp = S.messages()["ProfilePacketHead"].FromString(data)  # samples left unparsed
        dumps = list(pp.process_dumps)
        heaps = [_heap_name(d.heap_name) for d in dumps]
        wanted = np.array([self._wanted(d, heap) for d, (heap, _) in zip(dumps, heaps)], dtype=bool)
        buf = V.as_buffer(data)
        whole = (np.zeros(1, dtype=np.int64), np.full(1, len(data), dtype=np.int64))
        spans = V.walk_fields(buf, *whole, few_fields=True).select(5, V.LEN)  # a few dumps
        if spans.msg.size != len(dumps):
            raise _Decline
        # A few dumps of thousands of samples each (walk_fields finds their positions by pointer doubling)
        smp = V.walk_fields(buf, spans.start, spans.start + spans.length).select(2, V.LEN)
        keep = wanted[smp.msg]
        owner, start = smp.msg[keep], smp.start[keep]
        trusted = np.array([d.orig_sampling_interval_bytes > 0 for d in dumps], dtype=bool)
        iids, values, at_max = _samples(buf, start, start + smp.length[keep], trusted[owner], strict=False)
        bounds = np.searchsorted(owner, np.arange(len(dumps) + 1))
        return pp, heaps, [(iids[a:b], values[a:b], bool(at_max[a:b].any())) if w else (None, None, False)
                    for w, a, b in zip(wanted.tolist(), bounds[:-1].tolist(), bounds[1:].tolist())]

    def finalize(self, s: Sequence) -> None:
        st = s.heap
        for dump, samples in st.pending.values():
            self._commit(dump, samples, st, s)
        st.pending = {}
        st.tables = Generation(-1)

    def _commit(self, dump: Dump, samples: list[tuple[np.ndarray, np.ndarray]], st: _SeqHeap, s: Sequence) -> None:
        iids = np.concatenate([i for i, _ in samples]) if samples else np.zeros(0, dtype=np.uint64)
        values = np.concatenate([v for _, v in samples]) if samples else np.zeros((0, 4), dtype=np.int64)
        own = st.tables.tables.has_callstacks(iids)  # the dump's own tables first
        node = np.empty(iids.size, dtype=np.int64)
        node[own] = self.ctx.resolver.stacks(st.tables, iids[own])
        node[~own] = self.ctx.resolver.stacks(s.gen, iids[~own])
        source = np.where(own, -1, s.gen.key)
        if dump.heap == ART_HEAP:
            values = values.copy()
            values[:, 2:] = 0
        series = self._series.setdefault((dump.pid, dump.heap), _Series())
        keys = [np.full(iids.size, s.id, dtype=np.int64), source, iids.view(np.int64), node]
        ignored = series.update(keys, values) if iids.size else 0
        if ignored:
            self.ctx.stats["heap samples whose cumulative values went down (ignored, as trace processor)"] += ignored
        nodes, total = series.totals()
        dump.nodes = nodes
        dump.values = np.empty((nodes.size, 6), dtype=np.int64)  # alloc, in use (alloc - freed), freed
        dump.values[:, :2] = total[:, :2]
        np.subtract(total[:, :2], total[:, 2:], out=dump.values[:, 2:4])
        dump.values[:, 4:] = total[:, 2:]
        self.dumps.append(dump)

    def release(self) -> None:
        """Drop the series (after :meth:`finish`: the dumps hold their totals)."""
        self._series = {}

    def finish(self, seqs: list[Sequence]) -> None:
        """Commit dumps whose last packet never came (trace processor drops them; we keep them)."""
        for s in seqs:
            if s.heap is not None and s.heap.pending:
                self.ctx.stats["heap dumps not finalized by the end of the trace (kept)"] += len(s.heap.pending)
                self.finalize(s)


class _Decline(Exception):
    """The bulk decode of a packet's samples leaves this packet to the per-dump path."""


_DumpSamples = tuple["np.ndarray | None", "np.ndarray | None", bool]


def _samples(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, trusted_count: Any,
             strict: bool = True) -> Any:
    """(callstack iid, [alloc count, alloc size, free count, free size]) of every HeapSample
    ``buf[starts[i]:ends[i]]``, and whether it is a dump-at-max sample (``strict``: whether
    any is). ``trusted_count``: whether the producer's counts of dump-at-max samples hold
    (one flag, or one per sample). A value out of signed 64-bit range is an error naming
    its field (``strict``) or declined."""
    n = starts.size
    if not strict and V.compiled():  # one compiled pass; None: the walker decides
        from polyprof.formats.perfetto._heap_compiled import heap_samples

        got = heap_samples(buf, starts, ends, (_CALLSTACK, *_PLAIN, *_AT_MAX), _MAX)
        if got is not None:
            return _compiled_samples(*got, trusted_count)
    f = V.walk_varint_fields(buf, starts, ends)

    def col(k: int) -> np.ndarray:
        raw = V.scalar_column(f, k, n)
        big = raw > np.uint64(2**63 - 1)
        if big.any():  # uint64 on the wire, signed 64-bit in the model
            if not strict:
                raise _Decline
            check_int64(f"HeapSample.{_NAMES[k]}", int(raw[np.argmax(big)]))
        return raw.view(np.int64)

    at_max = np.zeros(n, dtype=bool)
    at_max[f.msg[(f.field == _MAX) & (f.wire != V.LEN)]] = True
    values = np.stack([col(k) for k in _PLAIN], axis=1) if n else np.zeros((0, 4), dtype=np.int64)
    if at_max.any():
        count, size = (col(k)[at_max] for k in _AT_MAX)
        trusted = np.broadcast_to(np.asarray(trusted_count, dtype=bool), (n,))[at_max]
        values[at_max] = np.stack([np.where(trusted, count, 0), size, np.zeros_like(size),
                                   np.zeros_like(size)], axis=1)
    return V.scalar_column(f, _CALLSTACK, n), values, (bool(at_max.any()) if strict else at_max)


def _compiled_samples(cols: np.ndarray, at_max: np.ndarray, trusted_count: Any) -> Any:
    """:func:`_samples` (not ``strict``) from ``_heap_compiled.heap_samples``'s columns
    (callstack, ``_PLAIN``, ``_AT_MAX``)."""
    big = np.uint64(2**63 - 1)
    if (cols[1:5] > big).any() or at_max.any() and (cols[5:7] > big).any():
        raise _Decline  # uint64 on the wire, signed 64-bit in the model: the per-dump path names it
    values = np.ascontiguousarray(cols[1:5].T).view(np.int64)
    if at_max.any():
        count, size = (c.view(np.int64)[at_max] for c in cols[5:7])
        trusted = np.broadcast_to(np.asarray(trusted_count, dtype=bool), (at_max.size,))[at_max]
        values[at_max] = np.stack([np.where(trusted, count, 0), size, np.zeros_like(size),
                                   np.zeros_like(size)], axis=1)
    return cols[0], values, at_max


def _heap_name(raw: bytes) -> tuple[str, bool]:
    """A dump's heap name ("unknown" when unset) and whether it was not valid UTF-8 (then decoded
    with replacement, as :func:`._sequence.text`)."""
    try:
        return raw.decode("utf-8") or "unknown", False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), True


def _facts(d: Any, at_max: bool) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name in _FLAGS:
        if getattr(d, name):
            facts[name] = True
    if d.client_error:
        facts["client_error"] = S.CLIENT_ERRORS[d.client_error] if 0 <= d.client_error < len(S.CLIENT_ERRORS) \
            else f"error_{d.client_error}"
    for name in ("sampling_interval_bytes", "orig_sampling_interval_bytes"):
        if getattr(d, name):
            facts[name] = getattr(d, name)
    if at_max:
        facts["dump_at_max"] = True
    if d.HasField("stats"):
        stats = {name: getattr(d.stats, name) for name in _STATS if getattr(d.stats, name)}
        if stats:
            facts["process_stats"] = stats
    return facts
