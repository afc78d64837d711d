"""The on-disk cache: downloaded debug files and symbolized addresses.

Lives in ``$XDG_CACHE_HOME/polyprof`` (``~/.cache/polyprof`` when unset;
``$POLYPROF_CACHE_DIR`` overrides both):

- ``debuginfod/<build id>/debuginfo`` (or ``executable``): files fetched from
  debuginfod servers, and ``.missing`` markers for build ids no server had
  (retried after a day, like debuginfod's own client);
- ``symbols.sqlite``: the frames of every address symbolized so far, keyed by
  the debug file's identity (build id, path, size, modification time), so a
  second run over the same binaries neither starts llvm-symbolizer nor
  parses DWARF again.

A cache that cannot be written (read-only home, corrupt database) is
skipped: symbolization still works, only slower.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from polyprof.symbolize.frames import Frame

__all__ = ["ResultCache", "cache_dir"]


def cache_dir() -> Path:
    """The cache directory (not created)."""
    forced = os.environ.get("POLYPROF_CACHE_DIR")
    if forced:
        return Path(forced)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "polyprof"


class ResultCache:
    """Symbolized addresses per debug file, in one SQLite table."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._db: sqlite3.Connection | None = None
        self.hits = 0

    @property
    def db(self) -> sqlite3.Connection | None:
        """The database, opened on first use (a run that never resolves ELF never touches disk)."""
        if self._db is None and self.root is not None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.root / "symbols.sqlite", timeout=10)
                self._db.execute("CREATE TABLE IF NOT EXISTS frames (module TEXT, address INTEGER, frames TEXT, "
                                 "PRIMARY KEY (module, address)) WITHOUT ROWID")
            except (OSError, sqlite3.Error):
                self._db, self.root = None, None
        return self._db

    def get(self, module: str, addresses: Iterable[int]) -> dict[int, list[Frame]]:
        """The cached answers among ``addresses`` of ``module``."""
        db = self.db
        if db is None:
            return {}
        wanted = set(addresses)
        out: dict[int, list[Frame]] = {}
        try:
            rows = db.execute("SELECT address, frames FROM frames WHERE module = ?", (module,))
            found = [(address & (1 << 64) - 1, text) for address, text in rows]
            found = [(address, text) for address, text in found if address in wanted]
            # One JSON document for every answer: json.loads per address costs more than the lookup.
            decoded = json.loads("[" + ",".join(text for _, text in found) + "]")
            make = Frame._make
            out = {address: [make(f) for f in frames] for (address, _), frames in zip(found, decoded)}
        except (sqlite3.Error, ValueError, TypeError):
            return {}
        self.hits += len(out)
        return out

    def put(self, module: str, answers: dict[int, list[Frame]]) -> None:
        db = self.db
        if db is None or not answers:
            return
        signed = [(module, a - (1 << 64) if a >= 1 << 63 else a, json.dumps([list(f) for f in frames]))
                  for a, frames in answers.items()]
        try:
            with db:
                db.executemany("INSERT OR REPLACE INTO frames VALUES (?, ?, ?)", signed)
        except sqlite3.Error:
            pass

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
