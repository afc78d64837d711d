"""``wire.vector.varint_fields`` (each varint read from its first byte, the message of each
field found by a binary search) against a shift-and-sum decoder written here as the oracle
(every byte shifted into place, summed per varint, messages by a running count) on random,
damaged and real entries; and ``walk_varint_fields`` against the field walker."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.wire import vector as V
from polyprof.wire.encode import varint

COLUMNS = ("msg", "field", "wire", "value", "start", "length")


def _same(a: V.Fields | None, b: V.Fields | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(np.array_equal(getattr(a, c), getattr(b, c)) and getattr(a, c).dtype == getattr(b, c).dtype
               for c in COLUMNS)


def _oracle(buf: np.ndarray, ends: np.ndarray) -> V.Fields | None:
    """Varint-only messages packed back to back, decoded the slow, obvious way; None where
    they are not even runs of (one-byte VARINT tag, value) varints of at most ten bytes."""
    if not buf.size or ends.size == 0 or int(ends[-1]) != buf.size or (np.diff(ends) < 0).any():
        return None
    last = np.flatnonzero(buf < 0x80)
    if not last.size or int(last[-1]) != buf.size - 1:
        return None
    first = np.append(0, last[:-1] + 1)
    size = last - first + 1
    if int(size.max()) > 10:
        return None
    shift = (7 * (np.arange(buf.size, dtype=np.int64) - np.repeat(first, size))).astype(np.uint64)
    values = np.add.reduceat((buf & 0x7F).astype(np.uint64) << shift, first)
    starts = np.append(0, ends[:-1])
    starts = starts[ends > starts]
    begins = np.zeros(buf.size, dtype=bool)
    begins[first] = True
    if not begins[starts].all():
        return None
    msg_start = np.zeros(buf.size, dtype=np.int64)
    msg_start[starts] = 1
    msg_of = (np.cumsum(msg_start) - 1)[first]
    if (np.bincount(msg_of, minlength=starts.size) % 2).any():
        return None
    msg_of = np.flatnonzero(ends > np.append(0, ends[:-1]))[msg_of[0::2]]
    tag, value = values[0::2], values[1::2]
    if (size[0::2] != 1).any() or (tag & np.uint64(7)).any() or (tag < 8).any():
        return None
    zeros = np.zeros(tag.size, dtype=np.int64)
    return V.Fields(msg_of, (tag >> np.uint64(3)).astype(np.int64), zeros.astype(np.int8), value, zeros, zeros)


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
def test_varint_fields_are_the_oracle_and_the_walk(entries, gap, damage, cut):
    """Entries with any field numbers and wire types, overlong varints (past ten bytes),
    changed bytes and a cut last entry, spaced in a buffer: ``varint_fields`` of their bytes
    end to end gives the oracle's Fields, or both decline; and ``walk_varint_fields`` is the
    field walk wherever the walker accepts the entries."""
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
    want = _oracle(joined, np.cumsum(lengths)) if blobs else None
    assert _same(V.varint_fields(joined, np.cumsum(lengths)) if blobs else None, want)
    try:
        walked = V.walk_fields(buf, starts, starts + lengths)
    except Exception:  # noqa: BLE001 - damaged: the walker names it, and so must the entry walk
        return
    got = V.walk_varint_fields(buf, starts, starts + lengths)
    for c in ("msg", "field", "wire", "value"):
        assert np.array_equal(getattr(got, c)[getattr(got, "wire") == 0], getattr(walked, c)[walked.wire == 0])


def test_long_varints_and_real_callstacks():
    """Frame ids of one to ten bytes (the largest uint64) in callstack-shaped entries."""
    values = [0, 1, 127, 128, 16383, 16384, 2**21, 2**35, 2**63, 2**64 - 1]
    blobs = [varint(8) + varint(i) + b"".join(varint(16) + varint(v) for v in values[i:]) for i in range(10)]
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    got = V.varint_fields(buf, np.cumsum(lengths))
    assert got is not None and _same(got, _oracle(buf, np.cumsum(lengths)))
    assert got.value[got.field == 2].tolist() == [v for i in range(10) for v in values[i:]]
    walked = V.walk_varint_fields(buf, starts, starts + lengths)  # the entry walk (either kernels)
    for c in ("msg", "field", "wire", "value"):
        assert np.array_equal(getattr(walked, c), getattr(got, c)), c
