"""The on-disk layout of a store: Parquet datasets, their schemas, the manifest.

A store is a directory::

    polyprof-store.json        schema version + the manifest: every live data file
    profiles/part-*.parquet    one row per source profile x sample type
    samples/day=YYYY-MM-DD/part-*.parquet   one row per sample x sample type (value != 0)
    callsites/ frames/ functions/ mappings/ labelsets/   dictionaries keyed by content-hash ids
    rollup/day=YYYY-MM-DD/part-*.parquet    samples summed by profile, stack and ts (see below)
    .staging/                  work in progress of running ingests (never read by queries)
    .lock                      serializes publishing (ingest, compact, rm, symbolize)

Queries read exactly the files ``polyprof-store.json`` lists, so a change is
published by writing a new manifest beside the old one and renaming it over
it: a crash or Ctrl-C before that rename leaves the store as it was (files
written so far are unreferenced and removed by the next writer). Data files
are immutable; a writer replaces files, it never edits one.

The ``rollup`` dataset is derived, written by ``compact``: for a samples
file ``samples/day=D/part-X.parquet`` the file ``rollup/day=D/part-X.parquet``
holds its samples summed by (sample type, profile, leaf callsite, ts), the
positive and negative values apart. Whole-stack reductions (top, flame, tree,
diff without label or thread filters) read it instead of ``samples``: the
same sums from about a third of the rows (a profile repeats its stacks; the
labels, pids and tids that made samples distinct are summed away). A rollup
file counts only while its samples file is live (:meth:`Manifest.publish`
drops the others), and the samples files without one are read raw, so the
rollup is an index: losing it loses speed, never an answer. Older polyprof
ignores it (no schema change).

Ids are described in :mod:`polyprof.store.ids`; 0 means none. Addresses and
mapping bounds are uint64 in profiles but stored as int64 (same bits) since
Spark has no unsigned 64-bit type.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from polyprof import __version__
from polyprof.errors import StoreError

__all__ = ["DICTIONARIES", "MANIFEST", "PARTITIONED", "SCHEMA_VERSION", "TABLES", "Manifest", "rollup_of",
           "samples_of_rollup", "schema", "staging_dir",
           "negative_values_possible", "write_lock", "write_parquet"]

MANIFEST = "polyprof-store.json"
SCHEMA_VERSION = 1
DICTIONARIES = ("functions", "mappings", "frames", "callsites", "labelsets")
TABLES = ("profiles", "samples", *DICTIONARIES, "rollup")
#: Tables partitioned by day (``table/day=YYYY-MM-DD/part-*.parquet``).
PARTITIONED = ("samples", "rollup")


def schema(table: str):  # noqa: ANN201 - pyarrow is imported lazily
    """The Arrow schema of ``table`` (samples and rollup without their ``day`` partition column)."""
    import pyarrow as pa

    i64, s = pa.int64(), pa.string()
    line = pa.struct([("function", i64), ("line", i64), ("column", i64)])
    label = pa.struct([("key", s), ("str", s), ("num", i64), ("unit", s)])
    fields: dict[str, list] = {
        "profiles": [("profile_id", i64), ("source", s), ("source_index", pa.int32()), ("file_hash", s),
                     ("format", s), ("time", pa.timestamp("us", tz="UTC")), ("time_nanos", i64),
                     ("duration", i64), ("period", i64), ("period_type", s), ("period_unit", s),
                     ("sample_type", s), ("sample_unit", s), ("type_index", pa.int32()),
                     ("is_default", pa.bool_()), ("app", s), ("version", s), ("build_ids", pa.list_(s)),
                     ("process", s), ("platform", s), ("labels", pa.map_(s, s)), ("n_samples", i64),
                     ("total", i64), ("day", s), ("ingested", pa.timestamp("us", tz="UTC")), ("meta", s)],
        "samples": [("sample_type", s), ("profile_id", i64), ("callsite_id", i64), ("value", i64),
                    ("labelset_id", i64), ("ts", i64), ("pid", i64), ("tid", i64), ("cpu", i64),
                    ("thread", s)],
        "rollup": [("sample_type", s), ("profile_id", i64), ("callsite_id", i64), ("ts", i64),
                   ("pos", i64), ("neg", i64)],
        "callsites": [("id", i64), ("parent", i64), ("frame", i64), ("depth", pa.int32())],
        "frames": [("id", i64), ("mapping", i64), ("address", i64), ("folded", pa.bool_()),
                   ("lines", pa.list_(line))],
        "functions": [("id", i64), ("name", s), ("system_name", s), ("filename", s), ("start_line", i64)],
        "mappings": [("id", i64), ("start", i64), ("limit", i64), ("offset", i64), ("filename", s),
                     ("build_id", s), ("flags", pa.int32())],
        "labelsets": [("id", i64), ("labels", pa.list_(label))],
    }
    return pa.schema(fields[table])


def write_parquet(table, path: str) -> None:  # noqa: ANN001
    """Write one data file with the store's settings (zstd, 1M-row groups, dictionaries).

    A large dictionary page limit keeps 64-bit id columns dictionary-encoded
    (a few bytes per row instead of eight) when a row group repeats ids.
    """
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, compression="zstd", compression_level=3, row_group_size=1 << 20,
                   dictionary_pagesize_limit=8 << 20, write_statistics=True)


def negative_values_possible(paths: list[str]) -> bool:
    """Whether some sample file may hold a negative ``value``, from the Parquet footers' statistics
    (True when a file has none). Reductions skip the separate negative sums when it is False."""
    import pyarrow.parquet as pq

    for path in paths:
        try:
            meta = pq.ParquetFile(path).metadata
        except OSError:  # not a local file (a Spark store on a cluster's file system)
            return True
        column = meta.schema.names.index("value")
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(column).statistics
            if stats is None or not stats.has_min_max or stats.min < 0:
                return True
    return False


@dataclass
class Manifest:
    """The content of ``polyprof-store.json``: version, generation, live files per table."""

    root: str
    generation: int = 0
    files: dict[str, list[str]] = field(default_factory=lambda: {t: [] for t in TABLES})
    created_by: str = f"polyprof {__version__}"

    # ---- reading -----------------------------------------------------------

    @classmethod
    def load(cls, root: str) -> "Manifest":
        """Read the manifest of the store at ``root``; StoreError if it is not a usable store."""
        path = os.path.join(root, MANIFEST)
        if not os.path.isdir(root):
            raise StoreError(f"{root}: no such store (create one with 'polyprof store ingest {root} FILES')")
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise StoreError(f"{root}: not a polyprof store (no {MANIFEST}); "
                             f"create one with 'polyprof store ingest {root} FILES'") from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"{path}: unreadable store manifest ({exc})") from None
        return cls._from_json(root, data)

    @classmethod
    def _from_json(cls, root: str, data: Any) -> "Manifest":
        if not isinstance(data, dict) or data.get("format") != "polyprof-store":
            raise StoreError(f"{root}: {MANIFEST} is not a polyprof store manifest")
        version = data.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(f"{root}: store schema version {version} is newer than this polyprof "
                             f"understands ({SCHEMA_VERSION}); upgrade polyprof to read it")
        if version < SCHEMA_VERSION:
            data = _migrate(root, data, version)
        files = data.get("files") or {}
        m = cls(root, int(data.get("generation", 0)), {t: list(files.get(t, [])) for t in TABLES},
                str(data.get("created_by", "")))
        return m

    @classmethod
    def load_or_create(cls, root: str) -> "Manifest":
        """The manifest of ``root``, or a new empty store there (the directory may not exist yet)."""
        if os.path.exists(os.path.join(root, MANIFEST)):
            return cls.load(root)
        if os.path.isdir(root) and any(n for n in os.listdir(root) if not n.startswith(".")):
            raise StoreError(f"{root}: exists, is not empty and is not a polyprof store; "
                             "choose a new directory for the store")
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{root}: cannot create the store ({exc.strerror})") from None
        m = cls(root)
        m.publish()
        return m

    def paths(self, table: str) -> list[str]:
        """Absolute paths of the live files of ``table``."""
        return [os.path.join(self.root, f) for f in self.files[table]]

    # ---- writing -----------------------------------------------------------

    def publish(self) -> None:
        """Write this manifest atomically (temp file, fsync, rename); bumps the generation.

        Rollup files whose samples file is no longer live are dropped first."""
        self.generation += 1
        live = set(self.files["samples"])
        self.files["rollup"] = [r for r in self.files["rollup"] if samples_of_rollup(r) in live]
        data = {"format": "polyprof-store", "schema_version": SCHEMA_VERSION, "generation": self.generation,
                "created_by": self.created_by, "written_by": f"polyprof {__version__}",
                "files": {t: sorted(self.files[t]) for t in TABLES}}
        tmp = os.path.join(self.root, f".{MANIFEST}.{uuid.uuid4().hex}")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(self.root, MANIFEST))
        _fsync_dir(self.root)

    def new_file(self, table: str, day: str | None = None) -> str:
        """A fresh relative path for a data file of ``table`` (samples: in partition ``day``)."""
        name = f"part-{uuid.uuid4().hex}.parquet"
        return os.path.join(table, f"day={day}", name) if table in PARTITIONED else os.path.join(table, name)

    def rollup_coverage(self) -> tuple[list[str], list[str]]:
        """(live rollup files, samples files without one): together they hold every sample once."""
        covered = {samples_of_rollup(r) for r in self.files["rollup"]}
        return self.paths("rollup"), [os.path.join(self.root, f) for f in self.files["samples"] if f not in covered]


    def collect_garbage(self) -> int:
        """Remove data files no manifest references and abandoned staging areas.

        Call with the write lock held. Returns how many files were removed.
        """
        live = {f for t in TABLES for f in self.files[t]}
        removed = 0
        for table in TABLES:
            top = os.path.join(self.root, table)
            for dirpath, _dirs, names in os.walk(top):
                for name in names:
                    rel = os.path.relpath(os.path.join(dirpath, name), self.root)
                    if rel not in live:
                        os.unlink(os.path.join(dirpath, name))
                        removed += 1
        staging = os.path.join(self.root, ".staging")
        for name in os.listdir(staging) if os.path.isdir(staging) else []:
            if not _owner_alive(name):
                shutil.rmtree(os.path.join(staging, name), ignore_errors=True)
        return removed


def rollup_of(samples_rel: str) -> str:
    """The rollup file of a samples file (relative paths: ``samples/day=D/X`` -> ``rollup/day=D/X``)."""
    return os.path.join("rollup", os.path.relpath(samples_rel, "samples"))


def samples_of_rollup(rollup_rel: str) -> str:
    return os.path.join("samples", os.path.relpath(rollup_rel, "rollup"))


def staging_dir(root: str) -> str:
    """A new private staging directory for one writer (named after its process id)."""
    path = os.path.join(root, ".staging", f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
    os.makedirs(path)
    return path


@contextlib.contextmanager
def write_lock(root: str, timeout: float = 600.0) -> Iterator[None]:
    """Hold the store's publishing lock (an flock on ``.lock``); waits up to ``timeout`` s."""
    fd = os.open(os.path.join(root, ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(f"{root}: another polyprof is writing this store; try again later") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _owner_alive(staging_name: str) -> bool:
    pid = staging_name.split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: schema version -> function(root, manifest data) returning the data of the next version.
MIGRATIONS: dict[int, Any] = {}


def _migrate(root: str, data: dict, version: int) -> dict:
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise StoreError(f"{root}: store schema version {version} is too old for this polyprof "
                             f"(it reads {SCHEMA_VERSION}); re-ingest the profiles into a new store")
        data = step(root, data)
        version = data["schema_version"]
    return data
