"""Profile -> store rows: the one place a model Profile becomes Parquet-ready columns.

:class:`Shredder` hashes every table of a profile into content ids (see
:mod:`polyprof.store.ids`) with numpy, emits the dictionary rows it has not
emitted before (it remembers ids across the files one worker ingests, so a
fleet's shared functions and stacks are written once per worker), and one
``profiles`` row and one ``samples`` row per sample type whose value is not
zero (zero rows carry no weight; every analysis of the store ignores them).

Identity (what makes two rows one):

- function: name, system name, file name, start line;
- mapping: start, limit, offset, file name, build id, flags;
- frame: mapping id, address, folded, and its lines (function id, line,
  column; innermost first), so frames without addresses (symbolized-only
  formats) stay distinct;
- callsite: parent callsite id and frame id (a stack is its leaf callsite);
- label set: its labels in order;
- profile: the source file's content hash, the profile's index in the file
  and the sample type's index.

Kept per profile: every sample column (time, pid, tid, cpu, labels, and the
thread name the model derives), metadata, ``extras`` (JSON). Lost: the order
of samples within a profile, and samples whose values are all zero.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from polyprof.model.profile import Profile
from polyprof.store import ids
from polyprof.store.ids import TAGS, combine, finish
from polyprof.store.layout import DICTIONARIES, schema
from polyprof.store.meta import extract
from polyprof.wire.vector import compiled_wanted, import_compiled

__all__ = ["Batch", "Shredder", "Source", "day_of", "file_digest", "function_ids"]

_I64 = np.int64


@dataclass
class Source:
    """Where a profile came from: the file, its content hash and its place in the file."""

    path: str
    digest: bytes
    index: int
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def file_hash(self) -> str:
        return self.digest.hex()


def file_digest(path: str, chunk: int = 1 << 20) -> bytes:
    """BLAKE2b-128 of a file's bytes (what makes re-ingesting it a no-op)."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.digest()


def day_of(time_nanos: int) -> str:
    """The ``day=`` partition of a profile starting at ``time_nanos`` (1970-01-01 when unknown)."""
    return _dt.datetime.fromtimestamp(max(time_nanos, 0) / 1e9, _dt.timezone.utc).strftime("%Y-%m-%d")


@dataclass
class Batch:
    """Rows of several profiles, ready to write: tables by name, samples by (day, sample type)."""

    tables: dict[str, list] = field(default_factory=lambda: {t: [] for t in ("profiles", *DICTIONARIES)})
    samples: dict[tuple[str, str], list] = field(default_factory=dict)
    sample_rows: int = 0

    def add_samples(self, day: str, sample_type: str, table: Any) -> None:
        self.samples.setdefault((day, sample_type), []).append(table)
        self.sample_rows += table.num_rows


