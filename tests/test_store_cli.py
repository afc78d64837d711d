"""The polyprof store command line: help, progress, outputs, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

from polyprof.cli.env import Env  # noqa: E402
from polyprof.cli.main import main  # noqa: E402
from store_support import write_fleet  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:  # noqa: ANN001
    root = tmp_path_factory.mktemp("cli")
    write_fleet(root / "in", 4)
    assert main(["store", "ingest", str(root / "s"), str(root / "in"), "--label", "version=1"],
                Env(io.StringIO(), io.StringIO(), False)) == 0
    return root / "s"


def test_help_teaches_with_examples(cli) -> None:  # noqa: ANN001
    r = cli("store", "--help")
    assert r.code == 0 and "polyprof store ingest" in r.out and "--where" in r.out
    for command in ("ingest", "top", "diff", "export", "sql", "compact", "symbolize", "rm"):
        assert command in r.out
    r = cli("store", "top", "--help")
    assert r.code == 0 and "--where" in r.out and "--engine" in r.out and "--from" in r.out


def test_ingest_progress_shows_files_and_samples_per_second(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "in", 3)
    err = io.StringIO()
    code = main(["store", "ingest", str(tmp_path / "s"), *map(str, files)], Env(io.StringIO(), err, True))
    assert code == 0
    text = err.getvalue()
    assert "ingesting [" in text and "files/s" in text and "samples/s" in text and "3/3 files" in text


def test_reports_json_and_output_files(store: Path, cli, tmp_path: Path) -> None:  # noqa: ANN001
    r = cli("store", "top", store, "--format", "json", "--nodecount", "3")
    data = json.loads(r.out)
    assert r.code == 0 and len(data["rows"]) == 3
    r = cli("store", "tree", store, "-o", tmp_path / "tree.txt", "--where", "version = '1'")
    assert r.code == 0 and (tmp_path / "tree.txt").read_text().strip()
    r = cli("store", "traces", store, "--sample-index", "samples")
    assert r.code == 0 and "-----------+" in r.out
    r = cli("store", "peek", store, "^nomatch$")
    assert r.code == 6 and "no function matches" in r.err
    r = cli("store", "flame", store, "-o", tmp_path / "f.html", "--base-where", "time < TIMESTAMP '2023-11-15'")
    assert r.code == 0 and "<html" in (tmp_path / "f.html").read_text().lower()
    r = cli("store", "export", store, "-o", tmp_path / "m.json", "--output-format", "speedscope")
    assert r.code == 0 and json.loads((tmp_path / "m.json").read_text())


def test_diff_fail_on_growth_exit_code(store: Path, cli) -> None:  # noqa: ANN001
    args = ["store", "diff", store, "--base-where", "time < TIMESTAMP '2023-11-15'",
            "--where", "time >= TIMESTAMP '2023-11-15'", "--normalize", "total"]
    r = cli(*args, "--fail-on-growth", "0.001")
    assert r.code == 8 and "grew by more than" in r.err
    r = cli(*args, "--fail-on-growth", "100")
    assert r.code == 0


def test_errors_are_one_line(cli, tmp_path: Path) -> None:  # noqa: ANN001
    r = cli("store", "top", tmp_path / "missing")
    assert r.code == 10 and "no such store" in r.err and "Traceback" not in r.err
    r = cli("store", "top", tmp_path, "--where", "x = 1")
    assert r.code == 10 and "not a polyprof store" in r.err
