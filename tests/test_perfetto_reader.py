"""The Perfetto reader on traces built with Perfetto's own schema.

Every expected number below follows from how the trace is built (written
next to it), never from running our code.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyprof
from polyprof.model.validate import check

from test_perfetto_support import (
    CLEARED,
    NEEDS,
    TraceMaker,
    gz,
    intern_stacks,
    label,
    read,
    stack_names,
    zlib_bundle,
)

# Clocks: MONOTONIC 5_000_000 = BOOTTIME 1_000_000 = REALTIME 1.7e18.
MONO, BOOT, WALL = 5_000_000, 1_000_000, 1_700_000_000_000_000_000
STACKS = {1: [("main", 0x10), ("work", 0x20)], 2: [("main", 0x10), ("idle", 0x30)]}


def perf_trace(extra=None) -> bytes:  # noqa: ANN001
    t = TraceMaker()
    t.clock_snapshot(boottime=BOOT, monotonic=MONO, realtime=WALL)
    t.process(10, "app", {11: "main-thread", 12: "worker"})
    d = t.packet(seq=7, flags=CLEARED).trace_packet_defaults
    d.timestamp_clock_id = 3  # MONOTONIC
    d.perf_sample_defaults.timebase.counter = 1  # SW_CPU_CLOCK
    d.perf_sample_defaults.timebase.frequency = 100
    d.perf_sample_defaults.followers.add().counter = 11  # HW_INSTRUCTIONS

    def sample(ts, interned=None, **fields):  # noqa: ANN001, ANN003, ANN202
        p = t.packet(seq=7, ts=MONO + ts, flags=NEEDS)
        if interned:
            intern_stacks(p.interned_data, interned)
        followers = fields.pop("followers", [])
        for k, v in fields.items():
            setattr(p.perf_sample, k, v)
        p.perf_sample.follower_counts.extend(followers)

    sample(100, STACKS, cpu=0, pid=10, tid=11, callstack_iid=1, cpu_mode=2, timebase_count=1000, followers=[500])
    sample(200, cpu=1, pid=10, tid=12, callstack_iid=2, cpu_mode=1, timebase_count=4000, followers=[100])
    sample(300, cpu=0, pid=10, tid=11, callstack_iid=1, cpu_mode=2, timebase_count=3500, followers=[900])
    sample(400, cpu=0, pid=10, tid=11, sample_skipped_reason=2, timebase_count=4000, followers=[950])
    sample(500, cpu=1, pid=10, tid=12, callstack_iid=2, unwind_error=2, timebase_count=4100, followers=[150])
    sample(600, cpu=1, kernel_records_lost=7)
    sample(700, cpu=0, pid=20, tid=21, callstack_iid=1, timebase_count=9000, followers=[1000])
    if extra:
        extra(t)
    return t.bytes()


@pytest.fixture(scope="module")
def perf_profiles():
    return read(perf_trace())


def by_pid(profiles, pid):  # noqa: ANN001, ANN201
    return next(p for p in profiles if p.extras["profile_labels"].get("pid") == pid)


def test_perf_packets_that_are_only_lost_record_notices_make_no_profile():
    """A batch of perf packets without one sample is an empty batch: the build reads it as
    no samples (the compact column fill once took it for a column of one value and failed)."""
    t = TraceMaker()
    t.clock_snapshot(boottime=BOOT, monotonic=MONO, realtime=WALL)
    d = t.packet(seq=7, flags=CLEARED).trace_packet_defaults
    d.timestamp_clock_id = 3  # MONOTONIC
    d.perf_sample_defaults.timebase.counter = 1  # SW_CPU_CLOCK
    p = t.packet(seq=7, ts=MONO + 600, flags=NEEDS)
    p.perf_sample.cpu, p.perf_sample.kernel_records_lost = 1, 7
    assert read(t.bytes()) == []


def test_perf_sample_types_event_and_period(perf_profiles):
    p = by_pid(perf_profiles, 10)
    check(p)
    assert [str(vt) for vt in p.sample_types] == ["samples/count", "cpu-clock/nanoseconds",
                                                   "instructions/instructions"]
    assert p.default_sample_type == "samples"
    assert p.period == 10_000_000  # 100 Hz
    assert p.extras["perf_event"] == {"timebase": "cpu-clock", "unit": "nanoseconds", "frequency": 100,
                                      "followers": ["instructions"]}
    assert p.extras["profile_labels"] == {"kind": "perf", "event": "cpu-clock", "pid": 10, "process_name": "app"}


def test_perf_counters_are_per_cpu_deltas(perf_profiles):
    p = by_pid(perf_profiles, 10)
    # cpu0: 1000, 3500 (+2500), 4000 (+500); cpu1: 4000, 4100 (+100); followers likewise.
    assert p.samples.values.tolist() == [[1, 1000, 500], [1, 4000, 100], [1, 2500, 400], [1, 500, 50],
                                         [1, 100, 50]]
    assert p.samples.cpu.tolist() == [0, 1, 0, 0, 1]
    assert p.samples.tid.tolist() == [11, 12, 11, 11, 12]
    assert set(p.samples.pid.tolist()) == {10}


def test_perf_times_are_converted_to_trace_clock(perf_profiles):
    p = by_pid(perf_profiles, 10)
    assert p.samples.time.tolist() == [BOOT + 100, BOOT + 200, BOOT + 300, BOOT + 400, BOOT + 500]
    assert p.time_nanos == WALL + 100  # REALTIME of the first sample
    assert p.duration_nanos == 400


def test_perf_stacks_labels_and_losses(perf_profiles):
    p = by_pid(perf_profiles, 10)
    assert [stack_names(p, i) for i in range(5)] == [["main", "work"], ["main", "idle"], ["main", "work"], [],
                                                     ["main", "idle"]]
    assert [label(p, i, "cpu_mode") for i in range(5)] == ["user", "kernel", "user", None, None]
    assert [label(p, i, "thread_name") for i in range(5)] == ["main-thread", "worker", "main-thread",
                                                             "main-thread", "worker"]
    assert label(p, 3, "sample_skipped") == "unwind_stage"
    assert label(p, 4, "unwind_error") == "memory_invalid"
    assert p.extras["samples_skipped"] == {"unwind_stage": 1}
    assert p.extras["unwind_errors"] == {"memory_invalid": 1}
    assert p.extras["kernel_records_lost"] == {"1": 7}


def test_perf_mapping_and_frames(perf_profiles):
    p = by_pid(perf_profiles, 10)
    assert len(p.mappings) == 1
    assert p.mapping_file(0) == "/system/lib64/libc.so"
    assert p.strings[p.mappings.build_id[0]] == "01020304"
    assert (int(p.mappings.start[0]), int(p.mappings.limit[0])) == (0x7000, 0x9000)
    leaf = p.stack_locations(0)[0]
    assert int(p.locations.address[leaf]) == 0x20


def test_perf_one_profile_per_process(perf_profiles):
    assert sorted(p.extras["profile_labels"]["pid"] for p in perf_profiles) == [10, 20]
    other = by_pid(perf_profiles, 20)
    # Counters run per cpu, whatever the process: cpu0 was at 4000 / 950.
    assert other.samples.values.tolist() == [[1, 5000, 50]]
    assert "process_name" not in other.extras["profile_labels"]


def test_perf_generic_and_fast_paths_keep_file_order():
    # Packets with interned data take the general decoder; counters must still
    # be differenced in file order with the fast-path packets around them.
    def extra(t):  # noqa: ANN001, ANN202
        for k, (ts, count) in enumerate(((800, 10_000), (900, 10_300), (1000, 10_700))):
            p = t.packet(seq=7, ts=MONO + ts, flags=NEEDS)
            if k == 1:
                intern_stacks(p.interned_data, {9: [("late", 0x90)]}, offset=50)
            p.perf_sample.cpu, p.perf_sample.pid, p.perf_sample.tid = 2, 30, 31
            p.perf_sample.callstack_iid = 9 if k else 1
            p.perf_sample.timebase_count = count
            p.perf_sample.follower_counts.append(0)
    p = by_pid(read(perf_trace(extra)), 30)
    assert p.samples.values[:, 1].tolist() == [10_000, 300, 400]
    assert [stack_names(p, i) for i in range(3)] == [["main", "work"], ["late"], ["late"]]


def test_samples_out_of_time_order_are_sorted_with_their_columns():
    # traced_perf writes each cpu's buffer in turn: cpu 0's samples, then cpu 1's earlier ones.
    # One process: its profile takes the trace's columns and sorts them in place.
    t = TraceMaker()
    t.clock_snapshot(boottime=BOOT, monotonic=MONO, realtime=WALL)
    p = t.packet(seq=7, flags=CLEARED)
    p.trace_packet_defaults.timestamp_clock_id = 3
    p.trace_packet_defaults.perf_sample_defaults.timebase.counter = 1
    rows = [(100, 0, 11, 1, 1000), (300, 0, 11, 2, 1500), (500, 0, 11, 1, 1600),
            (200, 1, 12, 2, 700), (400, 1, 12, 1, 1000)]
    for k, (ts, cpu, tid, iid, count) in enumerate(rows):
        q = t.packet(seq=7, ts=MONO + ts, flags=NEEDS)
        if k == 0:
            intern_stacks(q.interned_data, STACKS)
        q.perf_sample.cpu, q.perf_sample.pid, q.perf_sample.tid = cpu, 10, tid
        q.perf_sample.callstack_iid, q.perf_sample.timebase_count = iid, count
        q.perf_sample.cpu_mode = 2 if cpu == 0 else 1
    (prof,) = read(t.bytes())
    check(prof)
    assert prof.samples.time.tolist() == [BOOT + 100, BOOT + 200, BOOT + 300, BOOT + 400, BOOT + 500]
    assert prof.samples.cpu.tolist() == [0, 1, 0, 1, 0]
    assert prof.samples.tid.tolist() == [11, 12, 11, 12, 11]
    # counters differenced per cpu in file order, then moved with their samples
    assert prof.samples.values[:, 1].tolist() == [1000, 700, 500, 300, 100]
    assert [stack_names(prof, i)[-1] for i in range(5)] == ["work", "idle", "idle", "work", "work"]
    assert [label(prof, i, "cpu_mode") for i in range(5)] == ["user", "kernel", "user", "kernel", "user"]
    assert prof.duration_nanos == 400


def test_incremental_state_rules():
    t = TraceMaker()
    # Before any clear the state is invalid: this sample is skipped.
    p = t.packet(seq=3, ts=10, flags=NEEDS)
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    p = t.packet(seq=3, ts=20, flags=CLEARED | NEEDS)
    intern_stacks(p.interned_data, {1: [("first", 1)]})
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    # Data loss: invalid until the next clear.
    p = t.packet(seq=3, ts=30, flags=NEEDS, previous_packet_dropped=1)
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    # A clear starts a new generation: iid 1 now means another stack.
    p = t.packet(seq=3, ts=40, flags=CLEARED | NEEDS)
    intern_stacks(p.interned_data, {1: [("second", 2)]})
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    # The same iid on another sequence is unrelated (and that sequence is invalid).
    p = t.packet(seq=4, ts=50, flags=NEEDS)
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    (prof,) = read(t.bytes())
    assert prof.samples.time.tolist() == [20, 40]
    assert [stack_names(prof, i) for i in range(2)] == [["first"], ["second"]]
    assert any("incremental state invalid" in w and w.endswith(": 3") for w in prof.warnings)
    assert prof.extras["perf_event"]["legacy_defaults"] is True


def heap_trace() -> bytes:
    t = TraceMaker()
    t.clock_snapshot(boottime=0, monotonic_coarse=50)
    t.process(5, "system_server")
    t.packet(seq=9, flags=CLEARED)

    def dump(p, pid, heap, ts, samples):  # noqa: ANN001, ANN202
        d = p.profile_packet.process_dumps.add()
        d.pid, d.timestamp, d.orig_sampling_interval_bytes, d.sampling_interval_bytes = pid, ts, 4096, 4096
        if heap:
            d.heap_name = heap
        for iid, ac, asz, fc, fs in samples:
            s = d.samples.add()
            s.callstack_id, s.alloc_count, s.self_allocated, s.free_count, s.self_freed = iid, ac, asz, fc, fs
        return d

    # Dump 1 of pid 5 (MONOTONIC_COARSE 150 -> trace 100): samples first,
    # callstacks in a later packet, then an empty packet ends the dump.
    p = t.packet(seq=9)
    dump(p, 5, "libc.malloc", 150, [(1, 2, 200, 0, 0), (2, 1, 64, 1, 64)])
    p.profile_packet.continued, p.profile_packet.index = True, 0
    intern_stacks(t.packet(seq=9).interned_data, STACKS)
    p = t.packet(seq=9)
    p.profile_packet.index = 1
    # Dump 2 (trace 200): stack 1 frees half, stack 2 is gone (carried forward).
    p = t.packet(seq=9)
    dump(p, 5, "libc.malloc", 250, [(1, 4, 400, 2, 200)])
    d = dump(p, 6, "custom", 250, [(2, 3, 30, 0, 0)])
    d.client_error, d.disconnected = 1, True
    d.stats.unwinding_errors = 2
    p.profile_packet.index = 2
    return t.bytes()


@pytest.fixture(scope="module")
def heap_profiles():
    return read(heap_trace())


def test_heap_one_profile_per_process_heap_dump(heap_profiles):
    labels = [p.extras["profile_labels"] for p in heap_profiles]
    assert labels == [{"kind": "heap", "pid": 5, "heap": "libc.malloc", "dump_time": 100,
                       "process_name": "system_server"},
                      {"kind": "heap", "pid": 5, "heap": "libc.malloc", "dump_time": 200,
                       "process_name": "system_server"},
                      {"kind": "heap", "pid": 6, "heap": "custom", "dump_time": 200}]
    assert [str(vt) for vt in heap_profiles[0].sample_types] == [
        "alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes",
        "freed_objects/count", "freed_space/bytes"]
    assert heap_profiles[0].default_sample_type == "inuse_space"


def test_heap_values_are_cumulative_and_carried_forward(heap_profiles):
    first, second, custom = heap_profiles
    rows = lambda p: sorted((stack_names(p, i), p.samples.values[i].tolist()) for i in range(len(p.samples)))  # noqa: E731
    assert rows(first) == [(["main", "idle"], [1, 64, 0, 0, 1, 64]), (["main", "work"], [2, 200, 2, 200, 0, 0])]
    assert rows(second) == [(["main", "idle"], [1, 64, 0, 0, 1, 64]), (["main", "work"], [4, 400, 2, 200, 2, 200])]
    assert rows(custom) == [(["main", "idle"], [3, 30, 3, 30, 0, 0])]


def test_heap_times_and_facts(heap_profiles):
    first, second, custom = heap_profiles
    assert set(first.samples.time.tolist()) == {100} and set(second.samples.time.tolist()) == {200}
    assert first.extras["heapprofd"] == {"dump_time": 100, "sampling_interval_bytes": 4096,
                                         "orig_sampling_interval_bytes": 4096}
    assert custom.extras["heapprofd"]["client_error"] == "hit_timeout"
    assert custom.extras["heapprofd"]["disconnected"] is True
    assert custom.extras["heapprofd"]["process_stats"] == {"unwinding_errors": 2}


def test_heap_legacy_tables_and_dump_at_max():
    t = TraceMaker()
    t.clock_snapshot(boottime=0, monotonic_coarse=0)
    pp = t.packet(seq=2, flags=CLEARED).profile_packet
    for iid, text in ((1, b"leaf"), (2, b"lib.so"), (3, b"root")):
        s = pp.strings.add()
        s.iid, s.str = iid, text
    m = pp.mappings.add()
    m.iid = 1
    m.path_string_ids.append(2)
    for iid, name, pc in ((1, 3, 0x100), (2, 1, 0x200)):
        f = pp.frames.add()
        f.iid, f.function_name_id, f.mapping_id, f.rel_pc = iid, name, 1, pc
    cs = pp.callstacks.add()
    cs.iid = 7
    cs.frame_ids.extend([1, 2])
    d = pp.process_dumps.add()
    d.pid, d.timestamp = 3, 5
    s = d.samples.add()
    s.callstack_id, s.self_max, s.self_max_count = 7, 900, 9  # untrusted count: no orig interval
    (p,) = read(t.bytes())
    assert stack_names(p, 0) == ["root", "leaf"]
    assert p.mapping_file(0) == "/lib.so"
    assert p.samples.values.tolist() == [[0, 900, 0, 900, 0, 0]]
    assert p.extras["heapprofd"]["dump_at_max"] is True
    assert p.extras["profile_labels"]["heap"] == "unknown"


def chrome_trace() -> bytes:
    t = TraceMaker()
    t.clock_snapshot(boottime=BOOT, monotonic=MONO)
    for seq, tid, name in ((20, 31, "CrBrowserMain"), (21, 32, "ThreadPool")):
        td = t.packet(seq=seq, flags=CLEARED).thread_descriptor
        td.pid, td.tid, td.thread_name, td.reference_timestamp_us = 30, tid, name, 1000
        p = t.packet(seq=seq, flags=NEEDS)
        intern_stacks(p.interned_data, STACKS)
        p.streaming_profile_packet.callstack_iid.append(1)
        p.streaming_profile_packet.timestamp_delta_us.append(10)
        p = t.packet(seq=seq, flags=NEEDS)
        p.streaming_profile_packet.callstack_iid.extend([2, 1])
        p.streaming_profile_packet.timestamp_delta_us.extend([5, 7])
        p.streaming_profile_packet.process_priority = 3
    return t.bytes()


def test_chrome_times_threads_and_priority():
    (p,) = read(chrome_trace())
    assert p.extras["profile_labels"] == {"kind": "chrome", "pid": 30}
    assert [str(vt) for vt in p.sample_types] == ["samples/count"]
    # reference 1000 us, deltas accumulate across packets: 1010, 1015, 1022 us (MONOTONIC).
    expected = sorted([(1010, 31), (1015, 31), (1022, 31), (1010, 32), (1015, 32), (1022, 32)])
    got = sorted(zip(((p.samples.time - BOOT + MONO) // 1000).tolist(), p.samples.tid.tolist()))
    assert got == expected
    names = {label(p, i, "thread_name") for i in range(len(p.samples))}
    assert names == {"CrBrowserMain", "ThreadPool"}
    prio = sorted(label(p, i, "process_priority") or 0 for i in range(len(p.samples)))
    assert prio == [0, 0, 3, 3, 3, 3]


def test_chrome_time_overflow_is_counted():
    t = TraceMaker()
    td = t.packet(seq=5, flags=CLEARED).thread_descriptor
    td.pid, td.tid, td.reference_timestamp_us = 1, 2, 0
    t.packet(seq=5).streaming_profile_packet.timestamp_delta_us.append(-9223372036854776)
    t.packet(seq=5).streaming_profile_packet.timestamp_delta_us.append(0)
    assert read(t.bytes()) == []


def test_streaming_allocations_and_frees():
    t = TraceMaker()
    t.clock_snapshot(boottime=0, monotonic_coarse=0)
    p = t.packet(seq=4, trusted_pid=40)
    a = p.streaming_allocation
    a.address.extend([0x1000, 0x2000])
    a.size.extend([64, 128])
    a.sample_size.extend([4096, 4096])
    a.clock_monotonic_coarse_timestamp.extend([10, 20])
    a.heap_id.extend([0, 0])
    p = t.packet(seq=4, ts=30, trusted_pid=40)
    p.streaming_free.address.append(0x1000)
    p.streaming_free.heap_id.append(0)
    (prof,) = read(t.bytes())
    assert prof.extras["profile_labels"] == {"kind": "heap_stream", "pid": 40}
    assert prof.samples.values.tolist() == [[1, 64, 4096, 0], [1, 128, 4096, 0], [0, 0, 0, 1]]
    assert prof.samples.time.tolist() == [10, 20, 30]
    assert [label(prof, i, "address") for i in range(3)] == [0x1000, 0x2000, 0x1000]


def _libc_symbols(t):  # noqa: ANN001, ANN202
    """libc's frame at 0x20 symbolized as an inlined leaf in ``work_impl``."""
    ms = t.packet(seq=1).module_symbols
    ms.path, ms.build_id = "/system/lib64/libc.so", b"\x01\x02\x03\x04"
    a = ms.address_symbols.add()
    a.address = 0x20
    for fn, file, line in (("inlined_leaf", "leaf.h", 3), ("work_impl", "work.cc", 42)):
        ln = a.lines.add()
        ln.function_name, ln.source_file_name, ln.line_number = fn, file, line


