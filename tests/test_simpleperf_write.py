"""simpleperf writer: framing and record order, exact round trips, conversions from other formats."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

import polyprof.api as api
from polyprof.formats import simpleperf
from polyprof.formats.options import WriteOptions
from polyprof.formats.simpleperf._schema import record_class
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.profile import ValueType
from polyprof.model.validate import check

from helpers import peer_files, peer_id
from test_simpleperf_read import OFFCPU, SMALL, make

PEER_TRACES = (peer_files("generated/simpleperf*/*.trace")
               + peer_files("firefox-devtools__profiler/src/test/fixtures/upgrades/simpleperf-*.trace.gz")
               + peer_files("jbeich__platform_system_extras/simpleperf/scripts/test/script_testdata/*.proto_data")
               + peer_files("google__perfetto/diff_tests_binary/parser__simpleperf_proto__tests/*.simpleperf.trace"))


def write(p, **options) -> tuple[bytes, object]:
    out = io.BytesIO()
    report = simpleperf.write(p, out, WriteOptions(**options))
    return out.getvalue(), report


def records(data: bytes) -> list:
    """Decode a written file with the upstream framing rules, independently of our reader."""
    assert data[:10] == b"SIMPLEPERF" and struct.unpack_from("<H", data, 10)[0] == 1
    pos, out = 12, []
    while True:
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            break
        out.append(record_class().FromString(data[pos:pos + size]))
        pos += size
    assert pos == len(data), "bytes after the zero terminator"
    return out


def kinds(recs: list) -> list[str]:
    names = ("sample", "lost", "file", "thread", "meta_info", "context_switch")
    return [next(n for n in names if r.HasField(n)) for r in recs]


def test_there_are_peer_files(peer):
    assert len(PEER_TRACES) >= 29


@pytest.mark.parametrize("path", PEER_TRACES, ids=[peer_id(t) for t in PEER_TRACES])
def test_read_write_read_keeps_the_canonical_dump(path):
    p = api.read(path, format="simpleperf")
    data, report = write(p)
    assert not report, report.lines()
    q = api.read(data)
    check(q)
    assert dump(q) == dump(p)


def test_records_come_in_simpleperf_order_with_contiguous_file_ids():
    p = api.read(make(*SMALL))
    recs = records(write(p)[0])
    order = kinds(recs)
    assert order == ["meta_info", "sample", "sample", "lost", "file", "file", "thread", "thread", "thread"]
    assert [r.file.id for r in recs if r.HasField("file")] == [0, 1]
    libfoo = next(r.file for r in recs if r.HasField("file") and r.file.path == b"/system/lib64/libfoo.so")
    assert list(libfoo.symbol) == [b"leaf()", b"Foo::run()"]
    assert list(libfoo.mangled_symbol) == [b"_Z4leafv", b"_ZN3Foo3runEv"]
    chain = recs[1].sample.callchain
    assert [(c.vaddr_in_file, c.symbol_id) for c in chain] == [(0x10, 0), (0x20, 1), (0x30, -1)]


def test_offcpu_times_are_written_as_switch_pairs():
    p = api.read(make(*OFFCPU))
    recs = records(write(p)[0])
    switches = [(r.context_switch.switch_on, r.context_switch.time, r.context_switch.thread_id)
                for r in recs if r.HasField("context_switch")]
    assert switches == [(False, 200, 10), (True, 1200, 10), (False, 1400, 10), (True, 1900, 10),
                        (False, 50, 11), (True, 51, 11)]
    assert dump(api.read(write(p)[0])) == dump(p)


def test_a_pprof_cpu_profile_becomes_cpu_clock_samples(peer):
    src = peer / "generated/go_runtime_pprof/cpu.pb.gz"
    p = api.read(src)
    data, report = write(p)
    q = api.read(data)
    assert [str(t) for t in q.sample_types] == ["samples/count", "cpu-clock/nanoseconds"]
    assert q.totals() == p.totals()  # a row standing for k samples is k records
    assert report.renamed == {"cpu/nanoseconds": "cpu-clock/nanoseconds"}
    expanded = np.repeat(np.arange(len(p.samples)), p.samples.values[:, 0])
    names = lambda prof, i: [prof.function_name(int(prof.lines.function[prof.locations.lines_of(loc)[0]]))  # noqa: E731
                             for loc in prof.stack_locations(i)]
    assert all(names(q, j) == names(p, int(i)) for j, i in enumerate(expanded))
    lost = "\n".join(report.lines())
    assert "sample type cpu/nanoseconds written as cpu-clock/nanoseconds" in lost
    assert "label worker not written" in lost
    assert "source line numbers not written" in lost


def test_sample_index_chooses_the_event_of_a_converted_profile(peer):
    p = api.read(peer / "generated/go_runtime_pprof/allocs.pb.gz")
    q = api.read(write(p, sample_index="alloc_space")[0])
    assert [str(t) for t in q.sample_types] == ["samples/count", "alloc_space/bytes"]  # event alloc_space(bytes)
    assert q.totals()[1] == p.totals()[p.sample_index("alloc_space")]


def test_every_sample_type_becomes_an_event_with_its_unit_and_wall_time_is_not_cpu_clock(peer):
    p = api.read(peer / "grafana__pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz")
    data, report = write(p)
    q = api.read(data)
    assert [str(t) for t in q.sample_types] == ["samples/count", "wall/microseconds"]
    assert records(data)[0].meta_info.event_type == [b"wall(microseconds)"]
    assert q.totals() == p.totals() and q.default_sample_type == "wall"
    heap = api.read(peer / "generated/go_runtime_pprof/heap.pb.gz")
    back = api.read(write(heap)[0])
    for vt in heap.sample_types:  # the default (inuse_space) is the first event, so the default survives
        assert back.totals()[back.sample_index(vt.type)] == heap.totals()[heap.sample_index(vt.type)]
    assert back.sample_types[back.default_index()] == ValueType("inuse_space", "bytes")


def test_inlined_lines_become_separate_entries_and_are_reported():
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    m = b.mapping(filename="/bin/app")
    inner, outer = b.function("inner"), b.function("outer")
    loc = b.location(m, 0x40, [(inner, 3, 0), (outer, 9, 0)])
    b.add_sample(b.stack([loc]), [10], tid=5)
    data, report = write(b.finish())
    chain = records(data)[1].sample.callchain
    assert [(c.vaddr_in_file, c.symbol_id) for c in chain] == [(0x40, 0), (0x40, 1)]
    assert report.items["inlined frames written as separate callchain entries"] == 1
    assert report.items["source line numbers not written"] == 2  # one per line


def test_unmapped_frames_go_to_an_unnamed_file_and_threads_are_derived():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("wall", "nanoseconds")])
    from polyprof.model.profile import Label
    b.add_sample(b.stack([b.frame("main", address=0x10)]), [3, 30], tid=7, pid=6,
                 labels=[Label("thread_name", str="worker")], cpu=1)
    data, report = write(b.finish())
    recs = records(data)
    assert [r.file.path for r in recs if r.HasField("file")] == [b""]
    assert [(r.thread.thread_id, r.thread.process_id, r.thread.thread_name) for r in recs
            if r.HasField("thread")] == [(7, 6, b"worker")]
    assert len([r for r in recs if r.HasField("sample")]) == 3  # the row stood for three samples
    assert [r.sample.event_count for r in recs if r.HasField("sample")] == [10, 10, 10]
    assert [r.meta_info.event_type for r in recs if r.HasField("meta_info")] == [[b"wall(nanoseconds)"]]
    assert report.items["sample cpu column not written"] == 1


def test_convert_through_the_api(tmp_path, peer):
    out = tmp_path / "x.trace"
    report = api.convert(peer / "generated/simpleperf/cpu_clock_fp.trace", out)
    assert not report and report.target == "simpleperf"
    assert dump(api.read(out)) == dump(api.read(peer / "generated/simpleperf/cpu_clock_fp.trace"))
