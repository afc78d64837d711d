"""The analysis verbs on the command line: goldens, JSON, shared filter flags, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import polyprof

from helpers import GOLDEN

CPU = "generated/go_runtime_pprof/cpu.pb.gz"
CPP = "google__pprof/internal/driver/testdata/cppbench.cpu_no_samples_type"
SIMPLEPERF = "generated/simpleperf/cpu_clock_fp.trace"


@pytest.mark.parametrize("name,argv", [
    ("tree_cpu.txt", ["tree", CPU]),
    ("tree_cpu_nodecount3.txt", ["tree", CPU, "--nodecount", "3"]),
    ("tree_cppbench_modules.txt", ["tree", CPP, "--granularity", "modules"]),
    ("peek_cpu_leaf_focus.txt", ["peek", CPU, "leaf", "--focus", "Div"]),
    ("traces_cpu_tagfocus.txt", ["traces", CPU, "--tagfocus", "worker=b"]),
    ("top_cpu_hide.txt", ["top", CPU, "--hide", "spin|Do$"]),
    ("tree_cpu.json", ["tree", CPU, "--nodecount", "4", "--format", "json"]),
    ("peek_cpu.json", ["peek", CPU, "middle", "--format", "json"]),
    ("traces_cpu.json", ["traces", CPU, "--show-from", "spin", "--format", "json"]),
])
def test_verb_output_matches_golden(cli, peer, golden, name, argv):
    r = cli(argv[0], peer / argv[1], *argv[2:])
    assert r.code == 0 and r.err == "", r.err
    if name.endswith(".json"):
        json.loads(r.out)
    golden(f"analysis/{name}", r.out)


GO_EQUIVALENT = {
    "tree_cpu.txt": ["-tree", "-nodecount=80"],
    "tree_cpu_nodecount3.txt": ["-tree", "-nodecount=3"],
    "peek_cpu_leaf_focus.txt": ["-peek", "leaf", "-focus=Div"],
    "traces_cpu_tagfocus.txt": ["-traces", "-tagfocus=worker=b"],
    "top_cpu_hide.txt": ["-top", "-nodecount=25", "-hide=spin|Do$"],
}


@pytest.mark.parametrize("name", sorted(GO_EQUIVALENT))
def test_text_goldens_are_what_go_tool_pprof_prints(peer, tmp_path, name):
    """The goldens above are ours; these are checked against the reference when Go is here."""
    if shutil.which("go") is None:
        pytest.skip("go tool pprof not available (install Debian golang-go)")
    env = {**os.environ, "TZ": "UTC", "HOME": str(tmp_path), "PPROF_TMPDIR": str(tmp_path)}
    cmd = ["go", "tool", "pprof", "-symbolize=remote", "-nodefraction=0", "-edgefraction=0",
           *GO_EQUIVALENT[name], str(peer / CPU)]
    expected = subprocess.run(cmd, capture_output=True, env=env, check=True, timeout=120).stdout.decode()
    assert (GOLDEN / "analysis" / name).read_text() == expected


def test_tree_json_numbers(cli, peer):
    data = json.loads(cli("tree", peer / CPU, "--nodecount", "0", "--format", "json").out)
    spin = next(n for n in data["nodes"] if n["name"] == "main.spin")
    assert (spin["flat"], spin["cum"], data["total"]) == (0, 500_000_000, 500_000_000)
    assert spin["callers"] == [{"name": "main.main.func1", "weight": 400_000_000},
                               {"name": "main.main.func2", "weight": 100_000_000}]
    assert sum(e["weight"] for e in spin["callees"]) == spin["cum"]


def test_modules_granularity_names_binaries(cli, peer):
    data = json.loads(cli("top", peer / CPP, "--granularity", "modules", "--format", "json").out)
    assert [(r["name"], r["flat"]) for r in data["rows"]] == [
        ("[cppbench_server_main]", 7_080_000_000), ("[libc-2.15.so]", 40_000_000), ("[libpthread-2.15.so]", 0)]


def test_traces_json_lists_each_stack_once(cli, peer):
    data = json.loads(cli("traces", peer / CPU, "--format", "json").out)
    assert len(data["samples"]) == 6 and len(data["stacks"]) == 6
    assert data["samples"][0] == {"stack": data["samples"][0]["stack"], "value": 80_000_000,
                                  "labels": {"worker": ["a"]}}
    assert data["stacks"][data["samples"][0]["stack"]][0] == {"name": "main.leafMul"}


def test_peek_errors(cli, peer):
    r = cli("peek", peer / CPU, "zzz")
    assert (r.code, r.out, r.err) == (6, "", "polyprof: error: peek: no function matches 'zzz'\n")
    r = cli("peek", peer / CPU, "(")
    assert r.code == 6 and r.err.startswith("polyprof: error: peek: bad regular expression '('")


def test_time_pid_tid_thread_selection_on_a_recording(cli, peer):
    path = peer / SIMPLEPERF
    everything = json.loads(cli("traces", path, "--sample-index", "samples", "--format", "json").out)
    total = sum(s["value"] for s in everything["samples"])
    early = json.loads(cli("traces", path, "--sample-index", "samples", "--time-range", ":100ms",
                           "--format", "json").out)
    assert 0 < sum(s["value"] for s in early["samples"]) < total
    p = polyprof.read(path)
    tid = int(p.samples.tid[0])
    by_tid = json.loads(cli("top", path, "--tid", str(tid), "--format", "json", "--nodecount", "0").out)
    assert 0 < sum(r["flat"] for r in by_tid["rows"]) <= by_tid["total"]
    r = cli("top", path, "--thread", "^worker_", "--sample-index", "samples", "--format", "json")
    assert r.code == 0 and json.loads(r.out)["rows"]
    r = cli("top", path, "--thread", "no-such-thread")
    assert r.err == "polyprof: warning: --thread matched nothing\n"


@pytest.mark.parametrize("verb", ["top", "tree", "traces", "peek", "diff", "merge", "validate", "info", "dump",
                                  "convert", "flame"])
def test_every_verb_takes_the_shared_filter_flags(cli, verb):
    r = cli(verb, "--help")
    assert r.code == 0
    for flag in ("--focus", "--ignore", "--hide", "--show", "--show-from", "--prune-from", "--tagfocus",
                 "--tagignore", "--thread", "--pid", "--tid", "--time-range"):
        assert flag in r.out, (verb, flag)
