"""Interned tables decoded in bulk: strings, mappings, frames and callstacks of many messages at once.

``InternedData`` messages (and a heap dump's in-packet tables, which share
their entry messages) are decoded with the numpy field walker, a batch at a
time: every entry of every message in one pass per table, not one Python
step per entry. A :class:`Tables` holds what one generation of a sequence
interned, first definition of an iid first (trace processor keeps the first
one). Callstacks are kept as the batches they arrived in (each sorted by
iid), so adding a batch never copies the earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyprof.wire import vector as V

__all__ = ["Layout", "INTERNED", "PROFILE_PACKET", "Tables"]

FUNCTION_NAMES, BUILD_IDS, MAPPING_PATHS, SOURCE_PATHS = 5, 16, 17, 18
STRING_TABLES = (FUNCTION_NAMES, BUILD_IDS, MAPPING_PATHS, SOURCE_PATHS)
#: InternedData fields of StackSample contexts and descriptors (kept as raw entries, parsed on use).
STACK_SAMPLE_FIELDS = (48, 49, 50, 51)
_U32 = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class Layout:
    """Where the tables are in a message: field numbers of each string table, frames, callstacks, mappings."""

    strings: dict[int, tuple[int, ...]]  # message field -> the string tables it fills
    frames: int
    callstacks: int
    mappings: int
    raw: tuple[int, ...] = ()


INTERNED = Layout({t: (t,) for t in STRING_TABLES}, frames=6, callstacks=7, mappings=19, raw=STACK_SAMPLE_FIELDS)
#: A ProfilePacket's in-packet tables: one ``strings`` table serves names, paths and build ids.
PROFILE_PACKET = Layout({1: STRING_TABLES}, frames=2, callstacks=3, mappings=4)


def _first_wins(iids: np.ndarray) -> np.ndarray:
    """Rows of the first occurrence of each iid, ordered by iid."""
    _, first = np.unique(iids, return_index=True)
    return first


def _varint_col(f: V.Fields, number: int, n: int) -> np.ndarray:
    sel = f.select(number, V.VARINT)
    out = np.zeros(n, dtype=np.uint64)
    out[sel.msg] = sel.value  # the last occurrence wins, as in protobuf
    return out


def _entries(buf: np.ndarray, f: V.Fields, number: int) -> tuple[V.Fields, int, V.Fields]:
    """The entry messages of one repeated field: (their records, count, their decoded fields)."""
    rec = f.select(number, V.LEN)
    return rec, len(rec), V.walk_fields(buf, rec.start, rec.start + rec.length)


@dataclass
class Frames:
    """Frame entries by iid (sorted)."""

    iid: np.ndarray
    name: np.ndarray
    mapping: np.ndarray
    rel_pc: np.ndarray
    source: np.ndarray
    line: np.ndarray
    has_kind: np.ndarray

    COLUMNS = ("iid", "name", "mapping", "rel_pc", "source", "line", "has_kind")

    @classmethod
    def empty(cls) -> "Frames":
        z = np.zeros(0, dtype=np.uint64)
        return cls(z, z, z, z, z, z, np.zeros(0, dtype=bool))

    def take(self, rows: np.ndarray) -> "Frames":
        return Frames(*(getattr(self, c)[rows] for c in self.COLUMNS))

    def merged(self, new: "Frames") -> "Frames":
        """This table with the entries of ``new`` whose iid it lacks."""
        if not new.iid.size:
            return self
        both = Frames(*(np.concatenate([getattr(self, c), getattr(new, c)]) for c in self.COLUMNS))
        return both.take(_first_wins(both.iid))


@dataclass
class Callstacks:
    """Callstack entries of one batch by iid (sorted): frame iids root first, as CSR."""

    iid: np.ndarray
    offsets: np.ndarray
    frames: np.ndarray


@dataclass
class Tables:
    """Everything one generation interned (see the module docstring)."""

    strings: dict[int, dict[int, bytes]] = field(default_factory=lambda: {t: {} for t in STRING_TABLES})
    mappings: dict[int, tuple] = field(default_factory=dict)
    frames: Frames = field(default_factory=Frames.empty)
    callstacks: list[Callstacks] = field(default_factory=list)
    raw: dict[int, dict[int, bytes]] = field(default_factory=lambda: {k: {} for k in STACK_SAMPLE_FIELDS})

    def add(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, layout: Layout = INTERNED) -> None:
        """Take the entries of the messages ``buf[starts[i]:ends[i]]`` (earlier definitions win)."""
        if not starts.size:
            return
        f = V.walk_fields(buf, starts, ends)
        raw = buf.tobytes() if _has_bytes(f, layout) else b""
        for number, tables in layout.strings.items():
            iids, texts = _strings(buf, raw, f, number)
            for t in tables:
                _merge_dict(self.strings[t], iids, texts)
        for number in layout.raw:
            rec, n, ef = _entries(buf, f, number)
            if n:
                iids = _varint_col(ef, 1, n)
                _merge_dict(self.raw[number], iids, [raw[s:s + ln] for s, ln in zip(rec.start.tolist(),
                                                                                   rec.length.tolist())])
        self._mappings(buf, f, layout.mappings)
        self.frames = self.frames.merged(_frames(buf, f, layout.frames))
        stacks = _callstacks(buf, f, layout.callstacks)
        if stacks is not None:
            self.callstacks.append(stacks)
            if len(self.callstacks) > 16:  # keep lookups cheap: fold the batches into one
                self.callstacks = [_fold(self.callstacks)]

    def _mappings(self, buf: np.ndarray, f: V.Fields, number: int) -> None:
        rec, n, mf = _entries(buf, f, number)
        if not n:
            return
        cols = [_varint_col(mf, k, n).tolist() for k in (1, 2, 3, 4, 5, 6, 8)]
        paths = mf.select(7)
        path_vals, path_counts = V.repeated_varints(buf, paths, n)
        path_vals = path_vals.astype(np.uint64).tolist()
        offsets = np.concatenate([[0], np.cumsum(path_counts)]).tolist()
        for i, (iid, build, start_offset, start, end, load_bias, exact) in enumerate(zip(*cols)):
            if iid not in self.mappings:
                self.mappings[iid] = (build, start_offset, start, end, load_bias,
                                      tuple(path_vals[offsets[i]:offsets[i + 1]]), exact)

    def callstack_rows(self, iids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(batch, row) of each callstack iid (-1, -1 when not interned); the earliest batch wins."""
        batch = np.full(iids.size, -1, dtype=np.int64)
        row = np.full(iids.size, -1, dtype=np.int64)
        for k, cs in enumerate(self.callstacks):
            todo = np.flatnonzero(batch < 0)
            if not todo.size:
                break
            at = np.searchsorted(cs.iid, iids[todo])
            atc = np.minimum(at, max(cs.iid.size - 1, 0))
            hit = (at < cs.iid.size) & (cs.iid[atc] == iids[todo]) if cs.iid.size else np.zeros(todo.size, bool)
            batch[todo[hit]] = k
            row[todo[hit]] = atc[hit]
        return batch, row

    def frame_rows(self, iids: np.ndarray) -> np.ndarray:
        """Row of each frame iid in ``frames`` (-1 when not interned)."""
        fr = self.frames.iid
        if not fr.size:
            return np.full(iids.size, -1, dtype=np.int64)
        at = np.searchsorted(fr, iids)
        atc = np.minimum(at, fr.size - 1)
        return np.where((at < fr.size) & (fr[atc] == iids), atc, -1)


