"""Hostile input (issue #17): bounded resources, errors that name the field, same verdict everywhere.

Each test builds the smallest input that shows its point (``fuzz/cases.py``
holds the full-size attacks; ``python fuzz/measure.py`` times them).
"""

from __future__ import annotations

import gzip
import io
import sys
import time
import tracemalloc
import zlib

import numpy as np
import pytest

import polyprof
from polyprof.errors import DecompressionLimitError, MalformedInputError
from polyprof.formats import registry
from polyprof.formats.limits import Limits
from polyprof.formats.options import ReadOptions, WriteOptions
from polyprof.formats.source import GunzipReader, Source, inflate
from polyprof.wire import vector as V
from polyprof.wire.encode import Encoder

from helpers import REPO

sys.path.insert(0, str(REPO / "fuzz"))
import cases  # noqa: E402

SMALL = Limits(inflate_ratio=32, inflate_ratio_floor=1 << 20)


def _zeros_gzip(n: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(b"\x00" * n) + c.flush()


# ---------------------------------------------------------------- inflation, per chunk

def test_inflation_ratio_stops_a_bomb_within_a_chunk_of_the_floor():
    bomb = _zeros_gzip(8 << 20)  # 8 KB of gzip, 8 MiB of zeros
    reader = GunzipReader(io.BytesIO(bomb), 1 << 40, SMALL)
    with pytest.raises(DecompressionLimitError, match=r"inflates \d+ times its compressed size.*"
                                                      "POLYPROF_MAX_INFLATE_RATIO"):
        while reader.read(1 << 20):
            pass
    assert reader.produced <= (1 << 20) + (1 << 20)  # stopped one chunk past the floor, not at the end


def test_absolute_inflation_limit_is_checked_while_inflating():
    reader = GunzipReader(io.BytesIO(_zeros_gzip(4 << 20)), 1 << 20, Limits(inflate_ratio=0))
    with pytest.raises(DecompressionLimitError, match="inflates past 1048576 bytes.*POLYPROF_MAX_INFLATE"):
        reader.read()
    assert reader.produced <= 2 << 20


def test_ratio_limit_spares_small_files_that_compress_well():
    assert inflate(_zeros_gzip(1 << 19), 1 << 30, SMALL) == b"\x00" * (1 << 19)


def test_stream_and_data_share_the_bounded_inflater(tmp_path):
    bomb = _zeros_gzip(4 << 20)
    path = tmp_path / "bomb.gz"
    path.write_bytes(bomb)
    for src in (Source.of(bomb, max_inflate=1 << 40), Source.of(str(path), max_inflate=1 << 40)):
        src.limits = SMALL
        with pytest.raises(DecompressionLimitError, match="times its compressed size"):
            src.stream().read()
        with pytest.raises(DecompressionLimitError, match="times its compressed size"):
            src.data()


def test_perfetto_gzip_given_by_path_streams_under_the_ratio_limit(tmp_path):
    path = tmp_path / "trace.pftrace.gz"
    path.write_bytes(gzip.compress(b"\x0a\x02\x50\x01" * (1 << 20), 9))  # 4 MiB of tiny packets
    options = ReadOptions(limits=SMALL)
    with pytest.raises(DecompressionLimitError, match="times its compressed size") as err:
        polyprof.read_all(path, format="perfetto", options=options)
    assert str(path) in str(err.value)


def test_multi_member_gzip_and_padding_still_read():
    one = gzip.compress(b"abc")
    assert inflate(one + b"\x00" * 7 + one, 100) == b"abcabc"
    with pytest.raises(MalformedInputError, match="trailing garbage"):
        inflate(one + b"junk", 100)
    with pytest.raises(MalformedInputError, match="truncated gzip"):
        GunzipReader(io.BytesIO(one[:-5]), 100).read()


# ---------------------------------------------------------------- counts from the data

def test_simpleperf_event_type_id_is_bounded():
    data = cases.simpleperf_event_type(0xFFFFFFFF)
    assert len(data) == 34
    with pytest.raises(MalformedInputError, match=r"sample 1: event_type_id = 4294967295 is over the limit "
                                                  r"of 1023 .*POLYPROF_MAX_EVENT_TYPES"):
        polyprof.read(data)
    assert polyprof.read(cases.simpleperf_event_type(3)).sample_types  # a few unnamed ids are fine


def test_simpleperf_value_table_is_bounded_by_the_input_size():
    meta = Encoder()
    for _ in range(1500):
        meta.bytes_field(1, b"e", always=True)
    sample = Encoder().message(1, Encoder().varint_field(1, 1).varint_field(2, 1).varint_field(4, 1))
    data = cases.simpleperf([Encoder().message(5, meta).getvalue()] + [sample.getvalue()] * 1000)
    with pytest.raises(MalformedInputError, match=r"sample values: 1000 samples x 3001 value columns = 3001000 "
                                                  r"values, more than \d+ bytes of input can justify.*"
                                                  "POLYPROF_MAX_VALUES_PER_BYTE"):
        polyprof.read(data)
    roomy = ReadOptions(limits=Limits(values_per_byte=1000))
    assert len(polyprof.read(data, options=roomy).samples) == 1000


def test_one_sample_with_many_labels_costs_its_labels_not_a_grid():
    n = 3000
    p = polyprof.read(cases.pprof_labels(n, n))  # one sample with n labels among n samples
    tracemalloc.start()
    try:
        sets = p.labelsets
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(sets[p.samples.labelset[0]]) == n
    assert peak < 8 * n * n / 4  # a samples x labels grid of int64 would be 72 MB


def test_a_million_unpacked_ids_are_not_a_million_steps():
    buf = V.as_buffer(Encoder().unpacked_field(1, range(200_000)).getvalue())
    t0 = time.process_time()
    f = V.walk_fields(buf, np.array([0]), np.array([buf.size]))
    assert time.process_time() - t0 < 2.0
    assert np.array_equal(f.value, np.arange(200_000)) and (f.field == 1).all()


def test_walk_fields_tail_agrees_with_lockstep(monkeypatch):
    rng = np.random.default_rng(7)
    msgs = [Encoder().unpacked_field(1 + k % 3, rng.integers(0, 1 << 40, 50 + 7 * k).tolist())
            .bytes_field(9, b"x" * k, always=True).getvalue() for k in range(40)]
    blob = b"".join(msgs)
    ends = np.cumsum([len(m) for m in msgs])
    buf = V.as_buffer(blob)
    fast = V.walk_fields(buf, ends - [len(m) for m in msgs], ends)
    monkeypatch.setattr(V, "_LOCKSTEP", 1 << 30)
    monkeypatch.setattr(V, "_LOCKSTEP_MANY", 1 << 30)
    slow = V.walk_fields(buf, ends - [len(m) for m in msgs], ends)
    for col in ("msg", "field", "wire", "value", "start", "length"):
        assert np.array_equal(getattr(fast, col), getattr(slow, col)), col


def test_walk_fields_tail_reports_the_first_broken_field():
    good = Encoder().unpacked_field(1, [1] * 100).getvalue()
    data = good + b"\x0f"  # field 1, wire type 7 after 100 good fields
    with pytest.raises(MalformedInputError, match=r"invalid field tag \(field 1, wire type 7\)") as err:
        V.walk_fields(V.as_buffer(data), np.array([0]), np.array([len(data)]))
    assert err.value.offset == len(good)


@pytest.mark.parametrize("target", ["folded", "speedscope"])
def test_a_deep_stack_is_written_in_linear_time(target):
    p = polyprof.read(cases.pprof_deep_stack(100_000))
    spec = registry.by_name(target)
    t0 = time.process_time()
    out = io.BytesIO()
    spec.load().write(p, out, WriteOptions())
    assert time.process_time() - t0 < 5.0
    assert out.getvalue().count(b";" if target == "folded" else b",") >= 99_999


def test_unreferenced_strings_cost_no_objects():
    data = cases._pprof([cases._sample([1])], cases._PPROF_STRINGS + [""] * 300_000)
    tracemalloc.start()
    try:
        p = polyprof.read(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(p.strings) < 10
    assert peak < 40 << 20  # a list of 300k decoded strings alone would be more


def test_empty_string_bomb_is_refused_by_the_ratio_limit():
    data = cases._gzip_repeat(cases._pprof([cases._sample([1])], cases._PPROF_STRINGS), b"\x32\x00", 2 << 20)
    with pytest.raises(DecompressionLimitError, match="times its compressed size"):
        polyprof.read(data, options=ReadOptions(limits=SMALL))


# ---------------------------------------------------------------- errors that say what and where

@pytest.mark.parametrize("build, message", [
    (cases.perfetto_alloc_count, r"HeapSample.alloc_count = 18446744073709551615 is out of range"),
    (cases.perfetto_pid, r"ProcessHeapSamples.pid = 9223372036854775808 is out of range"),
    (cases.chromium_sample_count, r"deprecated sample 0: count 9223372036854775807 x sampling period "
                                  r"100000000 ns = \d+ is out of range"),
])
def test_overflowing_integers_are_out_of_range_errors(build, message):
    with pytest.raises(MalformedInputError, match=message) as err:
        polyprof.read(build())
    assert err.value.format in ("perfetto", "chromium")


def test_perfetto_range_errors_name_the_packet_offset():
    with pytest.raises(MalformedInputError) as err:
        polyprof.read(cases.perfetto_alloc_count())
    assert err.value.offset == 2  # the packet's payload, after its 0A len header


@pytest.mark.parametrize("tail", [b"\x07", b"\x00\x00", b"garbage!"])
def test_trailing_garbage_is_malformed_not_unrecognized(tail):
    for data in (cases._pprof([cases._sample([1])], cases._PPROF_STRINGS), cases.perfetto_alloc_count()):
        with pytest.raises(MalformedInputError) as err:
            polyprof.read(data + tail)
        assert err.value.offset == len(data) or "trailing" in str(err.value)


@pytest.mark.parametrize("text", [b"hello world, this is not a profile\n", b"hi", b"B", b"x72T;AYST8nr\x0b]4>\n",
                                  b"\n41I6?\x0cFp", b"*'V\x0c{aT,Jln<dJn^\";aWTr"])
def test_text_is_still_unrecognized(text):
    # each of these is (the start of) a valid protobuf message that a sniffer once claimed
    with pytest.raises(polyprof.UnrecognizedFormatError):
        polyprof.read(text)


def test_parse_errors_name_field_and_offset():
    data = cases._pprof([cases._sample([1])], cases._PPROF_STRINGS)
    bad = data + Encoder().message(1, b"\x08\x80").getvalue()  # a ValueType whose varint is cut
    with pytest.raises(MalformedInputError, match=r"in sample_type: truncated varint") as err:
        polyprof.read(bad, format="pprof")
    assert err.value.offset == len(data) + 3  # the varint, after the ValueType's header and tag
    bad = data + Encoder().bytes_field(13, b"\x80").getvalue()  # packed comments, the varint cut
    with pytest.raises(MalformedInputError, match=r"in comment \(packed\): truncated packed varint") as err:
        polyprof.read(bad)
    assert err.value.offset == len(data) + 2
    assert "Wire format was corrupt" not in str(err.value)


def test_a_bad_label_fails_every_verb_the_same(tmp_path, cli):
    path = tmp_path / "bad.pb"
    path.write_bytes(cases.pprof_bad_label_string())
    results = [cli("top", path), cli("info", path), cli("convert", path, "-o", tmp_path / "out.pb.gz")]
    assert [r.code for r in results] == [4, 4, 4]
    assert all("label str = 999 is outside the string table" in r.err for r in results)
    assert not (tmp_path / "out.pb.gz").exists()


def test_a_compressed_packets_bomb_stops_at_the_ratio_limit():
    from polyprof.formats.perfetto._schema import F_COMPRESSED

    inner = b"\x0a\x02\x50\x01" * (2 << 20)  # 8 MiB of tiny packets
    packet = Encoder().varint_field(10, 1).bytes_field(F_COMPRESSED, zlib.compress(inner, 9)).getvalue()
    trace = Encoder().message(1, packet).getvalue()
    with pytest.raises(DecompressionLimitError, match="compressed_packets bundle: gzip data inflates") as err:
        polyprof.read(trace, format="perfetto", options=ReadOptions(limits=SMALL))
    assert err.value.offset == len(trace) - len(packet)  # the packet, after its 0A len header


def test_a_huge_sample_count_is_not_a_million_simpleperf_records():
    from polyprof.model.builder import ProfileBuilder

    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    b.add_sample(b.stack([b.frame("main")]), [1_000_000, 10**15])  # a few bytes that say "a million samples"
    out = io.BytesIO()
    t0 = time.process_time()
    report = registry.by_name("simpleperf").load().write(b.finish(), out, WriteOptions())
    assert time.process_time() - t0 < 2.0
    assert len(polyprof.read(out.getvalue()).samples) == 1
    assert any("samples/count not kept" in line for line in report.lines())


# ---------------------------------------------------------------- pprof's legacy text formats


def test_legacy_heap_scale_past_int64_is_an_error():
    # average size far below the sampling rate: pprof's un-sampling scale is +Inf (was ZeroDivisionError)
    text = b"heap profile: 1: 1 [1: 1] @ heap_v2/4611686018427387904\n1: 1 [1: 1] @ 0x10\n"
    with pytest.raises(MalformedInputError, match=r"line 2: un-sampled values do not fit 64 bits") as err:
        polyprof.read(text)
    assert err.value.offset == text.index(b"1: 1 [1: 1] @ 0x10")


def test_legacy_java_samples_read_in_linear_time():
    n = 30_000  # ~700 KB; each sample's line number was counted from the start of the file
    text = "--- heapz 1 ---\nformat = java\nresolution = bytes\n" + "  10  1 @ 0x10\n" * n
    t0 = time.process_time()
    p = polyprof.read(text.encode())
    assert time.process_time() - t0 < 4.0
    assert len(p.samples) == n


def test_every_peer_file_gets_a_verdict(peer):
    # a profile or one of polyprof's errors, never a raw exception (a Perfetto
    # track_event callstack trace once raised IndexError)
    files = [p for p in sorted(peer.rglob("*")) if p.is_file() and p.stat().st_size < 2_000_000]
    verdicts = {"read": 0, "refused": 0}
    for path in files:
        try:
            polyprof.read_all(path)
            verdicts["read"] += 1
        except polyprof.PolyprofError as exc:
            assert "\n" not in str(exc), path
            verdicts["refused"] += 1
    assert verdicts["read"] >= 100 and sum(verdicts.values()) == len(files)


def test_names_from_the_data_cannot_break_the_error_line():
    # an ELF section named "Y\n\x0e..." once made a two-line message (fuzz/regressions/elf)
    err = MalformedInputError("section Y\n\x0e\x1b[31m is cut", path="a\rb", fmt="elf", offset=3)
    assert str(err) == "a\\x0db: elf: section Y\\x0a\\x0e\\x1b[31m is cut (at byte 3)"
