"""Reduced store rows -> a model Profile, so the single-file analyses answer for the store.

The engine returns per-stack totals (leaf callsite id -> value, plus any
grouping keys). :func:`build_profile` walks the callsite dictionary from
those leaves to the roots and builds a small
:class:`~polyprof.model.profile.Profile`: the stacks through
:meth:`ProfileBuilder.stacks_from_csr` (pre-order callsites, as every reader
gets), one sample per reduced row (two when a group held both signs:
positive and negative sums stay apart so the sum of absolute values is the
original one), and the frames, functions and mappings those stacks use. The
existing analyses (top, tree, peek, traces, flame, diff) then compute every
number: nothing is computed a second time for the store.

:class:`Dictionaries` caches what it fetched per store handle: the callsite
tree whole (ids only), and the frames, functions, mappings and their strings
as model columns (:class:`_ModelCache`), so a warm query reads only samples
and cuts the tables it needs out of the cache with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from polyprof.errors import StoreError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import (
    FunctionTable,
    Label,
    LineTable,
    LocationTable,
    MappingTable,
    Profile,
    ValueType,
)

__all__ = ["Dictionaries", "ProfileMeta", "build_profile"]

_I64 = np.int64


class _Cached:
    """Rows of one dictionary fetched so far, sorted by id."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.rows: Any = None
        self.ids = np.zeros(0, dtype=_I64)

    def take(self, engine: Any, wanted: np.ndarray) -> Any:
        """The rows of ``wanted`` (sorted unique ids), in that order."""
        import pyarrow as pa

        missing = wanted[~_member(self.ids, wanted)]
        if missing.size:
            engine.register("need", pa.table({"id": missing}))
            got = engine.query(f"SELECT * FROM {self.table} WHERE id IN (SELECT id FROM need)")
            got = got.take(np.unique(got.column("id").to_numpy(), return_index=True)[1])
            if got.num_rows != missing.size:
                raise StoreError(f"the store is damaged: {missing.size - got.num_rows} {self.table} row(s) "
                                 "referenced by samples are missing (run polyprof store compact, or re-ingest)")
            self.rows = got if self.rows is None else pa.concat_tables([self.rows, got.cast(self.rows.schema)])
            ids = self.rows.column("id").to_numpy()
            order = np.argsort(ids, kind="stable")
            self.rows, self.ids = self.rows.take(order), ids[order]
        return self.rows.take(np.searchsorted(self.ids, wanted)) if wanted.size else self._empty()

    def _empty(self) -> Any:
        from polyprof.store.layout import schema

        return schema(self.table).empty_table() if self.rows is None else self.rows.slice(0, 0)


def _member(sorted_ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    if not sorted_ids.size:
        return np.zeros(values.size, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_ids, values), sorted_ids.size - 1)
    return sorted_ids[pos] == values


class _ModelCache:
    """Frames, functions and mappings fetched so far, as model columns (rows in fetch order)."""

    def __init__(self) -> None:
        self.strings: list[str] = [""]
        self._sid: dict[str, int] = {"": 0}
        i64, i32 = np.int64, np.int32
        self.fn: dict[str, np.ndarray] = {"id": np.zeros(0, i64), "name": np.zeros(0, i32), "system_name": np.zeros(0, i32),
                   "filename": np.zeros(0, i32), "start_line": np.zeros(0, i64)}
        self.map: dict[str, np.ndarray] = {"id": np.zeros(0, i64), "start": np.zeros(0, np.uint64), "limit": np.zeros(0, np.uint64),
                    "offset": np.zeros(0, np.uint64), "filename": np.zeros(0, i32), "build_id": np.zeros(0, i32),
                    "flags": np.zeros(0, np.uint8)}
        self.loc: dict[str, np.ndarray] = {"id": np.zeros(0, i64), "mapping": np.zeros(0, i32), "address": np.zeros(0, np.uint64),
                    "folded": np.zeros(0, bool), "count": np.zeros(0, i64), "first": np.zeros(0, i64)}
        self.line: dict[str, np.ndarray] = {"function": np.zeros(0, i32), "line": np.zeros(0, i64), "column": np.zeros(0, i64)}
        self._sorted: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def intern(self, texts: list[str]) -> np.ndarray:
        sid, strings = self._sid, self.strings
        out = np.empty(len(texts), dtype=np.int32)
        for i, t in enumerate(texts):
            got = sid.get(t)
            if got is None:
                got = sid[t] = len(strings)
                strings.append(t)
            out[i] = got
        return out

    def rows(self, kind: str, ids: np.ndarray) -> np.ndarray:
        """Cache rows of store ids (which must be cached); 0 -> -1."""
        table = getattr(self, kind)
        if kind not in self._sorted:
            order = np.argsort(table["id"], kind="stable")
            self._sorted[kind] = (table["id"][order], order)
        keys, order = self._sorted[kind]
        if not keys.size:
            return np.full(ids.size, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, ids), keys.size - 1)
        return np.where(ids == 0, -1, order[pos]).astype(np.int64)

    def missing(self, kind: str, ids: np.ndarray) -> np.ndarray:
        ids = np.unique(ids[ids != 0])
        rows = self.rows(kind, ids)
        known = rows >= 0
        known[known] = getattr(self, kind)["id"][rows[known]] == ids[known]
        return ids[~known]

    def append(self, kind: str, columns: dict[str, np.ndarray]) -> None:
        table = getattr(self, kind)
        for name, col in columns.items():
            table[name] = np.concatenate([table[name], col.astype(table[name].dtype, copy=False)])
        self._sorted.pop(kind, None)


