"""simpleperf report-sample reader: framing, every record type, off-CPU, quality facts.

Synthetic files here are built field by field with the wire encoder (not with
our writer), following ../shared/spec/wire-formats.md section 3, so a reader
bug cannot hide behind a matching writer bug.
"""

from __future__ import annotations

import pytest

import polyprof.api as api
from polyprof.errors import MalformedInputError, OptionsError, UnsupportedFeatureError
from polyprof.formats import simpleperf
from polyprof.formats.options import ReadOptions
from polyprof.model.dump import dump
from polyprof.model.validate import check
from polyprof.wire.encode import Encoder

# ---------------------------------------------------------------- file building helpers

_KIND = {"sample": 1, "lost": 2, "file": 3, "thread": 4, "meta": 5, "switch": 6}


def rec(kind: str, body: Encoder) -> bytes:
    return Encoder().message(_KIND[kind], body).getvalue()


def sample(time: int, tid: int, chain=(), count: int = 1, event: int = 0, unwind=None) -> bytes:
    e = Encoder().varint_field(1, time, always=True).varint_field(2, tid, always=True)
    for entry in chain:
        vaddr, fid, sid = entry[:3]
        c = Encoder().varint_field(1, vaddr, always=True).varint_field(2, fid, always=True)
        c.varint_field(3, sid, always=True)
        if len(entry) > 3:
            c.varint_field(4, entry[3], always=True)
        e.message(3, c)
    e.varint_field(4, count, always=True).varint_field(5, event, always=True)
    if unwind is not None:
        raw, addr, code = unwind
        e.message(6, Encoder().varint_field(1, raw, always=True).varint_field(2, addr, always=True)
                  .varint_field(3, code, always=True))
    return rec("sample", e)


def file_(fid: int, path: str | bytes, symbols=(), mangled=()) -> bytes:
    e = Encoder().varint_field(1, fid, always=True)
    e.bytes_field(2, path if isinstance(path, bytes) else path.encode(), always=True)
    for s in symbols:
        e.bytes_field(3, s if isinstance(s, bytes) else s.encode(), always=True)
    for s in mangled:
        e.string_field(4, s, always=True)
    return rec("file", e)


def thread(tid: int, pid: int, name: str | None = None) -> bytes:
    e = Encoder().varint_field(1, tid, always=True).varint_field(2, pid, always=True)
    if name is not None:
        e.string_field(3, name, always=True)
    return rec("thread", e)


def meta(events, offcpu: bool | None = None, **text: str) -> bytes:
    e = Encoder()
    for name in events:
        e.string_field(1, name, always=True)
    for field, key in ((2, "app_package_name"), (3, "app_type"), (4, "android_sdk_version"),
                       (5, "android_build_type")):
        if key in text:
            e.string_field(field, text[key], always=True)
    if offcpu is not None:
        e.bool_field(6, offcpu, always=True)
    return rec("meta", e)


def switch(on: bool, time: int, tid: int) -> bytes:
    return rec("switch", Encoder().bool_field(1, on, always=True).varint_field(2, time, always=True)
               .varint_field(3, tid, always=True))


def lost(kept: int, dropped: int) -> bytes:
    return rec("lost", Encoder().varint_field(1, kept, always=True).varint_field(2, dropped, always=True))


def make(*records: bytes, terminator: bool = True) -> bytes:
    out = b"SIMPLEPERF" + (1).to_bytes(2, "little")
    for r in records:
        out += len(r).to_bytes(4, "little") + r
    return out + (b"\0\0\0\0" if terminator else b"")


def read(data: bytes, **extra):
    p = api.read(data, format="simpleperf", options=ReadOptions(extra=extra))
    check(p)
    return p


def frames(p, i: int) -> list[tuple[str, int, str | None]]:
    """(file, address, function name or None) of sample i, leaf first."""
    out = []
    for loc in p.stack_locations(i):
        rows = p.locations.lines_of(loc)
        name = p.function_name(int(p.lines.function[rows[0]])) if len(rows) else None
        out.append((p.mapping_file(int(p.locations.mapping[loc])), int(p.locations.address[loc]), name))
    return out


