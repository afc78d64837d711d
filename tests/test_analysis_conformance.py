"""tree / traces / peek / filters / granularities equal ``go tool pprof`` on peer pprof files.

Two kinds of reference:

- stored: ``generated/go_tool_pprof/**/*.traces.txt[.gz]`` (Go 1.19.8's
  ``go tool pprof -traces``), compared without running Go;
- live: ``go tool pprof`` (Debian golang-go) is run in the test with the same
  options, ``-nodefraction=0 -edgefraction=0`` and ``-symbolize=remote``
  (name clean-up without looking for binaries on this machine); skipped with
  the reason when ``go`` is not installed.

Our text must equal pprof's line for line (numbers, names, order, percentages).
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import polyprof
from polyprof.analysis.options import Options
from polyprof.analysis.top import top
from polyprof.analysis.traces import traces
from polyprof.analysis.tree import peek, tree
from polyprof.render.top import top_text
from polyprof.render.traces import traces_lines
from polyprof.render.tree import tree_text

from helpers import PEER, peer_files

REFS = "generated/go_tool_pprof/"

GO_CPU = "generated/go_runtime_pprof/cpu.pb.gz"
GO_HEAP = "generated/go_runtime_pprof/heap.pb.gz"
SAMPLE = "google__pprof/internal/report/testdata/sample.cpu"
CPP = "google__pprof/internal/driver/testdata/cppbench.cpu_no_samples_type"
LABELS = "grafana__pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"
DOTNET = "grafana__pyroscope/pkg/pprof/testdata/dotnet.labels.pprof"
JFR = ("grafana__pyroscope/pkg/og/convert/jfr/testdata/"
       "dump1.jfr.gz.process_cpu_cpu_nanoseconds_cpu_nanoseconds.17241709254077376921.pb.gz")
NODE_HEAP = "grafana__pyroscope/pkg/og/convert/pprof/testdata/nodejs-heap.pb.gz"


# ---------------------------------------------------------------- stored -traces references

def _trace_refs() -> list[tuple[Path, Path]]:
    out = []
    for ref in peer_files(REFS + "**/*.traces.txt*"):
        rel = str(ref.relative_to(PEER / REFS))
        out.append((ref, PEER / rel[: rel.index(".traces.txt")]))
    return out


TRACE_REFS = _trace_refs()


def test_there_are_trace_references(peer):
    assert len(TRACE_REFS) >= 35


@pytest.mark.parametrize("ref,source", TRACE_REFS, ids=[str(r.relative_to(PEER / REFS)) for r, _ in TRACE_REFS])
def test_traces_equal_stored_reference(ref, source):
    data = ref.read_bytes()
    if ref.suffix == ".gz":
        data = gzip.decompress(data)
    expected = _text(data.decode("utf-8", errors="replace"))
    assert _text("\n".join(traces_lines(traces(_read(str(source))))) + "\n") == expected


def _text(text: str) -> list[str]:
    """Lines (names may hold \\x0b, \\x1c...), with a run of bytes that are not UTF-8 as one
    replacement character (pprof prints them raw; we decode them with replacement)."""
    return re.sub("\ufffd+", "\ufffd", text).split("\n")


# ---------------------------------------------------------------- live go tool pprof

@functools.lru_cache(maxsize=None)
def _read(path: str) -> polyprof.Profile:
    return polyprof.read(path)


@pytest.fixture(scope="module")
def go(tmp_path_factory):
    if shutil.which("go") is None:
        pytest.skip("go tool pprof not available (install Debian golang-go)")
    home = tmp_path_factory.mktemp("gohome")
    env = {**os.environ, "TZ": "UTC", "HOME": str(home), "PPROF_TMPDIR": str(home),
           "PPROF_BINARY_PATH": str(home)}

    def run(args: list[str], path: str) -> str:
        cmd = ["go", "tool", "pprof", "-symbolize=remote", "-nodefraction=0", "-edgefraction=0", *args, path]
        done = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
        if done.returncode:
            pytest.fail(f"{' '.join(cmd)} failed: {done.stderr.decode(errors='replace')}")
        return done.stdout.decode("utf-8", errors="replace")

    return run


_FLAG = {"focus": "focus", "ignore": "ignore", "hide": "hide", "show": "show", "show_from": "show_from",
         "prune_from": "prune_from", "tagfocus": "tagfocus", "tagignore": "tagignore",
         "sample_index": "sample_index", "nodecount": "nodecount"}


def _go_args(verb: str, opts: dict) -> list[str]:
    args = [f"-{verb}"] if verb != "peek" else ["-peek", opts["regex"]]
    for key, value in opts.items():
        if key == "noinlines":
            args.append("-noinlines")
        elif key == "granularity":
            args.append(f"-{value}")  # Go 1.19's pprof spells granularities as flags
        elif key != "regex":
            args.append(f"-{_FLAG[key]}={value}")
    if verb in ("top", "tree") and "nodecount" not in opts:
        args.append("-nodecount=80" if verb == "tree" else "-nodecount=25")
    return args


def _ours(verb: str, path: str, opts: dict) -> str:
    fields = {k: v for k, v in opts.items() if k != "regex"}
    fields.setdefault("nodecount", 80 if verb == "tree" else 25)
    o = Options(**fields, nodefraction=0, edgefraction=0)
    p = _read(path)
    if verb == "top":
        return top_text(top(p, o))
    if verb == "tree":
        return tree_text(tree(p, o))
    if verb == "peek":
        return tree_text(peek(p, opts["regex"], o))
    return "\n".join(traces_lines(traces(p, o))) + "\n"


def _case_id(case: tuple) -> str:
    rel, verb, opts = case
    flags = ",".join(f"{k}={v}" for k, v in opts.items())
    return f"{verb}:{Path(rel).name[:40]}:{flags}"


FILTERS = [
    (GO_CPU, {"focus": "leaf"}), (GO_CPU, {"ignore": "Mul"}), (GO_CPU, {"hide": "spin"}),
    (GO_CPU, {"show": r"main\."}), (GO_CPU, {"show_from": "middleAB"}), (GO_CPU, {"prune_from": "spin"}),
    (GO_CPU, {"tagfocus": "worker=a"}), (GO_CPU, {"tagignore": "worker=a"}), (GO_CPU, {"tagfocus": "b"}),
    (GO_CPU, {"focus": "leaf", "ignore": "asyncPreempt", "hide": r"pprof\.Do"}),
    (SAMPLE, {"focus": "mapassign"}), (SAMPLE, {"hide": "runtime"}), (SAMPLE, {"show": "main|Abs"}),
    (SAMPLE, {"show_from": "mapiternext"}), (SAMPLE, {"prune_from": "mapassign"}),
    (SAMPLE, {"ignore": "evacuate"}), (SAMPLE, {"focus": "bmap", "noinlines": True}),
    (SAMPLE, {"show_from": "overflow"}), (SAMPLE, {"hide": r"\(inline\)|add$"}),
    (GO_HEAP, {"tagfocus": "bytes=1kb:"}), (GO_HEAP, {"tagfocus": ":2kb"}), (GO_HEAP, {"tagfocus": "512"}),
    (GO_HEAP, {"tagignore": "bytes=1kb:8kb", "sample_index": "alloc_space"}),
    (GO_HEAP, {"tagfocus": "bytes=8192", "sample_index": "alloc_objects"}),
    (CPP, {"focus": "libc"}), (CPP, {"hide": "libpthread"}), (CPP, {"show": "cppbench"}),
    (CPP, {"show_from": "libpthread"}),
    (JFR, {"hide": "java"}), (JFR, {"prune_from": "fib"}), (JFR, {"show_from": "lambda"}),
    (JFR, {"focus": "Long", "tagfocus": "thread_name=."}),
    (LABELS, {"tagfocus": "function=fast"}), (LABELS, {"tagfocus": "foo:bar,function:slow"}),
    (LABELS, {"tagignore": "profile_id=c7"}),
    (DOTNET, {"tagfocus": "pod=42", "sample_index": "cpu"}),
    (DOTNET, {"sample_index": "alloc_size", "focus": "String"}),
]

GRANULARITIES = ("functions", "filefunctions", "files", "lines", "addresses")

CASES = (
    [(rel, verb, opts) for rel, opts in FILTERS for verb in ("top", "tree", "traces")]
    + [(rel, verb, {"granularity": g, **({"noinlines": True} if noinl else {})})
       for rel in (SAMPLE, GO_CPU) for g in GRANULARITIES for noinl in (False, True)
       for verb in ("top", "tree", "traces")]
    + [(rel, "tree", {"nodecount": n}) for rel in (SAMPLE, JFR, GO_HEAP, LABELS, NODE_HEAP) for n in (3, 7)]
    + [(GO_CPU, "peek", {"regex": "leaf"}), (SAMPLE, "peek", {"regex": r"runtime\.map"}),
       (JFR, "peek", {"regex": "fib"}), (CPP, "peek", {"regex": "libc"}),
       (GO_CPU, "peek", {"regex": "Div", "focus": "middle"}),
       (SAMPLE, "peek", {"regex": "Abs", "granularity": "lines"}),
       (GO_HEAP, "peek", {"regex": "main", "sample_index": "alloc_space", "tagfocus": "bytes=1kb:"})]
)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_equals_go_tool_pprof(peer, go, case):
    rel, verb, opts = case
    path = str(PEER / rel)
    expected = go(_go_args(verb, opts), path)
    assert _text(_ours(verb, path, opts)) == _text(expected)


TREE_FILES = [c[1] for c in TRACE_REFS if not c[0].name.endswith(".error.txt")]


@pytest.mark.parametrize("source", TREE_FILES, ids=[str(s.relative_to(PEER)) for s in TREE_FILES])
def test_tree_equals_go_tool_pprof(go, source):
    expected = go(["-tree", "-nodecount=80"], str(source))
    assert _text(_ours("tree", str(source), {})) == _text(expected)
