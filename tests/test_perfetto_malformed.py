"""Broken traces raise polyprof's own errors with one clear line, and nothing else."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyprof.errors import DecompressionLimitError, MalformedInputError, PolyprofError
from polyprof.formats.options import ReadOptions
from polyprof.formats.perfetto import read as read_module
from polyprof.formats.source import Source

from test_perfetto_reader import chrome_trace, heap_trace, perf_trace
from test_perfetto_support import CLEARED, NEEDS, TraceMaker, read, zlib_bundle


def _read(data: bytes, **options):  # noqa: ANN003, ANN202
    return read_module(Source.of(data), ReadOptions(**options))


def test_truncated_trace_names_the_offset():
    data = perf_trace()
    with pytest.raises(MalformedInputError, match="truncated packet") as err:
        _read(data[:-3])
    assert err.value.offset is not None and 0 < err.value.offset < len(data)


def test_huge_packet_length():
    with pytest.raises(MalformedInputError, match="implausibly large"):
        _read(b"\x0a\xff\xff\xff\xff\x0f" + b"\x00" * 10)


def test_invalid_top_level_record():
    with pytest.raises(MalformedInputError, match="invalid top-level record"):
        _read(b"\x0a\x02\x50\x01" + b"\x0b\x00")  # a group start tag after one packet


def test_corrupt_packet_fields():
    with pytest.raises(MalformedInputError, match="corrupt packet"):
        _read(b"\x0a\x03\x50\x01\x07")  # wire type 7 inside the packet


def test_perf_sample_longer_than_its_packet():
    bad = b"\x50\x01\x92\x04\x09\x08\x01"  # perf_sample claims 9 bytes, has 2
    with pytest.raises(MalformedInputError):
        _read(b"\x0a" + bytes([len(bad)]) + bad)


def test_needs_incremental_state_without_sequence():
    t = TraceMaker()
    p = t.packet(ts=1, flags=NEEDS)
    p.perf_sample.pid = 1
    with pytest.raises(MalformedInputError, match="no trusted_packet_sequence_id"):
        _read(t.bytes())


def test_corrupt_gzip():
    data = gzip.compress(perf_trace())
    with pytest.raises(MalformedInputError):
        _read(data[: len(data) // 2])


def test_corrupt_compressed_bundle():
    t = TraceMaker()
    t.packet().compressed_packets = b"\x78\x9c not zlib at all"
    with pytest.raises(MalformedInputError, match="compressed_packets"):
        _read(t.bytes())


def test_compressed_bundle_bomb_is_refused():
    t = TraceMaker()
    t.packet().compressed_packets = zlib_bundle(b"\x0a\x00" * 500_000)
    with pytest.raises(DecompressionLimitError):
        _read(t.bytes(), max_inflate=10_000)


def test_nested_bundles_have_a_depth_limit():
    data = TraceMaker().bytes()
    inner = b"\x0a\x02\x50\x01"
    for _ in range(6):
        t = TraceMaker()
        t.packet().compressed_packets = zlib_bundle(inner)
        inner = t.bytes()
    with pytest.raises(MalformedInputError, match="nested too deeply"):
        _read(inner + data)


def test_errors_through_the_api_carry_path_and_format(tmp_path):
    path = tmp_path / "broken.pftrace"
    path.write_bytes(perf_trace()[:-3])
    with pytest.raises(MalformedInputError) as err:
        read(path.read_bytes())
    text = str(err.value)
    assert "perfetto" in text and "truncated" in text and "\n" not in text


_SEEDS = [perf_trace(), heap_trace(), chrome_trace()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(range(len(_SEEDS))), cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                           min_size=1, max_size=6))
def test_mutated_traces_raise_only_polyprof_errors(seed, cuts):
    data = bytearray(_SEEDS[seed])
    for pos, byte in cuts:
        data[pos % len(data)] = byte
    try:
        profiles = _read(bytes(data))
    except PolyprofError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    from polyprof.model.validate import check

    for p in profiles:
        check(p)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_polyprof_errors(data):
    try:
        _read(b"\x0a" + data)
    except PolyprofError:
        pass


def test_clear_flag_on_every_packet_is_fine():
    t = TraceMaker()
    for ts in range(3):
        p = t.packet(seq=2, ts=ts, flags=CLEARED | NEEDS)
        p.perf_sample.pid = 1
    (prof,) = _read(t.bytes())
    assert len(prof.samples) == 3


def test_gzip_file_streams_with_the_inflate_limit(tmp_path):
    path = tmp_path / "big.pftrace.gz"
    path.write_bytes(gzip.compress(b"\x0a\x02\x50\x01" * 400_000))
    with pytest.raises(DecompressionLimitError):
        read_module(Source.of(str(path), max_inflate=100_000), ReadOptions())
    truncated = tmp_path / "cut.pftrace.gz"
    data = path.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(MalformedInputError):
        read_module(Source.of(str(truncated)), ReadOptions())
