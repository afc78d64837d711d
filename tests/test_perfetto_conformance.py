"""Conformance with Perfetto's trace processor, from its own diff tests (../shared/peer-data).

Each usable record of ``google__perfetto/diff_tests/*.json`` (one with a
trace; ``diff_tests_binary/index.json`` lists them) is either checked here
or listed in ``UNCOVERED`` with the reason. A check runs our reader on the
record's binary trace and asserts the facts of its expected CSV, translated
from trace processor's tables into the model's terms: its SQL tables hold
ids in order of first sight, so checks compare content (names, addresses,
values, times, counts) and groupings, never raw ids.

Heap allocations: trace processor stores, per dump, the increase of each
callstack's cumulative values since the previous dump (an allocation row
with positive count/size and a free row with negative ones). Our heap
profiles hold the cumulative values, so ``allocation_rows`` takes the
differences between consecutive dumps to compare the same rows.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Callable

import pytest

import polyprof
from polyprof.model.profile import Profile

from helpers import PEER

from test_perfetto_support import label, stack_names

DIFF = PEER / "google__perfetto" / "diff_tests"
BINARY = PEER / "google__perfetto" / "diff_tests_binary"

UNCOVERED = {
    **{f"PerfettoFlamegraph:{t}": "flamegraph SQL operator test: its data is built in SQL, the trace is empty"
       for t in ("aggregate_columns", "bottom_up", "bottom_up_hide_frame_aggregate", "case_insensitive_filter",
                 "empty_input", "filter_matches_grouping_column", "filter_matches_numeric_grouping_column",
                 "from_frame", "grouping_column", "hide_frame_aggregate_and_operation_order", "hide_frame_filter",
                 "hide_stack_filter", "multiple_values", "negative_value",
                 "null_grouping_column_does_not_match_empty_string", "pivot", "show_stack_filter", "super_root",
                 "top_down")},
    **{f"SimpleperfProtoParser:{t}": "simpleperf report-sample file, not a Perfetto trace (simpleperf reader's suite)"
       for t in ("cpu_profiling_basic_aggregation", "cpu_profiling_summary_tree", "empty_file", "file_record",
                 "missing_symbol_handling", "multiple_files_and_threads", "multiple_samples_same_thread",
                 "sample_with_callchain", "thread_record")},
    **{t: "ART heap graph (Java object graph extension), not a sampling profile; the trace cannot be serialized "
          "without Android's extension proto"
       for t in ("Profiling:art_oome_heap_graph", "Profiling:art_process_metadata_non_oome",
                 "Profiling:heap_graph_flamegraph", "Profiling:heap_graph_flamegraph_matches_objects",
                 "ProfilingHeapGraph:heap_graph_duplicate_flamegraph", "ProfilingHeapGraph:heap_graph_flamegraph",
                 "ProfilingHeapGraph:heap_graph_flamegraph_2", "ProfilingHeapGraph:heap_graph_flamegraph_focused",
                 "ProfilingHeapGraph:heap_graph_flamegraph_truncated",
                 "ProfilingHeapGraph:heap_graph_native_size_flamegraph", "ProfilingMetrics:heap_stats_closest_proc",
                 "ProfilingMetrics:java_heap_class_stats", "ProfilingMetrics:java_heap_histogram",
                 "ProfilingMetrics:java_heap_stats")},
    **{t: "ART OutOfMemoryError metadata / Java stack samples (art_process_metadata packet), not read"
       for t in ("Profiling:art_oome_stack_sample", "Profiling:art_oome_stack_sample_callstack",
                 "Deobfuscation:art_oome_stack_sample_deobfuscation")},
    "Profiling:frame_types": "Frame.kind / kind_str: the model has no frame-type column (the reader counts them "
                             "in a warning)",
    "Profiling:profiler_smaps": "smaps packet (memory maps), not stack samples",
    "Profiling:profiler_smaps_metric": "smaps packet (memory maps), not stack samples",
    "TraceDiagnostics:heapprofd_sampling_interval_ok": "trace config diagnostics only (no profile data)",
    "TraceDiagnostics:heapprofd_sampling_interval_too_low": "trace config diagnostics only (no profile data)",
    "TrackEvent:track_event_callstacks": "TrackEvent slices with callstacks: track events are not read",
    "TrackEvent:track_event_callstack_weights": "TrackEvent slices with callstacks: track events are not read",
    "ProfilingMetrics:java_heap_class_stats_no_heap_graph": "Java heap-graph metric; the expected output is empty "
                                                            "and says nothing about the heap dumps in the trace",
}

CHECKS: dict[str, Callable[[list[Profile], list[dict], dict], None]] = {}


def checks(*names: str):  # noqa: ANN201
    def register(fn):  # noqa: ANN001, ANN202
        for name in names:
            CHECKS[name] = fn
        return fn
    return register


def _records() -> dict[str, dict]:
    out = {}
    for path in sorted(DIFF.glob("*.json")) if DIFF.is_dir() else []:
        for rec in json.loads(path.read_text())["tests"]:
            out[rec["name"]] = rec
    return out


def _index() -> dict[str, dict]:
    path = BINARY / "index.json"
    return json.loads(path.read_text()) if path.exists() else {}


RECORDS, INDEX = _records(), _index()


def _value(text: str):  # noqa: ANN202
    if text == "[NULL]":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def expected_rows(rec: dict) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(rec["expected_csv"])))
    return [{k: _value(v) for k, v in row.items()} for row in rows]


def profiles_of(name: str) -> list[Profile]:
    # trace processor demangles names in full (c++filt's spelling), not pprof's simplified way
    return polyprof.read_all(BINARY / INDEX[name]["file"], format="perfetto",
                             options=polyprof.ReadOptions(demangle="full"))


# ---------------------------------------------------------------- heap dumps


def _heap(profiles: list[Profile]) -> list[Profile]:
    return [p for p in profiles if p.extras["profile_labels"]["kind"] == "heap"]


def _stack_key(p: Profile, i: int) -> tuple:
    return tuple((p.mapping_file(int(p.locations.mapping[loc])), int(p.locations.address[loc]))
                 for loc in p.stack_locations(i))


def allocation_rows(profiles: list[Profile]) -> list[tuple]:
    """Trace processor's heap_profile_allocation rows: (ts, heap, count, size, stack) deltas per dump."""
    prev: dict[tuple, list[int]] = {}
    rows = []
    for p in _heap(profiles):
        labels = p.extras["profile_labels"]
        ts = p.extras["heapprofd"]["dump_time"]
        for i in range(len(p.samples)):
            if p.samples.stack[i] < 0:  # trace processor keeps no row for an empty callstack
                continue
            stack = _stack_key(p, i)
            ac, asz, _, _, fc, fs = p.samples.values[i].tolist()
            before = prev.get((labels["pid"], labels["heap"], stack), [0, 0, 0, 0])
            prev[(labels["pid"], labels["heap"], stack)] = [ac, asz, fc, fs]
            if ac - before[0] or asz - before[1]:
                rows.append((ts, labels["heap"], ac - before[0], asz - before[1], stack))
            if (fc - before[2] or fs - before[3]) and labels["heap"] != "com.android.art":
                rows.append((ts, labels["heap"], before[2] - fc, before[3] - fs, stack))
    return rows


