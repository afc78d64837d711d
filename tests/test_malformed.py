"""Malformed input: the readers raise only polyprof's own errors.

The corpus is built from real peer files: truncations at many offsets,
bit flips, huge length varints, nested gzip, a gzip bomb, and garbage.
"""

from __future__ import annotations

import gzip
import random

import pytest

import polyprof
from polyprof.errors import DecompressionLimitError, InputError, MalformedInputError, PolyprofError
from polyprof.formats.options import ReadOptions

from helpers import PEER, REPO

SOURCES = ["examples/demo.pb.gz"]


def _seed_bytes() -> bytes:
    return gzip.decompress((REPO / "examples" / "demo.pb.gz").read_bytes())


def _read(data: bytes, **options) -> None:
    polyprof.read(data, options=ReadOptions(**options) if options else None)


def _accepts_or_our_error(data: bytes) -> None:
    try:
        _read(data)
    except PolyprofError as exc:
        assert str(exc)  # one readable line
        assert "\n" not in str(exc)


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 8, 13, 50, 100, 1000, 5000, -1, -2, -3, -10, -100])
def test_truncated(cut):
    data = _seed_bytes()
    _accepts_or_our_error(data[:cut] if cut > 0 else data[:len(data) + cut])


def test_truncated_gzip_is_a_clear_error():
    raw = (REPO / "examples" / "demo.pb.gz").read_bytes()
    with pytest.raises(MalformedInputError, match="gzip"):
        _read(raw[: len(raw) // 2])


@pytest.mark.parametrize("seed", range(60))
def test_bit_flips(seed):
    data = bytearray(_seed_bytes())
    rng = random.Random(seed)
    for _ in range(1 + seed % 5):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    _accepts_or_our_error(bytes(data))


@pytest.mark.parametrize("payload", [
    b"\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",            # sample with a 2**64 length
    b"\x12\x80\x80\x80\x80\x10",                                # sample longer than the file
    b"\x0a\x04\x08\x01\x10\x02\x12\x05\x0a\xff\xff\xff\x7f",   # packed field longer than its sample
    b"\x0a\x04\x08\x01\x10\x02\x12\x03\x0a\x01\x80",            # truncated packed varint
    b"\x0a\x04\x08\x01\x10\x02\x12\x0b\x0a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # 11-byte varint
    b"\x0a\x04\x08\x01\x10\x02\x12\x02\x0b\x00",                # group wire type inside a sample
])
def test_hostile_lengths(payload):
    with pytest.raises(PolyprofError):
        _read(payload)


def test_nested_gzip_is_refused_clearly():
    with pytest.raises(MalformedInputError, match="gzip inside gzip"):
        _read(gzip.compress(gzip.compress(_seed_bytes())))


def test_decompression_bomb_stops_at_the_limit():
    # A valid-looking profile head (sample type, then empty comments) that
    # inflates to 8 MiB from a few KiB.
    bomb = gzip.compress(b"\x0a\x04\x08\x01\x10\x02" + b"\x68\x00" * (4 << 20))
    assert len(bomb) < 64 << 10
    with pytest.raises(DecompressionLimitError, match="inflates past"):
        _read(bomb, max_inflate=1 << 20)


@pytest.mark.parametrize("data", [b"", b"hello world\n", b"\x00" * 100, bytes(range(256)), b"\xff" * 64,
                                  b"SIMPLEPERF", b"\x1f\x8b"])
def test_garbage_is_unrecognized_or_malformed(data):
    with pytest.raises(InputError):
        _read(data)


def test_real_peer_files_survive_truncation(peer):
    data = gzip.decompress((PEER / "google__pprof/internal/report/testdata/sample.cpu").read_bytes())
    for cut in range(0, len(data), max(1, len(data) // 97)):
        _accepts_or_our_error(data[:cut])
