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
  parses DWARF again; and demangled names (per mode), so it does not
  demangle again either.

A cache that cannot be written (read-only home, corrupt database) is
skipped: symbolization still works, only slower.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from polyprof.symbolize.answers import Answers

__all__ = ["ResultCache", "cache_dir"]


def cache_dir() -> Path:
    """The cache directory (not created)."""
    forced = os.environ.get("POLYPROF_CACHE_DIR")
    if forced:
        return Path(forced)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "polyprof"


class ResultCache:
    """Symbolized addresses per debug file: packed column blobs in one SQLite table.

    Each batch of fresh answers is one row (:meth:`.Answers.pack`), read back
    and decoded in bulk: a row and a JSON document per address cost more
    than llvm-symbolizer itself on 100k addresses. A debug file's batches are
    folded into one once there are many of them.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._db: sqlite3.Connection | None = None
        self._stored: dict[str, Answers] = {}
        self.hits = 0

    @property
    def db(self) -> sqlite3.Connection | None:
        """The database, opened on first use (a run that never resolves ELF never touches disk)."""
        if self._db is None and self.root is not None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.root / "symbols.sqlite", timeout=10)
                self._db.execute("DROP TABLE IF EXISTS frames")  # the per-address rows of before
                self._db.execute("CREATE TABLE IF NOT EXISTS answers (module TEXT, batch INTEGER, data BLOB, "
                                 "PRIMARY KEY (module, batch)) WITHOUT ROWID")
                self._db.execute("CREATE TABLE IF NOT EXISTS names (rules TEXT, mangled TEXT, name TEXT, "
                                 "PRIMARY KEY (rules, mangled)) WITHOUT ROWID")
            except (OSError, sqlite3.Error):
                self._db, self.root = None, None
        return self._db

    @property
    def opened(self) -> bool:
        """Whether the database is open (something was looked up in it)."""
        return self._db is not None

    def _load(self, module: str) -> list[tuple[int, Answers]]:
        db = self.db
        if db is None:
            return []
        try:
            rows = db.execute("SELECT batch, data FROM answers WHERE module = ? ORDER BY batch", (module,)).fetchall()
            return [(batch, Answers.unpack(data)) for batch, data in rows]
        except (sqlite3.Error, ValueError, TypeError):
            return []

    def get(self, module: str, addresses: Iterable[int] | np.ndarray) -> Answers:
        """The cached answers among ``addresses`` of ``module`` (only those found)."""
        wanted = np.unique(np.asarray(list(addresses) if not isinstance(addresses, np.ndarray) else addresses,
                                      dtype=np.uint64))
        stored = self._stored.get(module)
        if stored is None:  # read once per run: the async backtraces ask address by address
            stored = self._stored[module] = Answers.concat([a for _, a in self._load(module)])
        if not len(stored) or not len(wanted):
            return Answers.empty()
        found, hit = stored.lookup(wanted)
        out = found.take(np.flatnonzero(hit))
        self.hits += len(out)
        return out

    def put(self, module: str, answers: Answers) -> None:
        """Store fresh answers of ``module`` as one more batch (all batches folded into one past
        :data:`MAX_BATCHES`)."""
        db = self.db
        if db is None or not len(answers):
            return
        if module in self._stored:
            self._stored[module] = Answers.concat([self._stored[module], answers])
        try:
            with db:
                last = db.execute("SELECT COUNT(*), MAX(batch) FROM answers WHERE module = ?", (module,)).fetchone()
                count, top = int(last[0] or 0), int(last[1] or 0)
                if count + 1 > MAX_BATCHES:
                    answers = Answers.concat([a for _, a in self._load(module)] + [answers])
                    db.execute("DELETE FROM answers WHERE module = ?", (module,))
                db.execute("INSERT INTO answers VALUES (?, ?, ?)", (module, top + 1, answers.pack()))
        except sqlite3.Error:
            pass

    def names(self, key: str, mangled: list[str]) -> dict[str, str]:
        """Demangled names of ``mangled`` stored under ``key`` (mode and rules) by earlier runs."""
        db = self.db
        out: dict[str, str] = {}
        if db is None:
            return out
        try:
            for i in range(0, len(mangled), 900):  # under SQLite's limit on parameters
                part = mangled[i:i + 900]
                marks = ",".join("?" * len(part))
                out.update(db.execute(f"SELECT mangled, name FROM names WHERE rules = ? AND mangled IN ({marks})",
                                      (key, *part)).fetchall())
        except sqlite3.Error:
            return {}
        return out

    def put_names(self, key: str, demangled: dict[str, str]) -> None:
        db = self.db
        if db is None or not demangled:
            return
        try:
            with db:
                db.executemany("INSERT OR REPLACE INTO names VALUES (?, ?, ?)",
                               [(key, m, n) for m, n in demangled.items()])
        except sqlite3.Error:
            pass

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


#: Batches kept per debug file before they are folded into one.
MAX_BATCHES = 16
