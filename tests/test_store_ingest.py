"""store ingest: layout, ids, idempotence, per-file failures, metadata per format, atomicity."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

import polyprof  # noqa: E402
import polyprof.store  # noqa: E402
from helpers import PEER  # noqa: E402
from polyprof.errors import StoreError  # noqa: E402
from polyprof.store import layout  # noqa: E402
from store_support import answers, write_fleet  # noqa: E402

PPROF = PEER / "google__pprof" / "internal" / "report" / "testdata" / "sample.cpu"
PERFETTO = PEER / "google__perfetto" / "diff_tests_binary" / "parser__profiling__tests" / "Profiling__stack_sample.pftrace"
SIMPLEPERF = PEER / "generated" / "simpleperf_from_aosp_testdata" / "perf_with_multiple_pids_and_tids.trace"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"peer data not found: {path}")
    return path


def _profiles(store: Path) -> list[dict]:
    with polyprof.store.open(store) as s:
        return s.profiles().to_pylist()


def test_layout_manifest_and_schema_version(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "in", 3)
    report = polyprof.store.ingest(tmp_path / "s", [str(f) for f in files])
    assert report.ingested == 3 and report.profiles == 3 and report.published
    manifest = json.loads((tmp_path / "s" / layout.MANIFEST).read_text())
    assert manifest["format"] == "polyprof-store" and manifest["schema_version"] == layout.SCHEMA_VERSION
    assert manifest["files"]["rollup"] == []  # written by compact
    for table in layout.TABLES:
        assert manifest["files"][table] or table == "rollup", table
        for rel in manifest["files"][table]:
            assert (tmp_path / "s" / rel).is_file()
    days = {rel.split("/")[1] for rel in manifest["files"]["samples"]}
    assert days == {"day=2023-11-14", "day=2023-11-15"}  # Hive partitions by the profile's day
    rows = _profiles(tmp_path / "s")
    assert len(rows) == 6  # one row per profile x sample type
    assert all(0 < r["profile_id"] < 2**63 for r in rows)


def test_newer_or_foreign_store_is_refused(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "in", 1)
    polyprof.store.ingest(tmp_path / "s", [str(files[0])])
    path = tmp_path / "s" / layout.MANIFEST
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": layout.SCHEMA_VERSION + 1}))
    with pytest.raises(StoreError, match="newer than this polyprof"):
        polyprof.store.open(tmp_path / "s")
    path.write_text(json.dumps({**data, "schema_version": 0}))
    with pytest.raises(StoreError, match="too old"):
        polyprof.store.open(tmp_path / "s")
    with pytest.raises(StoreError, match="not a polyprof store"):
        polyprof.store.open(tmp_path / "in")
    with pytest.raises(StoreError, match="not empty and is not a polyprof store"):
        polyprof.store.ingest(tmp_path / "in", [str(files[0])])


def test_reingest_adds_nothing_and_ids_are_content_hashes(tmp_path: Path) -> None:
    files = [str(f) for f in write_fleet(tmp_path / "in", 2)]
    polyprof.store.ingest(tmp_path / "a", files)
    manifest = (tmp_path / "a" / layout.MANIFEST).read_text()
    copy = tmp_path / "copy.pb.gz"  # the same content under another name is the same profile
    copy.write_bytes(Path(files[0]).read_bytes())
    again = polyprof.store.ingest(tmp_path / "a", files + [files[0], str(copy)])
    assert again.ingested == 0 and len(again.skipped) == 3 and not again.published
    assert (tmp_path / "a" / layout.MANIFEST).read_text() == manifest
    polyprof.store.ingest(tmp_path / "b", list(reversed(files)), jobs=2)
    ids = [sorted(r["profile_id"] for r in _profiles(tmp_path / d)) for d in ("a", "b")]
    assert ids[0] == ids[1]  # any worker, any order: the same ids
    with polyprof.store.open(tmp_path / "a") as a, polyprof.store.open(tmp_path / "b") as b:
        for table in ("callsites", "frames", "functions", "mappings", "labelsets"):
            q = f"SELECT id FROM {table} ORDER BY id"
            assert a.sql(q).column(0).to_pylist() == b.sql(q).column(0).to_pylist(), table


def test_failures_are_reported_per_file_with_summary_and_exit_code(tmp_path: Path, cli) -> None:  # noqa: ANN001
    good = write_fleet(tmp_path / "in", 2)
    (tmp_path / "in" / "notes.txt").write_text("not a profile\n")
    (tmp_path / "in" / "broken.pb.gz").write_bytes(good[0].read_bytes()[:60])
    r = cli("store", "ingest", tmp_path / "s", tmp_path / "in")
    assert r.code == 3  # both files are of no format polyprof reads: the exit code of that failure
    failed = [line for line in r.err.splitlines() if line.startswith("polyprof: skipped")]
    assert len(failed) == 2 and any("notes.txt" in line for line in failed)
    assert any("broken.pb.gz" in line for line in failed)
    assert "ingested 2 file(s)" in r.err and "2 failed" in r.err and "Traceback" not in r.err
    assert len(_profiles(tmp_path / "s")) == 4
    r = cli("store", "ingest", tmp_path / "t", tmp_path / "in", "--strict")
    assert r.code == 3 and "nothing was published" in r.err  # the code of the failure that stopped it
    with polyprof.store.open(tmp_path / "t") as s:
        assert s.profiles().num_rows == 0  # --strict stopped before publishing anything


def test_globs_directories_and_missing_paths(tmp_path: Path, cli) -> None:  # noqa: ANN001
    write_fleet(tmp_path / "in" / "a", 2)
    write_fleet(tmp_path / "in" / "b", 1, start_seed=10)
    r = cli("store", "ingest", tmp_path / "s", str(tmp_path / "in" / "a" / "*.pb.gz"), tmp_path / "in" / "b",
            "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["ingested"] == 3
    r = cli("store", "ingest", tmp_path / "s", tmp_path / "nowhere")
    assert r.code == 2 and "nowhere: no such file" in r.err


def test_multi_profile_inputs_are_split_with_format_metadata(tmp_path: Path) -> None:
    src = [str(_need(p)) for p in (PPROF, PERFETTO, SIMPLEPERF)]
    polyprof.store.ingest(tmp_path / "s", src, labels={"env": "ci", "version": "7"})
    rows = _profiles(tmp_path / "s")
    perfetto = [r for r in rows if r["format"] == "perfetto"]
    assert len({r["source_index"] for r in perfetto}) == len(polyprof.read_all(src[1]))
    proc = [r for r in perfetto if r["process"] == "myproc"]
    assert proc and dict(proc[0]["labels"])["pid"] == "100"
    pprof = next(r for r in rows if r["format"] == "pprof")
    assert pprof["app"] == "sample.bin" and pprof["time"] is not None
    simpleperf = next(r for r in rows if r["format"] == "simpleperf")
    assert dict(simpleperf["labels"])["event_types"] == "cpu-cycles" and simpleperf["platform"] == "android"
    assert all(dict(r["labels"])["env"] == "ci" and r["version"] == "7" for r in rows)


def test_uma_metadata(tmp_path: Path) -> None:
    from test_chromium_support import fixture_bytes

    path = tmp_path / "log.uma"
    path.write_bytes(fixture_bytes("uma_log.textproto"))
    polyprof.store.ingest(tmp_path / "s", [str(path)])
    rows = _profiles(tmp_path / "s")
    assert len({r["source_index"] for r in rows}) == len(polyprof.read_all(path))
    first = next(r for r in rows if r["process"] == "BROWSER_PROCESS")
    labels = dict(first["labels"])
    assert first["version"] == "120.0.6099.71-64" and labels["milestone"] == "120"
    assert labels["channel"] == "CHANNEL_STABLE" and first["platform"] == "Linux"
    assert {dict(r["labels"])["thread"] for r in rows} >= {"MAIN_THREAD", "COMPOSITOR_THREAD"}


def test_crash_before_the_manifest_rename_leaves_the_store_as_before(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    files = [str(f) for f in write_fleet(tmp_path / "in", 4)]
    polyprof.store.ingest(tmp_path / "s", files[:2])
    with polyprof.store.open(tmp_path / "s") as s:
        before = answers(s)

    def crash(self) -> None:  # the worst moment: new files moved in, manifest not yet replaced
        raise KeyboardInterrupt

    monkeypatch.setattr(layout.Manifest, "publish", crash)
    with pytest.raises(KeyboardInterrupt):
        polyprof.store.ingest(tmp_path / "s", files[2:])
    monkeypatch.undo()
    with polyprof.store.open(tmp_path / "s") as s:
        assert answers(s) == before
    polyprof.store.ingest(tmp_path / "s", files[2:])  # the next writer removes the leftovers
    live = {r for t in layout.TABLES for r in layout.Manifest.load(str(tmp_path / "s")).files[t]}
    on_disk = {str(p.relative_to(tmp_path / "s")) for p in (tmp_path / "s").rglob("*.parquet")}
    assert on_disk == live and not any((tmp_path / "s" / ".staging").iterdir())


@pytest.mark.slow
def test_killing_ingest_at_any_moment_keeps_a_readable_store(tmp_path: Path) -> None:
    files = [str(f) for f in write_fleet(tmp_path / "in", 12, samples=300)]
    polyprof.store.ingest(tmp_path / "s", files[:2])
    with polyprof.store.open(tmp_path / "s") as s:
        before = answers(s)
    start = time.monotonic()
    polyprof.store.ingest(tmp_path / "full", files, jobs=2)
    took = time.monotonic() - start
    with polyprof.store.open(tmp_path / "full") as s:
        after = answers(s)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    staging = tmp_path / "s" / ".staging"
    mid_ingest = 0
    for fraction in (0.0, 0.3, 0.6, 0.9, 1.5):
        proc = subprocess.Popen([sys.executable, "-m", "polyprof", "store", "ingest", str(tmp_path / "s"),
                                 *files, "--jobs", "2"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not (staging.is_dir() and any(staging.iterdir())) and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(fraction * took)
        running = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with polyprof.store.open(tmp_path / "s") as s:
            now = answers(s)
        assert now in (before, after)  # never a state in between, always readable
        mid_ingest += running and now == before
        if now == after:
            break
    assert mid_ingest >= 1  # at least one kill landed while the ingest was staging


def test_exit_code_is_the_failures_code_or_2_when_they_differ() -> None:
    from polyprof.store.ingest import IngestReport

    r = IngestReport()
    assert r.exit_code == 0
    r.fail("a.pb.gz", "a.pb.gz: truncated", 4)
    r.fail("b.pb.gz", "b.pb.gz: truncated", 4)
    assert r.exit_code == 4
    r.fail("c.txt", "c.txt: not a profile format", 3)
    assert r.exit_code == 2 and len(r.failed) == 3
