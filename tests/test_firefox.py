"""Firefox Profiler processed JSON (version 70) against the profiler's documented format and snapshots.

Structure: every table and column that ``src/types/profile.ts`` of
firefox-devtools/profiler declares for processed version 70 (the commit of
peer-data), and the invariants of its ``assertProfileIntegrity`` (test
fixture ``profile-summary.ts``): indexes in range, stack table topological,
unique thread ids.

Content: the profiler's own import of the two simpleperf recordings in
``profile-conversion.test.ts.snap`` gives, per thread, name, pid, tid,
main-thread flag, sample count, summed weight and the top-5 stacks (weight,
hit count, ``a -> b -> c``). Our file of the same recording must give the
same threads and the same weight and count for each of those stacks. (Our
frames are per address, the profiler's importer makes one per function, so
stacks are compared by their function names, not by stack index.) And
simpleperf's own ``gecko_profile_generator.py`` output for two AOSP
recordings gives the samples' stacks per thread.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.formats import firefox
from polyprof.formats.options import WriteOptions

from viewer_profiles import expected_names, hostile_profile, random_profile

FIXTURES = "firefox-devtools__profiler/src/test/fixtures/upgrades/"
SNAP = "firefox-devtools__profiler/src/test/unit/__snapshots__/profile-conversion.test.ts.snap"
GECKO = "jbeich__platform_system_extras/simpleperf/scripts/test/script_testdata/"
AOSP = "generated/simpleperf_from_aosp_testdata/"

COLUMNS = {  # profile.ts at processed version 70
    "stackTable": {"frame", "prefixOffset"},
    "frameTable": {"address", "lib", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
                   "innerWindowID", "line", "column", "originalLocation"},
    "funcTable": {"name", "isJS", "relevantForJS", "resource", "source", "lineNumber", "columnNumber",
                  "originalLocation"},
    "resourceTable": {"name", "host", "type"},
    "nativeSymbols": {"libIndex", "address", "name", "functionSize"},
    "sources": {"id", "filename", "startLine", "startColumn", "sourceMapURL", "content"},
    "sourceLocationTable": {"source", "line", "column"},
}
META = {"interval", "startTime", "processType", "product", "stackwalk", "version", "preprocessedProfileVersion",
        "markerSchema"}
THREAD = {"processType", "processStartupTime", "processShutdownTime", "registerTime", "unregisterTime",
          "pausedRanges", "name", "isMainThread", "pid", "tid", "samples", "markers"}
LIB = {"arch", "name", "path", "debugName", "debugPath", "breakpadId", "codeId"}


def write(p, sample_index=None) -> dict:  # noqa: ANN001
    out = io.BytesIO()
    firefox.write(p, out, WriteOptions(sample_index=sample_index))
    return json.loads(out.getvalue().decode("utf-8"))


def _ok_index(v, n: int, *, nullable: bool = False, minus_one: bool = False) -> bool:  # noqa: ANN001
    return (v is None and nullable) or (v == -1 and minus_one) or (isinstance(v, int) and 0 <= v < n)


def check_structure(doc: dict) -> None:
    meta, shared = doc["meta"], doc["shared"]
    assert META <= set(meta) and meta["preprocessedProfileVersion"] == 70
    cats = meta["categories"]
    assert next(c for c in cats if c["color"] == "grey") and all(c["subcategories"] for c in cats)
    assert set(shared) == set(COLUMNS) | {"stringArray"}
    for table, cols in COLUMNS.items():
        t = shared[table]
        assert set(t) == cols | {"length"}, table
        assert all(len(t[c]) == t["length"] for c in cols), table
    strings = len(shared["stringArray"])
    st, fr, fn = shared["stackTable"], shared["frameTable"], shared["funcTable"]
    for s in range(st["length"]):  # assertProfileIntegrity's invariants
        assert _ok_index(st["frame"][s], fr["length"]) and 0 <= st["prefixOffset"][s] <= s
    for f in range(fr["length"]):
        assert _ok_index(fr["func"][f], fn["length"])
        assert _ok_index(fr["category"][f], len(cats), nullable=True)
        assert _ok_index(fr["lib"][f], len(doc["libs"]), minus_one=True)
        assert isinstance(fr["address"][f], int) and fr["address"][f] >= -1
    for k in range(fn["length"]):
        assert _ok_index(fn["name"][k], strings)
        assert _ok_index(fn["resource"][k], shared["resourceTable"]["length"], minus_one=True)
        assert _ok_index(fn["source"][k], shared["sources"]["length"], nullable=True)
    assert all(set(lib) == LIB for lib in doc["libs"])
    tids = [t["tid"] for t in doc["threads"]]
    assert len(tids) == len(set(tids))
    for t in doc["threads"]:
        assert THREAD <= set(t) and isinstance(t["pid"], str)
        s = t["samples"]
        assert s["weightType"] in ("samples", "tracing-ms", "bytes")
        assert len(s["stack"]) == len(s["time"]) == s["length"]
        assert s["weight"] is None or len(s["weight"]) == s["length"]
        assert all(_ok_index(x, st["length"], nullable=True) for x in s["stack"])
        assert s["time"] == sorted(s["time"])
        assert t["markers"]["length"] == 0


def func_path(doc: dict, stack: int | None) -> str:
    sh = doc["shared"]
    names = []
    while stack is not None:
        frame = sh["stackTable"]["frame"][stack]
        names.append(sh["stringArray"][sh["funcTable"]["name"][sh["frameTable"]["func"][frame]]])
        off = sh["stackTable"]["prefixOffset"][stack]
        stack = stack - off if off else None
    return " -> ".join(reversed(names))


def _snapshot_entry(peer, title: str) -> str:  # noqa: ANN001
    text = (peer / SNAP).read_text()
    start = text.index(f"exports[`converting Simpleperf trace successfully imports a simpleperf trace with {title} 1`]")
    return text[start:text.index("\n`;\n", start)]


def _snapshot_threads(entry: str) -> list[dict]:
    summary = entry[:entry.index('"topStacksPerThread"')]
    out = []
    for block in re.findall(r"Object \{\n(\s+\"isMainThread\".*?)\n\s+\},", summary, flags=re.S):
        f = dict(re.findall(r'"(\w+)": ("[^"]*"|[\w.-]+)', block))
        out.append({"name": f["name"].strip('"'), "pid": f["pid"].strip('"'), "tid": int(f["tid"]),
                    "isMainThread": f["isMainThread"] == "true", "sampleCount": int(f["sampleCount"]),
                    "sampleWeightTotal": None if f["sampleWeightTotal"] == "null" else float(f["sampleWeightTotal"]),
                    "weightType": f["weightType"].strip('"')})
    return out


def _snapshot_stacks(entry: str) -> dict[int, list[tuple[float, int, str]]]:
    tops = entry[entry.index('"topStacksPerThread"'):]
    out = {}
    for stacks, tid in re.findall(r'"stacks": Array \[(.*?)\],\n\s+"thread": "[^"]*",\n\s+"tid": (\d+)', tops,
                                  flags=re.S):
        out[int(tid)] = [(float(w), int(n), path) for w, n, path in
                         re.findall(r'^\s+"([0-9.e-]+) \((\d+)x\) (.*)",$', stacks, flags=re.M)]
    return out


# title in the snapshot -> (fixture, the sample type whose weights the profiler's importer uses)
SIMPLEPERF = {"cpu-clock": ("simpleperf-cpu-clock.trace.gz", "cpu-clock"),
              "task-clock": ("simpleperf-task-clock.trace.gz", "samples")}


@pytest.mark.parametrize("title", sorted(SIMPLEPERF))
def test_simpleperf_threads_and_top_stacks_equal_firefox_import_snapshot(peer, title):
    fixture, sample_type = SIMPLEPERF[title]
    doc = write(polyprof.read(peer / FIXTURES / fixture), sample_type)
    check_structure(doc)
    entry = _snapshot_entry(peer, title)
    expected = _snapshot_threads(entry)
    assert len(expected) in (15, 11)  # Thread records in the two recordings
    ours = {}
    for t in doc["threads"]:
        w = t["samples"]["weight"]
        ours[t["tid"]] = {"name": t["name"], "pid": t["pid"], "tid": t["tid"], "isMainThread": t["isMainThread"],
                          "sampleCount": t["samples"]["length"],
                          "sampleWeightTotal": None if w is None else pytest.approx(sum(w)),
                          "weightType": t["samples"]["weightType"]}
    assert ours == {e["tid"]: e for e in expected}
    checked = 0
    for t in doc["threads"]:
        w = t["samples"]["weight"] or [1] * t["samples"]["length"]
        by_path: dict[str, list] = {}
        for s, weight in zip(t["samples"]["stack"], w):
            agg = by_path.setdefault(func_path(doc, s), [0.0, 0])
            agg[0] += weight
            agg[1] += 1
        for weight, count, path in _snapshot_stacks(entry).get(t["tid"], []):
            got = by_path.get(path)
            assert got is not None, path
            if t["samples"]["weight"] is not None:
                assert got[0] == pytest.approx(weight)
            assert got[1] == count
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize("recording", ["perf_with_jit_symbol", "perf_with_tracepoint_event"])
def test_samples_equal_simpleperf_gecko_profile_generator(peer, recording):
    gecko = json.loads((peer / GECKO / f"{recording}.gecko.json").read_text())
    doc = write(polyprof.read(peer / AOSP / f"{recording}.trace"), "samples")
    check_structure(doc)
    ours = {t["tid"]: t for t in doc["threads"]}
    assert len(gecko["threads"]) >= 1
    for g in gecko["threads"]:
        t = ours[g["tid"]]
        assert (t["name"], t["pid"]) == (g["name"], str(g["pid"]))
        strings, frames, stacks = g["stringTable"], g["frameTable"]["data"], g["stackTable"]["data"]

        def gecko_path(s: int | None) -> str:
            names = []
            while s is not None:
                names.append(re.sub(r" \(in .*\)$", "", strings[frames[stacks[s][1]][0]]))
                s = stacks[s][0]
            return " -> ".join(reversed(names))

        want = Counter(gecko_path(sample[0]) for sample in g["samples"]["data"])
        # simpleperf names unknown symbols "lib[+addr]"; Firefox (and we) write "lib+0xaddr"
        got = Counter(re.sub(r"\+0x([0-9a-f]+)(?= ->|$)", r"[+\1]", func_path(doc, s)) for s in t["samples"]["stack"])
        assert got == want


@pytest.mark.parametrize("path", ["jlfwong__speedscope/sample/profiles/pprof/simple.prof",
                                  "generated/go_runtime_pprof/heap.pb.gz",
                                  "google__pprof/internal/driver/testdata/cppbench.cpu_no_samples_type"])
def test_pprof_inputs_give_one_valid_thread(peer, path):
    p = polyprof.read(peer / path)
    doc = write(p)
    check_structure(doc)
    (thread,) = doc["threads"]
    s = thread["samples"]
    total = p.totals()[p.default_index()]
    unit = p.sample_types[p.default_index()].unit
    assert sum(s["weight"] or [1] * s["length"]) == pytest.approx(total / 1e6 if unit == "nanoseconds" else total)


def test_hostile_names_stay_strings():
    doc = write(hostile_profile())
    check_structure(doc)
    assert "<script>alert(1)</script>" in doc["shared"]["stringArray"]
    assert all("\ud800" not in s for s in doc["shared"]["stringArray"])


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_property_structure_stacks_and_weights(data):
    p = random_profile(data)
    doc = write(p, "cpu")
    check_structure(doc)
    got, want = Counter(), Counter()
    for t in doc["threads"]:
        for s, w in zip(t["samples"]["stack"], t["samples"]["weight"]):
            got[(t["tid"], t["name"], func_path(doc, s) if s is not None else "")] += round(w * 1e6)
    for i in range(len(p.samples)):
        key = (int(p.samples.tid[i]), p.labelsets[int(p.samples.labelset[i])][0].str,
               " -> ".join(expected_names(p, i)))
        want[key] += int(p.samples.values[i, 1])
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}
    assert {(t["tid"], t["pid"], t["isMainThread"]) for t in doc["threads"]} <= {
        (100, "100", True), (101, "100", False), (201, "200", False)}