class Shredder:
    """Turns profiles into store rows, remembering which dictionary ids it already emitted."""

    def __init__(self) -> None:
        self.string_cache: dict[str, int] = {}
        self.labelset_cache: dict[tuple, int] = {}
        self.seen: dict[str, _SeenIds] = {t: _SeenIds() for t in DICTIONARIES}
        #: (tables, frame ids) of the last few distinct symbol tables: a fleet's files of one
        #: build repeat the same functions, mappings and locations, hashed once per worker.
        self.recent_tables: list[tuple[tuple, np.ndarray]] = []

    def shred(self, p: Profile, source: Source, batch: Batch) -> int:
        """Append the rows of ``p`` to ``batch``; returns how many samples it has."""
        return self.shred_group([(p, source)], batch)[0]

    def shred_group(self, items: list[tuple[Profile, Source]], batch: Batch) -> list[int]:
        """:meth:`shred` of several profiles: their callsite trees are hashed as one forest,
        one vector step per depth for all of them. Returns each profile's sample count."""
        lids = [self._frame_ids(p, batch) for p, _ in items]
        cids = callsite_ids_forest([p.callsites for p, _ in items], lids)
        for (p, source), lid, (cid, pid) in zip(items, lids, cids):
            self._callsites(p, lid, cid, pid, batch)
            lsid = self._labelsets(p, batch)
            self._samples(p, source, cid, lsid, batch)
        return [len(p.samples) for p, _ in items]

    # ---- dictionaries ------------------------------------------------------

    def _frame_ids(self, p: Profile, batch: Batch) -> np.ndarray:
        """Frame id of every location, emitting new functions, mappings and frames."""
        key = _symbol_tables(p)
        for i, (known, lid) in enumerate(self.recent_tables):
            if _same_tables(known, key):  # emitted when first seen; ids depend on nothing else
                self.recent_tables.insert(0, self.recent_tables.pop(i))
                return lid
        sh = ids.hash_strings(p.strings, self.string_cache)
        fid = self._functions(p, sh, batch)
        mid = self._mappings(p, sh, batch)
        lid = self._frames(p, fid, mid, batch)
        self.recent_tables = [(key, lid), *self.recent_tables[:_RECENT_TABLES - 1]]
        return lid

    def _fresh(self, table: str, row_ids: np.ndarray) -> np.ndarray:
        """Rows (first occurrence per id) whose id this shredder has not emitted yet."""
        seen = self.seen[table]
        cand = np.flatnonzero(~seen.contains(row_ids))  # usually few once a worker has warmed up
        if not cand.size:
            return cand.astype(_I64)
        uniq, first = np.unique(row_ids[cand], return_index=True)
        seen.add(uniq)
        return np.sort(cand[first]).astype(_I64)

    def _functions(self, p: Profile, sh: np.ndarray, batch: Batch) -> np.ndarray:
        import pyarrow as pa

        f = p.functions
        fid = function_ids(sh[f.name], sh[f.system_name], sh[f.filename], f.start_line)
        new = self._fresh("functions", fid)
        if new.size:
            strs = p.strings
            batch.tables["functions"].append(pa.table({
                "id": fid[new], "name": [strs[i] for i in f.name[new].tolist()],
                "system_name": [strs[i] for i in f.system_name[new].tolist()],
                "filename": [strs[i] for i in f.filename[new].tolist()], "start_line": f.start_line[new]},
                schema=schema("functions")))
        return fid

    def _mappings(self, p: Profile, sh: np.ndarray, batch: Batch) -> np.ndarray:
        import pyarrow as pa

        m = p.mappings
        h: np.ndarray | np.uint64 = TAGS["mapping"]
        for col in (m.start, m.limit, m.offset, sh[m.filename], sh[m.build_id], m.flags.astype(_I64)):
            h = combine(h, col)
        mid = finish(h) if len(m) else np.zeros(0, _I64)
        new = self._fresh("mappings", mid)
        if new.size:
            strs = p.strings
            batch.tables["mappings"].append(pa.table({
                "id": mid[new], "start": m.start[new].view(_I64), "limit": m.limit[new].view(_I64),
                "offset": m.offset[new].view(_I64), "filename": [strs[i] for i in m.filename[new].tolist()],
                "build_id": [strs[i] for i in m.build_id[new].tolist()], "flags": m.flags[new].astype(np.int32)},
                schema=schema("mappings")))
        return mid

    def _frames(self, p: Profile, fid: np.ndarray, mid: np.ndarray, batch: Batch) -> np.ndarray:
        loc, ln = p.locations, p.lines
        line_fn = np.where(ln.function >= 0, fid[np.maximum(ln.function, 0)] if fid.size else 0, 0)
        lh = combine(combine(combine(TAGS["line"], line_fn), ln.line), ln.column)
        starts = loc.line_start[:-1].astype(_I64)
        counts = np.diff(loc.line_start).astype(_I64)
        mapping = np.where(loc.mapping >= 0, mid[np.maximum(loc.mapping, 0)] if mid.size else 0, 0)
        h: np.ndarray | np.uint64 = TAGS["frame"]
        for col in (mapping, loc.address, loc.folded.astype(_I64), counts):
            h = combine(h, col)
        fh = np.array(h, dtype=np.uint64, copy=True).reshape(-1)
        for j in range(int(counts.max(initial=0))):  # fold the lines in, innermost first
            sel = np.flatnonzero(counts > j)
            fh[sel] = combine(fh[sel], lh[starts[sel] + j])
        lid = finish(fh) if len(loc) else np.zeros(0, _I64)
        new = self._fresh("frames", lid)
        if new.size:
            batch.tables["frames"].append(_frame_rows(lid[new], mapping[new], loc.address[new], loc.folded[new],
                                                      starts[new], counts[new], line_fn, ln))
        return lid

    def _callsites(self, p: Profile, lid: np.ndarray, cid: np.ndarray, pid: np.ndarray, batch: Batch) -> None:
        import pyarrow as pa

        cs = p.callsites
        new = self._new_callsites(p, cid)
        if new.size:
            batch.tables["callsites"].append(pa.table({
                "id": cid[new], "parent": pid[new], "frame": lid[cs.location[new]],
                "depth": cs.depth()[new].astype(np.int32)}, schema=schema("callsites")))

    def _new_callsites(self, p: Profile, cid: np.ndarray) -> np.ndarray:
        """Callsites (first occurrence per id) this shredder has not emitted, ancestors first.

        What a worker emitted is closed under "parent of", so only the
        ancestors of stacks whose leaf is new are probed: once a worker has
        seen a fleet's common stacks, a profile costs one probe per stack.
        """
        parent = p.callsites.parent
        seen = self.seen["callsites"]
        leaves = np.unique(p.samples.stack[p.samples.stack >= 0]).astype(_I64)
        todo = leaves[~seen.contains(cid[leaves])]
        wanted = np.zeros(len(cid), dtype=bool)
        while todo.size:
            wanted[todo] = True
            up = parent[todo]
            up = np.unique(up[up >= 0]).astype(_I64)
            up = up[~wanted[up]]
            todo = up[~seen.contains(cid[up])] if up.size else up
        cand = np.flatnonzero(wanted)
        if not cand.size:
            return cand.astype(_I64)
        uniq, first = np.unique(cid[cand], return_index=True)
        seen.add(uniq)
        return np.sort(cand[first]).astype(_I64)

    def _labelsets(self, p: Profile, batch: Batch) -> np.ndarray:
        import pyarrow as pa

        sets = p.labelsets
        cache = self.labelset_cache  # label tuples repeat across a fleet's files
        lsid = np.zeros(len(sets), dtype=_I64)
        for i, labels in enumerate(sets):
            if labels:
                got = cache.get(labels)
                if got is None:
                    got = cache[labels] = _labelset_id(labels)
                lsid[i] = got
        new = self._fresh("labelsets", lsid)
        new = new[lsid[new] != 0]
        if new.size:
            batch.tables["labelsets"].append(pa.table({
                "id": lsid[new], "labels": [[{"key": lab.key, "str": lab.str, "num": lab.num, "unit": lab.unit}
                                             for lab in sets[i]] for i in new.tolist()]},
                schema=schema("labelsets")))
        return lsid

    # ---- profiles and samples ------------------------------------------------

    def _samples(self, p: Profile, source: Source, cid: np.ndarray, lsid: np.ndarray, batch: Batch) -> None:
        s = p.samples
        meta = extract(p, source.labels)
        day = day_of(p.time_nanos)
        common = _sample_columns(p, cid, lsid)
        key = int.from_bytes(source.digest[:8], "little")
        default = p.default_index()
        rows = []
        for k, vt in enumerate(p.sample_types):
            values = s.values[:, k]
            nz = np.flatnonzero(values)
            profile_id = _profile_id(key, source.index, k)
            rows.append(_profile_row(p, source, meta, vt, k, k == default, profile_id, nz.size,
                                     int(values.sum()), day))
            if nz.size:
                batch.add_samples(day, vt.type, _sample_table(vt.type, profile_id, values,
                                                                      None if nz.size == len(values) else nz, common))
        import pyarrow as pa

        batch.tables["profiles"].append(pa.Table.from_pylist(rows, schema=schema("profiles")))


