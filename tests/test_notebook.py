"""A notebook session, as plain pytest: read a real profile of each format, get the
top table and the samples as DataFrames, and check them against ``polyprof top
--format json`` and against ``go tool pprof -raw`` on the same profile.

Inputs: a real Go CPU profile (examples/demo.pb.gz), a Perfetto trace from
Perfetto's own tests, the upstream simpleperf report proto and a Chromium UMA
``SampledProfile`` (tests/fixtures). go is needed only for the -raw check
(skipped with the reason when absent).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import polyprof
from helpers import PEER, REPO
from polyprof.model.merge import compact

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
GO = shutil.which("go")


def _uma(tmp_path: Path) -> Path:
    from test_chromium_support import fixture_bytes

    path = tmp_path / "windows.uma"
    path.write_bytes(fixture_bytes("windows.sampled.textproto"))
    return path


INPUTS = {
    "pprof": lambda tmp: REPO / "examples" / "demo.pb.gz",
    "perfetto": lambda tmp: PEER / "google__perfetto/diff_tests_binary/parser__profiling__tests"
                                   "/Profiling__stack_sample.pftrace",
    "simpleperf": lambda tmp: PEER / "jbeich__platform_system_extras/simpleperf/scripts/test/script_testdata"
                                     "/display_bitmaps.proto_data",
    "uma": _uma,
}


@pytest.fixture(params=sorted(INPUTS))
def session(request, tmp_path):
    path = INPUTS[request.param](tmp_path)
    if not path.exists():
        pytest.skip(f"peer data not found: {path} (set POLYPROF_PEER_DATA)")
    return request.param, path, polyprof.read(path)


def test_top_dataframe_equals_the_cli_json(session, cli):
    kind, path, profile = session
    df = polyprof.top(profile, nodecount=0).to_pandas()
    r = cli("top", path, "--format", "json", "--nodecount", "0")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert len(df) == len(data["rows"]) > 0, kind
    for column in ("name", "flat", "cum", "function", "file", "module"):
        assert df[column].tolist() == [row[column] for row in data["rows"]], (kind, column)
    assert df["flat"].sum() == sum(row["flat"] for row in data["rows"])
    assert np.allclose(df["flat_percent"], [100 * row["flat"] / data["total"] for row in data["rows"]])


def test_samples_dataframe_holds_every_sample(session):
    kind, _, profile = session
    df = profile.to_pandas(stacks="both")
    assert len(df) == len(profile.samples)
    types = df.attrs["polyprof"]["value_columns"]
    assert [int(df[c].sum()) for c in types] == profile.totals(), kind
    for column in ("time", "pid", "tid", "cpu"):
        present = getattr(profile.samples, column) is not None
        assert (column in df.columns and column not in types) == present, (kind, column)
        if present:
            assert df[column].tolist() == getattr(profile.samples, column).tolist()
    # each sample's leaf frame is a row of the top table at function granularity, as pprof names it
    top_names = set(polyprof.top(profile, nodecount=0, nodefraction=0).to_pandas()["function"])
    leaves = {frames[-1] for frames in df["frames"] if len(frames)}
    assert leaves and leaves <= top_names | {f for f in leaves if "+0x" in f or f.startswith("0x")}, kind


def _raw_values(text: str) -> list[tuple[int, ...]]:
    """The value tuple of every sample ``go tool pprof -raw`` prints."""
    out, section = [], None
    for line in text.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        head, colon, _ = line.partition(":")
        if section == "Samples:" and colon and all(t.lstrip("-").isdigit() for t in head.split()) and head.strip():
            out.append(tuple(int(t) for t in head.split()))
    return out


@pytest.mark.skipif(GO is None, reason="go tool pprof not installed (apt-get install golang-go)")
def test_samples_dataframe_equals_go_tool_pprof_raw(session, tmp_path):
    kind, _, profile = session
    out = tmp_path / "written.pb.gz"
    polyprof.write(profile, out)
    raw = subprocess.run([GO, "tool", "pprof", "-raw", str(out)], capture_output=True, timeout=120, check=True)
    theirs = sorted(_raw_values(raw.stdout.decode(errors="replace")))
    # pprof sums samples equal in stack, labels and columns (written as labels) before printing
    df = compact(profile).to_pandas()
    ours = sorted(map(tuple, df[df.attrs["polyprof"]["value_columns"]].to_numpy().tolist()))
    assert theirs == ours, kind
