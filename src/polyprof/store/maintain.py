"""Store maintenance: compact, rm, symbolize. Each publishes one new manifest under the lock.

- :func:`compact` rewrites the samples of each day into one file per sample
  type (sorted by profile and stack: better compression, fewer files) and
  its rollup (the samples summed by profile, stack and ts), the
  profiles into one file, and each dictionary into one file holding only
  rows still referenced (after ``rm``). Every answer stays identical:
  rows are moved, never changed.
- :func:`remove` drops the profiles a predicate selects and their samples;
  dictionary rows they alone used stay until the next compact (harmless).
- :func:`symbolize` fills the lines of address-only frames from a symbol
  directory with :func:`polyprof.symbolize.symbolize` (any source it
  supports). Frames keep their ids, so no stack is renumbered; new functions
  get content-hash ids like ingested ones.

Old files are deleted only after the new manifest is in place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyprof.errors import OptionsError
from polyprof.store.layout import DICTIONARIES, Manifest, rollup_of, write_lock, write_parquet

__all__ = ["CompactReport", "compact", "remove", "symbolize"]


@dataclass
class CompactReport:
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    dropped_rows: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _size(m: Manifest) -> tuple[int, int]:
    paths = [p for t in m.files for p in m.paths(t)]
    return len(paths), sum(os.path.getsize(p) for p in paths)


def _duckdb() -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


def _files(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def compact(root: str) -> CompactReport:
    """Compact the store at ``root`` (see the module doc)."""
    import pyarrow.parquet as pq

    with write_lock(root):
        m = Manifest.load(root)
        before = _size(m)
        con = _duckdb()
        dropped = {}
        new_files: dict[str, list[str]] = {t: [] for t in m.files}
        new_files["samples"] = _compact_samples(con, m)
        new_files["rollup"] = [_write_rollup(con, m.root, rel) for rel in new_files["samples"]]
        if m.files["profiles"]:
            rel = m.new_file("profiles")
            write_parquet(pq.read_table(m.paths("profiles")).sort_by([("time_nanos", "ascending"),
                                                                        ("profile_id", "ascending")]),
                          os.path.join(root, rel))
            new_files["profiles"] = [rel]
        keep = _referenced(con, m)
        for table in DICTIONARIES:
            if not m.files[table]:
                continue
            rows = pq.read_table(m.paths(table))
            ids = rows.column("id").to_numpy()
            _, first = np.unique(ids, return_index=True)
            mask = np.zeros(ids.size, dtype=bool)
            mask[first] = True
            mask &= np.isin(ids, keep[table])
            dropped[table] = int(ids.size - mask.sum())
            rel = m.new_file(table)
            write_parquet(rows.filter(mask).sort_by("id"), os.path.join(root, rel))
            new_files[table] = [rel]
        m.files = new_files
        m.publish()
        m.collect_garbage()
        return CompactReport(before[0], _size(m)[0], before[1], _size(m)[1], dropped)


def _compact_samples(con: Any, m: Manifest) -> list[str]:
    by_day: dict[str, list[str]] = {}
    for rel in m.files["samples"]:
        by_day.setdefault(rel.split(os.sep)[1], []).append(rel)
    out = []
    for day_dir, rels in sorted(by_day.items()):
        day = day_dir.split("=", 1)[1]
        paths = [os.path.join(m.root, r) for r in rels]
        types = [r[0] for r in con.execute(f"SELECT DISTINCT sample_type FROM read_parquet({_files(paths)})").fetchall()]
        for t in sorted(types):
            rel = m.new_file("samples", day)
            dst = os.path.join(m.root, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            con.execute(f"COPY (SELECT * FROM read_parquet({_files(paths)}) WHERE sample_type = ? "
                        "ORDER BY profile_id, callsite_id, labelset_id, ts) "
                        f"TO '{dst}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1048576)", [t])
            out.append(rel)
    return out


def _write_rollup(con: Any, root: str, samples_rel: str) -> str:
    """Write the rollup file of a samples file (see :mod:`polyprof.store.layout`); returns its path."""
    rel = rollup_of(samples_rel)
    dst = os.path.join(root, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    con.execute("COPY (SELECT sample_type, profile_id, callsite_id, ts, "
                "CAST(SUM(value) FILTER (WHERE value > 0) AS BIGINT) AS pos, "
                "CAST(SUM(value) FILTER (WHERE value < 0) AS BIGINT) AS neg "
                f"FROM read_parquet({_files([os.path.join(root, samples_rel)])}) GROUP BY ALL ORDER BY profile_id, callsite_id, ts) "
                f"TO {_files([dst])[1:-1]} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1048576)")
    return rel


def _referenced(con: Any, m: Manifest) -> dict[str, np.ndarray]:
    """Ids of dictionary rows still used by some sample (callsites with all their ancestors)."""
    empty = np.zeros(0, dtype=np.int64)
    out = {t: empty for t in DICTIONARIES}
    if not m.files["samples"] or not m.files["callsites"]:
        return out
    samples = _files(m.paths("samples"))
    leaves = con.execute(f"SELECT DISTINCT callsite_id FROM read_parquet({samples}) WHERE callsite_id <> 0").fetchnumpy()
    out["labelsets"] = con.execute(f"SELECT DISTINCT labelset_id FROM read_parquet({samples})").fetchnumpy()["labelset_id"]
    cs = con.execute(f"SELECT id, parent, frame FROM read_parquet({_files(m.paths('callsites'))})").fetchnumpy()
    ids, order = np.unique(cs["id"], return_index=True)
    parent, frame = cs["parent"][order], cs["frame"][order]
    used = np.zeros(ids.size, dtype=bool)
    cur = np.searchsorted(ids, leaves["callsite_id"])
    while cur.size:
        cur = cur[~used[cur]]
        used[cur] = True
        par = parent[cur]
        cur = np.searchsorted(ids, par[par != 0])
    out["callsites"] = ids[used]
    out["frames"] = np.unique(frame[used])
    if m.files["frames"]:
        fr = con.execute(f"SELECT mapping, UNNEST(lines).function AS fn FROM read_parquet({_files(m.paths('frames'))}) "
                         f"WHERE id IN (SELECT UNNEST(?::BIGINT[]))", [out["frames"].tolist()]).fetchnumpy()
        out["functions"] = np.unique(fr["fn"])
        mapped = con.execute(f"SELECT DISTINCT mapping FROM read_parquet({_files(m.paths('frames'))}) "
                             "WHERE id IN (SELECT UNNEST(?::BIGINT[]))", [out["frames"].tolist()]).fetchnumpy()
        out["mappings"] = mapped["mapping"]
    return out


def remove(store: Any, where: str) -> int:
    """Remove the profiles of ``store`` matching ``where``; returns how many profile rows went."""
    from polyprof.store.cohort import Cohort

    if not where:
        raise OptionsError("store rm needs --where (to empty a store, delete its directory)")
    root = store.path
    with write_lock(root):
        gone = store.engine.query(f"SELECT profile_id FROM profiles WHERE {Cohort(where).sql()}")
        ids = gone.column(0).to_numpy()
        if not ids.size:
            return 0
        m = Manifest.load(root)
        con = _duckdb()
        listed = "[" + ", ".join(str(int(i)) for i in ids) + "]"
        for table in ("profiles", "samples"):
            kept = (_rewrite(con, m, rel, listed) for rel in m.files[table])
            m.files[table] = [rel for rel in kept if rel]
        m.publish()
        m.collect_garbage()
        return int(ids.size)


def _rewrite(con: Any, m: Manifest, rel: str, listed: str) -> str | None:
    """``rel`` without the rows of the profiles in ``listed``: the same file, a new one, or None."""
    src = os.path.join(m.root, rel)
    cond = f"list_contains({listed}::BIGINT[], profile_id)"
    hit, total = con.execute(f"SELECT COUNT(*) FILTER (WHERE {cond}), COUNT(*) FROM read_parquet('{src}')").fetchone()
    if not hit:
        return rel
    if hit == total:
        return None
    table, day = rel.split(os.sep)[0], (rel.split(os.sep)[1].split("=", 1)[1] if rel.startswith("samples") else None)
    new = m.new_file(table, day)
    dst = os.path.join(m.root, new)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    con.execute(f"COPY (SELECT * FROM read_parquet('{src}') WHERE NOT {cond}) TO '{dst}' "
                "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1048576)")
    return new


def symbolize(store: Any, symbols: str) -> dict[str, Any]:
    """Symbolize the address-only frames of ``store`` from ``symbols`` (see the module doc)."""
    from polyprof.store.symbolize import symbolize_frames

    root = store.path
    with write_lock(root):
        m = Manifest.load(root)
        result = symbolize_frames(m, symbols)
        if result.pop("changed"):
            m.publish()
            m.collect_garbage()
        return result