def test_module_symbols_name_frames():
    p = by_pid(read(perf_trace(_libc_symbols)), 10)
    leaf = p.stack_locations(0)[0]
    rows = list(p.locations.lines_of(leaf))
    f = p.functions
    got = [(p.strings[f.name[p.lines.function[r]]], p.strings[f.filename[p.lines.function[r]]],
            int(p.lines.line[r]), p.strings[f.system_name[p.lines.function[r]]]) for r in rows]
    assert got == [("inlined_leaf", "leaf.h", 3, ""), ("work_impl", "work.cc", 42, "work")]


def test_module_symbols_leave_the_other_locations_lines_in_place():
    # One symbolized frame among plain ones: each location's lines land at its own rows (the
    # plain ones are placed in bulk, the symbolized ones one by one).

    def lines(p):  # noqa: ANN001, ANN202
        f, out = p.functions, {}
        for loc in range(len(p.locations)):
            out[int(p.locations.address[loc])] = [(p.strings[f.name[p.lines.function[r]]], int(p.lines.line[r]))
                                                  for r in p.locations.lines_of(loc)]
        return out

    plain, symbolized = lines(by_pid(read(perf_trace()), 10)), lines(by_pid(read(perf_trace(_libc_symbols)), 10))
    changed = {a for a in plain if plain[a] != symbolized[a]}
    assert len(changed) == 1 and symbolized[changed.pop()] == [("inlined_leaf", 3), ("work_impl", 42)]
    assert symbolized.keys() == plain.keys() and len(plain) > 2


