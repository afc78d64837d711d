"""``store ingest``: read profile files of any format into a store, atomically.

Steps:

1. expand the inputs (files, directories recursively, glob patterns);
2. hash every file's bytes; files already in the store, or given twice, are
   skipped (re-ingesting adds nothing);
3. workers (``jobs`` processes) read each file with :func:`polyprof.read_all`
   (a trace or log holding several profiles gives several), turn them into
   rows (:mod:`polyprof.store.rows`) and write Parquet files into a private
   staging directory;
4. publish, under the store's lock: dictionary rows the store already holds
   are dropped, the new files are moved into the store and one new manifest
   is renamed over the old one.

Until that rename nothing a query reads has changed, so a crash, a kill or
Ctrl-C at any point leaves the store exactly as it was; the next writer
removes what was left behind. A file that cannot be read is reported (one
line: the file and the reason) and skipped; ``strict`` stops at the first
one and publishes nothing.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from polyprof.errors import InputError, PolyprofError
from polyprof.store.layout import DICTIONARIES, Manifest, staging_dir, write_lock, write_parquet

__all__ = ["FileResult", "IngestReport", "expand", "ingest"]

#: A worker writes its rows once it holds this many sample rows.
FLUSH_ROWS = 2_000_000
#: Files a worker reads before shredding them together (their callsite trees hash as one forest).
GROUP_FILES = 16


@dataclass
class FileResult:
    """What happened to one input file."""

    path: str
    profiles: int = 0
    samples: int = 0
    error: str | None = None
    exit_code: int = 0  # the exit code table's code for ``error`` (2 unreadable, 3 unknown format, ...)
    decode_seconds: float = 0.0
    shred_seconds: float = 0.0


@dataclass
class IngestReport:
    """The outcome of one ingest (``to_json`` for scripts)."""

    files: int = 0
    ingested: int = 0
    skipped: list[str] = field(default_factory=list)  # already in the store, or given twice
    failed: list[tuple[str, str]] = field(default_factory=list)
    profiles: int = 0
    samples: int = 0
    seconds: float = 0.0
    decode_seconds: float = 0.0
    shred_seconds: float = 0.0
    write_seconds: float = 0.0
    publish_seconds: float = 0.0
    published: bool = False
    failure_codes: list[int] = field(default_factory=list)  # one per ``failed`` entry

    @property
    def exit_code(self) -> int:
        """0 when no file failed; else the failures' exit code when they share one, or 2."""
        codes = set(self.failure_codes)
        return 0 if not codes else codes.pop() if len(codes) == 1 else 2

    def fail(self, path: str, reason: str, code: int) -> None:
        self.failed.append((path, reason))
        self.failure_codes.append(code)

    def add(self, r: FileResult) -> None:
        if r.error is not None:
            self.fail(r.path, r.error, r.exit_code or 1)
            return
        self.ingested += 1
        self.profiles += r.profiles
        self.samples += r.samples
        self.decode_seconds += r.decode_seconds
        self.shred_seconds += r.shred_seconds

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "ingested": self.ingested, "skipped": len(self.skipped),
                "failed": [{"file": f, "error": e} for f, e in self.failed], "profiles": self.profiles,
                "samples": self.samples, "seconds": round(self.seconds, 3), "published": self.published,
                # worker time summed over processes: reading files, and turning profiles into rows
                "decode_seconds": round(self.decode_seconds, 3), "shred_seconds": round(self.shred_seconds, 3),
                "write_seconds": round(self.write_seconds, 3), "publish_seconds": round(self.publish_seconds, 3)}


# ------------------------------------------------------------------ inputs

def expand(paths: Iterable[str]) -> list[str]:
    """Files named by ``paths``: files, directories (recursively, hidden files skipped)
    and glob patterns, in order, each once. InputError names a path that matches nothing."""
    out: dict[str, None] = {}
    for path in paths:
        matches = sorted(glob.glob(path, recursive=True)) if glob.has_magic(path) else [path]
        if not matches or not any(os.path.exists(m) for m in matches):
            raise InputError("no such file or directory", path=path)  # exit 2, as every verb's missing input
        for m in matches:
            if os.path.isdir(m):
                for dirpath, dirs, names in os.walk(m):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    for name in sorted(names):
                        if not name.startswith("."):
                            out.setdefault(os.path.join(dirpath, name), None)
            else:
                out.setdefault(m, None)
    return list(out)


# ------------------------------------------------------------------ workers

