"""Properties of the store: ingest order, --jobs, batching, compaction and re-ingest never change
an answer; a crash at any step of an ingest leaves the previous answers."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import polyprof.store  # noqa: E402
from polyprof.store.maintain import compact  # noqa: E402
from store_support import answers, write_fleet  # noqa: E402

FILES = 5
ingest_module = importlib.import_module("polyprof.store.ingest")  # the module, not the function
SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> tuple[list[str], list]:  # noqa: ANN001
    root = tmp_path_factory.mktemp("fleet")
    files = [str(f) for f in write_fleet(root / "in", FILES, samples=50)]
    polyprof.store.ingest(root / "ref", files)
    with polyprof.store.open(root / "ref") as s:
        return files, answers(s)


def _answers(path: str) -> list:
    with polyprof.store.open(path) as s:
        return answers(s)


@SETTINGS
@given(order=st.permutations(range(FILES)), jobs=st.sampled_from([1, 2]),
       cuts=st.lists(st.integers(1, FILES - 1), max_size=2, unique=True))
def test_order_jobs_batches_compaction_and_reingest_never_change_answers(fleet, order, jobs, cuts) -> None:  # noqa: ANN001
    files, expected = fleet
    ordered = [files[i] for i in order]
    bounds = [0, *sorted(cuts), FILES]
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "s")
        for a, b in zip(bounds, bounds[1:]):  # several ingests, one per batch
            polyprof.store.ingest(store, ordered[a:b], jobs=jobs)
        assert _answers(store) == expected
        again = polyprof.store.ingest(store, ordered[: FILES // 2 + 1], jobs=jobs)
        assert again.ingested == 0 and _answers(store) == expected  # re-ingest adds nothing
        compact(store)
        assert _answers(store) == expected
        compact(store)  # compacting a compact store is a no-op for answers too
        assert _answers(store) == expected


@SETTINGS
@given(crash_at=st.integers(0, 12), jobs=st.sampled_from([1, 2]))
def test_a_crash_at_any_step_of_ingest_keeps_the_previous_answers(fleet, crash_at, jobs, monkeypatch) -> None:  # noqa: ANN001
    files, _ = fleet
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "s")
        polyprof.store.ingest(store, files[:2])
        before = _answers(store)
        calls = {"n": 0}
        real_write, real_replace = ingest_module.write_parquet, os.replace

        def step() -> None:
            calls["n"] += 1
            if calls["n"] > crash_at:
                raise KeyboardInterrupt  # as if the process died here

        def write(table, path) -> None:  # noqa: ANN001
            step()
            real_write(table, path)

        def replace(src, dst) -> None:  # noqa: ANN001
            step()
            real_replace(src, dst)

        with monkeypatch.context() as m:
            m.setattr(ingest_module, "write_parquet", write)
            m.setattr(os, "replace", replace)
            try:
                polyprof.store.ingest(store, files[2:])  # one process: the fault is injected here
                crashed = False
            except KeyboardInterrupt:
                crashed = True
        now = _answers(store)
        if crashed:
            assert now == before
        polyprof.store.ingest(store, files[2:], jobs=jobs)  # the next ingest completes and cleans up
        assert _answers(store) != before
        live = {r for t in polyprof.store.layout.TABLES for r in polyprof.store.layout.Manifest.load(store).files[t]}
        on_disk = {str(p.relative_to(store)) for p in Path(store).rglob("*.parquet")}
        assert on_disk == live
        shutil.rmtree(store)