@pytest.mark.parametrize("option,value,pids", [("pid", frozenset({20}), [20]), ("tid", frozenset({12}), [10])])
def test_select_pid_tid(option, value, pids):
    profiles = read(perf_trace(), **{option: value})
    assert [p.extras["profile_labels"]["pid"] for p in profiles] == pids
    if option == "tid":
        assert profiles[0].samples.tid.tolist() == [12, 12]


def test_select_time_range_is_relative_to_trace_start():
    # The earliest sample is at BOOT + 100; keep [start + 150, start + 400).
    profiles = read(perf_trace(), time_range=(150, 400))
    (p,) = profiles
    assert p.samples.time.tolist() == [BOOT + 300, BOOT + 400]


def test_select_heap_and_pid():
    assert [p.extras["profile_labels"]["heap"] for p in read(heap_trace(), heap="custom")] == ["custom"]
    assert [p.extras["profile_labels"]["pid"] for p in read(heap_trace(), pid=frozenset({5}))] == [5, 5]
    assert read(heap_trace(), tid=frozenset({5})) == []


def test_aggregate_option_sums_equal_samples():
    p = by_pid(read(perf_trace(), extra={"aggregate": True}), 10)
    assert p.samples.time is None
    assert p.extras["aggregated_samples"] == 5
    assert p.totals() == [5, 8100, 1100]
    assert len(p.samples) == 4  # samples 0 and 2 share stack, tid, cpu and labels


