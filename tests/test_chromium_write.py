"""Writing CallStackProfiles: Chrome's encoding rules, round trips, loss reports, properties."""

from __future__ import annotations

import io

import pytest
from helpers import small_peer_profiles
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chromium_support import SYMBOLS, all_fixtures, fixture_bytes

import polyprof
from polyprof.formats import chromium
from polyprof.formats.chromium.schema import messages
from polyprof.formats.loss import LossReport
from polyprof.formats.options import ReadOptions, WriteOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.profile import Label


def write(p: polyprof.Profile, container: str | None = None) -> tuple[bytes, LossReport]:
    out = io.BytesIO()
    extra = {"chromium_container": container} if container else {}
    report = chromium.write(p, out, WriteOptions(extra=extra))
    return out.getvalue(), report


def parse(kind: str, data: bytes):  # noqa: ANN201
    msg = messages()[kind]()
    msg.ParseFromString(data)
    return msg


def reread(data: bytes) -> polyprof.Profile:
    profiles = polyprof.read_all(data, format="chromium")
    assert len(profiles) == 1
    return profiles[0]


@pytest.mark.parametrize("name", all_fixtures())
def test_round_trip_is_lossless(name: str) -> None:
    for p in polyprof.read_all(fixture_bytes(name)):
        data, report = write(p)
        assert not report, report.lines()
        assert dump(reread(data)) == dump(p)


@pytest.mark.parametrize("container, kind", [("callstack", "CallStackProfile"), ("sampled", "SampledProfile"),
                                             ("uma", "ChromeUserMetricsExtension")])
def test_every_container_round_trips_its_part(container: str, kind: str) -> None:
    p = polyprof.read_all(fixture_bytes("uma_log.textproto"))[0]
    data, report = write(p, container)
    assert parse(kind, data).ListFields()
    q = reread(data)
    assert q.extras["container"] == kind
    if kind == "CallStackProfile":
        assert "process" not in q.extras
        assert "format-specific fact not kept: process" in report.items
    if kind == "ChromeUserMetricsExtension":
        assert not report
        p.extras["container"] = kind
        assert dump(q) == dump(p)


def test_chrome_builder_rules_hold_in_the_output() -> None:
    # call_stack_profile_builder_unittest expectations, checked on what we write
    p = polyprof.read_all(fixture_bytes("profiling_completed.sampled.textproto"))[0]
    sp = parse("SampledProfile", write(p)[0])
    assert (sp.process, sp.thread, sp.trigger_event) == (1, 1, 4)
    csp = sp.call_stack_profile
    assert [m.build_id for m in csp.module_id] == [b"1", b"2", b"3"]
    assert all(m.name_md5_prefix == 0x554838A8451AC36C for m in csp.module_id)
    assert [[f.module_id_index for f in s.frame] for s in csp.stack] == [[0, 1], [2]]
    assert all(f.HasField("module_id_index") and f.address == 0x10 for s in csp.stack for f in s.frame)
    assert [s.stack_index for s in csp.stack_sample] == [0, 1]
    for s in csp.stack_sample:
        assert not s.HasField("continued_work") and not s.HasField("weight") and not s.HasField("count")
    assert (csp.profile_duration_ms, csp.sampling_period_ms) == (500, 100)


def test_weight_and_count_written_only_when_not_one() -> None:
    p = polyprof.read_all(fixture_bytes("weights_and_counts.callstack.textproto"))[0]
    csp = parse("CallStackProfile", write(p)[0])
    s = csp.stack_sample
    assert (s[0].weight, s[0].count) == (42, 3)
    assert not any(x.HasField(f) for x in s[1:] for f in ("weight", "count"))


def test_unknown_module_frame_is_an_empty_location() -> None:
    p = polyprof.read_all(fixture_bytes("modules.callstack.textproto"))[0]
    frame = parse("CallStackProfile", write(p)[0]).stack[0].frame[0]
    assert not frame.ListFields()