def _groups(rows: list[tuple], key: Callable) -> Counter:
    """Multiset of the row contents grouped by ``key`` (callsite id / our stack)."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row[:4])
    return Counter(tuple(sorted(g)) for g in groups.values())


@checks("ProfilingHeapProfiling:heap_profile_dump_max", "ProfilingHeapProfiling:heap_profile_dump_max_legacy",
        "ProfilingHeapGraph:heap_profile_tracker_new_stack", "ProfilingHeapGraph:heap_profile_tracker_twoheaps",
        "Profiling:stack_profile_tracker_empty_callstack")
def check_allocation_rows(profiles, expected, rec):  # noqa: ANN001
    ours = allocation_rows(profiles)
    if rec["query"].strip().startswith("SELECT count(1)"):
        assert len(ours) == expected[0]["count"]
        return
    theirs = [(r["ts"], r["heap_name"], r["count"], r["size"], r["callsite_id"]) for r in expected]
    assert Counter(r[:4] for r in ours) == Counter(r[:4] for r in theirs)
    assert _groups(ours, lambda r: r[4]) == _groups(theirs, lambda r: r[4])


def _intervals(profiles: list[Profile]) -> list[dict]:
    """stdlib _android_heap_profile_intervals, from our dumps and their allocation rows."""
    rows = allocation_rows(profiles)
    out = []
    last_end: dict[tuple, int] = {}
    for p in _heap(profiles):
        labels = p.extras["profile_labels"]
        end = p.extras["heapprofd"]["dump_time"]
        mine = [r for r in rows if r[0] == end and r[1] == labels["heap"]]
        per_stack: dict = {}
        for _, _, count, size, stack in mine:
            net = per_stack.setdefault(stack, [0, 0, 0])
            net[0] += count
            net[1] += size
            net[2] += max(size, 0)
        start = end - p.duration_nanos if p.duration_nanos else None
        if start is None or start >= end:
            before = last_end.get((labels["pid"], labels["heap"]))
            start = min(before + 1, end) if before is not None else end
        last_end[(labels["pid"], labels["heap"])] = end
        out.append({"heap_name": labels["heap"], "ts": start, "dur": end - start, "ts_end": end,
                    "retained": sum(s for c, s, _ in per_stack.values() if c > 0),
                    "allocated": sum(a for _, _, a in per_stack.values()),
                    "delta": sum(s for _, s, _ in per_stack.values())})
    return out


@checks("ProfilingHeapProfiling:heap_profile_intervals", "ProfilingHeapProfiling:heap_profile_intervals_frees",
        "ProfilingHeapProfiling:heap_profile_intervals_legacy", "ProfilingHeapProfiling:heap_profile_intervals_window")
def check_intervals(profiles, expected, rec):  # noqa: ANN001
    ours = _intervals(profiles)
    columns = list(expected[0])
    key = "ts_end" if "ts_end" in columns else ("ts" if "ts" in columns else None)
    if key:
        ours = sorted(ours, key=lambda r: r[key])
    assert [{c: r[c] for c in columns} for r in ours] == expected


@checks("ProfilingHeapProfiling:heap_profile_window", "ProfilingHeapProfiling:heap_profile_window_legacy")
def check_heap_profile_window(profiles, expected, rec):  # noqa: ANN001
    (p,) = _heap(profiles)
    end = p.extras["heapprofd"]["dump_time"]
    row = {"ts": end - p.duration_nanos, "ts_end": end, "dur": p.duration_nanos}
    if "alloc_ts" in expected[0]:
        rows = allocation_rows(profiles)
        assert [{**row, "alloc_ts": r[0], "size": r[3]} for r in rows if r[0] == end] == expected
    else:
        assert [row] == expected


def _frames(profiles: list[Profile]) -> set[tuple]:
    """(mapping file, build id, address, outermost function name) of every location."""
    out = set()
    for p in profiles:
        for loc in range(len(p.locations)):
            m = int(p.locations.mapping[loc])
            rows = p.locations.lines_of(loc)
            name = p.function_name(int(p.lines.function[rows[-1]])) if len(rows) else ""
            out.add((p.mapping_file(m), p.strings[p.mappings.build_id[m]] if m >= 0 else "",
                     int(p.locations.address[loc]), name))
    return out


@checks("ProfilingHeapProfiling:heap_profile_jit")
def check_frame_names(profiles, expected, rec):  # noqa: ANN001
    ours = _frames(profiles)
    assert sorted((name, pc) for _, _, pc, name in ours) == sorted((r["name"], r["rel_pc"]) for r in expected)
    assert len({(f, b) for f, b, _, _ in ours}) == len({r["mapping"] for r in expected})


# ---------------------------------------------------------------- Java deobfuscation
# The trace's DeobfuscationMapping packets are applied on reading (polyprof.symbolize.r8): a frame's
# function takes the original name and keeps the obfuscated one as its system name.


def _deobfuscated(profiles: list[Profile]) -> Counter:
    """(obfuscated name, deobfuscated name or None) of every distinct frame, as stack_profile_frame."""
    frames = set()
    for p in profiles:
        for loc in range(len(p.locations)):
            rows = p.locations.lines_of(loc)
            if not len(rows):
                continue
            fn = int(p.lines.function[rows[-1]])
            name, system = p.function_name(fn), p.strings[p.functions.system_name[fn]]
            m = int(p.locations.mapping[loc])
            frames.add((p.mapping_file(m), int(p.locations.address[loc]), system or name, name if system else None))
    return Counter(f[2:] for f in frames)


@checks("Deobfuscation:profile_deobfuscation_default_package", "R8RetraceCompat:horizontal_class_merging",
        "R8RetraceCompat:method_overload", "R8RetraceCompat:removed_argument",
        "R8RetraceCompat:staticized_method", "R8RetraceCompat:vertical_class_merging")
def check_deobfuscated_names(profiles, expected, rec):  # noqa: ANN001
    ours = _deobfuscated(profiles)
    only = rec["query"].split("WHERE name = '")[1].split("'")[0] if "WHERE name = '" in rec["query"] else None
    if only is not None:
        ours = Counter({k: n for k, n in ours.items() if k[0] == only})
    assert ours == Counter((r["name"], r["deobfuscated_name"]) for r in expected)


@checks("ProfilingHeapProfiling:heap_profile_deobfuscate", "ProfilingHeapProfiling:heap_profile_deobfuscate_2")
def check_deobfuscated_frame(profiles, expected, rec):  # noqa: ANN001
    ours = {(deob, pc) for _, pc, _, deob in _deobfuscated_rows(profiles) if deob}
    assert ours == {(r["deobfuscated_name"], r["rel_pc"]) for r in expected}


def _deobfuscated_rows(profiles: list[Profile]) -> list[tuple]:
    out = []
    for p in profiles:
        for loc in range(len(p.locations)):
            for r in p.locations.lines_of(loc):
                fn = int(p.lines.function[r])
                system = p.strings[p.functions.system_name[fn]]
                out.append((p.mapping_file(int(p.locations.mapping[loc])), int(p.locations.address[loc]),
                            system, p.function_name(fn) if system else None))
    return out


@checks("R8RetraceCompat:inline_positions")
def check_retraced_inline_chain(profiles, expected, rec):  # noqa: ANN001
    (p,) = profiles
    rows = []
    for loc in sorted(range(len(p.locations)), key=lambda i: int(p.locations.address[i])):
        lines = list(p.locations.lines_of(loc))
        obfuscated = p.strings[p.functions.system_name[int(p.lines.function[lines[-1]])]]
        for i, r in enumerate(lines):  # innermost first, as stack_profile_symbol lists them
            rows.append((obfuscated, p.function_name(int(p.lines.function[r])), int(p.lines.line[r]),
                         int(i < len(lines) - 1)))
    assert rows == [(r["obfuscated_name"], r["deobfuscated_name"], r["line_number"], r["inlined"])
                    for r in expected]


@checks("ProfilingLlvmSymbolizer:no_build_id")
def check_no_build_id(profiles, expected, rec):  # noqa: ANN001
    # The stat counts mappings under /data/local/tmp that have no build id to symbolize with.
    mappings = {(f, b) for f, b, _, _ in _frames(profiles) if f.startswith("/data/local/tmp/")}
    assert len([m for m in mappings if not m[1]]) == expected[0]["value"]


@checks("Stacks:symbolization_candidates_heap_profile", "Stacks:symbolization_candidates_perf_profile")
def check_symbolization_candidates(profiles, expected, rec):  # noqa: ANN001
    # Frames with a build id and no symbols, per process; breakpad_module_id is
    # a derived id the model does not hold.
    ours = sorted((p.extras["profile_labels"]["pid"], f, b, pc) for p in profiles
                  for f, b, pc, _ in _frames([p]) if b)
    processes = sorted({pid for pid, *_ in ours})
    assert len(processes) == len({r["upid"] for r in expected})
    theirs = sorted((r["module"], r["build_id"], r["rel_pc"]) for r in expected)
    assert sorted(row[1:] for row in ours) == theirs


@checks("ProfilingMetrics:unsymbolized_frames")
def check_unsymbolized_frames(profiles, expected, rec):  # noqa: ANN001
    frames = sorted({(f, b, pc) for f, b, pc, _ in _frames(profiles) if b})
    text = rec["expected_text"]
    modules = [ln.split('"')[1] for ln in text.splitlines() if ln.strip().startswith("module:")]
    builds = [ln.split('"')[1] for ln in text.splitlines() if ln.strip().startswith("build_id:")]
    addresses = [int(ln.split(":")[1]) for ln in text.splitlines() if ln.strip().startswith("address:")]
    assert frames == sorted(zip(modules, builds, addresses))


@checks("Stacks:stack_profile_unknown_frame_name")
def check_unknown_frame_name(profiles, expected, rec):  # noqa: ANN001
    names = sorted(name or "unknown" for _, _, _, name in _frames(profiles))
    assert names == [r["name"] for r in expected]


# ---------------------------------------------------------------- perf samples


def _perf(profiles: list[Profile]) -> list[Profile]:
    return [p for p in profiles if p.extras["profile_labels"]["kind"] == "perf"]


@checks("Profiling:perf_sample_counter_only")
def check_counter_only(profiles, expected, rec):  # noqa: ANN001
    (p,) = _perf(profiles)
    (row,) = expected
    assert p.samples.time.tolist() == [row["ts"]]
    assert p.samples.stack.tolist() == [-1]  # callsite_id NULL: no stack
    assert label(p, 0, "cpu_mode") is None and row["perf_cpu_mode"] == "unknown"
    assert p.samples.values[0, 1] == row["value"]  # the first running count is the sample's count
    assert label(p, 0, "sample_skipped") == "not_in_scope"
    with_stack = sum(int(q.samples.stack.max(initial=-1) >= 0) for q in profiles)
    assert with_stack == row["stack_sample_count"]


@checks("Profiling:perf_sample_counter_set", "Profiling:perf_sample_followers",
        "LinuxTests:perf_sample_with_counters_view")
def check_counters(profiles, expected, rec):  # noqa: ANN001
    (p,) = _perf(profiles)
    assert len(p.samples) == 1
    values = p.samples.values[0, 1:].tolist()  # first sample: deltas equal the running counts
    assert values == [int(r.get("value", r.get("counter_value"))) for r in expected]
    if "ts" in expected[0]:
        assert {r["ts"] for r in expected} == set(p.samples.time.tolist())
    if "counter_name" in expected[0]:
        assert sorted(vt.type for vt in p.sample_types[1:]) == sorted(r["counter_name"] for r in expected)
    if "is_timebase" in expected[0]:
        assert [r["is_timebase"] for r in expected] == [1] + [0] * (len(expected) - 1)
        assert p.samples.cpu.tolist() == [r["cpu"] for r in expected][:1]


@checks("Profiling:perf_sample_timebase_count")
def check_timebase_count(profiles, expected, rec):  # noqa: ANN001
    (p,) = _perf(profiles)
    # Only samples that carry a timebase count make a counter row.
    counted = [(t, v) for t, v in zip(p.samples.time.tolist(), p.samples.values[:, 1].tolist()) if v]
    assert counted == [(r["ts"], int(r["value"])) for r in expected]
    assert len(p.samples) == 2


@checks("Profiling:cpu_profiling_samples_counter_only_excluded", "Profiling:cpu_profiling_samples_timebase_filter")
def check_cpu_profiling_samples(profiles, expected, rec):  # noqa: ANN001
    (row,) = expected
    perf = _perf(profiles)
    total = sum(len(p.samples) for p in perf)
    stacked = [(p, i) for p in perf for i in range(len(p.samples)) if p.samples.stack[i] >= 0]
    cpu = [(p, i) for p, i in stacked if p.sample_types[1].unit == "nanoseconds"]
    assert len(cpu) == row["profiling_samples"]
    if "perf_samples" in row:
        assert total == row["perf_samples"]
    if "stack_samples" in row:
        assert len(stacked) == row["stack_samples"]
        assert [int(p.samples.time[i]) for p, i in cpu] == [row["profiling_ts"]]
        units = Counter(p.sample_types[1].unit for p in perf)
        assert units["nanoseconds"] == row["ns_sessions"] and units["count"] == row["count_sessions"]


@checks("Profiling:annotations_switch_interpreter")
def check_annotated_callstack(profiles, expected, rec):  # noqa: ANN001
    (p,) = _perf(profiles)
    frames = list(reversed(p.stack_locations(0)))  # depth 0 is the root
    assert len(frames) == len(expected)
    names = stack_names(p, 0)
    for depth, (loc, row) in enumerate(zip(frames, expected)):
        assert row["depth"] == depth
        assert p.mapping_file(int(p.locations.mapping[loc])) == row["map_name"]
        assert names[depth] == row["frame_name"]  # demangled in full, as trace processor does


# ---------------------------------------------------------------- StackSample packets

_UNIT = {"nanoseconds": "ns"}  # trace processor's unit names where they differ from the model's


def _stack_samples(profiles: list[Profile]) -> list[tuple[Profile, int]]:
    rows = [(p, i) for p in profiles if p.extras["profile_labels"]["kind"] == "stack_sample"
            for i in range(len(p.samples))]
    return sorted(rows, key=lambda r: int(r[0].samples.time[r[1]]))


def _column(p: Profile, name: str, i: int):  # noqa: ANN202
    col = getattr(p.samples, name)
    return None if col is None or int(col[i]) < 0 else int(col[i])


@checks("Profiling:stack_sample")
def check_stack_sample_rows(profiles, expected, rec):  # noqa: ANN001
    ours = []
    for p, i in _stack_samples(profiles):
        vt = p.sample_types[1]
        ours.append({"ts": int(p.samples.time[i]), "cpu": _column(p, "cpu", i), "mode": label(p, i, "cpu_mode"),
                     "weight": int(p.samples.values[i, 1]), "source": p.extras["profile_labels"]["source"],
                     "timebase_name": vt.type, "unit": _UNIT.get(vt.unit, vt.unit),
                     "frame_name": stack_names(p, i)[-1]})
    assert ours == expected


@checks("Profiling:stack_sample_contexts", "Profiling:stack_sample_async")
def check_stack_sample_contexts(profiles, expected, rec):  # noqa: ANN001
    ours = []
    for p, i in _stack_samples(profiles):
        row = {"ts": int(p.samples.time[i]), "process_name": p.extras["profile_labels"].get("process_name"),
               "cpu": _column(p, "cpu", i), "mode": label(p, i, "cpu_mode"),
               "async_name": label(p, i, "async_context"), "async_kind": label(p, i, "async_kind"),
               "parent_name": label(p, i, "async_parent")}
        if "async_name" in expected[0] and row["async_name"] is None:
            continue  # the query joins on the async context
        ours.append({k: row[k] for k in expected[0]})
    assert ours == expected


@checks("Profiling:stack_sample_cpu_profiling_samples")
def check_stack_sample_count_by_source(profiles, expected, rec):  # noqa: ANN001
    counts = Counter(p.extras["profile_labels"]["source"] for p, i in _stack_samples(profiles)
                     if p.samples.stack[i] >= 0)
    assert dict(counts) == {r["source"]: r["cnt"] for r in expected}


@checks("Profiling:stack_sample_followers")
def check_stack_sample_followers(profiles, expected, rec):  # noqa: ANN001
    ours = []
    for p, i in _stack_samples(profiles):
        for j, vt in enumerate(p.sample_types[2:], start=2):
            if vt.type == "instructions" and p.samples.values[i, j]:
                ours.append({"ts": int(p.samples.time[i]), "counter_name": vt.type,
                             "unit": _UNIT.get(vt.unit, vt.unit), "weight": int(p.samples.values[i, j])})
    assert ours == expected


@checks("Profiling:stack_sample_inline_callstack", "Profiling:stack_sample_interned_callstack")
def check_stack_sample_callstacks(profiles, expected, rec):  # noqa: ANN001
    ts = 1000 if "inline" in rec["name"] else 2000
    ((p, i),) = [(p, i) for p, i in _stack_samples(profiles) if int(p.samples.time[i]) == ts]
    if "depth" not in expected[0]:  # the sample's own (leaf) frame
        assert [{"ts": ts, "frame_name": stack_names(p, i)[-1]}] == expected
        return
    ours = []
    for depth, loc in enumerate(reversed(p.stack_locations(i))):
        r = p.locations.lines_of(loc)[-1]
        fn = int(p.lines.function[r])
        ours.append({"depth": depth, "frame_name": p.function_name(fn),
                     "source_file": p.strings[p.functions.filename[fn]] or None,
                     "line_number": int(p.lines.line[r]) or None})
    assert ours == expected


@checks("Profiling:stack_sample_session_source")
def check_stack_sample_sessions(profiles, expected, rec):  # noqa: ANN001
    streams = {(p.extras["profile_labels"]["source"], p.sample_types[1].unit) for p, _ in _stack_samples(profiles)}
    perf = [p for p in profiles if p.extras["profile_labels"]["kind"] == "perf"]
    assert len([s for s in streams if s == ("python.wall", "nanoseconds")]) == expected[0]["stack_sample_sessions"]
    assert len(perf) == expected[0]["perf_sessions"]


# ---------------------------------------------------------------- Chrome samples


@checks("TrackEvent:streaming_profile_timestamp_delta_overflow")
def check_streaming_profile_overflow(profiles, expected, rec):  # noqa: ANN001
    # Both StreamingProfilePackets are rejected for an overflowing time (the
    # slice columns are about track events, which are not read).
    assert not [p for p in profiles if p.extras["profile_labels"]["kind"] == "chrome"]
    reader_warnings = _warnings_of("TrackEvent:streaming_profile_timestamp_delta_overflow")
    assert f"Chrome sample packets with an invalid (overflowing) time: {expected[0]['profile_errors']}" \
        in reader_warnings


def _warnings_of(name: str) -> list[str]:
    from polyprof.formats.options import ReadOptions
    from polyprof.formats.perfetto._reader import TraceReader
    from polyprof.formats.source import Source

    reader = TraceReader(ReadOptions())
    reader.read(Source.of(BINARY / INDEX[name]["file"]))
    return [f"{what}: {n}" for what, n in reader.stats.items() if n]


# ---------------------------------------------------------------- the tests (after every check is registered)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_conformance(name, peer):
    rec = RECORDS[name]
    CHECKS[name](profiles_of(name), expected_rows(rec) if rec.get("expected_csv") else [], rec)


def test_every_usable_record_is_checked_or_explained(peer):
    usable = set(INDEX)
    assert len(usable) == 96, "diff_tests_binary/index.json changed: review the conformance table"
    assert set(CHECKS) | set(UNCOVERED) == usable
    assert not set(CHECKS) & set(UNCOVERED)