class _Worker:
    """Reads files and writes their rows into a staging directory (one per process)."""

    def __init__(self, staging: str, labels: dict[str, str]) -> None:
        from polyprof.store.rows import Batch, Shredder

        self.staging, self.labels = staging, labels
        self.shredder = Shredder()
        self.batch = Batch()
        self._new_batch = Batch
        self.write_seconds = 0.0
        self.pending: list[tuple[FileResult, bytes, list[Any]]] = []

    def run(self, path: str, digest: bytes) -> list[FileResult]:
        """Read one file; returns the files finished so far (shredded a group at a time, or failed)."""
        import polyprof

        result = FileResult(path)
        start = time.perf_counter()
        try:
            profiles = polyprof.read_all(path)
            for p in profiles:
                p.labelsets  # noqa: B018 - pprof decodes labels on first use: count it as reading
        except PolyprofError as exc:
            result.error, result.exit_code = str(exc), exc.exit_code
            return [result]
        except MemoryError:
            result.error = f"{path}: out of memory while reading"
            return [result]
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop a fleet ingest
            result.error = f"{path}: internal error ({type(exc).__name__}: {exc}); please report"
            return [result]
        result.decode_seconds = time.perf_counter() - start
        self.pending.append((result, digest, profiles))
        return self.drain() if len(self.pending) >= GROUP_FILES else []

    def drain(self) -> list[FileResult]:
        """Shred the files read so far as one group; returns their results."""
        from polyprof.store.rows import Source

        group, self.pending = self.pending, []
        if not group:
            return []
        items = [(p, Source(os.path.abspath(r.path), digest, i, self.labels))
                 for r, digest, profiles in group for i, p in enumerate(profiles)]
        start = time.perf_counter()
        counts = iter(self.shredder.shred_group(items, self.batch))
        share = (time.perf_counter() - start) / max(1, len(group))
        for r, _, profiles in group:
            r.profiles, r.samples, r.shred_seconds = len(profiles), sum(next(counts) for _ in profiles), share
        if self.batch.sample_rows >= FLUSH_ROWS:
            self.flush()
        return [r for r, _, _ in group]

    def flush(self) -> None:
        """Write the rows gathered so far as Parquet files in the staging directory."""
        import pyarrow as pa

        from polyprof.store.rows import samples_schema

        begin = time.perf_counter()
        b = self.batch
        for table, parts in b.tables.items():
            if parts:
                write_parquet(pa.concat_tables(parts), _staged(self.staging, table))
        target = samples_schema()  # the tables are built in it: no cast, no copy
        for (day, _type), parts in b.samples.items():
            rows = pa.concat_tables([t if t.schema == target else t.cast(target) for t in parts])
            write_parquet(rows, _staged(self.staging, "samples", day))
        self.batch = self._new_batch()
        self.write_seconds += time.perf_counter() - begin


def _staged(staging: str, table: str, day: str | None = None) -> str:
    import uuid

    sub = os.path.join(table, f"day={day}") if day is not None else table
    return os.path.join(staging, sub, f"part-{uuid.uuid4().hex}.parquet")


