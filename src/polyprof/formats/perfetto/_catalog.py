"""Trace-wide, content-interned mappings, frames and stacks, and their copy into profiles.

Interning ids (iids) only mean something inside one sequence generation, so
the reader resolves them right away into this catalog, whose ids are stable
for the whole read: a mapping is its content, a frame is (mapping, rel_pc,
function name, source file, line), a stack is its sequence of frames, root
first. Frames and stacks are interned many at a time (numpy columns; stacks
found again by a hash of their frames, confirmed frame by frame).
Symbols (``ModuleSymbols``) may come after the samples, so frames are turned
into model locations only when profiles are built, with the symbols known by
then; the stacks a profile uses go to the builder's level-wise interning in
one call.

What a frame becomes: a location at ``rel_pc`` (the ELF-relative pc Perfetto
records) in its mapping, with one line per symbolized inline function
(innermost first) when symbols exist, else one line for its interned
function name and source position, else no line. A symbolized frame keeps
its interned name as the system name of its outermost function.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np

from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import distinct, factorize_rows, factorize_runs, runs_equal
from polyprof.wire.vector import compiled, gather_runs, hash_runs, import_compiled, ranges

__all__ = ["Catalog", "Emitter", "build_id_text", "catalog_kernels"]

MappingKey = tuple[str, str, int, int, int, int, int]  # path, build id, start, end, exact_offset, start_offset, load_bias
LineSpec = tuple[str, str, int]  # function name, source file, line
_FRAME_COLUMNS = ("mapping", "rel_pc", "name", "source", "line")


def build_id_text(raw: bytes) -> str:
    """How a build id is shown: Chrome's 33-character ids as text, others in hex (as trace processor)."""
    if not raw:
        return ""
    if len(raw) == 33:
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            return raw.hex()
        if text.isprintable():
            return text
    return raw.hex()


def catalog_kernels() -> ModuleType | None:
    """The compiled passes over frame-id columns (:mod:`._catalog_compiled`) once the wire kernels
    are compiled (large traces), else None: the numpy expressions they replace."""
    if not compiled():
        return None
    got = import_compiled("polyprof.formats.perfetto._catalog_compiled")
    return got if isinstance(got, ModuleType) else None


class _Growing:
    """Columns appended in parts, joined on first read after an append."""

    def __init__(self, names: tuple[str, ...], dtypes: tuple[type, ...]) -> None:
        self._parts: dict[str, list[np.ndarray]] = {n: [np.zeros(0, dtype=d)] for n, d in zip(names, dtypes)}
        self.size = 0

    def append(self, **cols: np.ndarray) -> None:
        for name, col in cols.items():
            self._parts[name].append(col)
        self.size += next(iter(cols.values())).size

    def __getitem__(self, name: str) -> np.ndarray:
        parts = self._parts[name]
        if len(parts) > 1:
            parts[:] = [np.concatenate(parts) if parts[0].size or len(parts) > 2 else parts[1]]  # one part: no copy
        return parts[0]