def test_compressed_bundles_and_gzip_give_the_same_profiles():
    plain = read(perf_trace())
    t = TraceMaker()
    p = t.packet()
    p.compressed_packets = zlib_bundle(perf_trace())
    bundled = read(t.bytes())
    zipped = read(gz(perf_trace()))
    key = lambda ps: [(p.extras["profile_labels"], p.samples.values.tolist(), p.samples.time.tolist()) for p in ps]  # noqa: E731
    assert key(bundled) == key(plain) == key(zipped)


def test_detection_by_content(tmp_path):
    path = tmp_path / "trace.bin"
    path.write_bytes(gz(perf_trace()))
    assert polyprof.detect(path).name == "perfetto"
    assert polyprof.detect(perf_trace()).name == "perfetto"
    assert len(polyprof.read_all(path)) == 2


def test_polyprof_read_merges_processes_with_labels():
    merged = polyprof.read(perf_trace())
    pids = {lb.num for ls in merged.labelsets for lb in ls if lb.key == "pid"}
    assert pids == {10, 20}
    assert merged.totals()[0] == 6


def test_process_and_thread_descriptors_name_things():
    def extra(t):  # noqa: ANN001, ANN202
        pd = t.packet(seq=1).process_descriptor
        pd.pid, pd.process_name = 20, "other-app"
        td = t.packet(seq=1).track_descriptor
        td.uuid, td.thread.pid, td.thread.tid, td.thread.thread_name = 5, 20, 21, "render"
    p = by_pid(read(perf_trace(extra)), 20)
    assert p.extras["profile_labels"]["process_name"] == "other-app"
    assert label(p, 0, "thread_name") == "render"