def _die_with_parent() -> None:
    """Linux: have the kernel kill this worker when the ingest process dies (e.g. kill -9)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_main(tasks: Any, results: Any, staging: str, labels: dict[str, str]) -> None:
    import signal

    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C does
    worker = _Worker(staging, labels)
    while True:
        task = tasks.get()
        if task is None:
            break
        for r in worker.run(*task):
            results.put(("file", r))
    try:
        for r in worker.drain():
            results.put(("file", r))
        worker.flush()
        results.put(("flushed", worker.write_seconds))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which publishes nothing
        results.put(("flush_failed", f"{type(exc).__name__}: {exc}"))


# ------------------------------------------------------------------ driver

Progress = Callable[[IngestReport, int], None]


def ingest(root: str, paths: Iterable[str], *, labels: dict[str, str] | None = None, jobs: int = 1,
           strict: bool = False, progress: Progress | None = None,
           on_failure: Callable[[str, str], None] | None = None) -> IngestReport:
    """Ingest ``paths`` into the store at ``root`` (created if needed); see the module doc.

    ``progress(report, total_files)`` is called after every file,
    ``on_failure(path, reason)`` for every file that could not be read.
    """
    from polyprof.store.rows import file_digest

    start = time.perf_counter()
    files = expand(paths)
    manifest = Manifest.load_or_create(root)
    report = IngestReport(files=len(files))
    todo = _new_files(manifest, files, file_digest, report)
    staging = staging_dir(root)
    try:
        ok = _run(todo, staging, labels or {}, max(1, jobs), strict, report, progress, on_failure)
        if ok and report.ingested:
            begin = time.perf_counter()
            with write_lock(root):
                _publish(Manifest.load(root), staging)
            report.published = True
            report.publish_seconds = time.perf_counter() - begin
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def _new_files(manifest: Manifest, files: list[str], digest: Callable[[str], bytes],
               report: IngestReport) -> list[tuple[str, bytes]]:
    known = _known_hashes(manifest)
    todo = []
    for path in files:
        try:
            d = digest(path)
        except OSError as exc:
            report.fail(path, f"{path}: cannot read ({exc.strerror})", 2)
            continue
        if d.hex() in known:
            report.skipped.append(path)
            continue
        known.add(d.hex())
        todo.append((path, d))
    return todo


def _known_hashes(manifest: Manifest) -> set[str]:
    paths = manifest.paths("profiles")
    if not paths:
        return set()
    import pyarrow.parquet as pq

    return set(pq.read_table(paths, columns=["file_hash"]).column(0).to_pylist())


def _run(todo: list[tuple[str, bytes]], staging: str, labels: dict[str, str], jobs: int, strict: bool,  # noqa: PLR0913
         report: IngestReport, progress: Progress | None, on_failure: Callable[[str, str], None] | None) -> bool:
    """Read and stage every file; False when nothing may be published (strict failure)."""
    total = len(todo)

    def record(r: FileResult) -> bool:
        report.add(r)
        if r.error is not None and on_failure is not None:
            on_failure(r.path, r.error)
        if progress is not None:
            progress(report, total)
        return r.error is None or not strict

    for path, reason in report.failed:  # unreadable before any worker started
        if on_failure is not None:
            on_failure(path, reason)
        if strict:
            return False
    if jobs == 1 or len(todo) <= 1:
        worker = _Worker(staging, labels)
        for task in todo:
            for r in worker.run(*task):
                if not record(r):
                    return False
        for r in worker.drain():
            if not record(r):
                return False
        worker.flush()
        report.write_seconds += worker.write_seconds
        return True
    return _run_parallel(todo, staging, labels, jobs, record, report)


def _run_parallel(todo: list[tuple[str, bytes]], staging: str, labels: dict[str, str], jobs: int,
                  record: Callable[[FileResult], bool], report: IngestReport) -> bool:
    import multiprocessing as mp

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    tasks, results = ctx.Queue(), ctx.Queue()
    jobs = min(jobs, len(todo))
    procs = [ctx.Process(target=_worker_main, args=(tasks, results, staging, labels), daemon=True)
             for _ in range(jobs)]
    for p in procs:
        p.start()
    for task in todo:
        tasks.put(task)
    for _ in procs:
        tasks.put(None)
    ok, flushed, pending = True, 0, len(todo)
    try:
        while flushed < jobs:
            kind, payload = results.get()
            if kind == "file":
                pending -= 1
                if not record(payload):
                    ok = False
                    break
            elif kind == "flushed":
                flushed += 1
                report.write_seconds += payload
            else:
                raise PolyprofError(f"an ingest worker could not write its rows: {payload}")
    finally:
        if not ok or flushed < jobs:
            for p in procs:
                p.kill()
        for p in procs:
            p.join()
    return ok


def _publish(manifest: Manifest, staging: str) -> None:
    """Move staged files into the store, dropping rows it already has; one manifest rename."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    staged = {t: sorted(glob.glob(os.path.join(staging, t, "**", "*.parquet"), recursive=True))
              for t in ("profiles", "samples", *DICTIONARIES)}
    new_profiles = pq.read_table(staged["profiles"]) if staged["profiles"] else None
    if new_profiles is None or not new_profiles.num_rows:
        return
    existing = _ids(manifest, "profiles", "profile_id")
    dup = np.isin(new_profiles.column("profile_id").to_numpy(), existing)
    if dup.any():  # another ingest published some of the same files meanwhile
        drop = pa.array(new_profiles.column("profile_id").to_numpy()[dup])
        new_profiles = new_profiles.filter(pc.invert(pc.is_in(new_profiles.column("profile_id"), drop)))
        for path in staged["samples"]:
            t = pq.read_table(path)
            write_parquet(t.filter(pc.invert(pc.is_in(t.column("profile_id"), drop))), path)
    moves: list[tuple[str, str]] = []
    rel = manifest.new_file("profiles")
    write_parquet(new_profiles, os.path.join(manifest.root, rel))
    manifest.files["profiles"].append(rel)
    for table in DICTIONARIES:
        rows = _new_dictionary_rows(manifest, table, staged[table])
        if rows is not None and rows.num_rows:
            rel = manifest.new_file(table)
            write_parquet(rows, os.path.join(manifest.root, rel))
            manifest.files[table].append(rel)
    for path in staged["samples"]:
        day = os.path.basename(os.path.dirname(path)).split("=", 1)[1]
        rel = manifest.new_file("samples", day)
        moves.append((path, os.path.join(manifest.root, rel)))
        manifest.files["samples"].append(rel)
    for src, dst in moves:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)
    manifest.publish()
    manifest.collect_garbage()


def _ids(manifest: Manifest, table: str, column: str = "id"):  # noqa: ANN202
    import numpy as np
    import pyarrow.parquet as pq

    paths = manifest.paths(table)
    if not paths:
        return np.zeros(0, dtype=np.int64)
    return np.sort(pq.read_table(paths, columns=[column]).column(0).to_numpy())


def _new_dictionary_rows(manifest: Manifest, table: str, staged: list[str]):  # noqa: ANN202
    """Staged rows of a dictionary whose ids neither the store nor an earlier staged row has."""
    import numpy as np
    import pyarrow.parquet as pq

    if not staged:
        return None
    rows = pq.read_table(staged)
    row_ids = rows.column("id").to_numpy()
    _, first = np.unique(row_ids, return_index=True)  # two workers may both have emitted an id
    keep = np.zeros(row_ids.size, dtype=bool)
    keep[first] = True
    existing = _ids(manifest, table)
    if existing.size:
        pos = np.minimum(np.searchsorted(existing, row_ids), existing.size - 1)
        keep &= existing[pos] != row_ids
    return rows if keep.all() else rows.filter(keep)
