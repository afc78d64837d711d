"""validate: the quality report on real files of several formats and on hand-made problems."""

from __future__ import annotations

import json

from polyprof.analysis.validate import validate
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label

import pytest

import polyprof

TRUNCATED = "grafana__pyroscope/pkg/pprof/testdata/gotruncatefix/cpu_go_truncated_1.pb.gz"


def test_go_stacks_cut_at_64_frames_are_found(peer):
    r = validate(polyprof.read(peer / TRUNCATED))
    assert (r.truncated, r.stack_limit, r.samples) == (114, 64, 647)
    assert r.problems() == ["114 stacks probably truncated at 64 frames"]
    fixed = validate(polyprof.read(peer / (TRUNCATED + ".fixed")))
    assert fixed.truncated == 0 and fixed.problems() == []


def test_simpleperf_unwinding_failures_and_lost_samples(peer):
    r = validate(polyprof.read(peer / "generated/simpleperf_from_aosp_testdata/"
                                      "perf_with_failed_unwinding_debug_info.trace"))
    assert r.unwind_errors == {"ERROR_INVALID_MAP": 1} and r.unwind_weight == r.total
    assert r.lost == {"lost": 0, "kept": 1}
    assert r.problems() == ["1 samples with unwinding errors"]


def test_unsymbolized_frames_per_mapping(peer):
    r = validate(polyprof.read(peer / "google__pprof/internal/driver/testdata/cppbench.cpu_no_samples_type"))
    by_name = {m.mapping.rsplit("/", 1)[-1]: m for m in r.mappings}
    assert (by_name["libc-2.15.so"].frames, by_name["libc-2.15.so"].unsymbolized) == (3, 3)
    assert by_name["cppbench_server_main"].unsymbolized_leaf_weight == by_name["cppbench_server_main"].leaf_weight > 0
    assert r.problems() == ["109 unsymbolized frames in 3 mapping(s)"]
    go = validate(polyprof.read(peer / "generated/go_runtime_pprof/cpu.pb.gz"))
    assert go.problems() == [] and all(m.unsymbolized == 0 for m in go.mappings)


def test_hand_made_problems_and_reported_extras():
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    m = b.mapping(0x1000, 0x2000, 0, "/bin/app")
    inside, outside = b.location(m, 0x1500, [(b.function("f"), 1, 0)]), b.location(m, 0x9000)
    no_function = b.location(m, 0x1600, [(-1, 3, 0)])
    b.add_sample(b.stack([inside]), [10])
    b.add_sample(b.stack([outside, inside]), [-5])
    b.add_sample(b.stack([no_function]), [1], labels=[Label("unwind_error", str="UNWIND_ERROR_MEMORY_INVALID")])
    b.add_sample(-1, [4])
    b.meta.extras.update(lost_samples=7, truncated_stacks=2)
    r = validate(b.finish())
    assert r.lost == {"lost": 7} and r.truncated == 2 and r.stack_limit is None
    assert (r.empty_stacks, r.empty_weight) == (1, 4)
    assert r.unwind_errors == {"UNWIND_ERROR_MEMORY_INVALID": 1}
    assert r.invalid == {"frames with an address outside their mapping": 1,
                         "inline lines without a function": 1, "samples with negative values": 1}
    assert [m.unsymbolized for m in r.mappings] == [2]
    assert r.problems() == ["7 samples lost by the recorder", "1 samples with unwinding errors",
                            "2 stacks probably truncated", "1 samples without a stack",
                            "2 unsymbolized frames in 1 mapping(s)",
                            "1 frames with an address outside their mapping",
                            "1 inline lines without a function", "1 samples with negative values"]


def test_extras_counts_are_used_when_samples_carry_no_labels():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    b.add_sample(b.stack([b.frame("f")]), [1])
    b.meta.extras["unwinding_failures"] = {"ERROR_MAX_FRAMES_EXCEEDED": 3}
    r = validate(b.finish())
    assert r.unwind_errors == {"ERROR_MAX_FRAMES_EXCEEDED": 3} and r.lost is None


def test_cli_validate(cli, peer, golden):
    r = cli("validate", peer / TRUNCATED)
    assert r.code == 0 and r.err == ""
    golden("analysis/validate_truncated.txt", r.out)
    r = cli("validate", peer / TRUNCATED, "--strict", "--format", "json")
    assert r.code == 9
    data = json.loads(r.out)
    assert data["truncated"] == 114 and data["problems"] == ["114 stacks probably truncated at 64 frames"]
    assert cli("validate", peer / "generated/go_runtime_pprof/cpu.pb.gz", "--strict").code == 0


def test_perfetto_skipped_samples_and_lost_records(peer):
    pytest.importorskip("polyprof.formats.perfetto", reason="Perfetto reader not installed")
    path = peer / "google__perfetto/diff_tests_binary/parser__profiling__tests/Profiling__perf_sample_counter_only.pftrace"
    r = validate(polyprof.read(path))
    assert (r.source_format, r.skipped, r.empty_stacks) == ("perfetto", {"not_in_scope": 1}, 1)
    assert r.problems() == ["1 samples not unwound (skipped)", "1 samples without a stack"]
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    b.meta.extras["kernel_records_lost"] = {"0": 3, "2": 4}
    assert validate(b.finish()).lost == {"lost": 7}
