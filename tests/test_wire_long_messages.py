"""``wire.vector.walk_fields`` on a batch of few long messages (every field position by pointer
doubling at once) gives the fields of its lockstep walk (forced by raising the length from which
it skips the lockstep), on random messages of few and many fields, packed end to end or spaced,
and raises where the lockstep walk raises on damaged ones; so does a walk told the messages
hold few fields (``few_fields``: lockstep first, then every position at once)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.errors import MalformedInputError
from polyprof.wire import vector as V

from test_perfetto_heap_walk import _field  # any field number and wire type

COLUMNS = ("msg", "field", "wire", "value", "start", "length")
FIELD = st.tuples(st.integers(1, 3000), st.sampled_from([0, 0, 1, 2, 2, 5]),
                  st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1)))


@pytest.mark.parametrize("mode", ["numpy", "compiled"])
@settings(max_examples=150, deadline=None)
@given(messages=st.lists(st.lists(FIELD, max_size=90), max_size=5), gap=st.integers(0, 2),
       damage=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=1))
def test_long_walk_is_the_walk(mode, messages, gap, damage):
    import os

    before = os.environ.get("POLYPROF_KERNELS")
    os.environ["POLYPROF_KERNELS"] = mode
    V._compiled = None
    try:
        blobs = [bytearray(b"".join(_field(*f) for f in m)) for m in messages]
        for at, byte in damage:
            if blobs and blobs[at % len(blobs)]:
                b = blobs[at % len(blobs)]
                b[at % len(b)] = byte
        lengths = np.array([len(b) for b in blobs], dtype=np.int64)
        buf = np.frombuffer(b"".join(b"\x00" * gap + bytes(b) for b in blobs) + b"\x00", dtype=np.uint8)
        starts = np.cumsum(lengths + gap) - lengths
        long_bytes = V._LONG_MESSAGE_BYTES
        try:
            V._LONG_MESSAGE_BYTES = 1 << 62  # the lockstep walk, whatever the lengths
            want = V.walk_fields(buf, starts, starts + lengths)
        except MalformedInputError:
            V._LONG_MESSAGE_BYTES = 0  # every batch is one of long messages
            with pytest.raises(MalformedInputError):
                V.walk_fields(buf, starts, starts + lengths)
            with pytest.raises(MalformedInputError):  # a caller's word that the fields are few
                V.walk_fields(buf, starts, starts + lengths, few_fields=True)
            return
        finally:
            V._LONG_MESSAGE_BYTES = long_bytes
        V._LONG_MESSAGE_BYTES = 0
        try:
            got = V.walk_fields(buf, starts, starts + lengths)
            few = V.walk_fields(buf, starts, starts + lengths, few_fields=True)  # lockstep first, then the same
        finally:
            V._LONG_MESSAGE_BYTES = long_bytes
        for c in COLUMNS:
            for walked in (got, few):
                assert np.array_equal(getattr(walked, c), getattr(want, c)), c
                assert getattr(walked, c).dtype == getattr(want, c).dtype, c
    finally:
        if before is None:
            os.environ.pop("POLYPROF_KERNELS", None)
        else:
            os.environ["POLYPROF_KERNELS"] = before
        V._compiled = None
