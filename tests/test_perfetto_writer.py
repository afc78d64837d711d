"""The Perfetto writer: round trips, Perfetto's parser rules, loss reports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.profile import Label

from helpers import PEER, peer_id
from test_perfetto_reader import chrome_trace, heap_trace, perf_trace, stack_sample_trace
from test_perfetto_support import CLEARED, NEEDS, TraceMaker, pb, read, write_bytes

BINARY = "google__perfetto/diff_tests_binary/"


def _diff_test_traces() -> list:
    index = PEER / BINARY / "index.json"
    if not index.exists():
        return []
    entries = json.loads(index.read_text())
    return sorted(PEER / BINARY / e["file"] for e in entries.values()
                  if e.get("file", "").endswith(".pftrace") and (PEER / BINARY / e["file"]).stat().st_size)


def _alloc_trace() -> bytes:
    t = TraceMaker()
    t.clock_snapshot(boottime=0, monotonic_coarse=0)
    p = t.packet(seq=4, trusted_pid=40)
    p.streaming_allocation.address.extend([0x10, 0x20])
    p.streaming_allocation.size.extend([8, 16])
    p.streaming_allocation.sample_size.extend([1, 1])
    p.streaming_allocation.clock_monotonic_coarse_timestamp.extend([5, 6])
    p.streaming_allocation.heap_id.extend([1, 1])
    p = t.packet(seq=4, ts=7, trusted_pid=40)
    p.streaming_free.address.append(0x10)
    p.streaming_free.heap_id.append(1)
    return t.bytes()


TRACES = {"perf": perf_trace, "heap": heap_trace, "chrome": chrome_trace, "allocs": _alloc_trace,
          "stack_sample": stack_sample_trace}


def _round_trip(p, **options):  # noqa: ANN001, ANN003, ANN202
    data, report = write_bytes(p)
    back = read(data, **options)
    assert len(back) == 1, report.lines()
    return data, report, back[0]


@pytest.mark.parametrize("name", sorted(TRACES))
def test_round_trip_equals_in_the_canonical_dump(name, golden):
    profiles = read(TRACES[name]())
    golden(f"perfetto/{name}.dump.txt", "".join(dump(p) for p in profiles))
    for p in profiles:
        _, report, back = _round_trip(p)
        assert not report, report.lines()
        assert dump(back) == dump(p)


DIFF_TRACES = _diff_test_traces()


@pytest.mark.parametrize("path", DIFF_TRACES, ids=[peer_id(p) for p in DIFF_TRACES])
def test_round_trip_of_perfetto_diff_test_traces(path):
    # names as written (a frame has one name, so demangled names would lose their mangled form)
    for p in polyprof.read_all(path, format="perfetto", options=polyprof.ReadOptions(demangle="none")):
        data, report, back = _round_trip(p, demangle="none")
        assert not report, report.lines()
        assert dump(back) == dump(p)
        pb.Trace.FromString(data)


def test_diff_test_traces_are_present(peer):
    assert len(DIFF_TRACES) >= 40


def _records(data: bytes):  # noqa: ANN202
    """(field, wire type, value or payload bytes) of each top-level field of a message."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield field, wire, value
        elif wire == 2:
            n, i = _varint(data, i)
            yield field, wire, data[i:i + n]
            i += n
        else:
            size = 8 if wire == 1 else 4
            yield field, wire, data[i:i + size]
            i += size


def _varint(b: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        value |= (b[i] & 0x7F) << shift
        i += 1
        if b[i - 1] < 0x80:
            return value, i
        shift += 7


# message path -> repeated scalar fields the schema leaves unpacked
UNPACKED = {(12, 7): {2}, (12, 19): {7}, (66,): {7}, (54,): {1, 2}, (74,): {1, 2, 3, 4, 5}, (75,): {1, 2}}
PACKED = {(135,): {13, 14}}  # StackSample declares these [packed = true]


def _check_unpacked(payload: bytes, path: tuple[int, ...]) -> int:
    seen = 0
    for field, wire, value in _records(payload):
        if field in UNPACKED.get(path, ()):
            assert wire == 0, f"field {field} of {path} is packed"
            seen += 1
        if field in PACKED.get(path, ()):
            assert wire == 2, f"field {field} of {path} must be packed"
            seen += 1
        sub = path + (field,)
        if wire == 2 and any(k[:len(sub)] == sub for k in (*UNPACKED, *PACKED)):
            seen += _check_unpacked(value, sub)
    return seen


@pytest.mark.parametrize("name", sorted(TRACES))
def test_written_traces_follow_perfettos_parser_rules(name):
    for p in read(TRACES[name]()):
        data, _ = write_bytes(p)
        trace = pb.Trace.FromString(data)  # the real schema parses it
        seen_seqs = set()
        checked = 0
        for raw, packet in zip((v for f, _, v in _records(data) if f == 1), trace.packet):
            seq = packet.trusted_packet_sequence_id
            assert seq != 0
            if seq not in seen_seqs and packet.sequence_flags:
                assert packet.sequence_flags & CLEARED, "a sequence must start by clearing its state"
            seen_seqs.add(seq)
            if packet.HasField("interned_data"):
                assert packet.sequence_flags & (NEEDS | CLEARED)
            checked += _check_unpacked(raw, ())
            assert not packet.HasField("trusted_uid")
        assert checked > 0


def _pprof(path: str):  # noqa: ANN202
    if not (PEER / path).exists():
        pytest.skip(f"peer file {path} not present")
    return polyprof.read(PEER / path)


def test_pprof_cpu_profile_to_perfetto_keeps_totals():
    p = _pprof("google__pprof/internal/report/testdata/sample.cpu")
    data, report, back = _round_trip(p)
    assert not report.items  # rows standing for several samples: their count is a follower named "samples"
    assert back.sample_types == p.sample_types and back.default_sample_type == "cpu"
    assert back.totals() == p.totals()
    assert back.period == p.period and back.period_type == p.period_type
    assert back.time_nanos == p.time_nanos and back.duration_nanos == p.duration_nanos


def test_units_without_a_perf_counter_are_kept_in_the_event_name():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("wall", "microseconds"), ("alloc", "bytes")])
    for t, name, values in ((1, "a", [1, 5, 7]), (2, "b", [1, 6, 8])):
        b.add_sample(b.stack([b.frame(name, "f.c", 1)]), values, time=t)
    p = b.finish()
    _, report, back = _round_trip(p)
    assert back.sample_types == p.sample_types and back.totals() == p.totals()
    assert back.sample_types[back.default_index()] == p.sample_types[p.default_index()]


