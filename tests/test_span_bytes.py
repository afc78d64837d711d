"""The numpy readers' grouping of wire spans by their bytes (formats/span_bytes.py), and the
sized-read rule that keeps numba out of reads that are quicker by numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.span_bytes import MAX_WORDS, decoded, factorize_span_bytes
from polyprof.wire import vector as V
from polyprof.wire.encode import varint as _varint

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


_POOL = [b"", b"\x08\x01", b"\x08\x01\x10\x02", b"\x10\x02\x08\x01", b"x" * 16, b"x" * 17, b"y" * 40]
_FIELD = st.one_of(st.tuples(st.just(3), st.integers(0, len(_POOL) - 1)),  # a sub-message from the pool
                   st.tuples(st.sampled_from([1, 2, 4, 9]), st.integers(0, 2**64 - 1)))  # another field (a varint)


def _message(fields: list[tuple[int, int]]) -> bytes:
    out = bytearray()
    for number, value in fields:
        if number == 3:
            out += _varint(3 << 3 | 2) + _varint(len(_POOL[value])) + _POOL[value]
        else:
            out += _varint(number << 3) + _varint(value)
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_FIELD, max_size=8), min_size=1, max_size=12), st.one_of(st.none(), st.integers(0, 999)))
def test_sub_span_twins_group_alike(messages, damage):
    """The compiled one-pass grouping and the numpy walk agree: the same sub-messages per message,
    each group's first its first member, every member equal to its group's first by bytes and,
    the numpy twin aside keeping long spans apart, the same groups; damage: both refuse."""
    import pytest
    from helpers import numpy_only

    from polyprof.errors import MalformedInputError
    from polyprof.formats import span_bytes as SB

    twin = pytest.importorskip("polyprof.formats._span_compiled", reason="numba is not installed")
    bodies = [_message(m) for m in messages]
    data = bytearray(b"\x00".join(bodies))
    if damage is not None and data:
        data[damage % len(data)] ^= 0xFF
    lengths = np.array([len(b) for b in bodies], dtype=np.int64)
    starts = np.cumsum(lengths + 1) - lengths - 1
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    got = twin.sub_spans(buf, starts, starts + lengths, 3, (1, 9), 3)
    try:
        want = numpy_only(V, SB.sub_spans_and_fields, buf, starts, starts + lengths, 3, (1, 9), 3)
    except MalformedInputError:
        assert got is None
        return
    assert got is not None
    for x, y in zip(got[6:], want[6:]):  # varints 1 and 9, the last field 3 and how many
        assert np.array_equal(x, y)
    got, want = got[:6], want[:6]
    for counts, group, first, lo, length, sizes in (got, want):
        assert np.array_equal(counts, want[0])
        assert np.array_equal(sizes, np.bincount(group, minlength=first.size))
        assert first.tolist() == [int(np.flatnonzero(group == g)[0]) for g in range(first.size)]
        member = [bytes(buf[a:a + n]) for a, n in zip(lo[group].tolist(), length[group].tolist())]
        assert member == [bytes(buf[a:a + n]) for a, n in zip(*_subs(buf, starts, lengths))]
    if (want[4] <= 8 * MAX_WORDS).all():  # no long spans: the very same groups
        assert np.array_equal(got[1], want[1])


def _subs(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[list[int], list[int]]:
    f = V.walk_fields(buf, starts, starts + lengths).select(3, V.LEN)
    return f.start.tolist(), f.length.tolist()


def test_compiled_span_words_read_from_aligned_words_as_byte_by_byte() -> None:
    """The compiled walk reads a span's first 16 bytes from the buffer's aligned words (shifted
    together, masked to the span); near the end, byte by byte: the same two words at every
    offset, length and alignment of the buffer."""
    import pytest

    twin = pytest.importorskip("polyprof.formats._span_compiled", reason="numba is not installed")
    raw = np.random.default_rng(7).integers(0, 256, 80, dtype=np.uint8).tobytes()
    for shift in range(3):  # the buffer itself starting off an 8-byte boundary
        buf = np.frombuffer(raw, dtype=np.uint8)[shift:]
        aligned = buf[:buf.size // 8 * 8].view("<u8")
        for s in range(buf.size):
            for n in range(buf.size - s + 1):
                head = bytes(buf[s:s + min(n, 16)]).ljust(16, b"\0")
                want = (int.from_bytes(head[:8], "little"), int.from_bytes(head[8:], "little"))
                assert tuple(int(w) for w in twin._words(buf, aligned, s, n)) == want, (shift, s, n)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=300), st.lists(st.integers(0, 299), max_size=2000),
       st.booleans())
def test_first_sight_by_slots_numbers_as_a_sort_would(pool, picks, crowd):
    """Values grouped through the slot table number their groups, and name each group's first
    row, as a stable sort of the values does; ``crowd``: values alike in every slot's bits
    (every round collides, the rest is sorted)."""
    from polyprof.formats.span_bytes import _first_sight

    values = np.array(pool, dtype=np.uint64)
    if crowd:
        values = (values & np.uint64(0xF)) | np.uint64(1 << 63)
    h = values[np.array([p % len(pool) for p in picks], dtype=np.int64)]
    group, first = _first_sight(h)
    _, order_first, inverse = np.unique(h, return_index=True, return_inverse=True)
    by_sight = np.argsort(order_first, kind="stable")
    rank = np.empty(by_sight.size, dtype=np.int64)
    rank[by_sight] = np.arange(by_sight.size)
    assert first.tolist() == np.sort(order_first).tolist()
    assert group.tolist() == rank[inverse.reshape(-1)].tolist()


@given(data=st.binary(max_size=40), strided=st.booleans())
def test_words_at_every_position_read_as_byte_by_byte(data, strided):
    """The word view (unaligned loads) and its byte-by-byte end: every position, the last
    seven included, and a buffer that is not contiguous (read the slow way)."""
    from polyprof.formats.span_bytes import _words_at

    raw = np.frombuffer(data * 2 if strided else data, dtype=np.uint8)
    buf = raw[::2] if strided else raw
    pos = np.arange(buf.size, dtype=np.int64)
    want = [int.from_bytes(bytes(buf[p:p + 8].tolist()), "little") for p in pos.tolist()]
    assert _words_at(buf, pos).tolist() == want
    assert _words_at(buf, pos[::-1].copy()).tolist() == want[::-1]


_RUN_FIELD = st.one_of(_FIELD, st.tuples(st.just(3), st.just(-1)),  # a LEN field 3 of 200 bytes (two-byte length)
                       st.tuples(st.just(-2), st.integers(0, 2**32)))  # field 3 as a varint, or a fixed32 field 5


def _run_message(fields: list[tuple[int, int]]) -> bytes:
    out = bytearray()
    for number, value in fields:
        if number == 3 and value == -1:
            out += _varint(3 << 3 | 2) + _varint(200) + b"z" * 200
        elif number == -2:
            out += (_varint(3 << 3) + _varint(value)) if value % 2 else (_varint(5 << 3 | 5) + b"\x01\x02\x03\x04")
        else:
            out += _message([(number, value)])
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_RUN_FIELD, max_size=90), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=2))
def test_walk_runs_is_the_field_walk_split_in_two(messages, flips):
    """The numpy sample walk that takes one-byte-tag runs of field 3 by gathers gives the field
    walker's own fields (split: field 3 LEN, the rest), long messages (the walker's tail) and
    longer lengths included, or the walker's very error on damaged bytes."""
    from helpers import numpy_only

    from polyprof.errors import MalformedInputError
    from polyprof.formats.span_bytes import walk_runs

    bodies = [_run_message(m) for m in messages]
    data = bytearray(b"\x00".join(bodies))
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    lengths = np.array([len(b) for b in bodies], dtype=np.int64)
    starts = np.cumsum(lengths + 1) - lengths - 1
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    try:
        want = numpy_only(V, V.walk_fields, buf, starts, starts + lengths)
    except MalformedInputError as exc:
        try:
            numpy_only(V, walk_runs, buf, starts, starts + lengths, 3)
        except MalformedInputError as got:
            assert (str(got), got.offset) == (str(exc), exc.offset)
            return
        raise AssertionError("walk_runs read damaged bytes") from None
    runs, rest = numpy_only(V, walk_runs, buf, starts, starts + lengths, 3)
    sub = (want.field == 3) & (want.wire == V.LEN)
    for name in ("msg", "start", "length"):
        assert np.array_equal(getattr(runs, name), getattr(want, name)[sub]), name
    for name in ("msg", "field", "wire", "value", "start", "length"):
        a, b = getattr(rest, name), getattr(want, name)[~sub]
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=12), max_size=70), min_size=1, max_size=8))
def test_walk_runs_of_messages_that_are_all_runs_is_the_field_walk(messages):
    """Messages holding only short LEN fields 3 (a Chromium stack's frames; empty messages and
    ones longer than the lockstep included): the runs are the field walker's fields, in its order."""
    from helpers import numpy_only

    from polyprof.formats.span_bytes import walk_runs

    bodies = [b"".join(_varint(3 << 3 | 2) + _varint(len(p)) + p for p in m) for m in messages]
    lengths = np.array([len(b) for b in bodies], dtype=np.int64)
    starts = np.cumsum(lengths + 1) - lengths - 1
    buf = np.frombuffer(b"\x00".join(bodies) + b"\x00", dtype=np.uint8)
    want = numpy_only(V, V.walk_fields, buf, starts, starts + lengths)
    runs, rest = numpy_only(V, walk_runs, buf, starts, starts + lengths, 3)
    assert len(rest) == 0
    for name in ("msg", "field", "wire", "value", "start", "length"):
        a, b = getattr(runs, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


_COLUMN = st.lists(st.integers(-3, 3) | st.integers(-2**63, 2**63 - 1), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(_COLUMN, min_size=1, max_size=4), st.booleans())
def test_factorize_in_order_is_factorize_rows_in_order(columns, collide):
    """Rows of integer columns (int64, int8 and uint64 bit patterns, many repeats) grouped by
    their hash give ``factorize_rows(..., in_order=True)``'s groups and first rows, also when
    every row hashes alike (``collide``: the hash cannot tell rows apart)."""
    from polyprof.formats import span_bytes as SB
    from polyprof.model.columns import factorize_rows

    n = min(len(c) for c in columns)
    cols = [np.array(c[:n], dtype=np.int64) for c in columns]
    cols = [c if k % 3 == 0 else (c.astype(np.int8) if k % 3 == 1 else c.view(np.uint64).view(np.int64))
            for k, c in enumerate(cols)]
    want = factorize_rows(cols, in_order=True)
    saved = SB._MIX.copy()
    if collide:
        SB._MIX[:] = 0
    try:
        got = SB.factorize_in_order(cols)
    finally:
        SB._MIX[:] = saved
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
