"""Per-sequence state: interning generations, defaults, thread descriptor, validity.

A sequence (``trusted_packet_sequence_id``) is one writer's stream. Its
incremental state starts invalid; ``SEQ_INCREMENTAL_STATE_CLEARED`` (or the
legacy ``incremental_state_cleared``) starts a new generation of interned
data, drops the defaults and makes the state valid; a nonzero
``previous_packet_dropped`` makes it invalid again (the interned data is
kept) until the next clear. Interned entries are only taken while the state
is valid, and the first entry with a given iid wins, as in trace processor.

Resolving an iid is lenient where trace processor drops data: a missing
callstack leaves the sample with an empty stack, a missing frame becomes a
placeholder frame, a missing name or mapping is left empty. Every such case
is counted in ``Stats`` and shown as a warning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from polyprof.formats.perfetto._catalog import Catalog, build_id_text, catalog_kernels
from polyprof.formats.perfetto._tables import (
    BUILD_IDS,
    FUNCTION_NAMES,
    INTERNED,
    MAPPING_PATHS,
    SOURCE_PATHS,
    FrameRuns,
    Tables,
)
from polyprof.model.columns import unique_inverse
from polyprof.wire.vector import HASH_BASE, HASH_MIX

__all__ = ["Generation", "Resolver", "Sequence", "Stats", "text"]


class Stats(Counter):
    """Counts of everything the reader tolerated, skipped or repaired (become warnings)."""


def text(raw: bytes, stats: Stats) -> str:
    """Decode a wire string; invalid UTF-8 is replaced (and counted), never fatal."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats["strings that were not valid UTF-8 (decoded with replacement)"] += 1
        return raw.decode("utf-8", errors="replace")


#: iids (or frames of new callstacks) from which a lookup uses the compiled catalog kernels
#: (fewer are quicker in numpy than loading one more kernel's machine code, and a callstack
#: resolved alone does not scan its batches).
KERNELS_FROM = 1 << 20


