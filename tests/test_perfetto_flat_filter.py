"""``_flat._maybe_flat`` (the cheap look at a packet's first fields) only turns away packets the
flat decoder refuses: on random sample-shaped, interned-data-carrying, damaged and random
packets, every packet ``_decode`` accepts is one ``_maybe_flat`` keeps, and ``decode_flat``
answers as ``_decode`` of every packet does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.perfetto import _flat
from polyprof.formats.perfetto import _schema as S
from polyprof.wire.encode import varint

FIELDS = st.one_of(st.sampled_from([1, 2, 3, 4, 8, 10, 12, 13, 58, 66]), st.integers(0, 3000))
VALUES = st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1))


def _field(number: int, wire: int, value: int) -> bytes:
    if wire == 2:
        raw = bytes(value % 7)
        return varint(number << 3 | 2) + varint(len(raw)) + raw
    return varint(number << 3 | wire) + (varint(value) if wire == 0 else bytes(8 if wire == 1 else 4))


@st.composite
def packets(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["sample", "sample", "interned", "fields", "random"]))
    if kind == "random":
        return draw(st.binary(max_size=30))
    if kind == "fields":
        return b"".join(_field(*f) for f in draw(st.lists(st.tuples(FIELDS, st.sampled_from([0, 0, 1, 2, 5]),
                                                                        VALUES), max_size=5)))
    inner = b"".join(_field(f, 0, v) for f, v in draw(st.lists(st.tuples(FIELDS, VALUES), max_size=6)))
    head = b"".join(_field(f, 0, v) for f, v in draw(st.lists(st.tuples(FIELDS, VALUES), max_size=3)))
    skew = draw(st.sampled_from([0, 0, 0, -1, 1]))
    body = head + varint(66 << 3 | 2) + varint(max(len(inner) + skew, 0)) + inner
    if kind == "interned":  # interned data before or after the sample, as producers write it
        interned = varint(12 << 3 | 2) + varint(3) + b"\x08\x01\x00"
        body = interned + body if draw(st.booleans()) else body + interned
    if body and draw(st.integers(0, 3)) == 0:
        i = draw(st.integers(0, len(body) - 1))
        body = body[:i] + bytes([draw(st.integers(0, 255))]) + body[i + 1:]
    return body


@settings(max_examples=300, deadline=None)
@given(pkts=st.lists(packets(), min_size=1, max_size=12))
def test_filter_keeps_every_flat_packet(pkts):
    buf = np.frombuffer(b"".join(pkts) + b"\x00", dtype=np.uint8)
    lengths = np.array([len(p) for p in pkts], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    every = _flat._decode(buf, starts, ends)
    assert not (every.ok & ~_flat._maybe_flat(buf, starts, ends)).any()
    got = _flat.decode_flat(buf, starts, ends)
    assert np.array_equal(got.ok, every.ok)
    for mine, theirs in ((got.top, every.top), (got.inner, every.inner)):
        for k, (present, value) in theirs.items():
            p, v = mine.get(k, (np.zeros_like(present), np.zeros_like(value)))
            assert np.array_equal(p[every.ok], present[every.ok]) and np.array_equal(v[every.ok], value[every.ok])


_TOP_FIELDS = [S.F_SEQ_ID, S.F_SEQUENCE_FLAGS, S.F_TIMESTAMP, S.F_CLOCK_ID, S.F_PERF_SAMPLE,
               S.F_INCREMENTAL_CLEARED, S.F_PREVIOUS_DROPPED]


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**32 - 1), every=st.booleans(),
       fields=st.sets(st.sampled_from(_TOP_FIELDS)))
def test_take_flat_is_the_masked_copy_of_the_accepted_packets(n, seed, every, fields):
    """``_TopLevel.take_flat`` (one masked copy per column) sets the accepted packets' rows as the
    masked gather and scatter did (uint64 fields wrapped into int64 columns, absent fields 0 and
    False, control from the flags and the two state fields) and leaves the other rows alone."""
    from polyprof.formats.perfetto._reader import _TopLevel

    rng = np.random.default_rng(seed)
    ok = np.ones(n, dtype=bool) if every else rng.random(n) < 0.6
    top = {f: (rng.random(n) < 0.7, rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
               if f != S.F_SEQUENCE_FLAGS else rng.integers(0, 4, n).astype(np.uint64)) for f in fields}
    flat = _flat.Flat(ok, top, {}, (np.zeros(0, np.uint64), np.zeros(n, np.int64)))
    got = _TopLevel(n, np.zeros(1, np.uint8))
    before = {k: rng.integers(0, 2, n).astype(getattr(got, k).dtype) for k in
              ("seq", "flags", "ts", "has_ts", "clock", "perf", "control")}
    for k, v in before.items():
        getattr(got, k)[:] = v
    got.take_flat(flat)
    zero = (np.zeros(n, bool), np.zeros(n, np.uint64))
    want = {k: v.copy() for k, v in before.items()}
    get = lambda k: top.get(k, zero)  # noqa: E731
    want["seq"][ok] = get(S.F_SEQ_ID)[1][ok].astype(np.int64)
    want["flags"][ok] = get(S.F_SEQUENCE_FLAGS)[1][ok]
    want["ts"][ok] = get(S.F_TIMESTAMP)[1][ok]
    want["has_ts"][ok] = get(S.F_TIMESTAMP)[0][ok]
    want["clock"][ok] = get(S.F_CLOCK_ID)[1][ok].astype(np.int64)
    want["perf"][ok] = get(S.F_PERF_SAMPLE)[0][ok]
    want["control"][ok] = ((want["flags"][ok] & S.SEQ_INCREMENTAL_STATE_CLEARED) != 0) | \
        (get(S.F_INCREMENTAL_CLEARED)[1][ok] != 0) | (get(S.F_PREVIOUS_DROPPED)[1][ok] != 0)
    for k, v in want.items():
        assert getattr(got, k).dtype == v.dtype and getattr(got, k).tolist() == v.tolist(), k
