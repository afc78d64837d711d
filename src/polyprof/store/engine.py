"""The one small adapter between the store and a SQL engine: DuckDB or Spark.

Every query of the store is written once, in DuckDB's dialect. An engine
offers four things: views over the manifest's Parquet files
(:meth:`attach`, the same for both: each engine only says how it views a
list of files), small in-memory tables (:meth:`register`), running a query
to an Arrow table (:meth:`query`) and :meth:`close`. The Spark engine
translates each query with sqlglot (cached) before running it.

DuckDB (the default, embedded) runs locked down: it may read files only
inside the store directory, and its configuration is locked, so no query
can read ``/etc/passwd`` even if the SQL checks of
:mod:`polyprof.store.where` missed something. Its Arrow API changed in 2.0
(``to_arrow_table``; before: ``arrow``): the adapter takes whichever exists.

Spark (``--engine spark``, the ``spark`` extra, a Java runtime) reads the
same files, so the store can live on any path Spark reads. Sessions are
shared per process (a JVM starts once), with UTC time, no partition-type
inference (``day`` stays a string, as in DuckDB), ``spark.sql.runSQLOnFiles``
off and few shuffle partitions on a local master.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from polyprof.errors import MissingDependencyError, OptionsError, StoreError
from polyprof.store.layout import PARTITIONED, TABLES, Manifest, schema

__all__ = ["ENGINES", "DuckDBEngine", "Engine", "SparkEngine", "open_engine"]


class Engine:
    """Base: the operations every engine offers (see the module doc)."""

    name = ""

    def attach(self, manifest: Manifest) -> None:
        """Views over the manifest's files: one per dataset, and ``rollup`` (see :data:`ROLLUP_SQL`)."""
        for table in TABLES:
            if table != "rollup":
                self._view(table, manifest.paths(table), manifest.root)
        rollups, raw = manifest.rollup_coverage()
        self._view("rollup_files", rollups, manifest.root, "rollup")
        self._view("rollup_raw", raw, manifest.root, "samples")
        self.define("rollup", ROLLUP_SQL)

    def _view(self, name: str, files: list[str], root: str, table: str | None = None) -> None:
        """A view ``name`` over ``files`` of dataset ``table`` (default: ``name``), empty when none."""
        raise NotImplementedError

    def register(self, name: str, table: Any) -> None:
        raise NotImplementedError

    def define(self, name: str, sql: str) -> None:
        """A view ``name`` defined by a query (DuckDB dialect) over the other views."""
        raise NotImplementedError

    def query(self, sql: str) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


#: The ``rollup`` view: the rollup files, and the samples files without one summed alike
#: (row by row: equal sums, without a second GROUP BY).
ROLLUP_SQL = """\
SELECT sample_type, profile_id, callsite_id, ts, pos, neg, day FROM rollup_files
UNION ALL
SELECT sample_type, profile_id, callsite_id, ts, CASE WHEN value > 0 THEN value END AS pos,
       CASE WHEN value < 0 THEN value END AS neg, day FROM rollup_raw"""


def _empty(table: str) -> Any:
    import pyarrow as pa

    s = schema(table)
    if table in PARTITIONED:
        s = s.append(pa.field("day", pa.string()))
    return s.empty_table()


