"""polyprof info/top/convert/dump on simpleperf files, and golden dumps of small recordings.

Expected numbers come from simpleperf's own decoding of the same files
(generated/simpleperf_from_aosp_testdata/*.dump.txt).
"""

from __future__ import annotations

import json

import pytest

import polyprof.api as api

AOSP = "generated/simpleperf_from_aosp_testdata/"


def test_info_reports_losses_unwinding_failures_and_unsymbolized_share(cli, peer):
    r = cli("info", peer / AOSP / "perf_g_fp.trace", "--format", "json")
    assert r.code == 0, r.err
    extras = json.loads(r.out)["extras"]
    assert extras["lost_situation"] == {"sample_count": 10, "lost_count": 590}  # dump: lost_situation
    assert extras["lost_ratio"] == pytest.approx(590 / 600, abs=1e-6)
    assert extras["unsymbolized_frames"]["share"] == 1.0  # every callchain entry has symbol_id -1
    r = cli("info", peer / AOSP / "perf_with_failed_unwinding_debug_info.trace")
    assert r.code == 0, r.err
    assert "  unwinding_failures: ERROR_INVALID_MAP 1" in r.out  # info is words, not JSON (issue #15)
    assert "app_package_name: com.google.samples.apps.iosched" in r.out


def test_top_sample_index_samples_counts_and_event_sums(cli, peer):
    path = peer / AOSP / "perf_with_two_event_types.trace"
    r = cli("top", path, "--sample-index", "samples", "--exact")
    assert r.code == 0, r.err
    assert "of 10 total" in r.out  # 10 Sample records
    r = cli("top", path, "--sample-index", "cpu-clock", "--exact")
    assert "of 500000ns total" in r.out  # two cpu-clock samples of 250000 ns
    r = cli("top", path, "--exact")  # default: the first event type, cpu-cycles
    assert "of 3983917 total" in r.out


def test_convert_to_pprof_keeps_totals_and_threads(cli, peer, tmp_path):
    src = peer / AOSP / "perf_with_multiple_pids_and_tids.trace"
    out = tmp_path / "out.pb.gz"
    r = cli("convert", src, "-o", out)
    assert r.code == 0, r.err
    p, q = api.read(src), api.read(out)
    assert q.sample_types == p.sample_types and q.totals() == p.totals()
    keys = {lb.key for ls in q.labelsets for lb in ls}
    assert {"thread_name", "tid", "pid", "time"} <= keys


SMALL_RECORDINGS = ["perf_with_failed_unwinding_debug_info", "perf_with_two_event_types", "perf_with_meta_info",
                    "perf_g_fp", "perf_with_ip_zero_in_callchain"]


@pytest.mark.parametrize("name", SMALL_RECORDINGS)
def test_dump_golden(cli, peer, golden, name):
    r = cli("dump", peer / AOSP / f"{name}.trace")
    assert r.code == 0, r.err
    golden(f"simpleperf/{name}.dump.txt", r.out)


def test_bad_input_is_one_clear_line(cli, tmp_path):
    bad = tmp_path / "cut.trace"
    bad.write_bytes(b"SIMPLEPERF\x01\x00\x10\x00\x00\x00\x0a")
    r = cli("info", bad)
    assert r.code != 0
    assert "truncated file" in r.err and len(r.err.strip().splitlines()) == 1
