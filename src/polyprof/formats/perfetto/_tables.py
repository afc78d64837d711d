"""Interned tables decoded in bulk: strings, mappings, frames and callstacks of many messages at once.

``InternedData`` messages (and a heap dump's in-packet tables, which share
their entry messages) are decoded with the numpy field walker, a batch at a
time: every entry of every message in one pass per table, not one Python
step per entry. A :class:`Tables` holds what one generation of a sequence
interned, first definition of an iid first (trace processor keeps the first
one). Callstack frames are kept as the batches they arrived in, found
through a few index levels of growing size, so adding a batch never copies
the frames of earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyprof.formats.perfetto import _schema as S
from polyprof.model.columns import distinct
from polyprof.wire import vector as V

__all__ = ["Layout", "INTERNED", "PROFILE_PACKET", "Tables"]

FUNCTION_NAMES, BUILD_IDS, MAPPING_PATHS, SOURCE_PATHS = 5, 16, 17, 18
STRING_TABLES = (FUNCTION_NAMES, BUILD_IDS, MAPPING_PATHS, SOURCE_PATHS)
#: InternedData fields of StackSample contexts and descriptors (kept as raw entries, parsed on use).
STACK_SAMPLE_FIELDS = (48, 49, 50, 51)
_U32 = np.uint64(0xFFFFFFFF)
_BIG = 4096  # bytes: a message larger than this is split into its entries by upb


@dataclass(frozen=True)
class Layout:
    """Where the tables are in a message: field numbers of each string table, frames, callstacks, mappings."""

    strings: dict[int, tuple[int, ...]]  # message field -> the string tables it fills
    frames: int
    callstacks: int
    mappings: int
    entries: str  # the twin message class that keeps the entries as bytes
    raw: tuple[int, ...] = ()

    def numbers(self) -> list[int]:
        return [*self.strings, self.frames, self.callstacks, self.mappings, *self.raw]


INTERNED = Layout({t: (t,) for t in STRING_TABLES}, frames=6, callstacks=7, mappings=19,
                  entries="InternedDataEntries", raw=STACK_SAMPLE_FIELDS)
#: A ProfilePacket's in-packet tables: one ``strings`` table serves names, paths and build ids.
PROFILE_PACKET = Layout({1: STRING_TABLES}, frames=2, callstacks=3, mappings=4, entries="ProfilePacketEntries")


def _first_wins(iids: np.ndarray) -> np.ndarray:
    """Rows of the first occurrence of each iid, ordered by iid."""
    _, first = np.unique(iids, return_index=True)
    return first


def _varint_col(f: V.Fields, number: int, n: int) -> np.ndarray:
    sel = f.select(number, V.VARINT)
    out = np.zeros(n, dtype=np.uint64)
    out[sel.msg] = sel.value  # the last occurrence wins, as in protobuf
    return out


@dataclass
class _Spans:
    """The entry messages of one table: spans ``buf[start:start+length]``."""

    buf: np.ndarray
    start: np.ndarray
    length: np.ndarray

    @classmethod
    def of(cls, buf: np.ndarray, rec: V.Fields) -> "_Spans":
        return cls(buf, rec.start, rec.length)

    @classmethod
    def join(cls, entries: list[bytes]) -> "_Spans":
        lengths = np.fromiter(map(len, entries), dtype=np.int64, count=len(entries))
        return cls(V.as_buffer(b"".join(entries)), np.cumsum(lengths) - lengths, lengths)

    @property
    def n(self) -> int:
        return self.start.size

    def fields(self, varints: bool = False) -> V.Fields:
        """The fields of every entry (``varints``: entries are mostly varint fields only)."""
        walk = V.walk_varint_fields if varints else V.walk_fields
        return walk(self.buf, self.start, self.start + self.length)

    def texts(self) -> list[bytes]:
        raw = self.buf.tobytes()
        return [raw[a:a + ln] for a, ln in zip(self.start.tolist(), self.length.tolist())]


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
class _Level:
    """Callstack iids (sorted) with where their frames are: part, start in it, count."""

    iid: np.ndarray
    part: np.ndarray
    start: np.ndarray
    count: np.ndarray

    COLUMNS = ("iid", "part", "start", "count")

    def merged(self, newer: "_Level") -> "_Level":
        """Both levels' entries by iid; an iid in both keeps this (older) level's entry. Both
        are sorted and distinct: the newer's new entries are placed by a binary search, no sort."""
        if not self.iid.size or (newer.iid.size and newer.iid[0] > self.iid[-1]):  # producers count iids up
            return _Level(*(np.concatenate([getattr(self, c), getattr(newer, c)]) for c in self.COLUMNS))
        at = np.searchsorted(self.iid, newer.iid)
        fresh = ~((at < self.iid.size) & (self.iid[np.minimum(at, max(self.iid.size - 1, 0))] == newer.iid)) \
            if self.iid.size else np.ones(newer.iid.size, dtype=bool)
        at = at[fresh] + np.arange(int(fresh.sum()))  # final rows of the new entries
        is_new = np.zeros(self.iid.size + at.size, dtype=bool)
        is_new[at] = True
        cols = []
        for c in self.COLUMNS:
            old, new = getattr(self, c), getattr(newer, c)[fresh]
            out = np.empty(is_new.size, dtype=np.result_type(old, new))
            out[is_new], out[~is_new] = new, old
            cols.append(out)
        return _Level(*cols)