class Dictionaries:
    """The store's dictionaries as one engine sees them, fetched on demand and cached."""

    def __init__(self, engine: Any, signed_values: bool = True) -> None:
        self.engine = engine
        #: False when no sample value of the store is negative: reductions need one sum, not two
        self.signed_values = signed_values
        self._callsites: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.cache = {"labelsets": _Cached("labelsets")}
        self.model = _ModelCache()
        self._memo: dict[Any, Any] = {}

    def memo(self, key: Any, make: Any) -> Any:
        """``make()``, remembered under ``key`` for this manifest generation (the last 16 kept):
        reports over one cohort (top, then tree, then flame) reduce its samples once."""
        if key in self._memo:
            self._memo[key] = self._memo.pop(key)  # most recently used last
            return self._memo[key]
        value = make()
        self._memo[key] = value
        while len(self._memo) > 16:
            self._memo.pop(next(iter(self._memo)))
        return value

    def has(self, key: Any) -> bool:
        """Whether :meth:`memo` remembers ``key``."""
        return key in self._memo

    def callsites(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids sorted, parent row or -1, frame id, depth) of every callsite."""
        if self._callsites is None:
            t = self.engine.query("SELECT id, parent, frame, depth FROM callsites")
            ids = t.column("id").to_numpy()
            order = np.argsort(ids, kind="stable")
            ids = ids[order]
            parent = t.column("parent").to_numpy()[order]
            prow = np.searchsorted(ids, parent)
            prow = np.where(parent == 0, -1, prow)
            bad = (parent != 0) & ((prow >= ids.size) | (ids[np.minimum(prow, max(ids.size - 1, 0))] != parent))
            if bad.any():
                raise StoreError(f"the store is damaged: {int(bad.sum())} callsite(s) have a missing parent")
            self._callsites = (ids, prow, t.column("frame").to_numpy()[order],
                               t.column("depth").to_numpy()[order].astype(_I64))
        return self._callsites

    def take(self, table: str, wanted: np.ndarray) -> Any:
        return self.cache[table].take(self.engine, np.unique(np.asarray(wanted, dtype=_I64)))

    def _fetch(self, table: str, ids: np.ndarray) -> Any:
        import pyarrow as pa

        self.engine.register("need", pa.table({"id": ids}))
        got = self.engine.query(f"SELECT * FROM {table} WHERE id IN (SELECT id FROM need)")
        if len(np.unique(got.column("id").to_numpy())) != ids.size:
            raise StoreError(f"the store is damaged: some {table} rows referenced by callsites are missing "
                             "(re-ingest the files, or run polyprof store compact)")
        return got

    def ensure_frames(self, frame_ids: np.ndarray) -> None:
        """Fetch into the model cache every frame of ``frame_ids`` it lacks, with their functions
        and mappings."""
        import pyarrow.compute as pc

        m = self.model
        new = m.missing("loc", frame_ids)
        if not new.size:
            return
        frames = self._fetch("frames", new)
        lines = frames.column("lines").combine_chunks()
        flat = pc.list_flatten(lines)
        fn_ids = flat.field("function").to_numpy(zero_copy_only=False).astype(_I64)
        map_ids = frames.column("mapping").to_numpy()
        self._ensure_functions(fn_ids)
        self._ensure_mappings(map_ids)
        counts = pc.list_value_length(lines).fill_null(0).to_numpy(zero_copy_only=False).astype(_I64)
        first = len(m.line["function"]) + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(_I64)
        m.append("line", {"function": m.rows("fn", fn_ids), "line": flat.field("line").to_numpy(zero_copy_only=False),
                          "column": flat.field("column").to_numpy(zero_copy_only=False)})
        m.append("loc", {"id": frames.column("id").to_numpy(), "mapping": m.rows("map", map_ids),
                         "address": frames.column("address").to_numpy().view(np.uint64),
                         "folded": frames.column("folded").to_numpy(zero_copy_only=False), "count": counts,
                         "first": first})

    def _ensure_functions(self, fn_ids: np.ndarray) -> None:
        m = self.model
        new = m.missing("fn", fn_ids)
        if new.size:
            t = self._fetch("functions", new)
            m.append("fn", {"id": t.column("id").to_numpy(), "start_line": t.column("start_line").to_numpy(),
                            **{c: m.intern(t.column(c).to_pylist()) for c in ("name", "system_name", "filename")}})

    def _ensure_mappings(self, map_ids: np.ndarray) -> None:
        m = self.model
        new = m.missing("map", map_ids)
        if new.size:
            t = self._fetch("mappings", new)
            m.append("map", {"id": t.column("id").to_numpy(),
                             **{c: t.column(c).to_numpy().view(np.uint64) for c in ("start", "limit", "offset")},
                             "filename": m.intern(t.column("filename").to_pylist()),
                             "build_id": m.intern(t.column("build_id").to_pylist()),
                             "flags": t.column("flags").to_numpy()})

    def tables(self, frame_ids: np.ndarray) -> tuple:
        """(strings, functions, mappings, locations, lines) holding exactly the frames ``frame_ids``
        (sorted unique store ids), location row i = frame_ids[i]."""
        self.ensure_frames(frame_ids)
        return _subset(self.model, self.model.rows("loc", frame_ids))


@dataclass
class ProfileMeta:
    """Metadata of the rebuilt profile (what the selected profiles share)."""

    sample_type: ValueType
    source_format: str = "store"
    time_nanos: int = 0
    duration_nanos: int = 0
    period_type: ValueType | None = None
    period: int = 0
    default_type: str = ""


def build_profile(dicts: Dictionaries, callsite: np.ndarray, values: np.ndarray, meta: ProfileMeta,
                  columns: dict[str, np.ndarray] | None = None,
                  sample_types: list[ValueType] | None = None) -> Profile:
    """A Profile with one sample per row: stack ``callsite[i]`` (0 = empty), values ``values[i]``
    (one column per sample type: ``sample_types``, default ``[meta.sample_type]``).

    ``columns`` may hold ``labelset_id`` and the optional sample columns
    (``ts`` as time, ``pid``, ``tid``, ``cpu``), one value per row.
    """
    columns = columns or {}
    types = sample_types or [meta.sample_type]
    b = ProfileBuilder(meta.source_format)
    b.set_sample_types(types)
    p = b.meta
    p.default_sample_type = meta.default_type or types[0].type
    p.time_nanos, p.duration_nanos = meta.time_nanos, meta.duration_nanos
    p.period_type, p.period = meta.period_type, meta.period
    leaves, inverse = np.unique(callsite, return_inverse=True)
    nonempty = leaves != 0
    leaf_stack = np.full(leaves.size, -1, dtype=np.int64)
    tables = None
    if nonempty.any():
        leaf_stack[nonempty], tables = _stacks(dicts, b, leaves[nonempty])
    stack = leaf_stack[inverse.reshape(-1)]
    labelset = _labelsets(dicts, b, columns.get("labelset_id"))
    optional = {name: columns.get(col) for name, col in (("time", "ts"), ("pid", "pid"), ("tid", "tid"),
                                                         ("cpu", "cpu"))}
    b.add_samples_bulk(stack, values.reshape(len(stack), len(types)), labelset, **optional)
    p = b.finish(check=False)
    if tables is not None:  # the frames the stacks use, cut out of the cache (see _subset)
        p.strings, p.functions, p.mappings, p.locations, p.lines = tables
    return p


def _stacks(dicts: Dictionaries, b: ProfileBuilder, leaves: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Intern the stacks ending at callsite ids ``leaves`` (sorted, unique): their leaf callsites,
    and the tables of the frames they use (location row i = i-th frame id in sorted order)."""
    ids, prow, frame, depth = dicts.callsites()
    rows = np.searchsorted(ids, leaves)
    if (rows >= ids.size).any() or (ids[np.minimum(rows, ids.size - 1)] != leaves).any():
        raise StoreError("the store is damaged: samples reference callsites it does not have")
    lengths = depth[rows] + 1
    offsets = np.zeros(rows.size + 1, dtype=_I64)
    np.cumsum(lengths, out=offsets[1:])
    node_rows = np.empty(int(offsets[-1]), dtype=_I64)
    cur, pos = rows.astype(_I64), offsets[:-1] + lengths - 1
    while cur.size:  # leaf to root, one vector step per level: root-first paths
        node_rows[pos] = cur
        cur, pos = prow[cur], pos - 1
        live = cur >= 0
        cur, pos = cur[live], pos[live]
    frames, loc_of = np.unique(frame[node_rows], return_inverse=True)
    tables = dicts.tables(frames)
    return b.stacks_from_csr(loc_of.reshape(-1), offsets, leaf_first=False), tables


