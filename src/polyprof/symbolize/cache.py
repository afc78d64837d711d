"""The on-disk cache: downloaded debug files and symbolized addresses.

Lives in ``$XDG_CACHE_HOME/polyprof`` (``~/.cache/polyprof`` when unset;
``$POLYPROF_CACHE_DIR`` overrides both):

- ``debuginfod/<build id>/debuginfo`` (or ``executable``): files fetched from
  debuginfod servers, and ``.missing`` markers for build ids no server had
  (retried after a day, like debuginfod's own client);
- ``symbols.sqlite``: the frames of every address symbolized so far (packed
  columns, one blob per batch), keyed by
  the debug file's identity (build id, path, size, modification time), so a
  second run over the same binaries neither starts llvm-symbolizer nor
  parses DWARF again; and demangled names (per mode, one JSON blob per
  batch), so it does not demangle again either.

A cache that cannot be written (read-only home, corrupt database) is
skipped: symbolization still works, only slower.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import numpy as np

from polyprof.symbolize.answers import Answers

__all__ = ["ResultCache", "cache_dir"]

T = TypeVar("T")


def cache_dir() -> Path:
    """The cache directory (not created)."""
    forced = os.environ.get("POLYPROF_CACHE_DIR")
    if forced:
        return Path(forced)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "polyprof"


class ResultCache:
    """Symbolized addresses per debug file, and demangled names per mode: packed blobs in SQLite.

    Each batch of fresh answers is one row (:meth:`.Answers.pack`), read back
    and decoded in bulk: a row and a JSON document per address cost more
    than llvm-symbolizer itself on 100k addresses. Demangled names are kept
    the same way, one JSON blob per batch, all of a mode read at once. A
    key's batches are folded into one once there are many of them. Writes
    happen in a background thread with a connection of its own (SQLite
    works without the interpreter lock), one at a time and in order, so
    symbolization goes on meanwhile; :meth:`close` waits for them.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._db: sqlite3.Connection | None = None
        self._stored: dict[str, Answers] = {}
        self._names: dict[str, dict[str, str]] = {}
        self._writer: threading.Thread | None = None
        self.hits = 0

    @property
    def db(self) -> sqlite3.Connection | None:
        """The database, opened on first use (a run that never resolves ELF never touches disk)."""
        if self._db is None and self.root is not None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.root / "symbols.sqlite", timeout=10)
                for old in ("frames", "names"):  # the per-address and per-name rows of before
                    self._db.execute(f"DROP TABLE IF EXISTS {old}")
                for table, key in _KEYS.items():
                    self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({key} TEXT, batch INTEGER, data BLOB, "
                                     f"PRIMARY KEY ({key}, batch)) WITHOUT ROWID")
                self._db.commit()
            except (OSError, sqlite3.Error):
                self._db, self.root = None, None
        return self._db

    @property
    def opened(self) -> bool:
        """Whether the database is open (something was looked up in it)."""
        return self._db is not None

    def get(self, module: str, addresses: Iterable[int] | np.ndarray) -> Answers:
        """The cached answers among ``addresses`` of ``module`` (only those found)."""
        wanted = np.unique(np.asarray(list(addresses) if not isinstance(addresses, np.ndarray) else addresses,
                                      dtype=np.uint64))
        stored = self._stored.get(module)
        if stored is None:  # read once per run: the async backtraces ask address by address
            stored = self._stored[module] = Answers.concat(_blobs(self.db, "answers", module, Answers.unpack))
        if not len(stored) or not len(wanted):
            return Answers.empty()
        found, hit = stored.lookup(wanted)
        out = found.take(np.flatnonzero(hit))
        self.hits += len(out)
        return out

    def put(self, module: str, answers: Answers) -> None:
        """Store fresh answers of ``module`` as one more batch (in the background)."""
        if self.db is None or not len(answers):
            return
        if module in self._stored:
            self._stored[module] = Answers.concat([self._stored[module], answers])
        self._write(lambda db: _add(db, "answers", module, answers, Answers.unpack,
                                    lambda parts: Answers.concat(parts).pack()))

    def names(self, key: str, mangled: list[str]) -> dict[str, str]:
        """Demangled names of ``mangled`` stored under ``key`` (mode and rules) by earlier runs."""
        known = self._names.get(key)
        if known is None:
            known = self._names[key] = {}
            for part in _blobs(self.db, "demangled", key, _unpack_names):
                known.update(part)
        return {m: known[m] for m in mangled if m in known}

    def put_names(self, key: str, demangled: dict[str, str]) -> None:
        """Store ``demangled`` (mangled -> name) under ``key`` as one more batch (in the background)."""
        if self.db is None or not demangled:
            return
        self._names.setdefault(key, {}).update(demangled)
        self._write(lambda db: _add(db, "demangled", key, demangled, _unpack_names, _pack_names))

    def _write(self, job: Callable[[sqlite3.Connection], None]) -> None:
        """``job`` run in a transaction of a connection of its own, in a background thread, after
        the writes before it; a cache that cannot be written is skipped."""
        self.flush()
        path = self.root / "symbols.sqlite"  # type: ignore[operator]

        def run() -> None:
            try:
                db = sqlite3.connect(path, timeout=10)
                try:
                    with db:
                        job(db)
                finally:
                    db.close()
            except (sqlite3.Error, ValueError, TypeError):
                pass

        self._writer = threading.Thread(target=run, name="polyprof-cache-writer")
        self._writer.start()

    def flush(self) -> None:
        """Wait for the writes under way."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None


#: The tables of packed batches, and the column each is keyed by.
_KEYS = {"answers": "module", "demangled": "rules"}
#: Batches kept per key before they are folded into one.
MAX_BATCHES = 16
#: Demangled names kept per mode when batches are folded (the newest win): the whole table of
#: a mode is read on first use, so it stays bounded.
MAX_NAMES = 1 << 20


def _blobs(db: sqlite3.Connection | None, table: str, key: str, unpack: Callable[[bytes], T]) -> list[T]:
    """The decoded batches of ``key`` in ``table``, oldest first; none when any is unreadable."""
    if db is None:
        return []
    column = _KEYS[table]
    try:
        rows = db.execute(f"SELECT data FROM {table} WHERE {column} = ? ORDER BY batch", (key,)).fetchall()
        return [unpack(data) for data, in rows]
    except (sqlite3.Error, ValueError, TypeError):
        return []


def _add(db: sqlite3.Connection, table: str, key: str, value: T, unpack: Callable[[bytes], T],
         pack: Callable[[list[T]], bytes]) -> None:
    """One more batch of ``key`` in ``table``; all its batches folded into one past :data:`MAX_BATCHES`."""
    column = _KEYS[table]
    count, top = db.execute(f"SELECT COUNT(*), MAX(batch) FROM {table} WHERE {column} = ?", (key,)).fetchone()
    parts = [value]
    if int(count or 0) + 1 > MAX_BATCHES:
        parts = _blobs(db, table, key, unpack) + parts
        db.execute(f"DELETE FROM {table} WHERE {column} = ?", (key,))
    db.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", (key, int(top or 0) + 1, pack(parts)))


def _pack_names(parts: list[dict[str, str]]) -> bytes:
    """Name batches as one JSON blob (later batches win; at most :data:`MAX_NAMES`, the newest)."""
    merged: dict[str, str] = {}
    for part in parts:
        merged.update(part)
    items = list(merged.items())[-MAX_NAMES:]
    return json.dumps([[m for m, _ in items], [n for _, n in items]], ensure_ascii=False).encode(
        "utf-8", "surrogatepass")


def _unpack_names(blob: bytes) -> dict[str, str]:
    mangled, names = json.loads(blob.decode("utf-8", "surrogatepass"))
    if not isinstance(mangled, list) or not isinstance(names, list) or len(mangled) != len(names):
        raise ValueError("not a demangled-names blob")
    return dict(zip(mangled, names))
