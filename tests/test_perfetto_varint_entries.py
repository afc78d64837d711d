"""The numpy decoder of varint-only entry messages (``_varint_entries``) against the wire
module's ``varint_fields`` (and so the field walker) on random, damaged and real entries."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.perfetto._varint_entries import varint_entries, walk_varint_entries
from polyprof.wire import vector as V
from polyprof.wire.encode import varint

COLUMNS = ("msg", "field", "wire", "value", "start", "length")


def _same(a: V.Fields | None, b: V.Fields | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(np.array_equal(getattr(a, c), getattr(b, c)) and getattr(a, c).dtype == getattr(b, c).dtype
               for c in COLUMNS)


FIELD = st.tuples(st.integers(0, 40), st.sampled_from([0, 0, 0, 0, 1, 2, 5]),
                  st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1)))


def _entry(fields: list[tuple[int, int, int]]) -> bytes:
    out = b""
    for number, wire, value in fields:
        out += varint(number << 3 | wire)
        out += varint(value) if wire != 2 else varint(1) + b"x"
    return out


@settings(max_examples=200, deadline=None)
@given(entries=st.lists(st.lists(FIELD, max_size=6), max_size=8), gap=st.integers(0, 3),
       damage=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=2),
       cut=st.integers(0, 2))
def test_varint_entries_are_varint_fields(entries, gap, damage, cut):
    """Entries with any field numbers and wire types, overlong varints (past ten bytes),
    changed bytes and a cut last entry, spaced in a buffer: the same Fields as
    ``varint_fields`` of their bytes end to end, or both decline; and ``walk_varint_entries``
    is the field walk wherever the walker accepts the entries."""
    blobs = [bytearray(_entry(e)) for e in entries]
    for at, byte in damage:
        if blobs and any(blobs):
            k = at % len(blobs)
            if blobs[k]:
                blobs[k][at % len(blobs[k])] = byte
    if blobs and cut and blobs[-1]:
        del blobs[-1][-cut:]
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    buf = np.frombuffer(b"".join(b"\x01" * gap + bytes(b) for b in blobs) + b"\x00", dtype=np.uint8)
    starts = np.cumsum(lengths + gap) - lengths
    joined = V.gather_spans(buf, starts, lengths)
    want = V.varint_fields(joined, np.cumsum(lengths)) if blobs else None
    assert _same(varint_entries(buf, starts, lengths), want)
    try:
        walked = V.walk_fields(buf, starts, starts + lengths)
    except Exception:  # noqa: BLE001 - damaged: the walker names it, and so must the entry walk
        return
    got = walk_varint_entries(buf, starts, starts + lengths)
    for c in ("msg", "field", "wire", "value"):
        assert np.array_equal(getattr(got, c)[getattr(got, "wire") == 0], getattr(walked, c)[walked.wire == 0])


def test_long_varints_and_real_callstacks():
    """Frame ids of one to ten bytes (the largest uint64) in callstack-shaped entries."""
    values = [0, 1, 127, 128, 16383, 16384, 2**21, 2**35, 2**63, 2**64 - 1]
    blobs = [varint(8) + varint(i) + b"".join(varint(16) + varint(v) for v in values[i:]) for i in range(10)]
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    got = varint_entries(buf, starts, lengths)
    assert got is not None and _same(got, V.varint_fields(buf.copy(), np.cumsum(lengths)))
    assert got.value[got.field == 2].tolist() == [v for i in range(10) for v in values[i:]]