def test_invalid_utf8_names_are_replaced_and_counted():
    t = TraceMaker()
    p = t.packet(seq=1, ts=5, flags=CLEARED)
    intern_stacks(p.interned_data, {1: [("ok", 1)]})
    p.interned_data.function_names[0].str = b"bad\xff"
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    (prof,) = read(t.bytes())
    assert stack_names(prof, 0) == ["bad\ufffd"]
    assert any("not valid UTF-8" in w for w in prof.warnings)


def test_missing_iids_keep_the_sample():
    t = TraceMaker()
    p = t.packet(seq=1, ts=5, flags=CLEARED)
    cs = p.interned_data.callstacks.add()
    cs.iid = 1
    cs.frame_ids.append(99)
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 1
    p = t.packet(seq=1, ts=6)
    p.perf_sample.pid, p.perf_sample.callstack_iid = 1, 2
    (prof,) = read(t.bytes())
    assert stack_names(prof, 0) == ["[missing frame iid 99]"] and stack_names(prof, 1) == []
    assert np.array_equal(prof.samples.values[:, 0], [1, 1])
    assert any("missing callstack iid" in w for w in prof.warnings)


def test_summarize_lists_what_the_trace_holds():
    from polyprof.formats.perfetto import summarize

    s = summarize(read(perf_trace()) + read(heap_trace()))
    assert s["processes"] == {"10": "app", "20": None, "5": "system_server", "6": None}
    assert s["threads"] == {"11": "main-thread", "12": "worker", "21": None}
    assert s["kinds"] == {"perf": {"profiles": 2, "samples": 6}, "heap": {"profiles": 3, "samples": 5}}
    assert s["losses"] == {"samples_skipped": {"unwind_stage": 1}, "unwind_errors": {"memory_invalid": 1},
                           "kernel_records_lost": {"cpu-clock": {"1": 7}},
                           "heapprofd_client_errors": {"hit_timeout": 1}}