def test_metadata_is_written_as_deltas() -> None:
    p = polyprof.read_all(fixture_bytes("metadata_retro.callstack.textproto"))[0]
    csp = parse("CallStackProfile", write(p)[0])
    assert list(csp.metadata_name_hash) == [3]
    items = [[(m.name_hash_index, m.key, m.HasField("value"), m.value) for m in s.metadata]
             for s in csp.stack_sample]
    assert items == [[], [(0, 30, True, 300)], [], [(0, 30, False, 0)]]


def test_heap_profile_with_unit_weights_stays_a_heap_profile() -> None:
    b = ProfileBuilder("test")
    b.set_sample_types([("alloc_objects", "count"), ("alloc_space", "bytes")])
    b.add_sample(b.stack([b.frame("f")]), [1, 1])
    p = b.finish()
    q = reread(write(p, "callstack")[0])
    assert [str(vt) for vt in q.sample_types] == ["inuse_objects/count", "inuse_space/bytes"]
    sp = parse("SampledProfile", write(p)[0])
    assert sp.trigger_event == 7  # PERIODIC_HEAP_COLLECTION


def test_pprof_cpu_profile_converts_with_a_loss_report() -> None:
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    b.meta.period_type = polyprof.ValueType("cpu", "nanoseconds")
    b.meta.period = 10_000_000
    m = b.mapping(0x400000, 0x500000, 0, "/usr/bin/app", "abcd")
    main = b.location(m, 0x401000, [(b.function("main", filename="main.c"), 12, 0)])
    leaf = b.location(m, 0x402000, [(b.function("work"), 0, 0)])
    b.add_sample(b.stack([leaf, main]), [3, 30_000_000], labels=[Label("tag", str="x")])
    b.add_sample(b.stack([main]), [1, 12_345], labels=[Label("n", num=4, unit="bytes")])
    p = b.finish()
    data, report = write(p)
    lost = report.items
    assert report.renamed == {}  # cpu stays cpu; 12345 ns != 1 x 10 ms, so the times go in the weights
    assert lost["string label 'tag'"] == 1
    assert lost["unit of numeric label 'n'"] == 1
    assert lost["source file and line of symbolized frames"] == 1
    assert lost["location addresses rebased to module offsets"] == 2
    q = reread(data)
    assert q.sample_types == p.sample_types and q.samples.values.tolist() == [[3, 30_000_000], [1, 12_345]]
    csp = parse("SampledProfile", data).call_stack_profile
    assert [f.address for f in csp.stack[0].frame] == [0x2000, 0x1000]  # module offsets
    assert csp.stack[0].frame[0].function_name == b"work"
    assert csp.sampling_period_ms == 10


def test_symbolized_frames_keep_their_innermost_function_name() -> None:
    p = polyprof.read_all(fixture_bytes("uma_log.textproto"), options=ReadOptions(symbols=str(SYMBOLS)))[0]
    data, report = write(p)
    assert report.items["inlined frames written as separate frames"] == 3
    frames = parse("ChromeUserMetricsExtension", data).sampled_profile[0].call_stack_profile.stack[0].frame
    assert frames[0].function_name == b"base::subtle::RefCountedThreadSafeBase::AddRefImpl() const"
    assert frames[0].address == frames[1].address  # the next frame is the function it was inlined into
    q = reread(data)
    for vt in p.sample_types:  # inlined functions keep their own rows: per-function flat and cum survive
        assert top_table(q, vt.type) == top_table(p, vt.type)


def top_table(p, index):  # noqa: ANN001, ANN201
    from polyprof.analysis.options import Options
    from polyprof.analysis.top import top

    return {(r.name, r.flat, r.cum) for r in top(p, Options(sample_index=index, nodecount=0, nodefraction=0, edgefraction=0)).rows}