class _Resolved:
    """Sorted iids of one kind already resolved in a generation, with their catalog ids."""

    __slots__ = ("iid", "cat")

    def __init__(self) -> None:
        self.iid = np.zeros(0, dtype=np.uint64)
        self.cat = np.zeros(0, dtype=np.int64)

    def lookup(self, iids: np.ndarray) -> np.ndarray:
        """Catalog id of each iid; -2 for iids not resolved yet."""
        if not self.iid.size:
            return np.full(iids.size, -2, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.iid, iids), self.iid.size - 1)
        return np.where(self.iid[at] == iids, self.cat[at], -2)

    def get(self, iids: np.ndarray, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Catalog id of each iid; ``make(new iids)`` resolves the ones not seen before."""
        k = catalog_kernels() if iids.size >= KERNELS_FROM else None  # compiled: no intp copy of the ids
        table = self.table(iids, make, np.int64, k)
        if table is not None:
            return table[iids] if k is None else k.map_runs(iids, *_whole(iids), table)
        uniq, inverse = unique_inverse(iids)
        return self._resolve(uniq, make)[inverse]

    def table(self, iids: np.ndarray, make: Callable[[np.ndarray], np.ndarray], dtype: type,
              k: ModuleType | None) -> np.ndarray | None:
        """A table by iid of the catalog ids (in ``dtype``) of every iid in ``iids`` when they are
        dense (as producers number them; no inverse column for the 26M frame ids of a heap dump),
        else None. ``k``: the compiled catalog kernels, if loaded."""
        if not (iids.size and iids.dtype.kind in "iu" and int(iids.min()) >= 0):
            return None
        top = int(iids.max())
        if top >= max(4 * iids.size, 1 << 16):
            return None
        present = np.zeros(top + 1, dtype=bool)
        if k is None:
            present[iids] = True
        else:
            k.mark_runs(iids, *_whole(iids), present)
        uniq = np.flatnonzero(present).astype(iids.dtype)
        del present
        table: np.ndarray = np.empty(top + 1, dtype=dtype)
        table[uniq] = self._resolve(uniq, make)
        return table

    def runs_table(self, runs: list[FrameRuns], total: int, make: Callable[[np.ndarray], np.ndarray],
                   k: ModuleType) -> np.ndarray | None:
        """:meth:`table` (int32) of the iids of ``runs`` (``total`` of them), marked where they lie."""
        top = max((int(f.max()) for f, _, _ in runs if f.size), default=0)  # a bound: the batches' largest iid
        if runs[0][0].dtype.kind != "u" or top >= max(4 * total, 1 << 16):
            return None
        present = np.zeros(top + 1, dtype=bool)
        for frames, starts, counts in runs:
            k.mark_runs(frames, starts, counts, present)
        narrow = all(frames.dtype == np.uint32 for frames, _, _ in runs)  # the dtype ``joined`` gives
        uniq = np.flatnonzero(present).astype(np.uint32 if narrow else np.uint64)
        del present
        table: np.ndarray = np.empty(top + 1, dtype=np.int32)
        table[uniq] = self._resolve(uniq, make)
        return table

    def _resolve(self, uniq: np.ndarray, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Catalog id of each of the sorted distinct iids ``uniq``, new ones made and remembered."""
        known = self.lookup(uniq)
        todo = np.flatnonzero(known == -2)
        if todo.size:
            known[todo] = make(uniq[todo])
            order = np.argsort(np.concatenate([self.iid, uniq[todo]]), kind="stable")
            self.iid = np.concatenate([self.iid, uniq[todo]])[order]
            self.cat = np.concatenate([self.cat, known[todo]])[order]
        return known


def _whole(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths) of one run of every value."""
    return np.zeros(1, dtype=np.int64), np.full(1, values.size, dtype=np.int64)


class Generation:
    """The interned entries of one sequence between two incremental-state clears.

    InternedData arrives as byte spans (``defer``) and is decoded in bulk when
    something needs it (``flush``); frames and callstacks resolve into the
    catalog once per generation.
    """

    __slots__ = ("key", "tables", "pending", "map_cache", "frames", "stacks")

    def __init__(self, key: int) -> None:
        self.key = key
        self.tables = Tables()
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.map_cache: dict[int, int] = {}
        self.frames = _Resolved()
        self.stacks = _Resolved()

    def release(self) -> None:
        """Drop the tables and what was resolved from them (the trace is read: its stacks are
        in the catalog)."""
        self.tables, self.pending, self.map_cache = Tables(), [], {}
        self.frames, self.stacks = _Resolved(), _Resolved()

    def defer(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        """Queue InternedData messages ``buf[starts:ends]`` (in wire order; decoded on flush)."""
        self.pending.append((buf, starts, ends))

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        k = 0
        while k < len(pending):  # one decode per run of spans in the same buffer
            buf = pending[k][0]
            j = k
            while j < len(pending) and pending[j][0] is buf:
                j += 1
            starts = np.concatenate([p[1] for p in pending[k:j]])
            ends = np.concatenate([p[2] for p in pending[k:j]])
            self.tables.add(buf, starts, ends, INTERNED)
            k = j


class Sequence:
    """The state of one sequence."""

    __slots__ = ("id", "valid", "gen", "defaults", "config", "clock", "pid", "tid", "thread_name",
                 "chrome_ns", "heap", "stack_samples", "dirty")

    def __init__(self, seq_id: int, gen: Generation, dirty: set[int]) -> None:
        self.id = seq_id
        self.valid = False
        self.gen = gen
        self.defaults: Any = None
        self.config = -1  # perf sampling config index, from the defaults
        self.clock = 0  # default timestamp clock from the defaults (0 = trace default)
        self.pid: int | None = None
        self.tid: int | None = None
        self.thread_name: str | None = None
        self.chrome_ns: int | None = None  # running time of StreamingProfilePackets (MONOTONIC ns)
        self.heap: Any = None  # heap-dump state, owned by the heap collector
        self.dirty = dirty

    def clear(self, gen: Generation) -> None:
        self.valid = True
        self.gen = gen
        self.defaults = None
        self.config = -1
        self.clock = 0
        self.chrome_ns = None
        self.dirty.add(self.id)

    def lost(self) -> None:
        self.valid = False
        self.chrome_ns = None
        self.dirty.add(self.id)

    def snapshot(self) -> tuple[bool, int, int, int]:
        """What the vectorized sample path needs to know about this sequence now."""
        return (self.valid, self.gen.key, self.config, self.clock)


class Resolver:
    """Turns iids of a generation into catalog ids, many at a time (cached per generation).

    Warnings count what trace processor would drop, once per generation and
    iid, as each frame or callstack is first resolved.
    """

    def __init__(self, catalog: Catalog, stats: Stats) -> None:
        self.cat = catalog
        self.stats = stats

    def stack(self, gen: Generation, iid: int) -> int:
        """Catalog stack of callstack ``iid``; -1 when empty or unknown (both counted)."""
        return int(self.stacks(gen, np.array([iid], dtype=np.uint64))[0])

    def stacks(self, gen: Generation, iids: np.ndarray) -> np.ndarray:
        """Catalog stack of every callstack iid (-1 when empty or unknown)."""
        gen.flush()
        return gen.stacks.get(np.asarray(iids, dtype=np.uint64), lambda new: self._new_stacks(gen, new))

    def _new_stacks(self, gen: Generation, iids: np.ndarray) -> np.ndarray:
        found, counts, order, runs = gen.tables.callstack_runs(iids)
        self._count("interning: missing callstack iid (sample kept with an empty stack)", int((~found).sum()))
        self._count("empty callstacks", int((found & (counts == 0)).sum()))
        out = np.full(iids.size, -1, dtype=np.int64)  # missing and empty stacks stay -1
        some = counts[order] > 0  # empty stacks add no frames
        order = order[some]
        if order.size:
            offsets = np.zeros(order.size + 1, dtype=np.int64)
            np.cumsum(counts[order], out=offsets[1:])
            out[order] = self._stacks_of_runs(gen, runs, offsets, some)
        return out

    def _stacks_of_runs(self, gen: Generation, runs: list[FrameRuns], offsets: np.ndarray,
                        some: np.ndarray) -> np.ndarray:
        """Catalog stacks of the frame iid runs ``runs`` (stack ``i`` = frames ``offsets[i]:
        offsets[i+1]`` of them end to end; ``some``: which runs are not empty). Compiled, with
        dense iids: the frames are read where they lie, and come as int32 catalog frames with
        their stacks' hashes from one pass."""
        total = int(offsets[-1])  # a few frames (a Chrome sample's new callstack) stay on numpy
        k = catalog_kernels() if total >= KERNELS_FROM else None
        table = None
        if k is not None and self.cat.frames.size + total < 2**31:  # catalog frames fit int32
            table = gen.frames.runs_table(runs, total, lambda new: self._new_frames(gen, new), k)
        if k is None or table is None:
            return self.cat.stacks_bulk(self.frames(gen, gen.tables.joined(runs)), offsets)
        frames, hashes = k.map_hash_runs(runs, total, table, HASH_MIX, HASH_BASE)
        return self.cat.stacks_bulk(frames, offsets, hashes[some])

    def frames(self, gen: Generation, iids: np.ndarray) -> np.ndarray:
        """Catalog frame of every frame iid (a placeholder frame for unknown ones, counted)."""
        return gen.frames.get(iids, lambda new: self._new_frames(gen, new))

    def _new_frames(self, gen: Generation, iids: np.ndarray) -> np.ndarray:
        rows = gen.tables.frame_rows(iids)
        out = np.empty(iids.size, dtype=np.int64)
        missing = np.flatnonzero(rows < 0)
        self._count("interning: missing frame iid (placeholder frame kept)", missing.size)
        for i in missing.tolist():
            out[i] = self.cat.frame(-1, 0, f"[missing frame iid {int(iids[i])}]")
        found = np.flatnonzero(rows >= 0)
        if not found.size:
            return out
        fr = gen.tables.frames.take(rows[found])
        name = self._strings(gen, FUNCTION_NAMES, fr.name, "function name")
        source = self._strings(gen, SOURCE_PATHS, fr.source, "source path")
        self.cat.frame_kinds += int(fr.has_kind.sum())
        mids, at = np.unique(fr.mapping, return_inverse=True)
        mapping = np.array([self.mapping(gen, m) for m in mids.tolist()], dtype=np.int64)[at.reshape(-1)]
        out[found] = self.cat.frames_bulk(mapping, fr.rel_pc, name, source, fr.line.astype(np.int64))
        return out

    def _strings(self, gen: Generation, table: int, iids: np.ndarray, what: str) -> np.ndarray:
        """Catalog string of each string iid (0 and unknown iids give "", unknown ones counted per use)."""
        uniq, inverse = np.unique(iids, return_inverse=True)
        entries = gen.tables.strings[table]
        raw = [entries.get(i) if i else b"" for i in uniq.tolist()]
        bad = np.zeros(uniq.size, dtype=np.int64)
        try:  # the usual case: all valid, one pass ("" is catalog string 0, as a missing one)
            texts = [r.decode("utf-8") if r else "" for r in raw]
        except UnicodeDecodeError:
            texts = []
            for k, r in enumerate(raw):
                try:
                    texts.append(r.decode("utf-8") if r else "")
                except UnicodeDecodeError:
                    texts.append(bytes(r or b"").decode("utf-8", errors="replace"))
                    bad[k] = 1
        sid = np.array(self.cat.sids(texts), dtype=np.int64)
        per_use = np.bincount(inverse.reshape(-1), minlength=uniq.size)
        self._count(f"interning: missing {what} iid", int(per_use[[r is None for r in raw]].sum()))
        self._count("strings that were not valid UTF-8 (decoded with replacement)", int((per_use * bad).sum()))
        return sid[inverse.reshape(-1)]

    def _count(self, what: str, n: int) -> None:
        if n:
            self.stats[what] += n

    def mapping(self, gen: Generation, iid: int) -> int:
        if iid == 0:
            return -1
        mid = gen.map_cache.get(iid)
        if mid is None:
            m = gen.tables.mappings.get(iid)
            if m is None:
                self.stats["interning: missing mapping iid"] += 1
                mid = -1
            else:
                build_iid, start_offset, start, end, load_bias, path_ids, exact_offset = m
                parts = []
                paths = gen.tables.strings[MAPPING_PATHS]
                for sid in path_ids:
                    raw = paths.get(sid)
                    if raw is None:  # as trace processor: stop at the first unknown component
                        self.stats["interning: missing mapping path iid"] += 1
                        break
                    parts.append(text(raw, self.stats))
                builds = gen.tables.strings[BUILD_IDS]
                build = builds.get(build_iid, b"") if build_iid else b""
                if build_iid and build_iid not in builds:
                    self.stats["interning: missing build id iid"] += 1
                mid = self.cat.mapping((mapping_name(parts), build_id_text(build), start, end,
                                        exact_offset, start_offset, load_bias))
            gen.map_cache[iid] = mid
        return mid


def mapping_name(parts: list[str]) -> str:
    """Join path components as trace processor does ("/" before each; "//" -> "/")."""
    name = "".join("/" + p for p in parts)
    return name[1:] if name.startswith("//") else name
