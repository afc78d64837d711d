"""diff: self-diff is zero, the three normalisations, unit conversion, the CI gate and the CLI."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.analysis.diff import diff
from polyprof.analysis.options import Options
from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.render.diff import diff_json, diff_text

from test_filters_properties import profiles

MS = 1_000_000


def _cpu(stacks: dict[str, int], *, unit: str = "nanoseconds", period: int = 0, period_unit: str = "nanoseconds",
         duration: int = 0, column: str = "cpu") -> polyprof.Profile:
    """Samples 'main;f;g' -> value (one sample each), as samples/count and cpu/unit."""
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), (column, unit)])
    b.meta.duration_nanos = duration
    if period:
        b.meta.period_type, b.meta.period = polyprof.ValueType("cpu", period_unit), period
    for path, value in stacks.items():
        frames = [b.frame(n) for n in reversed(path.split(";"))]
        b.add_sample(b.stack(frames), [value // max(period, 1) if period else 1, value])
    return b.finish()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles(), st.sampled_from(["none", "total", "rate"]), st.sampled_from([None, "alpha", "^main$"]))
def test_a_profile_differs_from_itself_by_nothing(p, normalize, focus):
    p = dataclasses.replace(p, duration_nanos=10**9)
    r = diff(p, p, Options(focus=focus), normalize=normalize)
    assert all(r.delta(f.base_flat, f.new_flat) == 0 and r.delta(f.base_cum, f.new_cum) == 0 for f in r.functions)
    assert all(s.base == s.new and r.delta(s.base, s.new) == 0 for s in r.stacks)
    assert r.growth(0.0) == []
    assert all(row["delta"] == 0 for row in diff_json(r, by="stack")["stacks"])


def test_absolute_and_share_deltas():
    base = _cpu({"main;f": 60 * MS, "main;g": 40 * MS})
    new = _cpu({"main;f": 150 * MS, "main;g": 50 * MS, "main;h": 100 * MS})
    r = diff(base, new)
    rows = {f.name: f for f in r.functions}
    assert [f.name for f in r.functions] == ["h", "f", "g", "main"]  # biggest flat change first
    assert (rows["f"].base_flat, rows["f"].new_flat, rows["main"].new_cum) == (60 * MS, 150 * MS, 300 * MS)
    assert r.share_delta(rows["f"].base_flat, rows["f"].new_flat) == pytest.approx(-10.0)  # 60% -> 50%
    assert r.share_delta(rows["h"].base_flat, rows["h"].new_flat) == pytest.approx(100 / 3)
    assert [f.name for f in r.growth(5.0)] == ["h"]
    assert [f.name for f in r.growth(5.0, "cum")] == ["h"]
    t = diff(base, new, normalize="total")
    assert t.delta(rows["g"].base_flat, rows["g"].new_flat) == pytest.approx(50 / 300 - 0.4)
    assert {s.frames: (s.base, s.new) for s in r.stacks}[("main", "h")] == (0, 100 * MS)


def test_rate_weights_counted_samples_by_their_period():
    # base: 100 Hz for 1 s; new: 250 Hz for 2 s; both spend half their time in f
    base = _cpu({"main;f": 50, "main;g": 50}, unit="count", period=10 * MS, duration=10**9, column="ticks")
    new = _cpu({"main;f": 250, "main;g": 250}, unit="count", period=4 * MS, duration=2 * 10**9, column="ticks")
    r = diff(base, new, normalize="rate", stacks=False)
    f = next(x for x in r.functions if x.name == "f")
    assert r.unit == "nanoseconds"
    assert r.norm(0, f.base_flat) == pytest.approx(500 * MS) == r.norm(1, f.new_flat)  # 0.5 s of CPU per second
    assert r.delta(f.base_flat, f.new_flat) == pytest.approx(0)
    text = diff_text(r)
    assert "500ms/s" in text and "Values: per second of each profile's duration" in text


def test_rate_needs_durations_and_units_convert():
    base = _cpu({"main;f": 5_000}, unit="microseconds", duration=10**9)
    new = _cpu({"main;f": 5 * MS}, duration=0)
    with pytest.raises(OptionsError, match="normalize=rate needs each profile's duration; the new profile has none"):
        diff(base, new, normalize="rate")
    r = diff(base, new)
    assert r.sample_type.unit == "nanoseconds" and r.functions[0].base_flat == r.functions[0].new_flat == 5 * MS
    with pytest.raises(OptionsError, match="base has no sample type to compare with alloc/bytes of new"):
        diff(base, _cpu({"f": 1}, unit="bytes", column="alloc"))


def test_types_of_one_unit_pair_across_names_with_a_note(cli, tmp_path):
    base = _write(tmp_path, "base.pb.gz", _cpu({"main;f": 30, "main;g": 10}, column="cpu"))
    new = _write(tmp_path, "new.pb.gz", _cpu({"main;f": 20, "main;g": 20}, column="cpu-clock"))
    r = cli("diff", base, new, "--format", "json")
    assert r.code == 0, r.err
    assert f"paired cpu/nanoseconds of {base} with cpu-clock/nanoseconds of {new}" in r.err
    assert cli("diff", base, new, "--sample-index", "cpu-clock").code == 0
    rows = {f["name"]: f for f in json.loads(r.out)["functions"]}
    assert rows["f"]["base_flat"] == 30 and rows["f"]["new_flat"] == 20
    merged = cli("merge", base, new, "-o", tmp_path / "m.pb.gz")
    assert merged.code == 0 and "paired cpu-clock/nanoseconds" in merged.err
    assert polyprof.read(tmp_path / "m.pb.gz").totals()[-1] == 80


def test_base_sample_index_picks_the_base_type_and_errors_name_both_files(cli, tmp_path):
    b = ProfileBuilder("x")
    b.set_sample_types([("samples", "count"), ("wall", "nanoseconds"), ("cpu", "nanoseconds")])
    b.add_sample(b.stack([b.frame("f")]), [1, 50, 7])
    base = _write(tmp_path, "base.pb.gz", b.finish())
    new = _write(tmp_path, "new.pb.gz", _cpu({"main;f": 9}, column="cpu-clock"))
    r = cli("diff", base, new, "--format", "json")  # two time types in base: no guess
    assert r.code == 6 and base in r.err and new in r.err and "--base-sample-index" in r.err
    r = cli("diff", base, new, "--base-sample-index", "cpu", "--format", "json")
    assert r.code == 0, r.err
    f = json.loads(r.out)["functions"][0]
    assert (f["base_flat"], f["new_flat"]) == (7, 9)


def _write(tmp_path, name: str, p: polyprof.Profile) -> str:
    path = str(tmp_path / name)
    polyprof.write(p, path)
    return path


def test_cli_gate_exits_8_after_printing_the_report(cli, tmp_path, golden):
    base = _write(tmp_path, "base.pb.gz", _cpu({"main;f": 60 * MS, "main;g": 40 * MS}))
    new = _write(tmp_path, "new.pb.gz", _cpu({"main;f": 150 * MS, "main;g": 50 * MS, "main;h": 100 * MS}))
    r = cli("diff", base, new, "--normalize", "total", "--by", "both", "--fail-on-growth", "5")
    assert r.code == 8
    assert r.err == "polyprof: 1 function(s) grew by more than 5 share points (flat): h (+33.33)\n"
    golden("analysis/diff_total_both.txt", r.out)
    r = cli("diff", base, new, "--fail-on-growth", "40", "--format", "json")
    assert r.code == 0 and r.err == ""
    data = json.loads(r.out)
    assert data["growth"] == {"threshold": 40.0, "exceeded": []}
    golden("analysis/diff_none.json", r.out)
    r = cli("diff", base, new, "--growth-metric", "cum", "--fail-on-growth", "0", "--format", "json", "--by", "stack")
    assert r.code == 8 and json.loads(r.out)["growth"]["exceeded"] == ["h"]
    assert json.loads(r.out)["stacks"][0] == {"frames": ["main", "h"], "base": 0, "new": 100 * MS,
                                              "delta": 100 * MS, "base_raw": 0, "new_raw": 100 * MS,
                                              "share_delta": pytest.approx(100 / 3)}


def test_cli_diff_flame_and_filters(cli, peer, tmp_path):
    cpu = peer / "generated/go_runtime_pprof/cpu.pb.gz"
    out = tmp_path / "d.svg"
    r = cli("diff", cpu, cpu, "--tagfocus", "worker=a", "--flame", out, "--normalize", "total")
    assert r.code == 0, r.err
    assert out.read_text().startswith("<?xml") or "<svg" in out.read_text()
    assert "Active filters:\n   tagfocus=worker=a" in r.out
    assert f"polyprof: wrote {out} (svg diff flame graph" in r.err
    r = cli("diff", cpu, cpu, "--flame", tmp_path / "d.png")
    assert r.code == 6 and "--flame: cannot tell the output type" in r.err