def test_sniff_separates_formats_in_peer_data(peer):
    from polyprof.formats import pprof
    from polyprof.formats.perfetto import sniff
    from polyprof.formats.source import Source

    seen = {"pprof": 0, "perfetto": 0}
    for path in sorted(peer.rglob("*")):
        if not path.is_file() or not path.stat().st_size:
            continue
        try:
            head = Source.of(path).head()
        except polyprof.PolyprofError:
            continue
        if pprof.sniff(head):
            assert not sniff(head), path
            assert polyprof.detect(path).name == "pprof", path
            seen["pprof"] += 1
        elif path.suffix == ".pftrace":
            assert sniff(head), path
            seen["perfetto"] += 1
    assert seen["pprof"] >= 40 and seen["perfetto"] >= 50


def stack_sample_trace() -> bytes:
    t = TraceMaker()
    t.process(50, "python", {51: "MainThread"})
    p = t.packet(seq=8, ts=100, flags=CLEARED)
    intern_stacks(p.interned_data, STACKS)
    d = p.trace_packet_defaults.stack_sample_defaults
    d.source = "python.cpu"
    d.primary_descriptor.name, d.primary_descriptor.unit = "cpu-time", 1  # UNIT_NANOSECONDS
    f = d.follower_descriptors.add()
    f.name, f.unit_str = "allocs", "objects"
    a = p.interned_data.stack_sample_async_context_descriptors.add()
    a.iid, a.name, a.kind = 3, "task-a", "coroutine"
    for ts, iid, weight, mode in ((200, 1, 1000, 1), (300, 2, 3000, 2)):
        ss = t.packet(seq=8, ts=ts, flags=NEEDS).stack_sample
        ss.task_context.pid, ss.task_context.tid = 50, 51
        ss.execution_context.cpu, ss.execution_context.mode = 1, mode
        ss.callstack_iid, ss.primary_weight = iid, weight
        ss.follower_weights.append(weight // 100)
    ss = t.packet(seq=8, ts=400, flags=NEEDS).stack_sample
    ss.task_context.pid, ss.task_context.async_id = 50, 3
    fr = ss.callstack.frames.add()
    fr.function_name, fr.source_file, fr.line_number = "coro", "c.py", 7
    ss.primary_weight, ss.unwind_error = 5, "truncated"
    return t.bytes()


def test_stack_sample_packets():
    (p,) = read(stack_sample_trace())
    assert p.extras["profile_labels"] == {"kind": "stack_sample", "source": "python.cpu", "event": "cpu-time",
                                          "pid": 50, "process_name": "python"}
    assert [str(vt) for vt in p.sample_types] == ["samples/count", "cpu-time/nanoseconds", "allocs/objects"]
    assert p.samples.values.tolist() == [[1, 1000, 10], [1, 3000, 30], [1, 5, 0]]  # weights are not running totals
    assert p.samples.time.tolist() == [200, 300, 400]
    assert [stack_names(p, i) for i in range(3)] == [["main", "work"], ["main", "idle"], ["coro"]]
    assert [label(p, i, "cpu_mode") for i in range(3)] == ["user", "kernel", None]
    assert [label(p, i, "thread_name") for i in range(3)] == ["MainThread", "MainThread", None]
    assert (label(p, 2, "async_context"), label(p, 2, "async_kind"), label(p, 2, "unwind_error")) == \
        ("task-a", "coroutine", "truncated")
    assert p.samples.cpu.tolist() == [1, 1, -1]