def test_cpu_time_stays_cpu_time_and_wall_time_in_weights_keeps_its_values() -> None:
    for name, unit, period, values in (("cpu", "nanoseconds", 10_000_000, [[2, 20_000_000]]),
                                       ("cpu-clock", "nanoseconds", 0, [[1, 250_001]]),
                                       ("wall", "microseconds", 396, [[1, 396], [3, 1190]])):
        b = ProfileBuilder("x")
        b.set_sample_types([("samples", "count"), (name, unit)])
        b.meta.period_type, b.meta.period = polyprof.ValueType(name, unit), period
        for v in values:
            b.add_sample(b.stack([b.frame("f")]), v)
        p = b.finish()
        data, report = write(p)
        q = reread(data)
        want = "wall" if name == "wall" else "cpu"
        assert [str(t) for t in q.sample_types] == ["samples/count", f"{want}/nanoseconds"]
        scale = 1000 if unit == "microseconds" else 1
        assert q.samples.values.tolist() == [[c, t * scale] for c, t in values]
        assert q.sample_types[q.default_index()].type == want
        if name != want or unit != "nanoseconds":
            assert report.renamed == {f"{name}/{unit}": f"{want}/nanoseconds"}


def test_merged_profile_reports_per_sample_processes() -> None:
    log = polyprof.read_all(fixture_bytes("uma_log.textproto"), options=ReadOptions(merge=True))[0]
    _, report = write(log)
    # no process in extras: the most common process is written, the 2 renderer samples' is not
    assert report.items["sample label 'process' (one process per SampledProfile)"] == 2


def test_unknown_container_is_an_options_error() -> None:
    p = polyprof.read_all(fixture_bytes("modules.callstack.textproto"))[0]
    with pytest.raises(polyprof.OptionsError, match="container"):
        write(p, "zip")


# ---- properties ---------------------------------------------------------------

_I64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def call_stack_profiles(draw):  # noqa: ANN001, ANN201
    """Random but well-formed CallStackProfile messages."""
    msg = messages()["CallStackProfile"]()
    n_modules = draw(st.integers(0, 3))
    for i in range(n_modules):
        m = msg.module_id.add()
        if draw(st.booleans()):
            m.build_id = draw(st.sampled_from([b"1", b"7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730", b""]))
        if draw(st.booleans()):
            m.name_md5_prefix = draw(st.sampled_from([0x554838A8451AC36C, 0, 0x0123456789ABCDEF, 2**64 - 1]))

    def location(loc) -> None:  # noqa: ANN001
        if n_modules and draw(st.booleans()):
            loc.module_id_index = draw(st.integers(0, n_modules - 1))
            loc.address = draw(st.integers(0, 2**64 - 1))
        elif draw(st.booleans()):
            loc.address = draw(st.integers(1, 2**20))
        if draw(st.integers(0, 4)) == 0:
            loc.function_name = draw(st.sampled_from(["Java.frame", "a b", "ünï"])).encode()

    for _ in range(draw(st.integers(0, 4))):
        stack = msg.stack.add()
        for _ in range(draw(st.integers(0, 4))):
            location(stack.frame.add())
    n_hashes = draw(st.integers(0, 3))
    msg.metadata_name_hash.extend(draw(st.lists(st.integers(0, 2**64 - 1), min_size=n_hashes,
                                                max_size=n_hashes, unique=True)))
    for _ in range(draw(st.integers(0, 2))):
        bt = msg.async_backtrace.add()
        for _ in range(draw(st.integers(0, 3))):
            location(bt.location.add())
    heap = draw(st.booleans())
    timed = draw(st.booleans())
    for _ in range(draw(st.integers(0, 6)) if msg.stack else 0):
        s = msg.stack_sample.add(stack_index=draw(st.integers(0, len(msg.stack) - 1)))
        if timed:
            s.sample_time_offset_ms = draw(st.integers(-(2**31), 2**31 - 1))
        s.continued_work = draw(st.booleans())
        if msg.async_backtrace and draw(st.booleans()):
            s.async_backtrace_index = draw(st.integers(0, len(msg.async_backtrace) - 1))
        for _ in range(draw(st.integers(0, 2)) if n_hashes else 0):
            item = s.metadata.add(name_hash_index=draw(st.integers(0, n_hashes - 1)))
            if draw(st.booleans()):
                item.key = draw(_I64)
            if draw(st.integers(0, 3)):
                item.value = draw(_I64)
        if heap:
            s.weight = draw(st.integers(-(2**40), 2**40))
            if draw(st.booleans()):
                s.count = draw(st.integers(0, 2**31))
    msg.profile_duration_ms = draw(st.integers(0, 2**31 - 1))
    msg.sampling_period_ms = draw(st.integers(0, 1000))
    if draw(st.booleans()):
        msg.profile_time_offset_ms = draw(_I64)
    return msg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call_stack_profiles())