class Catalog:
    """Content-interned strings, mappings, frames and stacks of a whole trace."""

    def __init__(self) -> None:
        self.strings: list[str] = [""]
        self._sid: dict[str, int] = {"": 0}
        self._mappings: dict[MappingKey, int] = {}
        self.mapping_rows: list[MappingKey] = []
        self.frames = _Growing(_FRAME_COLUMNS, (np.int64, np.uint64, np.int64, np.int64, np.int64))
        self.stacks = _Growing(("start", "length"), (np.int64, np.int64))
        self._stack_frames = _Growing(("frame",), (np.int64,))
        self._index = _Growing(("h", "id"), (np.uint64, np.int64))  # stack hashes, sorted
        self._unsorted: list[tuple[np.ndarray, np.ndarray]] = []  # (hashes, ids) added since: sorted in when looked up
        # (path, build id or None) -> {address: lines innermost first}
        self.symbols: dict[tuple[str, str | None], dict[int, tuple[LineSpec, ...]]] = {}
        self.frame_kinds = 0

    def sid(self, text: str) -> int:
        """The catalog id of a string."""
        got = self._sid.get(text)
        if got is None:
            got = self._sid[text] = len(self.strings)
            self.strings.append(text)
        return got

    def sids(self, texts: list[str]) -> list[int]:
        """Catalog ids of many strings (:meth:`sid` of each, in order, without a call per string)."""
        table, strings, out = self._sid, self.strings, []
        for text in texts:
            got = table.get(text)
            if got is None:
                got = table[text] = len(strings)
                strings.append(text)
            out.append(got)
        return out

    def mapping(self, key: MappingKey) -> int:
        mid = self._mappings.get(key)
        if mid is None:
            mid = self._mappings[key] = len(self.mapping_rows)
            self.mapping_rows.append(key)
        return mid

    # ---------------------------------------------------------------- frames

    def frame(self, mapping: int, rel_pc: int, name: str, source: str = "", line: int = 0) -> int:
        """The id of one frame (see :meth:`frames_bulk`)."""
        one = lambda v, t: np.array([v], dtype=t)  # noqa: E731
        return int(self.frames_bulk(one(mapping, np.int64), one(rel_pc, np.uint64), one(self.sid(name), np.int64),
                                    one(self.sid(source), np.int64), one(line, np.int64))[0])

    def frames_bulk(self, mapping: np.ndarray, rel_pc: np.ndarray, name: np.ndarray, source: np.ndarray,
                    line: np.ndarray) -> np.ndarray:
        """Ids of many frames given as columns (names and sources as catalog string ids)."""
        new = [np.asarray(c, dtype=t) for c, t in zip((mapping, rel_pc, name, source, line),
                                                        (np.int64, np.uint64, np.int64, np.int64, np.int64))]
        n_old = self.frames.size
        if not new[0].size:
            return np.zeros(0, dtype=np.int64)
        both = [np.concatenate([self.frames[c], col]) if n_old else col for c, col in zip(_FRAME_COLUMNS, new)]
        group, first = factorize_rows(both)
        group = group[n_old:]
        at = first[group]  # existing rows are distinct: a group's first row is the existing one, if any
        fresh = at >= n_old
        ids = at.copy()
        if fresh.any():
            seen = np.zeros(first.size, dtype=bool)
            seen[group[fresh]] = True
            new_groups = np.flatnonzero(seen)
            order = np.argsort(first[new_groups], kind="stable")  # new frames in order of first sight
            number = np.empty(first.size, dtype=np.int64)
            number[new_groups[order]] = n_old + np.arange(new_groups.size)
            ids[fresh] = number[group[fresh]]
            rows = first[new_groups[order]] - n_old
            self.frames.append(**{c: col[rows] for c, col in zip(_FRAME_COLUMNS, new)})
        return ids

    # ---------------------------------------------------------------- stacks

    def stack(self, frames_root_first: list[int]) -> int:
        """The id of one stack given root first; -1 for an empty stack."""
        if not frames_root_first:
            return -1
        return int(self.stacks_bulk(np.array(frames_root_first), np.array([0, len(frames_root_first)]))[0])

    def stacks_bulk(self, frames: np.ndarray, offsets: np.ndarray, hashes: np.ndarray | None = None) -> np.ndarray:
        """Ids of many non-empty stacks: ``frames[offsets[i]:offsets[i+1]]`` root first.

        A stack is found again by its hash (:func:`polyprof.wire.vector.hash_runs`)
        and length, confirmed frame by frame; stacks whose hashes collide but
        differ simply stay distinct. ``hashes``: those hashes, when the caller made them.
        int32 frames stay int32 (half the column; the stacks of a heap dump).
        """
        frames = np.asarray(frames)
        if frames.dtype != np.int32:
            frames = frames.astype(np.int64, copy=False)
        lengths = np.diff(offsets)
        if not lengths.size:
            return np.zeros(0, dtype=np.int64)
        h = hash_runs(frames, offsets) if hashes is None else hashes
        ids = self._find(h, frames, offsets)
        todo = np.flatnonzero(ids < 0)
        if todo.size:  # equal new stacks share an id, in order of first sight
            if _all_distinct(h[todo]):  # distinct hashes, distinct stacks: nothing to compare
                group = first = np.arange(todo.size)
            elif todo.size == lengths.size:
                group, first = factorize_runs(frames, offsets, h)
            else:
                sub = np.concatenate([[0], np.cumsum(lengths[todo])])
                group, first = factorize_runs(gather_runs(frames, offsets[todo], lengths[todo]), sub, h[todo])
            ids[todo] = self.stacks.size + group
            leaders = todo[first]
            self._add(frames, offsets, leaders, h[leaders], ids[leaders])
        return ids

    def _find(self, h: np.ndarray, frames: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Ids of stacks already in the catalog (-1 for the others)."""
        ids = np.full(h.size, -1, dtype=np.int64)
        keys = self._sorted_index()
        if not keys.size:
            return ids
        at = np.minimum(np.searchsorted(keys, h), keys.size - 1)
        cand = np.flatnonzero(keys[at] == h)
        if cand.size:
            sid = self._index["id"][at[cand]]
            start, length = self.stacks["start"], self.stacks["length"]
            stored = np.concatenate([[0], np.cumsum(length[sid])])
            same = runs_equal(frames, offsets, cand, self._stack_frames["frame"][ranges(start[sid], length[sid])],
                          stored, np.arange(cand.size))
            ids[cand[same]] = sid[same]
        return ids

    def _add(self, frames: np.ndarray, offsets: np.ndarray, rows: np.ndarray, h: np.ndarray,
             ids: np.ndarray) -> None:
        lengths = np.diff(offsets)[rows]
        self.stacks.append(start=self._stack_frames.size + np.cumsum(lengths) - lengths, length=lengths)
        every = rows.size == offsets.size - 1  # all of them (rows are sorted): no gather
        self._stack_frames.append(frame=frames if every else gather_runs(frames, offsets[rows], lengths))
        self._unsorted.append((h, ids))

    def _sorted_index(self) -> np.ndarray:
        """The sorted stack hashes (ids in ``_index["id"]``), the ones added since sorted in now:
        a read that interns its stacks in one batch (a heap dump) never sorts them."""
        if self._unsorted:
            new = [np.concatenate(c) for c in zip(*self._unsorted)]
            self._unsorted = []
            order = np.argsort(np.concatenate([self._index["h"], new[0]]), kind="stable")  # equal: oldest first
            joined = {k: np.concatenate([self._index[k], v])[order] for k, v in zip(("h", "id"), new)}
            self._index = _Growing(("h", "id"), (np.uint64, np.int64))
            self._index.append(**joined)
        return self._index["h"]

    def stack_frames(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The frames of stacks ``ids`` (root first) as (flat, offsets)."""
        start, length = self.stacks["start"][ids], self.stacks["length"][ids]
        offsets = np.zeros(ids.size + 1, dtype=np.int64)
        np.cumsum(length, out=offsets[1:])
        if ids.size == self.stacks.size and (ids.size == 0 or int(ids[-1]) == ids.size - 1):
            return self._stack_frames["frame"], offsets  # every stack, in order (ids are sorted)
        return gather_runs(self._stack_frames["frame"], start, length), offsets

    def stack_locations(self, ids: np.ndarray, locations: Callable[[np.ndarray], np.ndarray]
                        ) -> tuple[np.ndarray, np.ndarray]:
        """The stacks ``ids`` (root first) as (flat, offsets) of ``locations(frames)[k]`` for
        the k-th of their distinct frames (sorted), in the narrowest unsigned type: with the
        compiled kernels, read where the frames lie (no gathered copy, no ``distinct`` pass)."""
        k = catalog_kernels()
        if k is None:
            flat, offsets = self.stack_frames(ids)
            frames = distinct(flat)  # catalog frame ids are dense: one lookup table, no inverse column
        else:
            start, length = self.stacks["start"][ids], self.stacks["length"][ids]
            offsets = np.zeros(ids.size + 1, dtype=np.int64)
            np.cumsum(length, out=offsets[1:])
            present = np.zeros(self.frames.size, dtype=bool)
            k.mark_runs(self._stack_frames["frame"], start, length, present)
            frames = np.flatnonzero(present)
            del present
        locs = locations(frames)
        table = np.zeros(int(frames[-1]) + 1, dtype=np.min_scalar_type(max(int(locs.max()), 0)))
        table[frames] = locs  # narrow: cheaper interning
        if k is None:
            return table[flat], offsets
        return k.map_runs(self._stack_frames["frame"], start, length, table), offsets

    # ---------------------------------------------------------------- symbols

    def add_symbols(self, path: str, build_id: str, address: int, lines: tuple[LineSpec, ...]) -> None:
        self.symbols.setdefault((path, build_id or None), {}).setdefault(address, lines)

    def symbols_of(self, mapping: int, address: int) -> tuple[LineSpec, ...] | None:
        if mapping < 0 or not self.symbols:
            return None
        path, build_id = self.mapping_rows[mapping][:2]
        for key in ((path, build_id or None), (path, None)):
            table = self.symbols.get(key)
            if table is not None and address in table:
                return table[address]
        return None


def _all_distinct(h: np.ndarray) -> bool:
    """Whether no two of the hashes ``h`` are equal (then no two of their stacks are)."""
    s = np.sort(h)
    return not bool((s[1:] == s[:-1]).any())


class Emitter:
    """Copies the catalog entries one profile uses into that profile's builder."""

    def __init__(self, catalog: Catalog, builder: ProfileBuilder) -> None:
        self.cat = catalog
        self.b = builder
        self._map: dict[int, int] = {}

    def _mapping(self, mid: int) -> int:
        m = self._map.get(mid)
        if m is None:
            path, build_id, start, end, exact_offset, _, _ = self.cat.mapping_rows[mid]
            m = self._map[mid] = self.b.mapping(start, end, exact_offset, path, build_id)
        return m

    def mapping_offsets(self) -> list[list]:
        """[file, build id, start, start_offset, load_bias] of used mappings where those are set."""
        rows = [self.cat.mapping_rows[mid] for mid in self._map]
        return sorted([path, build, start, so, lb] for path, build, start, _, _, so, lb in rows if so or lb)

    def callsites(self, stacks: np.ndarray, in_place: bool = False) -> np.ndarray:
        """Model callsite of every catalog stack in ``stacks`` (-1, the empty stack, stays -1);
        ``in_place``: an int32 ``stacks`` the caller no longer needs becomes the answer (no copy)."""
        stacks = np.asarray(stacks)
        if not stacks.size:
            return np.zeros(0, dtype=np.int32)
        # Catalog ids from -1 are dense: a table by id, no sort and no int64 column per sample.
        wide = stacks.dtype.itemsize > 4
        out = stacks if in_place and stacks.dtype == np.int32 else None
        shifted = np.add(stacks, 1, dtype=np.int64 if wide else np.int32, out=out)  # >= 0
        present = np.zeros(int(shifted.max()) + 1, dtype=bool)
        present[shifted] = True  # ``distinct`` without its int64 copy of a column of millions
        uniq = np.flatnonzero(present)
        del present
        used = uniq[uniq > 0] - 1
        leaf = np.full(int(uniq[-1]) + 1, -1, dtype=np.int32)
        if used.size:
            locs, offsets = self.cat.stack_locations(used, self._locations)
            leaf[used + 1] = self.b.stacks_from_csr(locs, offsets, leaf_first=False, distinct=True)
        for lo in range(0, shifted.size, 1 << 20):  # in place, a block at a time: no second column
            shifted[lo:lo + (1 << 20)] = leaf[shifted[lo:lo + (1 << 20)]]
        return shifted.astype(np.int32) if wide else shifted

    def _locations(self, fids: np.ndarray) -> np.ndarray:
        """Model location of each catalog frame in ``fids`` (equal locations share a row)."""
        cat, b = self.cat, self.b
        mid, rel_pc = cat.frames["mapping"][fids], cat.frames["rel_pc"][fids]
        name, source, line = cat.frames["name"][fids], cat.frames["source"][fids], cat.frames["line"][fids]
        mids, m_at = np.unique(mid, return_inverse=True)
        mapping = np.array([self._mapping(m) if m >= 0 else -1 for m in mids.tolist()], dtype=np.int64)[m_at]
        symbols = self._symbolized(mid, rel_pc, name)
        plain = (symbols < 0) & ((name != 0) | (source != 0))
        sids, s_at = np.unique(np.concatenate([name, source]), return_inverse=True)
        model_sid = np.array([b.string(cat.strings[s]) for s in sids.tolist()], dtype=np.int64)[s_at]
        n = fids.size
        sym_cols, sym_line, sym_counts = self._symbol_functions(mapping, rel_pc, symbols, name)
        fn = np.full(n, -1, dtype=np.int64)
        n_plain = int(plain.sum())
        sym_fn = np.zeros(0, dtype=np.int64)
        if n_plain or sym_line:  # one call: plain frames' functions first, then symbol lines' in order
            zeros = np.zeros(n_plain, dtype=np.int64)
            rows = b.functions_bulk(*(np.concatenate([c, s]) for c, s in zip(
                (model_sid[:n][plain], zeros, model_sid[n:][plain], zeros), sym_cols)))
            fn[plain], sym_fn = rows[:n_plain], rows[n_plain:]
        key_line = np.where(plain, line, 0)
        key_fn = np.where(symbols >= 0, -2 - symbols, fn)  # symbolized frames: their lines' code
        loc, first = factorize_rows([mapping, rel_pc.view(np.int64), key_fn, key_line])
        counts, lf, ll = self._lines(first, plain, fn, line, symbols, (sym_fn, sym_line, sym_counts))
        row0 = b.add_locations_bulk(mapping[first], rel_pc[first], np.zeros(first.size, dtype=bool), counts,
                                    lf, ll, np.zeros(lf.size, dtype=np.int64))
        return row0 + loc

    def _symbolized(self, mid: np.ndarray, rel_pc: np.ndarray, name: np.ndarray) -> np.ndarray:
        """Per frame, a code for its symbol lines and interned name (the system name of its
        outermost function): equal code, equal lines. -1 for a frame without symbols."""
        self._symbol_lines: list[tuple[LineSpec, ...]] = []
        out = np.full(mid.size, -1, dtype=np.int64)
        if not self.cat.symbols:
            return out
        codes: dict[tuple[tuple[LineSpec, ...], int], int] = {}
        hit = self._with_symbols(mid, rel_pc)
        for i in np.flatnonzero(hit).tolist():  # in frame order: the codes' order as before
            lines = self.cat.symbols_of(int(mid[i]), int(rel_pc[i]))
            if lines:
                out[i] = codes.setdefault((lines, int(name[i])), len(codes))
        self._symbol_lines = [lines for lines, _ in codes]
        return out

    def _with_symbols(self, mid: np.ndarray, rel_pc: np.ndarray) -> np.ndarray:
        """Whether each frame's address is in a symbol table of its mapping (by build id or by
        path alone): only those frames are looked up one by one."""
        hit = np.zeros(mid.size, dtype=bool)
        for m in distinct(mid).tolist():
            if m < 0:
                continue
            path, build_id = self.cat.mapping_rows[m][:2]
            tables = [t for t in (self.cat.symbols.get(k) for k in ((path, build_id or None), (path, None))) if t]
            if tables:
                sel = np.flatnonzero(mid == m)
                known = np.fromiter((a for t in tables for a in t), dtype=np.uint64)
                hit[sel] = np.isin(rel_pc[sel], known)
        return hit

    def _symbol_functions(self, mapping: np.ndarray, rel_pc: np.ndarray, symbols: np.ndarray, name: np.ndarray
                          ) -> tuple[list[np.ndarray], list[int], np.ndarray]:
        """The functions (as model string id columns for ``functions_bulk``) and line numbers of
        the symbolized locations' lines, location after location in the order ``_locations``
        numbers them (sorted by mapping, address and symbol code: the order of those keys among
        all locations), and each location's line count. Their strings are interned here, in the
        order ``ProfileBuilder.function`` would have interned them line by line."""
        b, strings = self.b, self.cat.strings
        sym = np.flatnonzero(symbols >= 0)
        cols: list[list[int]] = [[], [], [], []]
        sym_line: list[int] = []
        counts: list[int] = []
        if sym.size:
            _, first = factorize_rows([mapping[sym], rel_pc[sym].view(np.int64), -2 - symbols[sym]])
            for row in sym[first].tolist():
                interned = strings[int(name[row])]
                lines = self._symbol_lines[int(symbols[row])]
                last = len(lines) - 1
                for i, (f, file, ln) in enumerate(lines):
                    cols[0].append(b.string(f))
                    cols[1].append(b.string(interned if i == last and interned != f else ""))
                    cols[2].append(b.string(file))
                    cols[3].append(0)
                    sym_line.append(ln)
                counts.append(len(lines))
        return [np.array(c, dtype=np.int64) for c in cols], sym_line, np.array(counts, dtype=np.int64)

    def _lines(self, first: np.ndarray, plain: np.ndarray, fn: np.ndarray, line: np.ndarray, symbols: np.ndarray,
               sym_lines: tuple[np.ndarray, list[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Line counts, functions and line numbers of the locations whose first frame is ``first``
        (``sym_lines``: the symbolized locations' functions, lines and counts, in location order)."""
        one = plain[first]
        counts = one.astype(np.int64)
        sym = np.flatnonzero(symbols[first] >= 0)
        if not sym.size:
            return counts, fn[first][one], line[first][one]
        sym_fn, sym_line, counts[sym] = sym_lines
        # Each location's lines at its offset: a plain frame's one line, a symbolized frame's own.
        at = np.cumsum(counts) - counts
        lf, ll = np.empty(int(counts.sum()), dtype=np.int64), np.empty(int(counts.sum()), dtype=np.int64)
        lf[at[one]], ll[at[one]] = fn[first[one]], line[first[one]]
        into = ranges(at[sym], counts[sym])
        lf[into], ll[into] = sym_fn, sym_line
        return counts, lf, ll