_RECENT_TABLES = 4
_C_CALLSITE = np.uint64(int(TAGS["callsite"]) * int(ids.K1) % 2**64)  # combine(TAG, x) == mix(_C_CALLSITE ^ x)


def callsite_ids_forest(trees: list[Any], lids: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(id, parent id) of every callsite of every tree, where ``lids[k]`` maps tree k's locations to
    frame ids: ``finish(combine(combine(TAG, parent id), frame id))`` (the ids :func:`ids.combine`
    gives), one vector step per depth over the trees concatenated, parents before children."""
    from polyprof.model.tree import group_by_depth

    sizes = [len(cs) for cs in trees]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(_I64)
    parent = np.concatenate([np.where(cs.parent >= 0, cs.parent.astype(_I64) + off, -1)
                             for cs, off in zip(trees, offsets)]) if trees else np.zeros(0, _I64)
    frame = np.concatenate([lid[cs.location] for cs, lid in zip(trees, lids)] or [np.zeros(0, _I64)])
    frame = frame.astype(_I64, copy=False).view(np.uint64)
    fast = _compiled_ids(parent.size)
    got = fast.callsite_hashes(parent, frame, _C_CALLSITE) if fast is not None else None
    if got is not None:
        cid, pid = got
        return [(cid[a:b], pid[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    depth = np.concatenate([cs.depth() for cs in trees] or [np.zeros(0, np.int32)])
    # numpy sorts 16-bit keys by radix (linear); stacks are rarely deeper than 32k frames
    order, bounds = group_by_depth(depth.astype(np.int16) if depth.max(initial=0) < 2**15 else depth)
    # renumber nodes by depth so that every level is one contiguous slice (no scattered writes)
    rank = np.empty(order.size, dtype=_I64)
    rank[order] = np.arange(order.size, dtype=_I64)
    up_rank = parent[order]
    up_rank = np.where(up_rank >= 0, rank[np.maximum(up_rank, 0)], -1)
    frame = frame[order]
    h = np.zeros(order.size, dtype=_I64)
    up = np.zeros(order.size, dtype=_I64)
    for d in range(len(bounds) - 1):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        par = up_rank[lo:hi]
        up[lo:hi] = np.where(par >= 0, h[np.maximum(par, 0)], 0)
        h[lo:hi] = ids.finish(ids.mix((ids.mix(up[lo:hi].view(np.uint64) ^ _C_CALLSITE) * ids.K1) ^ frame[lo:hi]))
    cid, pid = h[rank], up[rank]
    return [(cid[a:b], pid[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]


#: Callsites from which the forest is hashed by the compiled twin (store/_ids_compiled.py):
#: loading numba and its cached machine code costs about half a second once per process, and a
#: smaller forest hashes in less than that with numpy.
COMPILED_FROM = 200_000
_compiled: ModuleType | bool | None = None  # the module once loaded; False: numba not available


def _compiled_ids(size: int) -> ModuleType | None:
    """The compiled forest hash when ``size`` callsites are worth it (the kernels' one rule:
    ``POLYPROF_KERNELS=numpy`` never, ``=compiled`` always), else None."""
    global _compiled
    if not compiled_wanted(size, COMPILED_FROM):
        return None
    if _compiled is None:
        _compiled = import_compiled("polyprof.store._ids_compiled")
    return _compiled if isinstance(_compiled, ModuleType) else None


def _symbol_tables(p: Profile) -> tuple:
    """Everything frame, function and mapping ids depend on."""
    f, m, loc, ln = p.functions, p.mappings, p.locations, p.lines
    return (p.strings, f.name, f.system_name, f.filename, f.start_line, m.start, m.limit, m.offset, m.filename,
            m.build_id, m.flags, loc.mapping, loc.address, loc.folded, loc.line_start, ln.function, ln.line,
            ln.column)


def _same_tables(a: tuple, b: tuple) -> bool:
    if len(a[0]) != len(b[0]) or any(x.shape != y.shape for x, y in zip(a[1:], b[1:])):
        return False
    return all(np.array_equal(x, y) for x, y in zip(a[1:], b[1:])) and a[0] == b[0]


def _labelset_id(labels: tuple) -> int:
    """Store id of a label set: a hash of its labels, in order, each with kind and unit."""
    text = "\x01".join("\x00".join((lab.key, "" if lab.str is None else "s" + lab.str,
                                     "" if lab.num is None else f"n{lab.num}", lab.unit)) for lab in labels)
    return int(finish(combine(TAGS["labelset"], np.uint64(ids.hash_text(text))))[0])


def function_ids(name: np.ndarray, system_name: np.ndarray, filename: np.ndarray,
                 start_line: np.ndarray) -> np.ndarray:
    """Store ids of functions given the hashes of their strings (see ids.hash_strings)."""
    if not len(name):
        return np.zeros(0, _I64)
    h: np.ndarray | np.uint64 = TAGS["function"]
    for col in (name, system_name, filename, start_line):
        h = combine(h, col)
    return finish(h)


class _SeenIds:
    """A set of int64 ids as a few sorted arrays (merged like a binary counter):
    membership for a whole array at once, no Python loop per id."""

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []

    def contains(self, values: np.ndarray) -> np.ndarray:
        if not self.chunks:
            return np.zeros(values.size, dtype=bool)
        order = np.argsort(values, kind="stable")  # sorted probes walk each chunk in order
        probe = values[order]
        hit = np.zeros(values.size, dtype=bool)
        for chunk in self.chunks:
            pos = np.minimum(np.searchsorted(chunk, probe), chunk.size - 1)
            hit |= chunk[pos] == probe
        out = np.empty_like(hit)
        out[order] = hit
        return out

    def add(self, sorted_new: np.ndarray) -> None:
        if not sorted_new.size:
            return
        self.chunks.append(sorted_new)
        while len(self.chunks) > 1 and self.chunks[-1].size * 2 >= self.chunks[-2].size:
            last = self.chunks.pop()
            self.chunks[-1] = np.union1d(self.chunks[-1], last)


def _profile_id(file_key: int, index: int, type_index: int) -> int:
    h = combine(combine(combine(TAGS["profile"], np.array([file_key], dtype=np.uint64)), index), type_index)
    return int(finish(h)[0])


def _profile_row(p: Profile, source: Source, meta: Any, vt: Any, k: int, is_default: bool,  # noqa: PLR0913
                 profile_id: int, n: int, total: int, day: str) -> dict[str, Any]:
    stamp = _dt.datetime.fromtimestamp(p.time_nanos / 1e9, _dt.timezone.utc) if p.time_nanos else None
    pt = p.period_type
    return {
        "profile_id": profile_id, "source": source.path, "source_index": source.index,
        "file_hash": source.file_hash, "format": p.source_format, "time": stamp,
        "time_nanos": p.time_nanos or None, "duration": p.duration_nanos or None, "period": p.period or None,
        "period_type": pt.type if pt else None, "period_unit": pt.unit if pt else None,
        "sample_type": vt.type, "sample_unit": vt.unit, "type_index": k, "is_default": is_default,
        "app": meta.app, "version": meta.version, "build_ids": meta.build_ids, "process": meta.process,
        "platform": meta.platform, "labels": list(meta.labels.items()), "n_samples": n, "total": total,
        "day": day, "ingested": _dt.datetime.now(_dt.timezone.utc), "meta": _meta_json(p),
    }


def _meta_json(p: Profile) -> str:
    return json.dumps({"comments": p.comments, "drop_frames": p.drop_frames, "keep_frames": p.keep_frames,
                       "doc_url": p.doc_url, "default_sample_type": p.default_sample_type,
                       "sample_types": [[vt.type, vt.unit] for vt in p.sample_types],
                       "warnings": p.warnings, "extras": p.extras}, default=str, sort_keys=True)


@functools.cache
def samples_schema() -> Any:
    """The samples schema as written: its string columns dictionary-encoded."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string()))
                      if f.type == pa.string() else f for f in schema("samples")])