def test_property_read_write_read_is_identity(msg) -> None:  # noqa: ANN001
    first = reread(msg.SerializeToString()) if msg.ListFields() else None
    if first is None:
        return
    data, report = write(first)
    assert not report, report.lines()
    assert dump(reread(data)) == dump(first)
    assert first.totals() == reread(data).totals()


@st.composite
def deprecated_profiles(draw):  # noqa: ANN001, ANN201
    msg = messages()["CallStackProfile"]()
    msg.module_id.add(build_id=b"1", name_md5_prefix=0x554838A8451AC36C)
    for _ in range(draw(st.integers(1, 5))):
        s = msg.DEPRECATED_sample.add(count=draw(st.integers(0, 100)))
        for _ in range(draw(st.integers(0, 3))):
            s.frame.add(address=draw(st.integers(0, 99)), module_id_index=0)
        s.process_phase.extend(draw(st.lists(st.integers(0, 4), max_size=2)))
    msg.sampling_period_ms = 100
    return msg


@settings(max_examples=60, deadline=None)
@given(deprecated_profiles())
def test_property_deprecated_encoding_round_trips(msg) -> None:  # noqa: ANN001
    first = reread(msg.SerializeToString())
    data, report = write(first)
    assert not report, report.lines()
    assert dump(reread(data)) == dump(first)


def test_odd_extras_from_other_formats_are_reported_not_fatal() -> None:
    p = polyprof.read_all(fixture_bytes("modules.callstack.textproto"))[0]
    p.extras.update({"session_id": "abc", "client_id": [1], "process_types": 5, "profile_metadata": "x",
                     "process": 7, "trigger_event": "NOT_A_TRIGGER", "lacros_pids": ["a"]})
    data, report = write(p, "uma")
    assert report.items["format-specific fact not kept: session_id (unexpected value)"] == 1
    assert report.items["format-specific fact not kept: client_id (unexpected value)"] == 1
    assert report.items["trigger_event 'NOT_A_TRIGGER' (not a known value)"] == 1
    assert report.items["process 7 (not a known value)"] == 1
    assert reread(data).extras["container"] == "ChromeUserMetricsExtension"


def test_pprof_heap_profile_uses_in_use_columns() -> None:
    b = ProfileBuilder("pprof")
    b.set_sample_types([("alloc_objects", "count"), ("alloc_space", "bytes"),
                        ("inuse_objects", "count"), ("inuse_space", "bytes")])
    b.add_sample(b.stack([b.frame("f")]), [5, 500, 2, 200])
    data, report = write(b.finish())
    assert reread(data).samples.values.tolist() == [[2, 200]]
    what = "not written (a CallStackProfile holds a count and one time or size per sample)"
    assert report.items == {f"sample type alloc_objects/count {what}": 1, f"sample type alloc_space/bytes {what}": 1}


def test_peer_pprof_profiles_keep_their_sample_counts(peer) -> None:  # noqa: ANN001
    checked = 0
    for f, p in small_peer_profiles(peer):
        q = reread(write(p)[0])
        assert len(q.samples) == len(p.samples), f
        heap, count_col, _ = chromium.callstack.columns(p)
        if count_col is not None:
            assert q.totals()[0] == p.totals()[count_col], f
        checked += 1
    assert checked >= 3
