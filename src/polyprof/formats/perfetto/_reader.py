"""The trace reader: streams chunks of packets, keeps per-sequence state, builds profiles at the end.

Each chunk (about 1 MB) is decoded in passes. The fast decoder
(:mod:`._flat`) reads every packet of the common traced_perf shape at once;
the general vectorized walker reads the top level of the others. Packets
that change state or carry anything but a PerfSample -- interned data,
defaults, clears, losses, descriptors, heap dumps, Chrome and StackSample
samples, symbols, clock snapshots, compressed bundles -- are then handled
one by one, in order (parsed with upb); after each, the sequences it touched
record a state snapshot. Finally all PerfSamples of the chunk are decoded
together, each with the snapshot of its sequence at its position (so it
sees the interned data and defaults in effect there). Memory holds the
interned tables, the catalog, the decoded sample columns and heap-dump
aggregates, never the trace itself. A gzip file is inflated as it streams,
by the bounded ``Source.stream()`` (``max_inflate`` and the ratio limit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import InputError, MalformedInputError
from polyprof.formats.options import ReadOptions
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._catalog import build_id_text
from polyprof.formats.perfetto._chrome import AllocCollector, ChromeCollector
from polyprof.formats.perfetto._context import Context
from polyprof.formats.perfetto._flat import Flat, decode
from polyprof.formats.perfetto._framing import (
    Chunk,
    chunks,
    frame_all,
    inflate_bundle,
)
from polyprof.formats.perfetto._heap import HeapCollector
from polyprof.formats.perfetto._perf import (
    PerfCollector,
    columns_flat,
    columns_generic,
    merge_columns,
)
from polyprof.formats.perfetto._sequence import Generation, Sequence, text
from polyprof.formats.perfetto._stack import StackSampleCollector
from polyprof.formats.source import Source
from polyprof.model.columns import distinct, unique_inverse
from polyprof.model.memory import release_free_memory
from polyprof.model.profile import Profile
from polyprof.wire import vector as V
from polyprof.wire.locate import locate

__all__ = ["TraceReader"]

_MAX_NESTING = 4


#: chunks read between two returns of the C heap's free pages: each chunk's temporaries are freed
#: between the sample batches kept, where glibc holds them (230 MB trace: tens of MB of the peak);
#: every 16 chunks (32 MB of trace) costs ~0.1 s of system time on that trace, every chunk ~0.5 s
_TRIM_CHUNKS = 16


class TraceReader:
    """One read of one trace."""

    def __init__(self, options: ReadOptions) -> None:
        self.ctx = ctx = Context.new(options)
        self.options, self.stats, self.catalog, self.resolver = options, ctx.stats, ctx.catalog, ctx.resolver
        self.times = ctx.times
        self.clocks = ctx.times.clocks
        self.clock_index, self.trace_times = ctx.times.clock_index, ctx.times.trace_times
        self.seqs: dict[int, Sequence] = {}
        self._gen_count = 0
        self._gens: dict[int, Generation] = {}
        self._dirty: set[int] = set()
        self._snapshots: dict[tuple, int] = {}
        self._snapshot_rows: list[tuple[bool, int, int, int]] = []
        self.processes: dict[int, str] = {}
        self.thread_names: dict[int, str] = {}
        self.inflate_budget = options.max_inflate
        self.perf = PerfCollector(ctx)
        self.heap = HeapCollector(ctx)
        self.chrome = ChromeCollector(ctx)
        self.allocs = AllocCollector(ctx)
        self.stack_samples = StackSampleCollector(ctx)
        self.packets = 0
        #: DeobfuscationMapping packets as plain data; every profile carries them
        #: (``extras["java_deobfuscation"]``) for the symbolize layer to apply.
        self.deobfuscation: list[dict] = []
        self.profile_facts: dict[str, Any] = {}

    # ---------------------------------------------------------------- state

    def new_generation(self) -> Generation:
        self._gen_count += 1
        gen = self._gens[self._gen_count] = Generation(self._gen_count)
        return gen

    def release_interned(self) -> None:
        """Once the trace is read and every dump committed: the generations' interned tables go
        before the profiles are built from the catalog (a heap dump's 25M frame ids: 100 MB)."""
        for gen in [*self._gens.values(), *(s.gen for s in self.seqs.values())]:
            gen.release()
        self.heap.release()

    def seq(self, seq_id: int) -> Sequence:
        s = self.seqs.get(seq_id)
        if s is None:
            s = self.seqs[seq_id] = Sequence(seq_id, self.new_generation(), self._dirty)
        return s

    def _snapshot_id(self, s: Sequence) -> int:
        snap = s.snapshot()
        sid = self._snapshots.get(snap)
        if sid is None:
            sid = self._snapshots[snap] = len(self._snapshot_rows)
            self._snapshot_rows.append(snap)
        return sid

    def resolve_stacks(self, gens: np.ndarray, iids: np.ndarray) -> np.ndarray:
        """Catalog stack of each (generation, callstack iid) pair."""
        out = np.empty(iids.size, dtype=np.int64)
        for g in distinct(gens).tolist():
            sel = gens == g
            out[sel] = self.resolver.stacks(self._gens[g], iids[sel])
        return out

    # ---------------------------------------------------------------- reading

    def read(self, source: Source) -> list[Profile]:
        V.expect(_input_size(source))  # a large trace: compiled kernels from its first chunk
        stream = source.stream()  # gzip inflated on the fly, bounded (one gzip path)
        try:
            for i, chunk in enumerate(chunks(stream), 1):
                self.chunk(chunk, 0)
                if i % _TRIM_CHUNKS == 0:  # chunks' temporaries sit in glibc's heap between the batches kept
                    release_free_memory()
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror or exc})") from None
        finally:
            stream.close()
        from polyprof.formats.perfetto._build import build_profiles

        profiles = build_profiles(self)
        if self.deobfuscation:
            for p in profiles:
                p.extras["java_deobfuscation"] = self.deobfuscation
        return profiles

    def chunk(self, ch: Chunk, depth: int) -> None:
        n = ch.starts.size
        self.packets += n
        self.stats["top-level records that are not packets (skipped)"] += ch.skipped_records
        if not n:
            return
        buf = V.as_buffer(ch.buf)
        flat = decode(buf, ch.starts, ch.ends)  # sample packets, all at once; the rest are walked
        top = _TopLevel(n, buf)
        top.take_flat(flat)
        generic = np.flatnonzero(~flat.ok)
        if generic.size:
            try:
                f = V.walk_fields(buf, ch.starts[generic], ch.ends[generic], few_fields=True)  # packets
            except MalformedInputError as exc:
                at = None if exc.offset is None else ch.base + exc.offset
                raise MalformedInputError(f"corrupt packet: {exc.message}", offset=at) from None
            top.take_generic(f, generic)
        present_seqs = distinct(top.seq[top.perf]).tolist()
        start_snap = {s: self._snapshot_id(self.seq(s)) for s in present_seqs}
        events: list[tuple[int, int, int]] = []  # (packet index, seq, snapshot after it)
        attached = 0
        for i in np.flatnonzero(top.control).tolist():
            attached = self._attach(buf, top, attached, i)
            self._dirty.clear()
            self.control(ch, i, depth, top)
            for s in self._dirty:
                events.append((i, s, self._snapshot_id(self.seqs[s])))
        self._attach(buf, top, attached, n)
        if top.perf.any():
            self._perf_packets(ch, buf, top, flat, start_snap, events)
        for gen in self._gens.values():  # nothing may keep this chunk's buffer alive
            if gen.pending:
                gen.flush()
        self._prune_generations()

    def _attach(self, buf: np.ndarray, top: "_TopLevel", lo: int, hi: int) -> int:
        """Queue the InternedData of the interned-only packets ``lo <= i < hi`` into their
        sequences' current generations (state cannot change between control packets)."""
        owner, start, end = top.interned
        a, b = np.searchsorted(owner, [lo, hi])
        if a == b:
            return hi
        owner, start, end = owner[a:b], start[a:b], end[a:b]
        sel = top.interned_only[owner]
        owner, start, end = owner[sel], start[sel], end[sel]
        seqs = top.seq[owner]
        for sid in distinct(seqs).tolist():
            mine = seqs == sid
            s = self.seq(sid)
            if s.valid:
                s.gen.defer(buf, start[mine], end[mine])
                continue
            packets = np.unique(owner[mine])
            self.stats["interned data skipped: incremental state invalid"] += packets.size
            lost = ((top.flags[packets] & S.SEQ_NEEDS_INCREMENTAL_STATE) != 0) & ~top.perf[packets]
            self.stats["packets skipped: incremental state invalid (lost data before them)"] += int(lost.sum())
        return hi

    def _snapshots_at(self, idx: np.ndarray, seq: np.ndarray, start_snap: dict[int, int],
                      events: list[tuple[int, int, int]]) -> np.ndarray:
        """The state snapshot of each packet ``idx`` (of sequence ``seq``) at its position."""
        snap = np.empty(idx.size, dtype=np.int64)
        ev = np.array(events, dtype=np.int64).reshape(-1, 3)
        for s in distinct(seq).tolist():
            mine = seq == s
            e = ev[ev[:, 1] == s]
            if not e.size:
                snap[mine] = start_snap[s]
                continue
            at = np.searchsorted(e[:, 0], idx[mine], side="right") - 1
            snap[mine] = np.where(at >= 0, e[np.maximum(at, 0), 2], start_snap[s])
        return snap

    def _perf_packets(self, ch: Chunk, buf: np.ndarray, top: "_TopLevel", flat: Flat,
                      start_snap: dict[int, int], events: list[tuple[int, int, int]]) -> None:
        idx = np.flatnonzero(top.perf)
        seq = top.seq[idx]
        rows = np.array(self._snapshot_rows, dtype=np.int64).reshape(-1, 4)[
            self._snapshots_at(idx, seq, start_snap, events)]
        valid, gen, config, default_clock = rows[:, 0] != 0, rows[:, 1], rows[:, 2], rows[:, 3]
        needs = (top.flags[idx] & S.SEQ_NEEDS_INCREMENTAL_STATE) != 0
        if (needs & (seq == 0)).any():
            raise MalformedInputError("a packet needs incremental state but has no trusted_packet_sequence_id",
                                      offset=ch.base + int(ch.starts[idx[np.argmax(needs & (seq == 0))]]))
        skipped = needs & ~valid
        self.stats["packets skipped: incremental state invalid (lost data before them)"] += int(skipped.sum())
        ok = ~skipped
        idx, seq, gen, config, default_clock = idx[ok], seq[ok], gen[ok], config[ok], default_clock[ok]
        if not idx.size:
            return
        if (config < 0).any():  # no defaults on the sequence: the legacy cpu-clock timebase
            config[config < 0] = self.perf.config(None)
        own = top.clock[idx]
        clock_id = np.where(own != 0, own, default_clock)
        custom = (clock_id >= 64) & (clock_id <= 127)  # sequence-scoped clock ids
        key = (clock_id << 32) | np.where(custom, seq & 0xFFFFFFFF, 0)
        uniq, inverse = unique_inverse(key)
        clock = np.array([self.clock_index(k >> 32, k & 0xFFFFFFFF) for k in uniq.tolist()],
                         dtype=np.int32)[inverse.reshape(-1)]
        parts = []
        fast = flat.ok[idx]
        if fast.any():
            parts.append((idx[fast], columns_flat(flat.inner, flat.followers, idx[fast])))
        if (~fast).any():
            slow = idx[~fast]
            parts.append((slow, columns_generic(buf, top.span_start[slow], top.span_end[slow])))
        _, cols = merge_columns(parts)
        pk = {"seq": seq, "config": config, "gen": gen, "ts": top.ts[idx].view(np.int64),
              "has_ts": top.has_ts[idx], "clock": clock}
        self.perf.add(cols, pk, self.resolve_stacks)

    def _prune_generations(self) -> None:
        live = {s.gen.key for s in self.seqs.values()}
        for key in [k for k in self._gens if k not in live]:
            del self._gens[key]

    # ---------------------------------------------------------------- control packets

    def control(self, ch: Chunk, i: int, depth: int, top: "_TopLevel") -> None:
        start, end = int(ch.starts[i]), int(ch.ends[i])
        pkt = _parse(ch, start, end, "TracePacketLazy")
        s = self.seq(pkt.trusted_packet_sequence_id)
        if pkt.incremental_state_cleared or pkt.sequence_flags & S.SEQ_INCREMENTAL_STATE_CLEARED:
            s.clear(self.new_generation())
        elif pkt.previous_packet_dropped:
            s.lost()
            self.stats["sequence data losses (previous_packet_dropped)"] += 1
        if pkt.HasField("trace_packet_defaults"):
            s.defaults = pkt.trace_packet_defaults
            s.config = self.perf.config(s.defaults)
            s.clock = s.defaults.timestamp_clock_id
            s.dirty.add(s.id)
        if pkt.HasField("interned_data"):
            if s.valid:
                s.gen.defer(top.buf, *top.field_spans(i, S.F_INTERNED_DATA))
            else:  # skipped; damaged, it is still an error, as when every control packet was parsed whole
                _parse(ch, start, end, "TracePacket")
                self.stats["interned data skipped: incremental state invalid"] += 1
        if pkt.sequence_flags & S.SEQ_NEEDS_INCREMENTAL_STATE and not s.valid:
            if not pkt.HasField("perf_sample"):  # perf samples are counted by the sample path
                self.stats["packets skipped: incremental state invalid (lost data before them)"] += 1
            return
        try:
            self._payload(pkt, s, ch.base + start, depth, lambda number: (top.buf, *top.field_spans(i, number)))
        except (MalformedInputError, DecodeError) as exc:  # checks deep in a payload know the field, not the place
            if pkt.HasField("profile_packet"):  # a damaged heap dump: named by the full parse, as before
                _parse(ch, start, end, "TracePacket")
            if isinstance(exc, DecodeError):
                raise MalformedInputError("corrupt heap dump (cannot decode its fields)",
                                          offset=ch.base + start) from None
            if exc.offset is None:
                exc.offset = ch.base + start
            raise

    def _payload(self, pkt: Any, s: Sequence, offset: int, depth: int,
                 spans: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        if pkt.HasField("compressed_packets"):
            self._bundle(pkt.compressed_packets, offset, depth)
        if pkt.HasField("zstd_compressed_packets"):
            self._zstd(pkt.zstd_compressed_packets, offset, depth)
        if pkt.HasField("clock_snapshot"):
            cs = pkt.clock_snapshot
            self.clocks.add_snapshot([(self.clocks.key(c.clock_id, s.id), c.timestamp, c.unit_multiplier_ns,
                                       c.is_incremental) for c in cs.clocks], cs.primary_trace_clock or None)
        if pkt.HasField("process_tree"):
            self._process_tree(pkt.process_tree)
        if pkt.HasField("process_descriptor"):
            self._process(pkt.process_descriptor)
        if pkt.HasField("thread_descriptor"):
            self._thread(pkt.thread_descriptor, s)
        if pkt.HasField("track_descriptor"):
            td = pkt.track_descriptor
            if td.HasField("process"):
                self._process(td.process)
            if td.HasField("thread"):
                self._thread(td.thread, s)
        if pkt.HasField("profile_packet"):
            buf, starts, ends = spans(S.F_PROFILE_PACKET)  # several records merge: their bytes joined
            self.heap.packet(b"".join(buf[a:b].tobytes() for a, b in zip(starts.tolist(), ends.tolist())), s)
        if pkt.HasField("streaming_profile_packet"):
            self.chrome.packet(pkt.streaming_profile_packet, s)
        if pkt.HasField("streaming_allocation") or pkt.HasField("streaming_free"):
            self.allocs.packet(pkt, s)
        if pkt.HasField("stack_sample"):
            self.stack_samples.packet(pkt, s)
        if pkt.HasField("chrome_events"):
            self._metadata(pkt.chrome_events)
        if pkt.HasField("module_symbols"):
            self._module_symbols(pkt.module_symbols)
        if pkt.HasField("deobfuscation_mapping"):
            self.deobfuscation.append(self._deobfuscation(pkt.deobfuscation_mapping))
        if pkt.HasField("profiled_frame_symbols"):
            self.stats["legacy ProfiledFrameSymbols packets (not read; use ModuleSymbols)"] += 1

    def _metadata(self, bundle: Any) -> None:
        """polyprof's profile facts (see ``_build.apply_profile_facts``); other metadata is not read."""
        for item in bundle.metadata:
            if text(item.name, self.stats) == S.POLYPROF_METADATA:
                try:
                    facts = json.loads(text(item.string_value, self.stats))
                except ValueError:
                    facts = None
                if not isinstance(facts, dict):
                    self.stats[f"{S.POLYPROF_METADATA} metadata that is not a JSON object (ignored)"] += 1
                    continue
                self.profile_facts.update(facts)

    def _bundle(self, data: bytes, offset: int, depth: int) -> None:
        if depth >= _MAX_NESTING:
            raise MalformedInputError("compressed packets nested too deeply", offset=offset)
        inner = inflate_bundle(data, self.inflate_budget, self.options.limits)
        self.inflate_budget -= len(inner)
        self._inner(inner, offset, depth, "compressed_packets")

    def _inner(self, inner: bytes, offset: int, depth: int, what: str) -> None:
        """Read the packets of an inflated bundle; errors say where the bundle is."""
        try:
            self.chunk(frame_all(inner, 0), depth + 1)
        except MalformedInputError as exc:
            at = "" if exc.offset is None else f" at byte {exc.offset} of its inflated data"
            raise MalformedInputError(f"in the {what} bundle{at}: {exc.message}", offset=offset) from None

    def _zstd(self, data: bytes, offset: int, depth: int) -> None:
        try:
            import zstandard  # type: ignore[import-not-found]
        except ImportError:
            self.stats["zstd-compressed bundles skipped (install the 'zstandard' module to read them)"] += 1
            return
        try:
            cap = self.options.limits.inflate_cap(len(data), self.inflate_budget)
            inner = zstandard.ZstdDecompressor().decompress(data, max_output_size=cap)
        except zstandard.ZstdError as exc:
            raise MalformedInputError(f"corrupt zstd_compressed_packets bundle ({exc})", offset=offset) from None
        self.inflate_budget -= len(inner)
        self._inner(inner, offset, depth, "zstd_compressed_packets")

    def _process_tree(self, tree: Any) -> None:
        for p in tree.processes:
            if p.cmdline:
                self.processes[p.pid] = text(p.cmdline[0], self.stats)
        for t in tree.threads:
            if t.name:
                self.thread_names[t.tid] = text(t.name, self.stats)

    def _process(self, pd: Any) -> None:
        name = pd.process_name or (pd.cmdline[0] if pd.cmdline else b"")
        if name:
            self.processes[pd.pid] = text(name, self.stats)

    def _thread(self, td: Any, s: Sequence) -> None:
        if td.thread_name:
            self.thread_names[td.tid] = text(td.thread_name, self.stats)
        if not s.valid:
            self.stats["thread descriptors skipped: incremental state invalid"] += 1
            return
        s.pid, s.tid = td.pid, td.tid
        if td.HasField("reference_timestamp_us"):
            s.chrome_ns = self.chrome.reference(td.reference_timestamp_us)
        s.dirty.add(s.id)

    def _deobfuscation(self, dm: Any) -> dict:
        """{"package", "classes": [[obfuscated, original, [[obf, orig, obf_start, obf_end, src_start,
        src_end], ...] methods, [...] fields]]} (R8 line ranges as the packet gives them)."""
        def members(items: Any) -> list[list]:
            return [[text(m.obfuscated_name, self.stats), text(m.deobfuscated_name, self.stats),
                     m.obfuscated_line_start, m.obfuscated_line_end, m.source_line_start, m.source_line_end]
                    for m in items]

        return {"package": text(dm.package_name, self.stats),
                "classes": [[text(c.obfuscated_name, self.stats), text(c.deobfuscated_name, self.stats),
                             members(c.obfuscated_methods), members(c.obfuscated_members)]
                            for c in dm.obfuscated_classes]}

    def _module_symbols(self, ms: Any) -> None:
        path = text(ms.path, self.stats)
        build_id = build_id_text(ms.build_id)
        for a in ms.address_symbols:
            lines = tuple((text(ln.function_name, self.stats), text(ln.source_file_name, self.stats),
                           ln.line_number if ln.source_file_name else 0) for ln in a.lines)
            if lines:
                self.catalog.add_symbols(path, build_id, a.address, lines)


def _parse(ch: Chunk, start: int, end: int, message: str) -> Any:
    """The packet ``ch.buf[start:end]`` parsed as ``message``; a damaged one is an error naming the damage."""
    try:
        return S.messages()[message].FromString(ch.buf[start:end])
    except DecodeError:
        found = locate(ch.buf[start:end], S.messages()["TracePacket"].DESCRIPTOR, base=ch.base + start)
        what = f": {found.message}" if found is not None else " (cannot decode its fields)"
        raise MalformedInputError(f"corrupt packet{what}",
                                  offset=found.offset if found is not None else ch.base + start) from None


def _input_size(source: Source) -> int:
    """Bytes of the input as stored (a gzip file's inflated size is larger still)."""
    if source.raw is not None:
        return len(source.raw)
    try:
        return os.path.getsize(source.path) if source.path is not None else 0
    except OSError:
        return 0  # the read itself reports it


class _TopLevel:
    """Per-packet metadata of a chunk, from the fast decoder and the general walker."""

    _CONTROL_FIELDS = (S.F_INTERNED_DATA, S.F_DEFAULTS)
    #: Fields an interned-only packet may have besides its InternedData.
    _QUIET_FIELDS = list(S.METADATA_FIELDS - {S.F_DEFAULTS, S.F_INCREMENTAL_CLEARED, S.F_PREVIOUS_DROPPED}
                         | {S.F_PERF_SAMPLE})

    def __init__(self, n: int, buf: np.ndarray) -> None:
        self.buf = buf
        self.seq = np.zeros(n, dtype=np.int64)
        self.flags = np.zeros(n, dtype=np.uint64)
        self.ts = np.zeros(n, dtype=np.uint64)
        self.has_ts = np.zeros(n, dtype=bool)
        self.clock = np.zeros(n, dtype=np.int64)
        self.perf = np.zeros(n, dtype=bool)
        self.control = np.zeros(n, dtype=bool)
        self.span_start = np.zeros(n, dtype=np.int64)
        self.span_end = np.zeros(n, dtype=np.int64)
        # Packets whose only state is InternedData (their entries go to the current generation
        # without a trip through the control path), and every InternedData record: (packet, start, end).
        self.interned_only = np.zeros(n, dtype=bool)
        z = np.zeros(0, dtype=np.int64)
        self.interned: tuple[np.ndarray, np.ndarray, np.ndarray] = (z, z, z)
        self.generic: tuple[V.Fields, np.ndarray] = (V.walk_fields(buf, z, z), z)

    def field_spans(self, i: int, number: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) in ``buf`` of the LEN records of field ``number`` of packet ``i`` (generic packets)."""
        f, rows = self.generic
        k = int(np.searchsorted(rows, i))
        sel = f.select(number, V.LEN)
        mine = sel.msg == k
        return sel.start[mine], sel.start[mine] + sel.length[mine]

    def take_flat(self, flat: Flat) -> None:
        # One masked copy per column (the usual chunk of sample packets: none), not a masked gather
        # and a masked scatter; uint64 fields wrap into the int64 columns as ``astype`` would.
        where: np.ndarray | bool = True if flat.ok.all() else flat.ok

        def get(number: int, part: int) -> np.ndarray | int:
            got = flat.top.get(number)
            return 0 if got is None else got[part]  # a field no accepted packet has: absent, 0

        for dst, number, part in ((self.seq, S.F_SEQ_ID, 1), (self.flags, S.F_SEQUENCE_FLAGS, 1),
                                  (self.ts, S.F_TIMESTAMP, 1), (self.has_ts, S.F_TIMESTAMP, 0),
                                  (self.clock, S.F_CLOCK_ID, 1), (self.perf, S.F_PERF_SAMPLE, 0)):
            np.copyto(dst, get(number, part), casting="unsafe", where=where)
        control = (np.bitwise_and(get(S.F_SEQUENCE_FLAGS, 1), S.SEQ_INCREMENTAL_STATE_CLEARED) != 0) | \
            (np.not_equal(get(S.F_INCREMENTAL_CLEARED, 1), 0)) | (np.not_equal(get(S.F_PREVIOUS_DROPPED, 1), 0))
        np.copyto(self.control, control, where=where)

    def take_generic(self, f: V.Fields, rows: np.ndarray) -> None:
        n = rows.size
        self.seq[rows] = V.scalar_column(f, S.F_SEQ_ID, n).astype(np.int64)
        self.flags[rows] = V.scalar_column(f, S.F_SEQUENCE_FLAGS, n)
        self.ts[rows] = V.scalar_column(f, S.F_TIMESTAMP, n)
        self.has_ts[rows[f.msg[f.field == S.F_TIMESTAMP]]] = True
        self.clock[rows] = V.scalar_column(f, S.F_CLOCK_ID, n).astype(np.int64)
        start, length = V.span_column(f, S.F_PERF_SAMPLE, n)
        self.perf[rows] = start >= 0
        self.span_start[rows], self.span_end[rows] = start, start + length
        control = np.zeros(n, dtype=bool)
        control[f.msg[~np.isin(f.field, list(S.METADATA_FIELDS | {S.F_PERF_SAMPLE}))]] = True
        control[f.msg[np.isin(f.field, self._CONTROL_FIELDS) |
                      (np.isin(f.field, (S.F_INCREMENTAL_CLEARED, S.F_PREVIOUS_DROPPED)) & (f.value != 0))]] = True
        control |= (self.flags[rows] & S.SEQ_INCREMENTAL_STATE_CLEARED) != 0
        self.generic = (f, rows)
        rec = f.select(S.F_INTERNED_DATA, V.LEN)
        self.interned = (rows[rec.msg], rec.start, rec.start + rec.length)
        quiet = np.ones(n, dtype=bool)
        quiet[f.msg[~np.isin(f.field, self._QUIET_FIELDS)]] = False
        quiet[f.msg[np.isin(f.field, (S.F_INCREMENTAL_CLEARED, S.F_PREVIOUS_DROPPED)) & (f.value != 0)]] = False
        quiet &= (self.flags[rows] & S.SEQ_INCREMENTAL_STATE_CLEARED) == 0
        only = np.zeros(n, dtype=bool)
        only[rec.msg] = True
        only &= quiet
        self.interned_only[rows] = only
        self.control[rows] = control & ~only