def _has_bytes(f: V.Fields, layout: Layout) -> bool:
    wanted = list(layout.strings) + list(layout.raw)
    return bool(np.isin(f.field, wanted).any())


def _merge_dict(table: dict[int, Any], iids: np.ndarray, values: list) -> None:
    """Add ``iid -> value`` entries that ``table`` lacks; the first of equal iids wins."""
    if not values:
        return
    new = dict(zip(iids.tolist()[::-1], values[::-1]))  # reversed: the first occurrence is set last
    if table:
        new = {k: v for k, v in new.items() if k not in table}
    table.update(new)


def _strings(buf: np.ndarray, raw: bytes, f: V.Fields, number: int) -> tuple[np.ndarray, list[bytes]]:
    rec, n, sf = _entries(buf, f, number)
    if not n:
        return np.zeros(0, dtype=np.uint64), []
    iids = _varint_col(sf, 1, n)
    text = sf.select(2, V.LEN)
    start = np.zeros(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    start[text.msg] = text.start
    length[text.msg] = text.length
    return iids, [raw[s:s + ln] for s, ln in zip(start.tolist(), length.tolist())]


def _frames(buf: np.ndarray, f: V.Fields, number: int) -> Frames:
    rec, n, ff = _entries(buf, f, number)
    if not n:
        return Frames.empty()
    kind = np.zeros(n, dtype=bool)
    kind[ff.msg[np.isin(ff.field, (7, 8))]] = True
    cols = Frames(_varint_col(ff, 1, n), _varint_col(ff, 2, n), _varint_col(ff, 3, n), _varint_col(ff, 4, n),
                  _varint_col(ff, 5, n), _varint_col(ff, 6, n) & _U32, kind)
    return cols.take(_first_wins(cols.iid))


def _callstacks(buf: np.ndarray, f: V.Fields, number: int) -> Callstacks | None:
    rec, n, cf = _entries(buf, f, number)
    if not n:
        return None
    iids = _varint_col(cf, 1, n)
    vals, counts = V.repeated_varints(buf, cf.select(2), n)
    keep = _first_wins(iids)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = vals.astype(np.uint64)
    if keep.size != n or (np.diff(keep) < 0).any():
        kept_counts = counts[keep]
        flat = flat[V.ranges(offsets[keep], kept_counts)]
        offsets = np.zeros(keep.size + 1, dtype=np.int64)
        np.cumsum(kept_counts, out=offsets[1:])
    return Callstacks(iids[keep], offsets, flat)


def _fold(batches: list[Callstacks]) -> Callstacks:
    """One batch holding every entry of ``batches`` (earlier batches win)."""
    iids = np.concatenate([b.iid for b in batches])
    counts = np.concatenate([np.diff(b.offsets) for b in batches])
    starts = np.concatenate([b.offsets[:-1] + base for b, base in
                             zip(batches, np.cumsum([0] + [b.frames.size for b in batches[:-1]]))])
    flat = np.concatenate([b.frames for b in batches])
    keep = _first_wins(iids)
    offsets = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(counts[keep], out=offsets[1:])
    return Callstacks(iids[keep], offsets, flat[V.ranges(starts[keep], counts[keep])])
