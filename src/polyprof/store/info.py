"""``store info`` and ``store ls``, and the facets a cohort picker offers.

:class:`StoreInfo` summarizes a store (counts, size on disk, time span,
formats, sample types with totals, apps, versions, the most common labels);
:func:`list_profiles` lists the profiles of a cohort; :func:`facets` gives
what a UI needs to build a selection: the distinct values of the
low-cardinality columns and of every label key (with counts), and the time
span. All are plain data with ``to_records``/``to_pandas``/``to_arrow`` or
``to_json``; nothing is printed here.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from polyprof.store.cohort import Cohort
from polyprof.store.layout import DICTIONARIES, SCHEMA_VERSION, TABLES, Manifest

__all__ = ["FACET_COLUMNS", "LS_COLUMNS", "Facets", "StoreInfo", "facets", "list_profiles", "store_info"]

#: Columns of ``profiles`` offered as facets (few distinct values each).
FACET_COLUMNS = ("format", "app", "version", "process", "platform", "sample_type", "day")

LS_COLUMNS = ("profile_id", "time", "format", "sample_type", "sample_unit", "app", "version", "process",
               "n_samples", "total", "source", "source_index", "labels")


@dataclass
class StoreInfo:
    """Facts about a store (see the module doc)."""

    path: str
    schema_version: int
    generation: int
    files: int                       # data files
    bytes: int                       # on disk
    sources: int                     # ingested source files
    profiles: int                    # source profiles
    profile_rows: int                # profiles x sample types
    samples: int                     # sample rows (value != 0), all sample types
    time_first: str | None
    time_last: str | None
    formats: dict[str, int] = field(default_factory=dict)
    sample_types: list[dict[str, Any]] = field(default_factory=list)
    apps: dict[str, int] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    dictionaries: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_FACT_COLUMNS = ("file_hash", "source_index", "format", "app", "version", "process", "platform", "sample_type",
                 "sample_unit", "n_samples", "total", "time", "day", "labels")


class _Facts:
    """The profiles table's low-cardinality columns, read with one query and counted in Python
    (a store has thousands of profile rows, not billions: one engine job instead of dozens)."""

    def __init__(self, engine: Any) -> None:
        self.rows = engine.query(f"SELECT {', '.join(_FACT_COLUMNS)} FROM profiles").to_pylist()
        self.profile_keys = {(r["file_hash"], r["source_index"]) for r in self.rows}

    def counts(self, value: Any, limit: int) -> dict[str, int]:
        """Distinct source profiles per value of ``value(row)`` (None skipped), most first."""
        seen: dict[str, set] = {}
        for r in self.rows:
            v = value(r)
            if v is not None:
                seen.setdefault(str(v), set()).add((r["file_hash"], r["source_index"]))
        ranked = sorted(seen.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
        return {k: len(v) for k, v in ranked}

    def label_keys(self) -> list[str]:
        keys: dict[str, int] = {}
        for r in self.rows:
            for k, _ in r["labels"] or ():
                keys[k] = keys.get(k, 0) + 1
        return sorted(keys, key=lambda k: (-keys[k], k))

    def labels(self, keys: list[str], limit: int) -> dict[str, dict[str, int]]:
        return {k: self.counts(lambda r, k=k: dict(r["labels"] or ()).get(k), limit) for k in keys}

    def span(self) -> tuple[str | None, str | None]:
        times = [r["time"] for r in self.rows if r["time"] is not None]
        return (min(times).isoformat(), max(times).isoformat()) if times else (None, None)


def store_info(engine: Any, manifest: Manifest, top_labels: int = 8) -> StoreInfo:
    paths = [p for t in TABLES for p in manifest.paths(t)]
    size = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    facts = _Facts(engine)
    types: dict[tuple[str, str], dict[str, Any]] = {}
    for r in facts.rows:
        t = types.setdefault((r["sample_type"], r["sample_unit"]), {
            "sample_type": r["sample_type"], "sample_unit": r["sample_unit"], "profiles": 0, "samples": 0, "total": 0})
        t["profiles"] += 1
        t["samples"] += r["n_samples"] or 0
        t["total"] += r["total"] or 0
    dicts = {t: int(engine.query(f"SELECT COUNT(*) AS n FROM {t}").column(0)[0].as_py()) for t in DICTIONARIES}
    first, last = facts.span()
    return StoreInfo(
        manifest.root, SCHEMA_VERSION, manifest.generation, len(paths), size,
        len({r["file_hash"] for r in facts.rows}), len(facts.profile_keys), len(facts.rows),
        sum(r["n_samples"] or 0 for r in facts.rows), first, last, facts.counts(lambda r: r["format"], 20),
        sorted(types.values(), key=lambda t: (-t["profiles"], t["sample_type"], t["sample_unit"])),
        facts.counts(lambda r: r["app"], 10), facts.counts(lambda r: r["version"], 10),
        facts.labels(facts.label_keys()[:top_labels], 5), dicts)


def list_profiles(engine: Any, cohort: Cohort, columns: tuple[str, ...] | None = None) -> Any:
    """The profiles rows of ``cohort`` (all columns, or ``columns``), newest first: an Arrow table."""
    return engine.query(f"SELECT {', '.join(columns) if columns else '*'} FROM profiles WHERE {cohort.sql()} "
                        "ORDER BY time DESC NULLS LAST, source, source_index, type_index")


@dataclass
class Facets:
    """What a cohort picker offers: value -> profile count per column and per label key."""

    columns: dict[str, dict[str, int]]
    labels: dict[str, dict[str, int]]
    time_first: str | None
    time_last: str | None
    profiles: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def facets(engine: Any, max_values: int = 50) -> Facets:
    facts = _Facts(engine)
    columns = {c: facts.counts(lambda r, c=c: r[c], max_values) for c in FACET_COLUMNS}
    first, last = facts.span()
    return Facets(columns, facts.labels(sorted(facts.label_keys()), max_values), first, last,
                  len(facts.profile_keys))