def _subset(m: _ModelCache, loc_rows: np.ndarray) -> tuple:
    """Model tables holding the cached locations ``loc_rows`` (in that order) and only the
    lines, functions, mappings and strings they use."""
    loc, line = m.loc, m.line
    count, first = loc["count"][loc_rows], loc["first"][loc_rows]
    line_rows = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()), dtype=_I64)
    lf = line["function"][line_rows].astype(_I64)
    fn_used, fn_new = np.unique(lf[lf >= 0], return_inverse=True)
    line_fn = np.full(lf.size, -1, dtype=np.int32)
    line_fn[lf >= 0] = fn_new.reshape(-1)
    mr = loc["mapping"][loc_rows].astype(_I64)
    map_used, map_new = np.unique(mr[mr >= 0], return_inverse=True)
    loc_map = np.full(mr.size, -1, dtype=np.int32)
    loc_map[mr >= 0] = map_new.reshape(-1)
    fn, mp = m.fn, m.map
    sid_cols = [fn[c][fn_used] for c in ("name", "system_name", "filename")] + \
               [mp[c][map_used] for c in ("filename", "build_id")]
    used = np.unique(np.concatenate([np.zeros(1, np.int32), *sid_cols]))  # string 0 ("") first

    def sids(col: np.ndarray) -> np.ndarray:
        return np.searchsorted(used, col).astype(np.int32)

    strings = [m.strings[i] for i in used.tolist()]
    functions = FunctionTable(sids(sid_cols[0]), sids(sid_cols[1]), sids(sid_cols[2]), fn["start_line"][fn_used])
    mappings = MappingTable(mp["start"][map_used], mp["limit"][map_used], mp["offset"][map_used],
                            sids(sid_cols[3]), sids(sid_cols[4]), mp["flags"][map_used])
    locations = LocationTable(loc_map, loc["address"][loc_rows], loc["folded"][loc_rows],
                              np.concatenate([[0], np.cumsum(count)]).astype(_I64))
    lines = LineTable(line_fn, line["line"][line_rows], line["column"][line_rows])
    return strings, functions, mappings, locations, lines


def _labelsets(dicts: Dictionaries, b: ProfileBuilder, ids: np.ndarray | None) -> np.ndarray | None:
    if ids is None:
        return None
    wanted, inverse = np.unique(ids, return_inverse=True)
    rows = np.zeros(wanted.size, dtype=_I64)
    live = wanted != 0
    if live.any():
        t = dicts.take("labelsets", wanted[live]).column("labels").to_pylist()
        rows[live] = [b.labelset(tuple(Label(x["key"], x["str"], x["num"], x["unit"] or "") for x in labels))
                      for labels in t]
    return rows[inverse.reshape(-1)]
