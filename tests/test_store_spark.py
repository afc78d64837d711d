"""Parity: every store query verb gives identical results on DuckDB and on Spark local[2].

One SparkSession for the whole run (a JVM starts once), two shuffle
partitions, a small store. Skipped, saying why, only where Java or PySpark
is absent; .ci/run installs Java (Debian default-jre-headless).
"""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("duckdb")

import polyprof  # noqa: E402
import polyprof.store  # noqa: E402
from polyprof.store.maintain import compact  # noqa: E402
from helpers import PEER  # noqa: E402
from store_support import top_rows, traces_answer, write_fleet  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark_session():
    if shutil.which("java") is None:
        pytest.skip("Java is not installed (Debian: apt-get install default-jre-headless); .ci/run installs it")
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[spark]')")
    from polyprof.store.engine import spark_session

    return spark_session("local[2]")


@pytest.fixture(scope="module")
def stores(spark_session, tmp_path_factory):  # noqa: ANN001, ANN201
    root = tmp_path_factory.mktemp("spark")
    files = [str(f) for f in write_fleet(root / "in", 4, samples=60)]
    extra = PEER / "generated" / "simpleperf_from_aosp_testdata" / "perf_with_multiple_pids_and_tids.trace"
    if extra.exists():
        files.append(str(extra))
    polyprof.store.ingest(root / "s", files[:2], labels={"env": "ci"})
    compact(str(root / "s"))  # the engines read the rollup of these and the raw samples of the rest
    polyprof.store.ingest(root / "s", files[2:], labels={"env": "ci"})
    duck = polyprof.store.open(root / "s")
    spark = polyprof.store.open(root / "s", engine="spark")
    yield duck, spark
    duck.close()
    spark.close()


WHERE = ["format = 'pprof' AND time >= TIMESTAMP '2023-11-15'", "labels['env'] = 'ci' AND app IS NOT NULL"]


def test_reports_are_identical(stores) -> None:  # noqa: ANN001
    duck, spark = stores
    for where in (None, WHERE[0]):
        assert top_rows(spark.top(nodecount=0, where=where)) == top_rows(duck.top(nodecount=0, where=where))
    t1, t2 = spark.tree(nodecount=0), duck.tree(nodecount=0)
    assert [(n.name, n.flat, n.cum, [(e.name, e.weight) for e in n.callees]) for n in t1.nodes] == \
           [(n.name, n.flat, n.cum, [(e.name, e.weight) for e in n.callees]) for n in t2.nodes]
    assert [(n.name, n.cum) for n in spark.peek("parse").nodes] == [(n.name, n.cum) for n in duck.peek("parse").nodes]
    assert traces_answer(spark.traces()) == traces_answer(duck.traces())
    assert spark.flame(where=WHERE[0]).lines() == duck.flame(where=WHERE[0]).lines()


def test_thread_diff_and_export_are_identical(stores) -> None:  # noqa: ANN001
    from polyprof.model.dump import dump

    duck, spark = stores
    if duck.profiles(where="format = 'simpleperf'").num_rows:
        o = {"nodecount": 0, "thread": "t1", "where": "format = 'simpleperf'"}
        assert top_rows(spark.top(**o)) == top_rows(duck.top(**o))
    d1 = spark.diff("format = 'pprof' AND time < TIMESTAMP '2023-11-15'", WHERE[0], normalize="total")
    d2 = duck.diff("format = 'pprof' AND time < TIMESTAMP '2023-11-15'", WHERE[0], normalize="total")
    assert [(f.name, f.base_flat, f.new_flat) for f in d1.functions] == \
           [(f.name, f.base_flat, f.new_flat) for f in d2.functions]
    assert dump(spark.profile("format = 'pprof'")) == dump(duck.profile("format = 'pprof'"))


def test_sql_info_and_ls_are_identical(stores) -> None:  # noqa: ANN001
    duck, spark = stores
    query = ("SELECT st.frames[1] AS leaf, st.depth, sum(s.value) AS v FROM samples s "
             "JOIN stacks st ON st.callsite_id = s.callsite_id WHERE s.sample_type = 'cpu' "
             "GROUP BY ALL ORDER BY v DESC, leaf, st.depth LIMIT 5")
    assert [tuple(map(int, (r["depth"], r["v"]))) + (r["leaf"],) for r in spark.sql(query).to_pylist()] == \
           [tuple(map(int, (r["depth"], r["v"]))) + (r["leaf"],) for r in duck.sql(query).to_pylist()]
    assert spark.info().to_json() == duck.info().to_json()
    cols = ("profile_id", "sample_type", "n_samples", "total")
    assert spark.profiles(WHERE[1], columns=cols).to_pylist() == duck.profiles(WHERE[1], columns=cols).to_pylist()
    assert spark.facets().to_json() == duck.facets().to_json()