def labels(p, i: int) -> dict:
    return {lb.key: (lb.str if lb.str is not None else lb.num) for lb in p.labelsets[int(p.samples.labelset[i])]}


SMALL = [meta(["cpu-clock"], False, app_package_name="com.example"),
         sample(1000, 11, [(0x10, 0, 1), (0x20, 0, 0), (0x30, 1, -1)], count=250000),
         sample(2000, 12, [(0x20, 0, 0)], count=250000),
         lost(2, 1),
         file_(0, "/system/lib64/libfoo.so", ["Foo::run()", "leaf()"], ["_ZN3Foo3runEv", "_Z4leafv"]),
         file_(1, "/apex/libc.so"),
         thread(11, 10, "worker"), thread(12, 10, "main"), thread(13, 10, "idle")]


# ---------------------------------------------------------------- sniff and framing

def test_sniff_says_mine_only_for_the_magic():
    assert simpleperf.sniff(make())
    assert not simpleperf.sniff(b"SIMPLEPER")
    assert not simpleperf.sniff(b"\x1f\x8b\x08\x00")
    assert not simpleperf.sniff(b"\x0a\x04\x08\x01\x10\x02")


def test_detection_picks_simpleperf_also_under_gzip():
    import gzip
    assert api.detect(make(*SMALL)).name == "simpleperf"
    assert api.read(gzip.compress(make(*SMALL))).source_format == "simpleperf"


def test_empty_file_is_a_profile_without_samples():
    p = read(make())
    assert len(p.samples) == 0 and [str(t) for t in p.sample_types] == ["samples/count"]


def test_every_truncation_is_a_clear_malformed_error():
    data = make(*SMALL)
    for cut in range(len(data)):
        with pytest.raises(MalformedInputError) as err:
            api.read(data[:cut], format="simpleperf")
        assert "simpleperf" in str(err.value)
    assert "truncated" in str(_error(data[:-4]))
    assert "zero end marker" in str(_error(data[:-4]))


def _error(data: bytes) -> Exception:
    with pytest.raises(MalformedInputError) as err:
        api.read(data, format="simpleperf")
    return err.value


@pytest.mark.parametrize("data,words", [
    (make() [:12] + b"\xff\xff\xff\xff" + b"\0" * 8, "claims 4294967295 bytes"),
    (make(b"\x0a\x05\x08"), "not a valid Record"),
    (make(sample(1, 1, [(0x10, 0, 3)]), file_(0, "/a.so", ["only"])), "refers to symbol 3 of file 0"),
    (make(sample(1, 1, [(0x10, 0, -2)]), file_(0, "/a.so", ["only"])), "refers to symbol -2"),
    (make(file_(0, "/a.so"), file_(0, "/b.so")), "two File records have id 0"),
    (b"SIMPLEPERF\x01", "ends inside the version"),
], ids=["huge-size", "bad-record", "symbol-past-end", "symbol-below-minus-one", "duplicate-file", "short-header"])
def test_malformed_inputs(data, words):
    assert words in str(_error(data))


def test_unknown_version_is_unsupported():
    with pytest.raises(UnsupportedFeatureError, match="version 2"):
        api.read(b"SIMPLEPERF\x02\x00\0\0\0\0", format="simpleperf")


def test_trailing_bytes_and_odd_records_are_counted_not_dropped_silently():
    unknown_kind = Encoder().bytes_field(23, b"", always=True).getvalue()  # a Record field from the future
    p = read(make(*SMALL, unknown_kind) + b"junk")
    assert any("4 byte(s) after the zero end marker" in w for w in p.warnings)
    assert any("unknown kind" in w for w in p.warnings)


# ---------------------------------------------------------------- records

