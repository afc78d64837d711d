"""The compiled flat-packet decoder accepts exactly the packets the numpy one accepts, with the same values.

Random packets (well-formed traced_perf shapes, damaged ones, random bytes)
and the packets of a real trace written by our writer are decoded by both
and compared field by field. Without numba the compiled side is skipped,
visibly.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.perfetto import _flat

compiled = pytest.importorskip("polyprof.formats.perfetto._flat_compiled",
                               reason="numba is not installed: no compiled kernels")


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _pairs(pairs: list[tuple[int, int, int]]) -> bytes:
    return b"".join(_varint(field << 3 | wire) + _varint(value) for field, wire, value in pairs)


_values = st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1))
_fields = st.one_of(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 16, 17, 18, 41, 42, 58, 66]), st.integers(0, 3000))
_pair = st.tuples(_fields, st.sampled_from([0, 0, 0, 0, 1, 2, 5]), _values)


@st.composite
def packets(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["sample", "sample", "sample", "random", "pairs"]))
    if kind == "random":
        return draw(st.binary(max_size=40))
    if kind == "pairs":
        return _pairs(draw(st.lists(_pair, max_size=6)))
    inner = _pairs(draw(st.lists(st.tuples(_fields, st.just(0), _values), max_size=10)))
    before = _pairs(draw(st.lists(st.tuples(_fields, st.just(0), _values), max_size=4)))
    after = _pairs(draw(st.lists(st.tuples(_fields, st.just(0), _values), max_size=2)))
    skew = draw(st.sampled_from([0, 0, 0, -1, 1, 2]))  # a length that misses the payload's end
    body = before + _varint(66 << 3 | 2) + _varint(max(len(inner) + skew, 0)) + inner + after
    if draw(st.booleans()):
        body += _varint(66 << 3 | 2) + _varint(0)  # a second perf_sample
    cut = draw(st.integers(0, 3))
    if cut == 1 and body:  # truncated
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif cut == 2 and body:  # one byte damaged
        i = draw(st.integers(0, len(body) - 1))
        body = body[:i] + bytes([draw(st.integers(0, 255))]) + body[i + 1:]
    return body


def _compare(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    want = _flat.decode_flat(buf, starts, ends)
    ok, top, inner, followers = compiled.decode_flat_compiled(buf, starts, ends, _flat.TOP_FIELDS,
                                                              _flat.INNER_FIELDS)
    assert np.array_equal(ok, want.ok)
    n = starts.size
    absent = (np.zeros(n, bool), np.zeros(n, np.uint64))
    for got, expected in ((top, want.top), (inner, want.inner)):
        for field, (present, value) in got.items():
            e_present, e_value = expected.get(field, absent)
            assert np.array_equal(present, e_present), field
            assert np.array_equal(value, e_value), field
    assert np.array_equal(followers[1], want.followers[1])
    assert np.array_equal(followers[0], want.followers[0])
    return int(ok.sum())


@settings(max_examples=300, deadline=None)
@given(st.lists(packets(), min_size=1, max_size=12))
def test_flat_twins_agree_on_random_packets(bodies: list[bytes]) -> None:
    lengths = np.array([len(b) for b in bodies], dtype=np.int64)
    ends = np.cumsum(lengths) + 3  # packets need not be contiguous
    starts = ends - lengths
    buf = np.zeros(int(ends[-1]) + 2, dtype=np.uint8)
    for s, b in zip(starts.tolist(), bodies):
        buf[s:s + len(b)] = np.frombuffer(b, dtype=np.uint8)
    _compare(buf, starts, ends)


def test_flat_twins_agree_on_a_written_trace() -> None:
    """Every packet of a real traced_perf trace (our writer's): sample packets and the rest."""
    from polyprof.formats.perfetto._framing import frame_all

    ch = frame_all(_written_trace(), 0)
    buf = np.frombuffer(ch.buf, dtype=np.uint8)
    accepted = _compare(buf, ch.starts, ch.ends)
    assert 2500 <= accepted < ch.starts.size  # the sample packets, not those carrying interned data


def _written_trace() -> bytes:
    from polyprof.formats.options import WriteOptions
    from polyprof.formats.perfetto import write
    from polyprof.model.builder import ProfileBuilder
    from polyprof.model.profile import Label

    b = ProfileBuilder("perfetto")
    b.set_sample_types([("samples", "count"), ("cpu-clock", "nanoseconds")])
    b.meta.extras["profile_labels"] = {"kind": "perf", "event": "cpu-clock", "pid": 7}
    m = b.mapping(0x1000, 0x9000, 0, "/lib/libx.so", "ab" * 20)
    locs = [b.location(m, 0x1000 + 16 * i, [(b.function(f"f{i}"), 0, 0)]) for i in range(30)]
    rng = np.random.default_rng(3)
    stacks = [b.stack([locs[j] for j in rng.integers(0, 30, rng.integers(1, 9))]) for _ in range(50)]
    mode = [b.labelset([Label("cpu_mode", str="user")]), b.labelset([Label("cpu_mode", str="kernel")])]
    n = 3000
    pick = rng.integers(0, 50, n)
    b.add_samples_bulk(np.array(stacks)[pick], np.stack([np.ones(n, np.int64), rng.integers(1, 10**6, n)], axis=1),
                       np.array(mode)[pick % 2], time=10**9 + np.cumsum(rng.integers(1, 10**5, n)),
                       pid=np.full(n, 7), tid=7 + pick % 3, cpu=pick % 4)
    out = io.BytesIO()
    write(b.finish(), out, WriteOptions())
    return out.getvalue()


@st.composite
def callstacks(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A Callstack entry (iid, frame ids packed or not, maybe other fields), maybe damaged."""
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["iid", "frame", "packed", "other"]))
        if kind == "iid":
            parts.append(_pairs([(1, 0, draw(_values))]))
        elif kind == "frame":
            parts.append(_pairs([(2, 0, draw(_values))]))
        elif kind == "packed":
            body = b"".join(_varint(v) for v in draw(st.lists(_values, max_size=6)))
            parts.append(_varint(2 << 3 | 2) + _varint(len(body)) + body)
        else:
            parts.append(_varint(draw(st.integers(3, 40)) << 3 | 2) + _varint(2) + b"ab")
    msg = b"".join(parts)
    damaged = draw(st.integers(0, 4)) == 0 and len(msg) > 0
    if damaged:
        i = draw(st.integers(0, len(msg) - 1))
        msg = msg[:i] + bytes([draw(st.integers(0, 255))]) + msg[i + 1:]
    return msg, damaged


@settings(max_examples=300, deadline=None)
@given(st.lists(callstacks(), min_size=1, max_size=8))
def test_callstack_twins_agree(entries: list[tuple[bytes, bool]]) -> None:
    """Interned Callstack entries: the compiled decoder gives the field walker's iids and frame
    ids, or declines (None) where the walker raises; it declines nothing well-formed."""
    from helpers import numpy_only
    from polyprof.errors import MalformedInputError
    from polyprof.formats.perfetto._tables import _varint_col
    from polyprof.wire import vector as V

    lengths = np.array([len(m) for m, _ in entries], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    buf = np.frombuffer(b"".join(m for m, _ in entries) + b"\0", dtype=np.uint8)
    got = compiled.callstack_entries(buf, starts, ends)

    def walker() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        f = V.walk_varint_fields(buf, starts, ends)
        vals, counts = V.repeated_varints(buf, f.select(2), starts.size)
        return _varint_col(f, 1, starts.size), vals, counts

    try:
        want = numpy_only(V, walker)
    except MalformedInputError:
        assert got is None
        return
    if got is None:
        assert any(damaged for _, damaged in entries)
        return
    for a, b in zip(got, want):
        assert np.array_equal(np.asarray(a, np.uint64), np.asarray(b, np.uint64))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]),
       st.lists(st.integers(-(2**63), 2**64 - 1), min_size=1, max_size=40), st.integers(0, 2**64 - 1))
def test_distinct_is_numpy_unique(dtype: str, raw: list[int], base: int) -> None:
    """``model.columns.distinct`` (the presence-table unique the Perfetto reader uses per chunk)
    equals ``np.unique`` for every integer type, at the ends of its range too."""
    from polyprof.model.columns import distinct

    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    values = np.array([int(info.min) + (v + base) % span for v in raw], dtype=dtype)
    for col in (values, values[:1].repeat(3), (values % 7).astype(dtype)):
        got = distinct(col)
        assert np.array_equal(got, np.unique(col)) and got.dtype == col.dtype