def _sample_columns(p: Profile, cid: np.ndarray, lsid: np.ndarray) -> Any:
    """The per-sample columns shared by every sample type of ``p``, as one Arrow table (every
    sample type whose values are all non-zero writes these very arrays, no copy)."""
    import pyarrow as pa

    from polyprof.model.threads import sample_threads

    s = p.samples
    n = len(s)
    stack = s.stack.astype(_I64)
    cols = [np.where(stack >= 0, cid[np.maximum(stack, 0)] if cid.size else 0, 0), lsid[s.labelset]]
    for col in (s.time, s.pid, s.tid, s.cpu):
        cols.append(pa.nulls(n, pa.int64()) if col is None else np.asarray(col, dtype=_I64))
    thread_of, threads = sample_threads(p)
    names = [t.name for t in threads]
    thread_type = pa.dictionary(pa.int32(), pa.string())
    if all(x is None for x in names):
        cols.append(pa.nulls(n, thread_type))
    else:
        idx = thread_of.astype(np.int32)
        valid = np.array([x is not None for x in names], dtype=bool)[idx]
        cols.append(pa.DictionaryArray.from_arrays(pa.array(idx, mask=None if valid.all() else ~valid),
                                                   [x or "" for x in names]))
    target = samples_schema()
    shared = pa.schema([target.field(name) for name in _SHARED])
    return pa.Table.from_arrays([pa.array(c) if isinstance(c, np.ndarray) else c for c in cols], schema=shared)


