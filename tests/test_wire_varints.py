"""``wire.vector.varint_fields`` (the all-varint fast path) equals ``walk_fields``,
and declines anything else so the strict walker can judge it."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from polyprof.wire import vector as V


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


messages = st.lists(st.lists(st.tuples(st.integers(1, 15), st.integers(0, 2**63 - 1)), max_size=4),
                    min_size=1, max_size=8)


@given(messages)
def test_equals_the_field_walker(msgs):
    bodies = [b"".join(_varint(f << 3) + _varint(v) for f, v in m) for m in msgs]
    buf = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    ends = np.cumsum([len(b) for b in bodies])
    if not buf.size:
        return
    fast = V.varint_fields(buf, ends)
    slow = V.walk_fields(buf, ends - [len(b) for b in bodies], ends)
    assert fast is not None
    for name in ("msg", "field", "value"):
        assert getattr(fast, name).tolist() == getattr(slow, name).tolist()


def test_declines_what_is_not_plain_varint_pairs():
    tag = _varint(1 << 3)
    cases = [
        (tag + _varint(300) + tag, [5]),              # odd number of varints
        (tag + _varint(300), [2, 3]),                 # a message ends inside a varint
        (_varint((1 << 3) | 2) + b"\x01a", [3]),      # a LEN field
        (_varint(0) + _varint(1), [2]),               # field number 0
        (_varint(20 << 3) + _varint(1), [3]),         # a two-byte tag
        (b"\xf8\xff\xe7\xf8", [4]),                    # no varint ends at all (found by the fuzz smoke run)
        (tag + b"\x81", [2]),                          # the last varint runs off the end
    ]
    for data, ends in cases:
        assert V.varint_fields(np.frombuffer(data, dtype=np.uint8), np.array(ends)) is None, data