@dataclass
class Tables:
    """Everything one generation interned (see the module docstring)."""

    strings: dict[int, dict[int, bytes]] = field(default_factory=lambda: {t: {} for t in STRING_TABLES})
    mappings: dict[int, tuple] = field(default_factory=dict)
    frames: Frames = field(default_factory=Frames.empty)
    stack_parts: list[np.ndarray] = field(default_factory=list)  # frame iids of each batch, root first
    stack_levels: list[_Level] = field(default_factory=list)  # few, of growing age and size
    raw: dict[int, dict[int, bytes]] = field(default_factory=lambda: {k: {} for k in STACK_SAMPLE_FIELDS})

    def add(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, layout: Layout = INTERNED) -> None:
        """Take the entries of the messages ``buf[starts[i]:ends[i]]`` (earlier definitions win).

        Small messages are walked together; a large one (a heap dump's tables)
        is split into its entries by upb first, so that no message has more
        fields than the numpy walker's lockstep handles well (the compiled
        walker, in use for large inputs, walks every message in one pass).
        """
        big = ((ends - starts) > _BIG) & (not V.compiled())  # the compiled walker takes any size
        cuts = np.flatnonzero(np.diff(big.astype(np.int8))) + 1
        for lo, hi in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [big.size]]).tolist()):
            if not big[lo]:
                f = V.walk_fields(buf, starts[lo:hi], ends[lo:hi])
                present = set(distinct(f.field).tolist())  # once, not once per table
                numbers = [n for n in layout.numbers() if n in present]
                self._take(layout, {n: _Spans.of(buf, f.select(n, V.LEN)) for n in numbers})
                continue
            for a, b in zip(starts[lo:hi].tolist(), ends[lo:hi].tolist()):
                self.add_entries(S.messages()[layout.entries].FromString(buf[a:b].tobytes()), layout)

    def add_entries(self, msg: Any, layout: Layout) -> None:
        """Take the entries of a parsed twin message (``layout.entries``), whose entries are bytes."""
        self._take(layout, {n: _Spans.join(getattr(msg, f"f{n}")) for n in layout.numbers()})

    def _take(self, layout: Layout, entries: dict[int, "_Spans"]) -> None:
        none = _Spans.join([])
        for number, tables in layout.strings.items():
            iids, texts = _strings(entries.get(number, none))
            for t in tables:
                _merge_dict(self.strings[t], iids, texts)
        for number in layout.raw:
            e = entries.get(number, none)
            if e.n:
                _merge_dict(self.raw[number], _varint_col(e.fields(), 1, e.n), e.texts())
        self._mappings(entries.get(layout.mappings, none))
        self.frames = self.frames.merged(_frames(entries.get(layout.frames, none)))
        stacks = _callstacks(entries.get(layout.callstacks, none), len(self.stack_parts))
        if stacks is not None:
            level, frames = stacks
            self.stack_parts.append(frames)
            levels = self.stack_levels
            levels.append(level)
            # Merge the two newest levels while the newer is about as large: a few levels of
            # growing sizes (cheap lookups); frames are never copied, only these index columns.
            while len(levels) > 1 and levels[-1].iid.size * 2 >= levels[-2].iid.size:
                levels[-2:] = [levels[-2].merged(levels[-1])]

    def _mappings(self, e: "_Spans") -> None:
        if not e.n:
            return
        n, mf = e.n, e.fields()
        cols = [_varint_col(mf, k, n).tolist() for k in (1, 2, 3, 4, 5, 6, 8)]
        path_vals, path_counts = V.repeated_varints(e.buf, mf.select(7), n)
        path_vals = path_vals.astype(np.uint64).tolist()
        offsets = np.concatenate([[0], np.cumsum(path_counts)]).tolist()
        for i, (iid, build, start_offset, start, end, load_bias, exact) in enumerate(zip(*cols)):
            if iid not in self.mappings:
                self.mappings[iid] = (build, start_offset, start, end, load_bias,
                                      tuple(path_vals[offsets[i]:offsets[i + 1]]), exact)

    def callstacks(self, iids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(found, frame count) of each callstack iid, and the frames (root first) of the
        found ones end to end, stack after stack in the order ``order`` (indexes into ``iids``)."""
        found, count, order, runs = self.callstack_runs(iids)
        return found, count, self.joined(runs), order

    def joined(self, runs: list[FrameRuns]) -> np.ndarray:
        """The frames of ``runs`` end to end (uint32 when every batch is)."""
        narrow = self.stack_parts and all(p.dtype == np.uint32 for p in self.stack_parts)
        flat = np.empty(sum(int(c.sum()) for _, _, c in runs), dtype=np.uint32 if narrow else np.uint64)
        at = 0  # filled part by part: no list of pieces
        for frames, starts, counts in runs:
            piece = frames if _whole(starts, counts, frames.size) else V.gather_runs(frames, starts, counts)
            flat[at:at + piece.size] = piece
            at += piece.size
        return flat

    def callstack_runs(self, iids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[FrameRuns]]:
        """:meth:`callstacks` with the frames left where they lie: per batch (in order), the
        batch's frame ids and the (starts, counts) of the found stacks' runs in it, in ``order``."""
        part, start, count = self._locate(iids)
        found = part >= 0
        order = np.flatnonzero(found)
        order = order[np.argsort(part[order], kind="stable")]  # grouped by the batch they came in
        bounds = np.searchsorted(part[order], np.arange(len(self.stack_parts) + 1))
        runs = [(frames, start[order[a:b]], count[order[a:b]])
                for frames, a, b in zip(self.stack_parts, bounds[:-1].tolist(), bounds[1:].tolist()) if b > a]
        return found, count, order, runs

    def has_callstacks(self, iids: np.ndarray) -> np.ndarray:
        """Whether each callstack iid is interned here."""
        return self._locate(iids)[0] >= 0

    def _locate(self, iids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(batch, start in it, frame count) of each callstack iid; batch -1 when not interned."""
        part = np.full(iids.size, -1, dtype=np.int64)
        start = np.zeros(iids.size, dtype=np.int64)
        count = np.zeros(iids.size, dtype=np.int64)
        for level in self.stack_levels:  # oldest first: the first definition wins
            todo = np.flatnonzero(part < 0)
            if not todo.size:
                break
            at, hit = _find_sorted(level.iid, iids[todo])
            rows, at = todo[hit], at[hit]
            part[rows], start[rows], count[rows] = level.part[at], level.start[at], level.count[at]
        return part, start, count

    def frame_rows(self, iids: np.ndarray) -> np.ndarray:
        """Row of each frame iid in ``frames`` (-1 when not interned)."""
        fr = self.frames.iid
        if not fr.size:
            return np.full(iids.size, -1, dtype=np.int64)
        at = np.searchsorted(fr, iids)
        atc = np.minimum(at, fr.size - 1)
        return np.where((at < fr.size) & (fr[atc] == iids), atc, -1)


#: A batch's frame ids and the (starts, counts) of some of its stacks' runs.
FrameRuns = tuple[np.ndarray, np.ndarray, np.ndarray]


def _whole(start: np.ndarray, count: np.ndarray, size: int) -> bool:
    """Whether runs (``start``, ``count``) are every frame of a batch of ``size``, in order."""
    return bool(start.size and start[0] == 0 and int(count.sum()) == size and
                (start[1:] == start[:-1] + count[:-1]).all())


def _find_sorted(keys: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in the sorted distinct ``keys``, found) of each query. Dense keys (as producers
    number iids) are looked up in a table: no binary search per query. The table costs one
    fill of ``top`` entries, so a few queries (one new callstack of a Chrome sample) search."""
    top = int(keys[-1]) if keys.size else -1
    if 0 <= top < 4 * keys.size + (1 << 16) and 8 * queries.size >= top:
        pos = np.full(top + 1, -1, dtype=np.int64)
        pos[keys] = np.arange(keys.size)
        inside = queries <= top
        at = np.full(queries.size, -1, dtype=np.int64)
        at[inside] = pos[queries[inside]]
        return np.maximum(at, 0), at >= 0
    at = np.minimum(np.searchsorted(keys, queries), max(keys.size - 1, 0))
    return at, (keys[at] == queries) if keys.size else np.zeros(queries.size, dtype=bool)


def _merge_dict(table: dict[int, Any], iids: np.ndarray, values: list) -> None:
    """Add ``iid -> value`` entries that ``table`` lacks; the first of equal iids wins."""
    if not values:
        return
    new = dict(zip(iids.tolist()[::-1], values[::-1]))  # reversed: the first occurrence is set last
    if table:
        new = {k: v for k, v in new.items() if k not in table}
    table.update(new)


def _strings(e: "_Spans") -> tuple[np.ndarray, list[bytes]]:
    if not e.n:
        return np.zeros(0, dtype=np.uint64), []
    sf = e.fields()
    text = sf.select(2, V.LEN)
    start = np.zeros(e.n, dtype=np.int64)
    length = np.zeros(e.n, dtype=np.int64)
    start[text.msg] = text.start
    length[text.msg] = text.length
    raw = e.buf.tobytes()
    return _varint_col(sf, 1, e.n), [raw[a:a + ln] for a, ln in zip(start.tolist(), length.tolist())]


def _frames(e: "_Spans") -> Frames:
    if not e.n:
        return Frames.empty()
    n, ff = e.n, e.fields(varints=True)
    kind = np.zeros(n, dtype=bool)
    kind[ff.msg[np.isin(ff.field, (7, 8))]] = True
    cols = Frames(_varint_col(ff, 1, n), _varint_col(ff, 2, n), _varint_col(ff, 3, n), _varint_col(ff, 4, n),
                  _varint_col(ff, 5, n), _varint_col(ff, 6, n) & _U32, kind)
    return cols.take(_first_wins(cols.iid))


def _callstacks(e: "_Spans", part: int) -> tuple[_Level, np.ndarray] | None:
    """The index level and frames of a batch of Callstack entries (stored as batch ``part``)."""
    if not e.n:
        return None
    got = _compiled_callstacks(e)
    if got is None:
        n, cf = e.n, e.fields(varints=True)
        iids = _varint_col(cf, 1, n)
        vals, counts = V.repeated_varints(e.buf, cf.select(2), n)
    else:
        iids, vals, counts = got
    keep = _first_wins(iids)
    starts = np.cumsum(counts) - counts
    if vals.dtype != np.uint32:  # (uint32 from the compiled decoder: every id fits, checked there)
        vals = vals.astype(np.uint64, copy=False)
        if vals.size and int(vals.max()) <= 0xFFFFFFFF:  # producers' frame ids: half the memory
            vals = vals.astype(np.uint32)
    return _Level(iids[keep], np.full(keep.size, part, dtype=np.int64), starts[keep], counts[keep]), vals


def _compiled_callstacks(e: "_Spans") -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(iids, frame ids, counts) by the compiled decoder when the kernels are compiled, else None."""
    if not V.compiled():
        return None
    from polyprof.formats.perfetto._catalog_compiled import callstack_entries32
    from polyprof.formats.perfetto._flat_compiled import callstack_entries

    got = callstack_entries32(e.buf, e.start, e.start + e.length)  # the usual shape, frame ids as uint32
    return got if got is not None else callstack_entries(e.buf, e.start, e.start + e.length)
