"""merge: unit alignment, refusal of different kinds, associativity, and the CLI verb."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.merge import align_sample_types, compact, merge
from polyprof.model.profile import Label
from polyprof.model.validate import check

UNITS = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": 1_000_000}


def _profile(unit: str, stacks: list[tuple[list[str], int]], *, period: int = 0, comment: str = "",
             labels=()) -> polyprof.Profile:
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu", unit)])
    if period:
        b.meta.period_type = polyprof.ValueType("cpu", unit)
        b.meta.period = period
    if comment:
        b.meta.comments.append(comment)
    for names, value in stacks:
        b.add_sample(b.stack([b.frame(n) for n in names]), [1, value], labels=labels)
    return b.finish()


def test_units_of_one_family_convert_to_the_finest():
    a = _profile("milliseconds", [(["f", "main"], 3)], period=10)
    b = _profile("microseconds", [(["g", "main"], 7)], period=250)
    x, y = align_sample_types([a, b])
    assert [str(t) for t in x.sample_types] == [str(t) for t in y.sample_types] == ["samples/count", "cpu/microseconds"]
    assert x.samples.values[:, 1].tolist() == [3000] and y.samples.values[:, 1].tolist() == [7]
    assert (x.period, x.period_type.unit, y.period) == (10_000, "microseconds", 250)
    m = merge([x, y])
    check(m)
    assert m.totals() == [2, 3007]


def test_types_in_another_order_are_reordered_and_kinds_must_match():
    a = _profile("nanoseconds", [(["f"], 5)])
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "microseconds"), ("sample", "count")])
    b.add_sample(b.stack([b.frame("f")]), [2, 1])
    x, y = align_sample_types([a, b.finish()])
    assert y.samples.values.tolist() == [[1, 2000]]
    c = ProfileBuilder("test")
    c.set_sample_types([("alloc_space", "bytes")])
    with pytest.raises(OptionsError, match=r"^a and c: cannot combine profiles with different sample types: "
                                           r"samples/count, cpu/nanoseconds vs alloc_space/bytes$"):
        align_sample_types([a, c.finish()], ["a", "c"])
    d = _profile("bytes", [(["f"], 1)])
    with pytest.raises(OptionsError, match="different sample types"):
        align_sample_types([a, d])


def test_profiles_that_agree_are_returned_unchanged():
    a, b = _profile("nanoseconds", []), _profile("nanoseconds", [(["f"], 1)])
    x, y = align_sample_types([a, b])
    assert x is a and y is b


def test_compact_sums_equal_samples_and_drops_all_zero_ones():
    p = _profile("nanoseconds", [(["f", "main"], 3), (["g"], 0), (["f", "main"], 4)])
    b = ProfileBuilder("test")  # a sample whose values are all zero
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    b.add_sample(b.stack([b.frame("h")]), [0, 0])
    q = compact(merge([p, b.finish()]))
    check(q)
    assert q.samples.values.tolist() == [[2, 7], [1, 0]]


NAMES = st.sampled_from(["main", "a", "b", "c"])


@st.composite
def unit_profiles(draw):
    stacks = draw(st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=4), st.integers(0, 1000)), max_size=6))
    labels = draw(st.sampled_from([(), (Label("k", str="v"),)]))
    return _profile(draw(st.sampled_from(sorted(UNITS))), stacks, period=draw(st.integers(0, 3)),
                    comment=draw(st.sampled_from(["", "x", "y"])), labels=labels)


def _merged(profiles):
    return merge(align_sample_types(profiles))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit_profiles(), unit_profiles(), unit_profiles())
def test_merge_is_associative(a, b, c):
    left = _merged([_merged([a, b]), c])
    right = _merged([a, _merged([b, c])])
    flat = _merged([a, b, c])
    check(left)
    assert dump(left) == dump(right) == dump(flat)
    # totals add up once every input is in the finest unit
    finest = flat.sample_types[1].unit
    expected = sum(int(p.samples.values[:, 1].sum()) * UNITS[p.sample_types[1].unit] // UNITS[finest]
                   for p in (a, b, c))
    assert flat.totals()[1] == expected


def test_cli_merge_converts_labels_and_refuses(cli, peer, tmp_path):
    cpu = peer / "generated/go_runtime_pprof/cpu.pb.gz"
    out = tmp_path / "both.pb.gz"
    r = cli("merge", cpu, cpu, "-o", out, "--label-inputs", "run", "--tagfocus", "worker=a", "--format", "json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["samples"] == 8 and summary["sample_types"][1] == {"type": "cpu", "unit": "nanoseconds",
                                                                       "total": 800_000_000}
    merged = polyprof.read(out)
    assert {lab.str for ls in merged.labelsets for lab in ls if lab.key == "run"} == {"cpu.pb.gz"}
    heap = peer / "generated/go_runtime_pprof/heap.pb.gz"
    r = cli("merge", cpu, heap, "-o", tmp_path / "bad.pb.gz")
    assert r.code == 6 and not (tmp_path / "bad.pb.gz").exists()
    assert r.err.startswith(f"polyprof: error: {cpu} and {heap}: cannot combine profiles with different sample types")
