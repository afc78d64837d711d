"""The pprof reader's one-pass compiled sample decode gives exactly the numpy path's columns.

Random sample records (packed and unpacked location ids and values, labels
with odd fields, unknown fields, dangling ids, wrong value counts, bad
string indexes, cut bytes) are decoded both ways: where the compiled pass
answers, every column is identical; where it declines, the numpy path
either raises (the reader's error) or decodes them (then the input was
unusual, not ordinary: ordinary samples are always taken by the compiled
pass). Whole real files are compared by ``tests/test_kernels.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.errors import MalformedInputError
from polyprof.formats.pprof import _read
from polyprof.wire.encode import varint

pytest.importorskip("polyprof.formats.pprof._samples_compiled", reason="numba is not installed: no compiled kernels")

N_LOC, N_STR, WIDTH = 6, 9, 2


def _len(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _vint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


ordinary_label = st.one_of(
    st.tuples(st.integers(1, N_STR - 1), st.integers(1, N_STR - 1)).map(lambda t: _vint(1, t[0]) + _vint(2, t[1])),
    st.tuples(st.integers(1, N_STR - 1), st.integers(0, 2**64 - 1), st.integers(0, N_STR - 1)).map(
        lambda t: _vint(1, t[0]) + _vint(3, t[1]) + _vint(4, t[2])),
)
odd_label = st.lists(st.one_of(
    st.tuples(st.integers(1, 6), st.integers(0, N_STR + 2)).map(lambda t: _vint(*t)),
    st.integers(1, 4).map(lambda k: varint(k << 3 | 5) + b"\x01\x00\x00\x00"),
), max_size=4).map(b"".join)


def _sample(locs: list[int], values: list[int], labels: list[bytes], packed: bool) -> bytes:
    if packed:
        body = _len(1, b"".join(map(varint, locs))) + _len(2, b"".join(map(varint, values)))
    else:
        body = b"".join(_vint(1, v) for v in locs) + b"".join(_vint(2, v) for v in values)
    return body + b"".join(_len(3, lab) for lab in labels)


ordinary = st.builds(_sample, st.lists(st.integers(1, N_LOC), max_size=8),
                     st.lists(st.integers(0, 2**64 - 1), min_size=WIDTH, max_size=WIDTH),
                     st.lists(ordinary_label, max_size=3), st.booleans())
odd = st.one_of(
    st.builds(_sample, st.lists(st.integers(0, N_LOC + 3), max_size=8),
              st.lists(st.integers(0, 2**64 - 1), min_size=WIDTH - 1, max_size=WIDTH + 1),
              st.lists(st.one_of(ordinary_label, odd_label), max_size=3), st.booleans()),
    st.tuples(ordinary, st.sampled_from([_vint(7, 5), _len(9, b"ab"), varint(6 << 3 | 5) + b"1234",
                                         _vint(3, 1), varint(1 << 3 | 1) + b"12345678"])).map(b"".join),
    ordinary.map(lambda s: s[:-1]),
)


def _decode(samples: list[bytes], compiled: bool) -> _read._Decoded | None | str:
    buf = np.frombuffer(b"".join(samples), dtype=np.uint8)
    ends = np.cumsum([len(s) for s in samples], dtype=np.int64)
    starts = ends - np.array([len(s) for s in samples], dtype=np.int64)
    chunks = _read._Chunks(len(samples), iter([(0, buf, starts, ends)]), (buf, starts, ends))
    locations = _read._Ids("location", np.arange(1, N_LOC + 1, dtype=np.uint64)[::-1].copy(), first=3)
    strings = _read._Strings([b""] * N_STR, None)  # type: ignore[arg-type]  # only its size is used
    dtype = np.min_scalar_type(N_LOC + 2)
    if compiled:
        return _read._decode_compiled(chunks, locations, strings, WIDTH, dtype)
    try:
        return _read._decode_numpy(chunks, locations, strings, WIDTH, dtype)
    except MalformedInputError as exc:
        return f"error: {exc}"


@pytest.fixture(autouse=True)
def _compiled_kernels(monkeypatch):
    from polyprof.wire import vector as V

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(V, "_compiled", None)


def _same(a: _read._Decoded, b: _read._Decoded) -> None:
    for name in ("flat", "offsets", "values"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert (a.labels is None) == (b.labels is None)
    if a.labels is not None and b.labels is not None:
        for name in ("owner", "key", "str", "num", "unit"):
            x, y = getattr(a.labels, name), getattr(b.labels, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name


@settings(max_examples=300, deadline=None)
@given(st.lists(ordinary, min_size=1, max_size=12))
def test_ordinary_samples_decode_alike(samples):
    fast = _decode(samples, compiled=True)
    assert isinstance(fast, _read._Decoded)  # never declined
    slow = _decode(samples, compiled=False)
    assert isinstance(slow, _read._Decoded)
    _same(fast, slow)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(ordinary, odd), min_size=1, max_size=8))
def test_unusual_samples_decode_alike_or_fall_back(samples):
    fast = _decode(samples, compiled=True)
    slow = _decode(samples, compiled=False)
    if fast is not None:  # answered: then the numpy path decodes them too (no error) and alike
        assert isinstance(fast, _read._Decoded) and isinstance(slow, _read._Decoded), slow
        _same(fast, slow)


def test_a_dangling_location_falls_back_to_the_numpy_error():
    samples = [_sample([1, N_LOC + 1], [1, 2], [], True)]
    assert _decode(samples, compiled=True) is None
    assert "missing location id 7" in str(_decode(samples, compiled=False))
