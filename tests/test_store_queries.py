"""Store queries equal the single-file analyses; export equals merge for go tool pprof; SQL is checked."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

import polyprof  # noqa: E402
import polyprof.store  # noqa: E402
from helpers import PEER  # noqa: E402
from polyprof.analysis.diff import diff  # noqa: E402
from polyprof.analysis.flame import flame_tree  # noqa: E402
from polyprof.analysis.options import Options  # noqa: E402
from polyprof.analysis.top import top  # noqa: E402
from polyprof.analysis.traces import traces  # noqa: E402
from polyprof.analysis.tree import peek, tree  # noqa: E402
from polyprof.errors import OptionsError  # noqa: E402
from polyprof.model.validate import check  # noqa: E402
from store_support import answers, synthetic, top_rows, traces_answer, write_fleet  # noqa: E402

REAL = {
    "pprof-go-cpu": "google__pprof/internal/report/testdata/sample.cpu",
    "pprof-go-heap": "generated/go_runtime_pprof/heap.pb.gz",
    "perfetto-two-processes": "google__perfetto/diff_tests_binary/parser__profiling__tests/Profiling__stack_sample.pftrace",
    "perfetto-inline": "google__perfetto/diff_tests_binary/parser__profiling__tests/Profiling__stack_sample_inline_callstack.pftrace",
    "simpleperf-threads": "generated/simpleperf_from_aosp_testdata/perf_with_multiple_pids_and_tids.trace",
    "simpleperf-android-app": "firefox-devtools__profiler/src/test/fixtures/upgrades/simpleperf-cpu-clock.trace.gz",
}


def _real(name: str) -> Path:
    path = PEER / REAL[name]
    if not path.exists():
        pytest.skip(f"peer data not found: {path}")
    return path


def _uma(tmp_path: Path, fixture: str) -> Path:
    from test_chromium_support import fixture_bytes

    path = tmp_path / f"{fixture}.uma"
    path.write_bytes(fixture_bytes(fixture))
    return path


def _one(tmp_path: Path, path: Path) -> polyprof.store.Store:
    polyprof.store.ingest(tmp_path / "s", [str(path)])
    return polyprof.store.open(tmp_path / "s")


@pytest.mark.parametrize("name", sorted(REAL))
def test_store_top_of_one_file_equals_polyprof_top(tmp_path: Path, name: str) -> None:
    path = _real(name)
    profile = polyprof.read(path)
    with _one(tmp_path, path) as store:
        check(store.load(options=Options(nodecount=0)).profile)  # the rebuilt profile is a valid model
        for index in (None, *(vt.type for vt in profile.sample_types)):
            o = Options(nodecount=0, sample_index=index)
            ours, theirs = store.top(o), top(profile, o)
            assert ours.sample_type == theirs.sample_type
            assert top_rows(ours) == top_rows(theirs), (name, index)


@pytest.mark.parametrize("fixture", ["uma_log.textproto", "windows.sampled.textproto"])
def test_store_top_of_a_uma_log_equals_polyprof_top(tmp_path: Path, fixture: str) -> None:
    path = _uma(tmp_path, fixture)
    # A log mixes CPU and heap profiles: polyprof reads them with --merge (union of sample
    # types); the store selects one sample type at a time. Each must agree.
    merged = polyprof.read(path, options=polyprof.ReadOptions(merge=True))
    with _one(tmp_path, path) as store:
        for vt in merged.sample_types:
            o = Options(nodecount=0, sample_index=vt.type)
            assert top_rows(store.top(o)) == top_rows(top(merged, o)), vt


def test_other_reports_of_one_file_equal_the_single_file_ones(tmp_path: Path) -> None:
    path = _real("pprof-go-cpu")
    profile = polyprof.read(path)
    o = Options(nodecount=0)
    with _one(tmp_path, path) as store:
        t1, t2 = store.tree(o), tree(profile, o)
        assert [(n.name, n.flat, n.cum, [(e.name, e.weight) for e in n.callers]) for n in t1.nodes] == \
               [(n.name, n.flat, n.cum, [(e.name, e.weight) for e in n.callers]) for n in t2.nodes]
        p1, p2 = store.peek("main"), peek(profile, "main")
        assert [(n.name, n.cum, n.selected) for n in p1.nodes] == [(n.name, n.cum, n.selected) for n in p2.nodes]
        assert traces_answer(store.traces()) == traces_answer(traces(profile))
        assert store.flame().lines() == flame_tree(profile).lines()
        filtered = Options(nodecount=0, focus="runtime", hide="memeq", sample_index="samples")
        assert top_rows(store.top(filtered)) == top_rows(top(profile, filtered))


def test_label_and_thread_filters_match_the_single_file_semantics(tmp_path: Path) -> None:
    from store_support import synthetic

    p = synthetic(5, 200, threads=True)
    path = tmp_path / "t.pb.gz"
    polyprof.write(p, path)
    profile = polyprof.read(path)
    with _one(tmp_path, path) as store:
        for o in (Options(nodecount=0, tagfocus="tenant=2"), Options(nodecount=0, tagignore="tenant=1"),
                  Options(nodecount=0, tid=frozenset({11})), Options(nodecount=0, pid=frozenset({7}))):
            ours, theirs = store.top(o), top(profile, o)
            assert top_rows(ours) == top_rows(theirs) and ours.active_filters == theirs.active_filters, o


def test_thread_filter_is_pushed_down_with_whole_selection_percentages(tmp_path: Path) -> None:
    path = PEER / REAL["simpleperf-threads"]
    if not path.exists():
        pytest.skip("peer data not found")
    profile = polyprof.read(path)
    with _one(tmp_path, path) as store:
        o = Options(nodecount=0, thread="t1")
        ours, theirs = store.top(o), top(profile, o)
        assert top_rows(ours) == top_rows(theirs) and ours.active_filters == theirs.active_filters
        with pytest.raises(OptionsError, match="bad regular expression"):
            store.top(thread="(")


def test_diff_of_two_selections_equals_diff_of_the_files(tmp_path: Path) -> None:
    a, b = write_fleet(tmp_path / "in", 2)
    polyprof.store.ingest(tmp_path / "s", [str(a), str(b)], labels={"run": "x"})
    pa_, pb_ = polyprof.read(a), polyprof.read(b)
    with polyprof.store.open(tmp_path / "s") as store:
        ids = {Path(r["source"]).name: r["file_hash"] for r in store.profiles().to_pylist()}
        for norm in ("none", "total", "rate"):
            ours = store.diff(f"file_hash = '{ids[a.name]}'", f"file_hash = '{ids[b.name]}'", normalize=norm)
            theirs = diff(pa_, pb_, Options(), normalize=norm)
            assert [(r.name, r.base_flat, r.new_flat, r.base_cum, r.new_cum) for r in ours.functions] == \
                   [(r.name, r.base_flat, r.new_flat, r.base_cum, r.new_cum) for r in theirs.functions]
            assert ours.factors == pytest.approx(theirs.factors)


def test_negative_values_keep_their_own_sums_and_nonnegative_stores_sum_once(tmp_path: Path) -> None:
    plain = synthetic(1)
    signed = synthetic(2)
    signed.samples.values[::3] *= -1  # a diff base written as one profile: some values negative
    polyprof.write(plain, tmp_path / "plain.pb.gz")
    polyprof.write(signed, tmp_path / "signed.pb.gz")
    for name, profile in (("plain", plain), ("signed", signed)):
        polyprof.store.ingest(tmp_path / name, [str(tmp_path / f"{name}.pb.gz")])
        with polyprof.store.open(tmp_path / name) as store:
            engine, scans = store.engine, []
            real = engine.query
            engine.query = lambda sql: (scans.append(sql) if " FROM rollup " in sql else None) or real(sql)  # type: ignore[method-assign]
            ours = store.top(nodecount=0)
            assert ("CAST(NULL AS BIGINT) AS neg" not in scans[0]) == (name == "signed")
            values = store.load().profile.samples.values
        theirs = polyprof.read(tmp_path / f"{name}.pb.gz")
        # cpu (the default type): positive and negative parts of a stack are summed apart
        assert sorted(values[:, 0].tolist()) == sorted(_sums_by_stack_and_sign(theirs, 1))
        if name == "plain":
            assert top_rows(ours) == top_rows(top(theirs, Options(nodecount=0)))


def _sums_by_stack_and_sign(p: polyprof.Profile, k: int) -> list[int]:
    sums: dict[tuple, int] = {}
    for stack, v in zip(p.samples.stack.tolist(), p.samples.values[:, k].tolist()):
        if v:
            sums[(stack, v > 0)] = sums.get((stack, v > 0), 0) + v
    return list(sums.values())


def test_diff_reduces_both_sides_in_one_scan_even_when_they_overlap(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "in", 3)
    polyprof.store.ingest(tmp_path / "s", [str(f) for f in files])
    with polyprof.store.open(tmp_path / "s") as store:
        h = [r["file_hash"] for r in sorted(store.profiles().to_pylist(), key=lambda r: r["source"])]
        base, new = f"file_hash IN ('{h[0]}', '{h[1]}')", f"file_hash IN ('{h[1]}', '{h[2]}')"
        engine, scans = store.engine, []
        real = engine.query
        engine.query = lambda sql: (scans.append(sql) if " FROM rollup " in sql else None) or real(sql)  # type: ignore[method-assign]
        ours = store.diff(base, new, normalize="total")
        assert len(scans) == 1 and "p.side" in scans[0]
    with polyprof.store.open(tmp_path / "s") as one, polyprof.store.open(tmp_path / "s") as two:
        theirs = diff(one.load(base), two.load(new), Options(), normalize="total")
    assert [(r.name, r.base_flat, r.new_flat, r.base_cum, r.new_cum) for r in ours.functions] == \
           [(r.name, r.base_flat, r.new_flat, r.base_cum, r.new_cum) for r in theirs.functions]
    assert ours.factors == pytest.approx(theirs.factors)


def test_selection_time_window_and_sample_types(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "in", 4)
    polyprof.store.ingest(tmp_path / "s", [str(f) for f in files])
    with polyprof.store.open(tmp_path / "s") as store:
        day1 = store.top(nodecount=0, time_from="2023-11-14", time_to="2023-11-15")
        even = [polyprof.read(f) for f in files[0::2]]  # the fleet alternates days
        from polyprof.model.merge import merge

        assert top_rows(day1) == top_rows(top(merge(even), Options(nodecount=0)))
        assert store.top(sample_index="samples").sample_type.unit == "count"
        with pytest.raises(OptionsError, match="no profile in the store matches"):
            store.top(where="app = 'nothing'")
        with pytest.raises(OptionsError, match="unknown sample type"):
            store.top(sample_index="bogus")
        with pytest.raises(OptionsError, match="--from/--to"):
            store.top(time_range=(0, 10))


HOSTILE_WHERE = [
    "1=1; DROP TABLE profiles",
    "profile_id IN (SELECT profile_id FROM read_csv('/etc/passwd'))",
    "read_csv('/etc/passwd') IS NOT NULL",
    "EXISTS (SELECT 1)",
    "app = (SELECT content FROM read_text('/etc/passwd'))",
    "getenv('HOME') = ''",
    "app = 'x' UNION SELECT 1",
]
HOSTILE_SQL = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "COPY profiles TO '/tmp/x.csv'",
    "ATTACH '/tmp/x.db'",
    "SELECT 1; DROP VIEW samples",
    "INSTALL httpfs",
    "SELECT getenv('HOME')",
    "SELECT * FROM main.profiles",
]


def test_hostile_where_and_sql_are_refused(tmp_path: Path, cli) -> None:  # noqa: ANN001
    files = write_fleet(tmp_path / "in", 1)
    polyprof.store.ingest(tmp_path / "s", [str(files[0])])
    with polyprof.store.open(tmp_path / "s") as store:
        for bad in HOSTILE_WHERE:
            with pytest.raises(OptionsError, match="--where"):
                store.top(where=bad)
        for bad in HOSTILE_SQL:
            with pytest.raises(OptionsError, match="store sql"):
                store.sql(bad)
        # Even past the checks, DuckDB itself cannot read outside the store.
        with pytest.raises(OptionsError, match="query failed"):
            store.engine.query("SELECT * FROM read_csv('/etc/passwd')")
    r = cli("store", "top", tmp_path / "s", "--where", HOSTILE_WHERE[0])
    assert r.code == 6 and "';' is not allowed" in r.err and "Traceback" not in r.err
    r = cli("store", "sql", tmp_path / "s", HOSTILE_SQL[0])
    assert r.code == 6 and "store sql" in r.err and "Traceback" not in r.err


def test_sql_views_info_and_ls(tmp_path: Path, cli) -> None:  # noqa: ANN001
    files = write_fleet(tmp_path / "in", 3)
    r = cli("store", "ingest", tmp_path / "s", *files, "--label", "env=prod")
    assert r.code == 0, r.err
    r = cli("store", "sql", tmp_path / "s", "SELECT sample_type, count(*) AS n FROM profiles GROUP BY ALL "
                                            "ORDER BY 1", "--format", "csv")
    assert r.out.splitlines() == ["sample_type,n", "cpu,3", "samples,3"]
    r = cli("store", "sql", tmp_path / "s", "SELECT st.frames[1] AS leaf, sum(s.value) AS v FROM samples s "
            "JOIN stacks st ON st.callsite_id = s.callsite_id WHERE s.sample_type = 'cpu' "
            "GROUP BY ALL ORDER BY v DESC, leaf LIMIT 1", "--format", "json")
    with polyprof.store.open(tmp_path / "s") as store:
        best = store.top(nodecount=1).rows[0]
    import json

    assert json.loads(r.out) == [{"leaf": best.name, "v": best.flat}]
    r = cli("store", "info", tmp_path / "s", "--format", "json")
    info = json.loads(r.out)
    assert info["profiles"] == 3 and info["sources"] == 3 and info["labels"]["env"] == {"prod": 3}
    r = cli("store", "ls", tmp_path / "s", "--where", "time >= TIMESTAMP '2023-11-15'")
    assert "(2 rows)" in r.out
    with polyprof.store.open(tmp_path / "s") as store:
        f = store.facets()
        assert f.columns["format"] == {"pprof": 3} and f.labels["env"] == {"prod": 3} and f.time_first


def test_rm_and_compact_keep_answers(tmp_path: Path, cli) -> None:  # noqa: ANN001
    files = [str(f) for f in write_fleet(tmp_path / "in", 6)]
    for f in files:  # one ingest per file: many small files to compact
        polyprof.store.ingest(tmp_path / "s", [f])
    polyprof.store.ingest(tmp_path / "ref", files[:3])
    with polyprof.store.open(tmp_path / "ref") as ref:
        expected = answers(ref)
    with polyprof.store.open(tmp_path / "s") as store:
        hashes = sorted({r["file_hash"] for r in store.profiles().to_pylist() if Path(r["source"]).name >= "p003"})
    where = "file_hash IN (" + ", ".join(f"'{h}'" for h in hashes) + ")"
    r = cli("store", "rm", tmp_path / "s", "--where", where)
    assert r.code == 0 and "removed 6 profile row(s)" in r.out
    with polyprof.store.open(tmp_path / "s") as store:
        assert answers(store) == expected
    r = cli("store", "compact", tmp_path / "s", "--format", "json")
    assert r.code == 0, r.err
    import json

    report = json.loads(r.out)
    assert report["files_after"] < report["files_before"] and report["dropped_rows"]["callsites"] >= 0
    with polyprof.store.open(tmp_path / "s") as store:
        assert answers(store) == expected


def _whole_stack_answers(store) -> list:  # noqa: ANN001
    """Answers the rollup serves (no label, pid or thread key), signed sums included."""
    flat = store.load().profile.samples.values[:, 0].tolist()
    d = store.diff("time < TIMESTAMP '2023-11-15'", "time >= TIMESTAMP '2023-11-15'", normalize="total")
    return [top_rows(store.top(nodecount=0)), sorted(flat), top_rows(store.top(nodecount=0, sample_index="samples")),
            top_rows(store.top(nodecount=0, time_from="2023-11-15")),
            [(r.name, r.base_flat, r.new_flat, r.base_cum, r.new_cum) for r in d.functions]]


def test_the_rollup_gives_the_answers_of_the_samples_after_compact_ingest_and_rm(tmp_path: Path) -> None:
    from polyprof.store import layout
    from polyprof.store.maintain import compact

    files = [str(f) for f in write_fleet(tmp_path / "in", 6)]
    signed = synthetic(99, time_s=1_700_000_000)
    signed.samples.values[::3] *= -1  # negative values keep their own sums through the rollup
    polyprof.write(signed, tmp_path / "in" / "signed.pb.gz")
    files.append(str(tmp_path / "in" / "signed.pb.gz"))
    polyprof.store.ingest(tmp_path / "ref", files)
    with polyprof.store.open(tmp_path / "ref") as ref:
        expected = _whole_stack_answers(ref)
    for f in files[:4]:
        polyprof.store.ingest(tmp_path / "s", [f])
    compact(str(tmp_path / "s"))
    m = layout.Manifest.load(str(tmp_path / "s"))
    assert sorted(m.files["rollup"]) == sorted(layout.rollup_of(r) for r in m.files["samples"])
    polyprof.store.ingest(tmp_path / "s", files[4:])  # new samples files, read raw beside the rollup
    with polyprof.store.open(tmp_path / "s") as store:
        rollups, raw = store.manifest.rollup_coverage()
        assert rollups and raw
        sql: list[str] = []
        real = store.engine.query
        store.engine.query = lambda q: sql.append(q) or real(q)  # type: ignore[method-assign]
        assert _whole_stack_answers(store) == expected
        assert any(" FROM rollup " in q for q in sql)
        rows = store.sql("SELECT (SELECT count(*) FROM rollup), (SELECT count(*) FROM samples)").to_pylist()[0]
        assert 0 < list(rows.values())[0] < list(rows.values())[1]  # summed: fewer rows than samples
        gone = sorted({r["file_hash"] for r in store.profiles().to_pylist() if r["source"] in (files[0], files[5])})
        where = "file_hash IN (" + ", ".join(f"'{h}'" for h in gone) + ")"
        assert store.rm(where) == 4  # 2 files x 2 sample types
    kept = [f for f in files if f not in (files[0], files[5])]
    polyprof.store.ingest(tmp_path / "ref2", kept)
    with polyprof.store.open(tmp_path / "ref2") as ref, polyprof.store.open(tmp_path / "s") as store:
        m = store.manifest
        assert set(m.files["rollup"]) <= {layout.rollup_of(r) for r in m.files["samples"]}  # stale ones dropped
        assert _whole_stack_answers(store) == _whole_stack_answers(ref)


def test_listing_the_selected_profile_ids_in_the_reduction_changes_no_answer(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from polyprof.store import cohort

    polyprof.store.ingest(tmp_path / "s", [str(f) for f in write_fleet(tmp_path / "in", 4)])
    got = []
    for limit in (cohort.IN_LIST_PROFILES, 0):
        monkeypatch.setattr(cohort, "IN_LIST_PROFILES", limit)
        with polyprof.store.open(tmp_path / "s") as store:
            sql: list[str] = []
            real = store.engine.query
            store.engine.query = lambda q: sql.append(q) or real(q)  # type: ignore[method-assign]
            got.append(answers(store) + _whole_stack_answers(store))
            assert any("s.profile_id IN (" in q for q in sql) == bool(limit)
    assert got[0] == got[1]


def test_symbolize_fills_names_without_renumbering(tmp_path: Path) -> None:
    from test_chromium_support import SYMBOLS

    path = _uma(tmp_path, "windows.sampled.textproto")
    expected = top(polyprof.read(path, options=polyprof.ReadOptions(symbols=str(SYMBOLS))), Options(nodecount=0))
    with _one(tmp_path, path) as store:
        callsites = store.sql("SELECT id FROM callsites ORDER BY id").column(0).to_pylist()
        before = top_rows(store.top(nodecount=0))
        result = store.symbolize(str(SYMBOLS))
        assert result["symbolized"] > 0
        after = store.top(nodecount=0)
        assert top_rows(after) != before and top_rows(after) == top_rows(expected)
        assert store.sql("SELECT id FROM callsites ORDER BY id").column(0).to_pylist() == callsites


def _go(args: list[str], path: Path, home: Path) -> str:
    env = {**os.environ, "TZ": "UTC", "HOME": str(home), "PPROF_TMPDIR": str(home), "PPROF_BINARY_PATH": str(home)}
    done = subprocess.run(["go", "tool", "pprof", "-symbolize=none", *args, str(path)], capture_output=True,
                          env=env, timeout=300, check=True)
    return done.stdout.decode("utf-8", "replace")


def _body(text: str) -> list[str]:
    """go tool pprof output without the header lines that name the file, time and duration."""
    skip = ("File:", "Build ID:", "Type:", "Time:", "Duration:")
    return [line for line in text.splitlines() if not line.startswith(skip)]


def _trace_blocks(text: str) -> list[str]:
    blocks = "\n".join(_body(text)).split("-----------+-------------------------------------------------------")
    return sorted(b.strip() for b in blocks[1:])


def test_export_of_n_files_equals_polyprof_merge_for_go_tool_pprof(tmp_path: Path, cli) -> None:  # noqa: ANN001
    if shutil.which("go") is None:
        pytest.skip("go tool pprof not available (install Debian golang-go)")
    files = write_fleet(tmp_path / "in", 3, samples=80)
    real = PEER / "generated" / "go_runtime_pprof" / "cpu.pb.gz"
    if real.exists():
        files.append(real)
    assert cli("merge", *files, "-o", tmp_path / "merged.pb.gz").code == 0
    assert cli("store", "ingest", tmp_path / "s", *files).code == 0
    r = cli("store", "export", tmp_path / "s", "-o", tmp_path / "export.pb.gz")
    assert r.code == 0, r.err
    home = tmp_path / "home"
    home.mkdir()
    for index in ("samples", "cpu"):
        flags = ["-nodefraction=0", "-edgefraction=0", f"-sample_index={index}"]
        merged, exported = (_go(["-top", *flags], tmp_path / f, home) for f in ("merged.pb.gz", "export.pb.gz"))
        assert _body(exported) == _body(merged)
        merged, exported = (_go(["-traces", f"-sample_index={index}"], tmp_path / f, home)
                            for f in ("merged.pb.gz", "export.pb.gz"))
        assert _trace_blocks(exported) == _trace_blocks(merged)
