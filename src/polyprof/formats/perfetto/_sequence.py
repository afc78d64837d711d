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
from typing import Any

from polyprof.formats.perfetto._catalog import Catalog, build_id_text

__all__ = ["Generation", "Resolver", "Sequence", "Stats", "text"]

FUNCTION_NAMES, BUILD_IDS, MAPPING_PATHS, SOURCE_PATHS = 5, 16, 17, 18


class Stats(Counter):
    """Counts of everything the reader tolerated, skipped or repaired (become warnings)."""


def text(raw: bytes, stats: Stats) -> str:
    """Decode a wire string; invalid UTF-8 is replaced (and counted), never fatal."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats["strings that were not valid UTF-8 (decoded with replacement)"] += 1
        return raw.decode("utf-8", errors="replace")


class Generation:
    """The interned entries of one sequence between two incremental-state clears."""

    __slots__ = ("key", "strings", "mappings", "frames", "callstacks", "map_cache", "frame_cache",
                 "stack_cache", "stack_sample")

    def __init__(self, key: int) -> None:
        self.key = key
        self.strings: dict[int, dict[int, bytes]] = {FUNCTION_NAMES: {}, BUILD_IDS: {}, MAPPING_PATHS: {},
                                                     SOURCE_PATHS: {}}
        self.mappings: dict[int, Any] = {}
        self.frames: dict[int, Any] = {}
        self.callstacks: dict[int, tuple[int, ...]] = {}
        self.map_cache: dict[int, int] = {}
        self.frame_cache: dict[int, int] = {}
        self.stack_cache: dict[int, int] = {}
        # StackSample contexts and descriptors: InternedData field -> iid -> message
        self.stack_sample: dict[int, dict[int, Any]] = {48: {}, 49: {}, 50: {}, 51: {}}

    def take_profile_tables(self, mappings: Any, frames: Any, callstacks: Any) -> None:
        """Take mapping, frame and callstack entries (first definition of an iid wins);
        from InternedData or from a ProfilePacket's legacy in-packet tables."""
        for e in mappings:
            self.mappings.setdefault(e.iid, e)
        for e in frames:
            self.frames.setdefault(e.iid, e)
        for e in callstacks:
            if e.iid not in self.callstacks:
                self.callstacks[e.iid] = tuple(e.frame_ids)

    def add(self, data: Any) -> None:
        """Take the entries of an InternedData message (first definition of an iid wins)."""
        for number, entries in ((FUNCTION_NAMES, data.function_names), (BUILD_IDS, data.build_ids),
                                (MAPPING_PATHS, data.mapping_paths), (SOURCE_PATHS, data.source_paths)):
            table = self.strings[number]
            for e in entries:
                table.setdefault(e.iid, e.str)
        self.take_profile_tables(data.mappings, data.frames, data.callstacks)
        for number, entries in ((48, data.stack_sample_task_contexts), (49, data.stack_sample_execution_contexts),
                                (50, data.stack_sample_counter_descriptors),
                                (51, data.stack_sample_async_context_descriptors)):
            table = self.stack_sample[number]
            for e in entries:
                table.setdefault(e.iid, e)


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
    """Turns iids of a generation into catalog ids (cached per generation)."""

    def __init__(self, catalog: Catalog, stats: Stats) -> None:
        self.cat = catalog
        self.stats = stats

    def string(self, gen: Generation, table: int, iid: int, what: str) -> str:
        if iid == 0:
            return ""
        raw = gen.strings[table].get(iid)
        if raw is None:
            self.stats[f"interning: missing {what} iid"] += 1
            return ""
        return text(raw, self.stats)

    def mapping(self, gen: Generation, iid: int) -> int:
        if iid == 0:
            return -1
        mid = gen.map_cache.get(iid)
        if mid is None:
            m = gen.mappings.get(iid)
            if m is None:
                self.stats["interning: missing mapping iid"] += 1
                mid = -1
            else:
                parts = []
                for sid in m.path_string_ids:
                    raw = gen.strings[MAPPING_PATHS].get(sid)
                    if raw is None:  # as trace processor: stop at the first unknown component
                        self.stats["interning: missing mapping path iid"] += 1
                        break
                    parts.append(text(raw, self.stats))
                build = gen.strings[BUILD_IDS].get(m.build_id, b"") if m.build_id else b""
                if m.build_id and m.build_id not in gen.strings[BUILD_IDS]:
                    self.stats["interning: missing build id iid"] += 1
                mid = self.cat.mapping((mapping_name(parts), build_id_text(build), m.start, m.end,
                                        m.exact_offset, m.start_offset, m.load_bias))
            gen.map_cache[iid] = mid
        return mid

    def frame(self, gen: Generation, iid: int) -> int:
        fid = gen.frame_cache.get(iid)
        if fid is None:
            f = gen.frames.get(iid)
            if f is None:
                self.stats["interning: missing frame iid (placeholder frame kept)"] += 1
                fid = self.cat.frame(-1, 0, f"[missing frame iid {iid}]")
            else:
                name = self.string(gen, FUNCTION_NAMES, f.function_name_id, "function name")
                source = self.string(gen, SOURCE_PATHS, f.source_path_iid, "source path")
                if f.HasField("kind") or f.HasField("kind_str"):
                    self.cat.frame_kinds += 1
                fid = self.cat.frame(self.mapping(gen, f.mapping_id), f.rel_pc, name, source, f.line_number)
            gen.frame_cache[iid] = fid
        return fid

    def stack(self, gen: Generation, iid: int) -> int:
        """Trie node of callstack ``iid``; -1 when empty or unknown (both counted)."""
        node = gen.stack_cache.get(iid)
        if node is None:
            frames = gen.callstacks.get(iid)
            if frames is None:
                self.stats["interning: missing callstack iid (sample kept with an empty stack)"] += 1
                node = -1
            else:
                if not frames:
                    self.stats["empty callstacks"] += 1
                node = self.cat.stack([self.frame(gen, f) for f in frames])
            gen.stack_cache[iid] = node
        return node


def mapping_name(parts: list[str]) -> str:
    """Join path components as trace processor does ("/" before each; "//" -> "/")."""
    name = "".join("/" + p for p in parts)
    return name[1:] if name.startswith("//") else name
