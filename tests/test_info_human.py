"""info is for people: no JSON blobs, no address lists, no boot-clock nanoseconds;
--format json keeps every value."""

from __future__ import annotations

import json
import re

import pytest

from helpers import PEER

FILES = [
    "generated/simpleperf_from_aosp_testdata/perf_with_jit_symbol.exectype.trace",
    "generated/simpleperf_from_aosp_testdata/perf_with_trace_offcpu_v2.trace",
    "google__perfetto/diff_tests_binary/parser__profiling__deobfuscation_tests/"
    "Deobfuscation__profile_deobfuscation_default_package.pftrace",
    "grafana__pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
    "generated/go_runtime_pprof/heap.pb.gz",
]


@pytest.mark.parametrize("rel", FILES, ids=[f.rsplit("/", 1)[-1][:40] for f in FILES])
def test_info_text_is_readable(cli, peer, rel):
    r = cli("info", PEER / rel)
    assert r.code == 0, r.err
    for line in r.out.splitlines():
        assert len(line.replace(str(PEER / rel), "FILE")) <= 200, line
        assert '{"' not in line and "[[" not in line and "['" not in line, line
        assert not re.search(r"\d{13,}", line), line  # raw nanosecond clocks
        assert not re.search(r"(0x[0-9a-f]+, ){4}", line), line  # address lists
    data = json.loads(cli("info", PEER / rel, "--format", "json").out)
    assert "sample_types" in json.dumps(data)


def test_sample_times_are_relative_to_the_start(cli, peer):
    r = cli("info", PEER / FILES[0])
    line = next(x for x in r.out.splitlines() if x.startswith("time:"))
    assert line.startswith("time:         samples from +0 .. +114.14ms after the start")


def test_nested_facts_and_lists(cli, peer):
    out = cli("info", PEER / FILES[0]).out
    assert "  threads: BusyThread (tid 7630, pid 7601)" in out
    assert "      jit_jvm_method: 3 addresses (0x9c9ebca4, 0x9c9ebd48, 0x9c9ec180)" in out
    assert "  unsymbolized_frames: frames 810, without_symbol 123, share 15.19%" in out
    data = json.loads(cli("info", PEER / FILES[0], "--format", "json").out)
    assert data["extras"]["threads"] == [[7630, 7601, "BusyThread"]]  # the full data stays in JSON


def test_wall_clock_time(cli):
    out = cli("info", "examples/demo.pb.gz").out
    assert re.search(r"^Time:         \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$", out, re.M)
