"""The numpy readers' grouping of wire spans by their bytes (formats/span_bytes.py), and the
sized-read rule that keeps numba out of reads that are quicker by numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.span_bytes import MAX_WORDS, decoded, factorize_span_bytes
from polyprof.wire import vector as V

_SPANS = st.lists(st.binary(max_size=8 * MAX_WORDS + 9), min_size=1, max_size=40)


def _by_dict(spans: list[bytes]) -> tuple[list[int], list[int]]:
    seen: dict[bytes, int] = {}
    group, first = [], []
    for i, s in enumerate(spans):
        if s not in seen:
            seen[s] = len(seen)
            first.append(i)
        group.append(seen[s])
    return group, first


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=60), _SPANS, st.integers(0, 9))
def test_spans_group_as_a_dict_of_their_bytes_would(picks, pool, gap):
    """Spans picked (with repeats) from a pool, laid out with gaps and the last one flush with the
    buffer's end: grouped exactly as a dict of bytes groups them (long spans apart)."""
    spans = [pool[p % len(pool)] for p in picks]
    parts, starts = [], []
    at = 0
    for s in spans:
        parts.append(b"\xff" * gap)
        at += gap
        starts.append(at)
        parts.append(s)
        at += len(s)
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)
    lengths = np.array([len(s) for s in spans], dtype=np.int64)
    got = factorize_span_bytes(buf, np.array(starts, dtype=np.int64), lengths, long_apart=True)
    assert got is not None
    long = [len(s) > 8 * MAX_WORDS for s in spans]
    keyed = [s if not lg else (i, s) for i, (s, lg) in enumerate(zip(spans, long))]
    want = _by_dict(keyed)  # type: ignore[arg-type]
    assert got[0].tolist() == want[0] and got[1].tolist() == want[1]
    if any(long):
        assert factorize_span_bytes(buf, np.array(starts, dtype=np.int64), lengths) is None


def test_a_hash_collision_splits_a_group_and_never_merges():
    """Spans whose words hash alike are compared: differing bytes are groups of their own."""
    from polyprof.formats import span_bytes as SB

    buf = np.frombuffer(b"abcdefghabcdefghabcdefgX", dtype=np.uint8)
    saved = SB._MIX.copy()
    SB._MIX[:] = 0  # every span hashes to 0
    try:
        group, first = factorize_span_bytes(buf, np.array([0, 8, 16]), np.array([8, 8, 8]))
    finally:
        SB._MIX[:] = saved
    assert group[0] == group[1] != group[2]
    assert first.tolist() == [0, 2]


def test_names_decode_at_once_or_say_they_cannot():
    assert decoded([b"main", "é".encode(), b""]) == ["main", "é", ""]
    assert decoded([b"a\0b"]) is None  # a NUL would split the text
    assert decoded([b"\xff"]) is None


def test_a_sized_read_below_its_threshold_stays_numpy_and_restores_the_switch(monkeypatch):
    monkeypatch.delenv("POLYPROF_KERNELS", raising=False)
    monkeypatch.setattr(V, "_compiled", None)
    monkeypatch.setattr(V, "_work", 5)
    with V.sized_read(1000, 2000):
        assert not V.compiled()
        assert V._kernels(1 << 40) is None  # work that would load numba does not
    assert V._compiled is None and V._work == 5
    monkeypatch.setenv("POLYPROF_KERNELS", "numpy")
    with V.sized_read(3000, 2000):  # over the threshold: the usual rule (here: numpy asked for)
        assert not V.compiled()
