"""The fleet store: many profiles of any format in Parquet, queried with DuckDB or Spark.

::

    import polyprof.store

    polyprof.store.ingest("fleet/", ["profiles/"], labels={"env": "prod"}, jobs=2)
    with polyprof.store.open("fleet/") as store:
        result = store.top(where="version = '120' AND labels['channel'] = 'beta'")
        result.rows[0]                       # the TopResult of ``polyprof top``
        store.diff("version = '119'", "version = '120'", normalize="total")
        store.export("merged.pb.gz", where="app = 'chrome'")
        store.sql("SELECT app, sum(n_samples) FROM profiles GROUP BY app")   # an Arrow table

Layers: ``layout`` (files, schemas, manifest), ``ids`` (content hashes),
``rows`` + ``meta`` (Profile -> rows), ``ingest``, ``where`` (SQL checks),
``engine`` (DuckDB/Spark adapter), ``cohort`` (selection, reduce SQL),
``fold`` (reduced rows -> Profile), ``query`` (-> FilterResult), ``handle``
(the Store object), ``views``/``info``/``maintain`` (sql, info, compact, rm,
symbolize). DESIGN.md 3.3 gives the reasons.
"""

from __future__ import annotations

from polyprof.store.handle import Store, open
from polyprof.store.ingest import IngestReport, ingest

__all__ = ["IngestReport", "Store", "ingest", "open"]