def test_pprof_heap_profile_to_perfetto_dump():
    p = _pprof("generated/go_runtime_pprof/heap.pb.gz")
    _, report, back = _round_trip(p)
    assert back.extras["profile_labels"]["kind"] == "heap"
    index = {vt.type: i for i, vt in enumerate(back.sample_types)}
    for name in ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space"):
        assert back.totals()[index[name]] == p.totals()[p.sample_index(name)]
    assert report.items.get("sample labels not kept in a heap dump: bytes") == 1


def _perf_profile(times, stacks, values, labels=()):  # noqa: ANN001, ANN202
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu-clock", "nanoseconds")])
    locs = [b.frame(f"f{i}", "f.c", i + 1) for i in range(4)]
    for k, (t, s, v) in enumerate(zip(times, stacks, values)):
        b.add_sample(b.stack([locs[j] for j in s]), [1, v], time=t, labels=labels[k] if labels else ())
    return b.finish()


def test_loss_report_lists_what_a_trace_cannot_hold():
    p = _perf_profile([5, 3], [[0, 1], [2]], [10, 20], labels=[(Label("custom", str="x"),), ()])
    p.comments.append("a comment")
    p.extras["made_up"] = 1
    _, report, back = _round_trip(p)
    assert report.items["sample labels not kept: custom"] == 1
    assert report.items["samples reordered by time"] == 1
    assert report.items["comments not kept"] == 1
    assert report.items["format-specific fact not kept: made_up"] == 1
    assert back.samples.time.tolist() == [3, 5]
    assert back.samples.values[:, 1].tolist() == [20, 10]


def test_negative_times_survive_through_a_shifted_clock():
    p = _perf_profile([-50, 10], [[0], [1]], [1, 2])
    _, report, back = _round_trip(p)
    assert back.samples.time.tolist() == [-50, 10]
    assert dump(back).split("samples:")[1] == dump(p).split("samples:")[1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10**12), st.lists(st.integers(0, 3), min_size=0, max_size=5),
                          st.integers(0, 10**9)), min_size=1, max_size=30))
def test_property_counts_and_totals_survive(rows):
    times, stacks, values = zip(*rows)
    p = _perf_profile(times, stacks, values)
    _, report, back = _round_trip(p)
    assert len(back.samples) == len(p.samples)
    assert back.totals() == p.totals()
    assert sorted(back.samples.time.tolist()) == sorted(times)
    assert not report or set(report.items) == {"samples reordered by time"}


def test_convert_by_extension(tmp_path):
    src = tmp_path / "in.pftrace"
    src.write_bytes(perf_trace())
    merged = polyprof.read(src, options=polyprof.ReadOptions(pid=frozenset({10})))
    out = tmp_path / "out.perfetto-trace"
    report = polyprof.write(merged, out)
    assert report.target == "perfetto"
    assert polyprof.detect(out).name == "perfetto"
    assert dump(polyprof.read(out)) == dump(merged)


def test_empty_stack_and_no_samples():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu-clock", "nanoseconds")])
    b.add_sample(-1, [1, 5], time=1)
    p = b.finish()
    _, _, back = _round_trip(p)
    assert back.samples.stack.tolist() == [-1] and back.totals() == [1, 5]
    empty = ProfileBuilder("test")
    empty.set_sample_types([("samples", "count"), ("cpu-clock", "nanoseconds")])
    data, _ = write_bytes(empty.finish())
    assert read(data) == []
    assert np.all(np.frombuffer(data[:1], np.uint8) == 0x0A)