_SHARED = ("callsite_id", "labelset_id", "ts", "pid", "tid", "cpu", "thread")


def _sample_table(sample_type: str, profile_id: int, values: np.ndarray, rows: np.ndarray | None,
                  common: Any) -> Any:
    """The sample rows of one sample type: ``rows`` (None: all) of ``common`` with their values."""
    import pyarrow as pa

    shared = common if rows is None else common.take(pa.array(rows))
    n = shared.num_rows
    value = values if rows is None else values[rows]
    cols = {"sample_type": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [sample_type]),
            "profile_id": pa.array(np.full(n, profile_id, dtype=_I64)),
            "value": pa.array(np.ascontiguousarray(value, dtype=_I64))}
    target = samples_schema()
    return pa.Table.from_arrays([cols[f.name] if f.name in cols else shared.column(f.name) for f in target],
                                schema=target)


def _frame_rows(frame_id: np.ndarray, mapping: np.ndarray, address: np.ndarray, folded: np.ndarray,
                starts: np.ndarray, counts: np.ndarray, line_fn: np.ndarray, ln: Any) -> Any:
    import pyarrow as pa

    take = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()), dtype=_I64)
    line = pa.StructArray.from_arrays([pa.array(line_fn[take]), pa.array(ln.line[take].astype(_I64)),
                                       pa.array(ln.column[take].astype(_I64))], names=["function", "line", "column"])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    lines = pa.ListArray.from_arrays(pa.array(offsets), line)
    return pa.table({"id": frame_id, "mapping": mapping.astype(_I64), "address": address.view(_I64)
                     if address.dtype == np.uint64 else address.astype(_I64),
                     "folded": folded.astype(bool), "lines": lines}, schema=schema("frames"))
