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


def _counts(engine: Any, expr: str, limit: int, where: str = "TRUE") -> dict[str, int]:
    t = engine.query(f"SELECT {expr} AS v, COUNT(DISTINCT file_hash || ':' || CAST(source_index AS VARCHAR)) AS n "
                     f"FROM profiles WHERE {where} GROUP BY 1 ORDER BY n DESC, v LIMIT {limit}")
    return {str(v): int(n) for v, n in zip(t.column("v").to_pylist(), t.column("n").to_pylist()) if v is not None}


def store_info(engine: Any, manifest: Manifest, top_labels: int = 8) -> StoreInfo:
    paths = [p for t in TABLES for p in manifest.paths(t)]
    size = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    head = engine.query(
        "SELECT COUNT(DISTINCT file_hash) AS sources, "
        "COUNT(DISTINCT file_hash || ':' || CAST(source_index AS VARCHAR)) AS profiles, "
        "COUNT(*) AS rows_, SUM(n_samples) AS samples, MIN(time) AS first, MAX(time) AS last FROM profiles"
    ).to_pylist()[0]
    types = engine.query("SELECT sample_type, sample_unit, COUNT(*) AS profiles, SUM(n_samples) AS samples, "
                         "SUM(total) AS total FROM profiles GROUP BY 1, 2 ORDER BY profiles DESC, 1, 2").to_pylist()
    keys = engine.query("SELECT k, COUNT(*) AS n FROM (SELECT UNNEST(MAP_KEYS(labels)) AS k FROM profiles) "
                        f"GROUP BY k ORDER BY n DESC, k LIMIT {top_labels}").column("k").to_pylist()
    labels = {k: _counts(engine, f"labels[{_lit(k)}]", 5) for k in keys}
    dicts = {t: int(engine.query(f"SELECT COUNT(*) AS n FROM {t}").column(0)[0].as_py()) for t in DICTIONARIES}
    return StoreInfo(
        manifest.root, SCHEMA_VERSION, manifest.generation, len(paths), size, int(head["sources"] or 0),
        int(head["profiles"] or 0), int(head["rows_"] or 0), int(head["samples"] or 0),
        head["first"].isoformat() if head["first"] else None, head["last"].isoformat() if head["last"] else None,
        _counts(engine, "format", 20), [{k: _plain(v) for k, v in r.items()} for r in types],
        _counts(engine, "app", 10), _counts(engine, "version", 10), labels, dicts)


def _plain(value: Any) -> Any:
    """Engine numbers (Decimal sums) as Python ints; anything else unchanged."""
    from decimal import Decimal

    return int(value) if isinstance(value, Decimal) else value


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
    columns = {c: _counts(engine, c, max_values) for c in FACET_COLUMNS}
    keys = engine.query("SELECT DISTINCT UNNEST(MAP_KEYS(labels)) AS k FROM profiles ORDER BY k").column(0).to_pylist()
    labels = {k: _counts(engine, f"labels[{_lit(k)}]", max_values) for k in keys}
    span = engine.query("SELECT MIN(time) AS a, MAX(time) AS b, "
                        "COUNT(DISTINCT file_hash || ':' || CAST(source_index AS VARCHAR)) AS n FROM profiles"
                        ).to_pylist()[0]
    return Facets(columns, labels, span["a"].isoformat() if span["a"] else None,
                  span["b"].isoformat() if span["b"] else None, int(span["n"] or 0))