def test_samples_frames_threads_and_files():
    p = read(make(*SMALL))
    assert [str(t) for t in p.sample_types] == ["samples/count", "cpu-clock/nanoseconds"]
    assert p.default_sample_type == "cpu-clock"
    assert p.samples.values.tolist() == [[1, 250000], [1, 250000]]
    assert p.samples.time.tolist() == [1000, 2000]
    assert p.samples.tid.tolist() == [11, 12] and p.samples.pid.tolist() == [10, 10]
    assert frames(p, 0) == [("/system/lib64/libfoo.so", 0x10, "leaf()"),
                            ("/system/lib64/libfoo.so", 0x20, "Foo::run()"), ("/apex/libc.so", 0x30, None)]
    assert labels(p, 0) == {"thread_name": "worker"}
    fn = {p.function_name(i): p.strings[p.functions.system_name[i]] for i in range(len(p.functions))}
    assert fn["leaf()"] == "_Z4leafv"
    assert p.extras["threads"] == [[11, 10, "worker"], [12, 10, "main"], [13, 10, "idle"]]
    assert p.extras["meta_info"] == {"event_type": ["cpu-clock"], "app_package_name": "com.example",
                                     "trace_offcpu": False}
    assert p.extras["lost_situation"] == {"sample_count": 2, "lost_count": 1}
    assert p.extras["lost_ratio"] == pytest.approx(1 / 3, abs=1e-6)
    assert p.extras["unsymbolized_frames"] == {"frames": 4, "without_symbol": 1, "share": 0.25}


def test_record_order_does_not_matter():
    head, samples, tail = SMALL[:1], SMALL[1:3], SMALL[3:]
    assert dump(read(make(*head, *samples, *tail))) == dump(read(make(*tail, *samples, *head)))
    assert read(make(*samples[::-1], *tail, *head)).samples.time.tolist() == [2000, 1000]  # file order kept


def test_several_event_types_get_their_own_columns():
    p = read(make(meta(["cpu-cycles", "task-clock", "cpu-clock:u"]),
                  sample(1, 1, count=100, event=0), sample(2, 1, count=7, event=1),
                  sample(3, 1, count=9, event=2), sample(4, 1, count=50, event=0)))
    assert [str(t) for t in p.sample_types] == [
        "samples/count", "cpu-cycles_samples/count", "cpu-cycles/count", "task-clock_samples/count",
        "task-clock/nanoseconds", "cpu-clock:u_samples/count", "cpu-clock:u/nanoseconds"]
    assert p.totals() == [4, 2, 150, 1, 7, 1, 9]
    assert p.default_sample_type == "cpu-cycles"


def test_missing_meta_info_names_events_and_warns():
    p = read(make(sample(1, 1, count=5, event=1)))
    assert [t.type for t in p.sample_types] == ["samples", "event0_samples", "event0", "event1_samples", "event1"]
    assert any("no MetaInfo record" in w for w in p.warnings)


def test_file_ids_need_not_start_at_zero_and_missing_files_are_kept_as_addresses():
    p = read(make(file_(5, "/x.so", ["f"]), sample(1, 1, [(0x1, 5, 0), (0x2, 9, -1)])))
    assert frames(p, 0) == [("/x.so", 1, "f"), ("", 2, None)]
    assert any("file id(s) [9]" in w for w in p.warnings)


def test_unwinding_results_become_labels_and_counts():
    p = read(make(meta(["cpu-cycles"]), sample(1, 1, unwind=(4, 0x1234, 5)),
                  sample(2, 1, unwind=(0, 0, 2)), sample(3, 1, unwind=(7, 0, 5)), sample(4, 1)))
    assert labels(p, 0) == {"unwinding_error": "ERROR_INVALID_MAP", "unwinding_raw_error": 4,
                            "unwinding_error_addr": 0x1234}
    assert labels(p, 3) == {}
    assert p.extras["unwinding_failures"] == {"ERROR_INVALID_MAP": 2, "ERROR_NOT_ENOUGH_STACK": 1}


def test_execution_types_are_kept_per_frame():
    p = read(make(sample(1, 1, [(0x10, 0, 0, 2), (0x20, 1, -1, 1), (0x30, 2, -1, 0)]),
                  sample(2, 1, [(0x10, 0, 0, 2)]), sample(3, 1, [(0x20, 1, -1, 2)]),
                  file_(0, "[JIT app cache]", ["a.b.C.run"]), file_(1, "/data/app/base.vdex"),
                  file_(2, "/system/lib64/libart.so")))
    assert p.extras["frame_execution_types"] == {
        "[JIT app cache]": {"jit_jvm_method": ["0x10"]},
        "/data/app/base.vdex": {"interpreted_jvm_method": ["0x20"]}}  # 1 vote to 1: lower number wins
    assert any("1 callchain entries have another execution type" in w for w in p.warnings)


