"""Reduced store rows -> a model Profile, so the single-file analyses answer for the store.

The engine returns per-stack totals (leaf callsite id -> value, plus any
grouping keys). :func:`build_profile` walks the callsite dictionary from
those leaves to the roots, fetches only the frames, functions, mappings and
label sets they use, and builds a small :class:`~polyprof.model.profile.Profile`
through :class:`~polyprof.model.builder.ProfileBuilder`: one sample per
reduced row (two when a group held both signs: positive and negative sums
stay apart so the sum of absolute values is the original one). The existing
analyses (top, tree, peek, traces, flame, diff) then compute every number:
nothing is computed a second time for the store.

:class:`Dictionaries` caches what it fetched per store handle (callsites
whole, the other dictionaries by id), so warm queries read only samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from polyprof.errors import StoreError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile, ValueType

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


class Dictionaries:
    """The store's dictionaries as one engine sees them, fetched on demand and cached."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._callsites: tuple[np.ndarray, ...] | None = None
        self.cache = {t: _Cached(t) for t in ("frames", "functions", "mappings", "labelsets")}

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
    if nonempty.any():
        leaf_stack[nonempty] = _stacks(dicts, b, leaves[nonempty])
    stack = leaf_stack[inverse.reshape(-1)]
    labelset = _labelsets(dicts, b, columns.get("labelset_id"))
    optional = {name: columns.get(col) for name, col in (("time", "ts"), ("pid", "pid"), ("tid", "tid"),
                                                         ("cpu", "cpu"))}
    b.add_samples_bulk(stack, values.reshape(len(stack), len(types)), labelset, **optional)
    return b.finish()


def _stacks(dicts: Dictionaries, b: ProfileBuilder, leaves: np.ndarray) -> np.ndarray:
    """Intern the stacks ending at callsite ids ``leaves`` (sorted, unique); their leaf callsites."""
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
    first_loc = _locations(dicts, b, frames)
    return b.stacks_from_csr(first_loc + loc_of.reshape(-1), offsets, leaf_first=False)


def _locations(dicts: Dictionaries, b: ProfileBuilder, frame_ids: np.ndarray) -> int:
    """Add the frames (sorted ids) as locations in that order; returns the first location row."""
    import pyarrow.compute as pc

    frames = dicts.take("frames", frame_ids)
    lines = frames.column("lines").combine_chunks()
    counts = pc.list_value_length(lines).fill_null(0).to_numpy(zero_copy_only=False).astype(_I64)
    flat = pc.list_flatten(lines)
    line_fn = flat.field("function").to_numpy(zero_copy_only=False).astype(_I64)
    fn_row = _functions(dicts, b, line_fn)
    mapping = frames.column("mapping").to_numpy()
    map_row = _mappings(dicts, b, mapping)
    return b.add_locations_bulk(
        map_row.astype(np.int32), frames.column("address").to_numpy().view(np.uint64),
        frames.column("folded").to_numpy(zero_copy_only=False).astype(bool), counts,
        fn_row.astype(np.int32), flat.field("line").to_numpy(zero_copy_only=False).astype(_I64),
        flat.field("column").to_numpy(zero_copy_only=False).astype(_I64))


def _functions(dicts: Dictionaries, b: ProfileBuilder, fn_ids: np.ndarray) -> np.ndarray:
    """Builder function rows for store function ids (0 -> -1)."""
    out = np.full(fn_ids.size, -1, dtype=_I64)
    live = fn_ids != 0
    if not live.any():
        return out
    wanted, inverse = np.unique(fn_ids[live], return_inverse=True)
    t = dicts.take("functions", wanted)
    sid = [np.array([b.string(x) for x in t.column(c).to_pylist()], dtype=_I64)
           for c in ("name", "system_name", "filename")]
    rows = b.functions_bulk(*sid, t.column("start_line").to_numpy())
    out[live] = rows[inverse.reshape(-1)]
    return out


def _mappings(dicts: Dictionaries, b: ProfileBuilder, map_ids: np.ndarray) -> np.ndarray:
    out = np.full(map_ids.size, -1, dtype=_I64)
    live = map_ids != 0
    if not live.any():
        return out
    wanted, inverse = np.unique(map_ids[live], return_inverse=True)
    t = dicts.take("mappings", wanted).to_pylist()
    rows = np.array([b.mapping(r["start"] % 2**64, r["limit"] % 2**64, r["offset"] % 2**64, r["filename"],
                               r["build_id"], r["flags"]) for r in t], dtype=_I64)
    out[live] = rows[inverse.reshape(-1)]
    return out


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
