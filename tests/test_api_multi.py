"""Inputs that hold several profiles: read() merges or selects, info lists them."""

from __future__ import annotations

import json

import pytest

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


_BIN = "google__perfetto/diff_tests_binary/"
SAME_KIND = _BIN + "parser__profiling__tests/Profiling__stack_sample.pftrace"  # two StackSample profiles
MIXED = _BIN + "parser__profiling__deobfuscation_tests/Deobfuscation__profile_deobfuscation_default_package.pftrace"
EMPTY = _BIN + "parser__profiling__tests/Profiling__profiler_smaps.pftrace"  # a trace without profiling data


def test_profiles_of_one_kind_are_merged_with_a_note_naming_how_many(cli, peer):
    r = cli("top", peer / SAME_KIND)
    assert r.code == 0
    notes = [line for line in r.err.splitlines() if "merged" in line]
    assert len(notes) == 1 and "merged 2 profiles" in notes[0] and "--profile" in notes[0]
    assert r.out.splitlines()[0] == "File: profile 1, myproc (pid 100)"  # each input named, not the first twice
    assert cli("top", peer / SAME_KIND, "--profile", "2").err == ""


def test_profiles_of_different_kinds_are_one_error_listing_the_selectors(cli, peer):
    r = cli("top", peer / MIXED)
    assert r.code == 6 and r.out == ""
    assert "holds 2 profiles of different kinds" in r.err
    listed = [line.strip() for line in r.err.splitlines()[1:]]
    assert listed[0].startswith("[1] kind=heap pid=25587") and "--profile 1 or --pid 25587" in listed[0]
    assert listed[1].startswith("[2] kind=perf") and "--profile 2 or --pid 26698" in listed[1]
    info = cli("info", peer / MIXED).out.splitlines()  # info shows the same profiles and selectors
    for n, line in enumerate(listed, 1):
        heading = next(i for i, text in enumerate(info) if text.startswith(f"[{n}] "))
        assert line.split(" dump_time")[0].split(":")[0] in info[heading]
        assert info[heading + 1] == "select with " + line.split("(select with ")[1].rstrip(")")
    for selector in (("--profile", "2"), ("--pid", "26698")):
        picked = cli("top", peer / MIXED, *selector)
        assert picked.code == 0 and "File: Prebuilt2.apk" in picked.out, selector
    assert polyprof.read(peer / MIXED, options=polyprof.ReadOptions(profiles=(1,))).default_sample_type == \
        "inuse_space"
    merged = cli("top", peer / MIXED, "--merge")
    assert merged.code == 0 and "prebuilt1 (pid 25587), com.google.android.prebuilt2 (pid 26698)" in merged.out


def test_profile_numbers_outside_the_list_are_an_options_error(cli, peer):
    r = cli("top", peer / MIXED, "--profile", "3")
    assert r.code == 6 and "--profile 3" in r.err and "1 to 2" in r.err
    zero = cli("top", peer / MIXED, "--profile", "0")  # refused while parsing the flags
    assert zero.code != 0 and "profile numbers from 1" in zero.err


@pytest.mark.parametrize("verb", ["info", "top", "tree", "traces", "peek", "flame", "dump", "validate",
                                  "convert", "diff", "merge"])
def test_an_input_without_profiles_is_exit_4_on_every_verb(cli, peer, tmp_path, verb):
    path = peer / EMPTY
    extra = {"peek": [".*"], "flame": ["-o", tmp_path / "f.html"], "convert": ["-o", tmp_path / "x.pb.gz"],
             "diff": [path], "merge": ["-o", tmp_path / "m.pb.gz"]}.get(verb, [])
    args = [path, path, *extra] if verb == "merge" else [path, *extra]
    r = cli(verb, *args)
    assert r.code == 4, (verb, r.err)
    assert r.err.strip().endswith("holds no profiling data") and r.err.count("\n") == 1, r.err