class DuckDBEngine(Engine):
    """DuckDB, embedded, one connection per store handle."""

    name = "duckdb"

    def __init__(self, root: str, threads: int | None = None) -> None:
        try:
            import duckdb
        except ImportError:
            raise MissingDependencyError("the store needs DuckDB: pip install 'polyprof[store]'", module="duckdb",
                                         extra="store") from None
        self.root = os.path.realpath(root)
        self.con = duckdb.connect(config={"threads": threads} if threads else {})
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(f"SET allowed_directories = ['{_quote(self.root)}']")
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    def _view(self, name: str, files: list[str], root: str, table: str | None = None) -> None:
        table = table or name
        if not files:
            self.register(name, _empty(table))
            return
        listed = ", ".join(f"'{_quote(os.path.realpath(f))}'" for f in files)
        hive = ", hive_partitioning = true, hive_types_autocast = false" if table in PARTITIONED else ""
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet([{listed}]{hive})")

    def register(self, name: str, table: Any) -> None:
        self.con.execute(f"DROP VIEW IF EXISTS {name}")
        self.con.register(name, table)

    def define(self, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")

    def query(self, sql: str) -> Any:
        import duckdb

        try:
            rel = self.con.sql(sql)
        except duckdb.Error as exc:
            raise _engine_error(exc) from None
        if rel is None:
            raise OptionsError("the query returned no result")
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
        try:
            return fetch()
        except duckdb.Error as exc:
            raise _engine_error(exc) from None

    def close(self) -> None:
        self.con.close()


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _engine_error(exc: Exception) -> OptionsError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return OptionsError(f"query failed: {first}")


@functools.lru_cache(maxsize=256)
def to_spark_sql(sql: str) -> str:
    """``sql`` (DuckDB dialect) in Spark SQL, via sqlglot."""
    import sqlglot

    return ";\n".join(sqlglot.transpile(sql, read="duckdb", write="spark"))


class SparkEngine(Engine):
    """Apache Spark through PySpark (local[N] or a cluster master)."""

    name = "spark"

    def __init__(self, root: str, master: str | None = None) -> None:
        self.root = os.path.abspath(root)
        self.spark = spark_session(master or "local[2]")

    def _view(self, name: str, files: list[str], root: str, table: str | None = None) -> None:
        table = table or name
        if not files:
            self.register(name, _empty(table))
            return
        reader = self.spark.read
        if table in PARTITIONED:
            reader = reader.option("basePath", os.path.join(root, table))
        reader.parquet(*files).createOrReplaceTempView(name)

    def register(self, name: str, table: Any) -> None:
        self.spark.createDataFrame(table).createOrReplaceTempView(name)

    def define(self, name: str, sql: str) -> None:
        self.spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {to_spark_sql(sql)}")

    def query(self, sql: str) -> Any:
        try:
            df = self.spark.sql(to_spark_sql(sql))
            return df.toArrow()
        except Exception as exc:  # noqa: BLE001 - Py4J/analysis errors become one line
            if type(exc).__name__ in ("AnalysisException", "ParseException", "SparkException",
                                      "IllegalArgumentException", "PySparkException", "Py4JJavaError"):
                raise _engine_error(exc) from None
            raise


@functools.lru_cache(maxsize=4)
def spark_session(master: str) -> Any:
    """One SparkSession per master and process (starting a JVM takes seconds)."""
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise StoreError("--engine spark needs a Java runtime (Debian: apt-get install default-jre-headless)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingDependencyError("--engine spark needs PySpark: pip install 'polyprof[spark]'", module="pyspark",
                                     extra="spark") from None
    local = master.startswith("local")
    builder = (SparkSession.builder.master(master).appName("polyprof-store")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
               .config("spark.sql.runSQLOnFiles", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.ansi.enabled", "false")
               # the stacks view walks callsite trees deeper than the default 100 levels
               .config("spark.sql.cteRecursionLevelLimit", "-1")
               .config("spark.sql.cteRecursionRowLimit", "-1"))
    if local:
        builder = (builder.config("spark.sql.shuffle.partitions", "2")
                   .config("spark.default.parallelism", "2")
                   .config("spark.driver.memory", os.environ.get("POLYPROF_SPARK_MEMORY", "2g")))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


ENGINES = {"duckdb": DuckDBEngine, "spark": SparkEngine}


def open_engine(root: str, engine: str = "duckdb", master: str | None = None) -> Engine:
    """An engine over the store at ``root`` (views are attached by the caller)."""
    if engine == "duckdb":
        return DuckDBEngine(root)
    if engine == "spark":
        return SparkEngine(root, master)
    raise OptionsError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