def test_invalid_utf8_is_replaced_and_counted():
    p = read(make(sample(1, 1, [(0x1, 0, 0)]), file_(0, b"/lib\xff.so", [b"f\xfe"]), thread(1, 1, "t")))
    assert frames(p, 0) == [("/lib\ufffd.so", 1, "f\ufffd")]
    assert any("2 string(s) were not valid UTF-8" in w for w in p.warnings)


def test_samples_without_thread_record_are_counted():
    p = read(make(sample(1, 1), sample(2, 2), thread(1, 1, "main")))
    assert p.samples.pid.tolist() == [1, 0]
    assert any("1 sample(s) of 1 thread(s) have no Thread record" in w for w in p.warnings)


# ---------------------------------------------------------------- off-CPU

OFFCPU = [meta(["cpu-clock", "sched:sched_switch"], True),
          sample(100, 10, count=1000),                  # on-CPU
          sample(200, 10, count=1, event=1),            # off until the switch-on at 1200
          switch(False, 200, 10), switch(True, 1200, 10),
          sample(1300, 10, count=1000),
          sample(1400, 10, count=1, event=1),           # off until its next sample at 1900
          sample(50, 11, count=1, event=1),             # held back: ends at an earlier switch-on -> 1 ns
          switch(True, 40, 11),
          sample(1900, 10, count=1000),
          sample(2000, 10, count=1, event=1)]           # never ends


def test_offcpu_times_follow_simpleperf_report_semantics():
    p = read(make(*OFFCPU))
    names = [t.type for t in p.sample_types]
    assert names[-2:] == ["off-cpu", "on+off-cpu"]
    assert p.default_sample_type == "on+off-cpu"
    off = p.samples.values[:, names.index("off-cpu")].tolist()
    both = p.samples.values[:, names.index("on+off-cpu")].tolist()
    assert off == [0, 1000, 0, 500, 1, 0, 0]
    assert both == [1000, 1000, 1000, 500, 1, 1000, 0]
    assert p.extras["offcpu"] == {"switch_off_samples": 4, "without_end": 1}
    assert any("3 ContextSwitch record(s)" in w for w in p.warnings)


@pytest.mark.parametrize("view,default", [("on", "cpu-clock"), ("off", "off-cpu"), ("on+off", "on+off-cpu")])
def test_offcpu_option_chooses_the_view(view, default):
    assert read(make(*OFFCPU), offcpu=view).default_sample_type == default


def test_offcpu_option_is_checked():
    with pytest.raises(OptionsError, match="one of on, off, on\\+off"):
        read(make(*OFFCPU), offcpu="both")
    with pytest.raises(OptionsError, match="no off-CPU data"):
        read(make(*SMALL), offcpu="off")
    assert read(make(*SMALL), offcpu="on").default_sample_type == "cpu-clock"


def test_switches_without_trace_offcpu_are_reported():
    p = read(make(meta(["cpu-clock"], False), switch(True, 1, 1), sample(2, 1)))
    assert [t.type for t in p.sample_types] == ["samples", "cpu-clock"]
    assert any("1 ContextSwitch record(s) ignored" in w for w in p.warnings)


# ---------------------------------------------------------------- fuzz

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from polyprof.errors import PolyprofError  # noqa: E402
from polyprof.formats.source import Source  # noqa: E402

_VALID = make(*SMALL, *OFFCPU[1:])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(12, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=4))
def test_corrupted_bytes_raise_only_polyprof_errors(flips):
    data = bytearray(_VALID)
    for at, value in flips:
        data[at] = value
    try:
        profiles = simpleperf.read(Source.of(bytes(data)), ReadOptions())
    except PolyprofError:
        return
    for p in profiles:
        check(p)
