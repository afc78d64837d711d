"""Inputs that hold several profiles: read() merges or selects, info lists them."""

from __future__ import annotations

import json

import polyprof

def test_cumulative_dumps_are_not_summed_by_read(peer):
    path = peer / ("google__perfetto/diff_tests_binary/parser__profiling__tests_heap_profiling/"
                   "ProfilingHeapProfiling__heap_profile_intervals_frees.pftrace")
    dumps = polyprof.read_all(path)
    assert [p.extras["profile_labels"]["dump_time"] for p in dumps] == [20, 40, 60]
    latest = polyprof.read(path)
    assert latest.totals() == dumps[-1].totals()  # the last dump, not the sum of three
    assert any("last of 3 cumulative dumps" in w for w in latest.warnings)


def test_info_lists_every_profile_of_a_mixed_input(cli, tmp_path, peer):
    path = (peer / "google__perfetto/diff_tests_binary/parser__profiling__tests/"
            "Profiling__cpu_profiling_samples_timebase_filter.pftrace")
    text = cli("info", path)
    assert text.code == 0 and "holds 2 profiles" in text.out and "event=page-faults" in text.out
    data = json.loads(cli("info", path, "--format", "json").out)
    assert data["count"] == 2 and len(data["profiles"]) == 2
    merged = json.loads(cli("info", path, "--merge", "--format", "json").out)
    assert merged["samples"] == sum(p["samples"] for p in data["profiles"])
