"""The sample table's optional columns: pid/tid kept as int32 and cpu as int16 when their values
fit (memory of very large traces), int64 otherwise; every value kept exactly either way."""

from __future__ import annotations

import numpy as np
import pytest

from polyprof.formats.perfetto._perf import _small_rows
from polyprof.model.builder import ProfileBuilder, sample_column, sample_dtype
from polyprof.model.columns import factorize_rows


def _profile(**optional: object) -> object:
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    n = len(next(iter(optional.values())))  # type: ignore[arg-type]
    b.add_samples_bulk(np.full(n, -1), np.ones((n, 1)), **optional)  # type: ignore[arg-type]
    return b.finish()


def test_narrow_when_values_fit() -> None:
    p = _profile(pid=np.array([1, 4_194_304]), tid=np.array([7, 9], np.uint16), cpu=np.array([0, 255]),
                 time=np.array([1, 2], np.int32))
    s = p.samples  # type: ignore[attr-defined]
    assert (s.pid.dtype, s.tid.dtype, s.cpu.dtype, s.time.dtype) == (np.int32, np.int32, np.int16, np.int64)
    assert s.pid.tolist() == [1, 4_194_304] and s.cpu.tolist() == [0, 255]


@pytest.mark.parametrize("col", [np.array([0, 2**31]), np.array([2**32 - 1], np.uint32), np.array([-(2**40)])])
def test_wide_values_stay_int64(col: np.ndarray) -> None:
    kept = sample_column("pid", col)
    assert kept.dtype == np.int64 and kept.tolist() == col.astype(np.int64).tolist()
    assert sample_column("cpu", np.array([40_000])).dtype == np.int64


def test_per_sample_adds_and_chunks_of_mixed_types() -> None:
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    b.add_sample(-1, [1], pid=3, cpu=1)
    b.add_sample(-1, [1], pid=None, cpu=2)
    b.add_samples_bulk(np.array([-1]), np.ones((1, 1)), pid=np.array([2**33]))
    s = b.finish().samples
    assert s.pid.dtype == np.int64 and s.pid.tolist() == [3, 0, 2**33]
    assert s.cpu.dtype == np.int16 and s.cpu.tolist() == [1, 2, 0]
    assert sample_dtype("tid", np.dtype(np.int64)) == np.int64 and sample_dtype("tid", np.dtype(np.int8)) == np.int32


def test_small_rows_matches_factorize_rows() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 1000):
        keys = [rng.integers(0, 4, n).astype(np.int8), rng.integers(-1, 3, n).astype(np.int8),
                rng.integers(-1, 1, n).astype(np.int8), rng.integers(4000, 4100, n).astype(np.int32)]
        coded = _small_rows(keys)
        assert coded is not None
        ids, uniq = coded
        want_ids, first = factorize_rows(keys)
        assert ids.dtype == np.int32 and ids.tolist() == want_ids.tolist()
        assert uniq.tolist() == np.stack([k[first] for k in keys], axis=1).reshape(-1, 4).tolist()
    assert _small_rows([np.array([0, 2**30]), np.array([0, 2**30])]) is None  # too wide for a table


def test_block_wise_passes_match_whole_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory-saving block loops (codes, in-place remaps, the value fill with trims) give what
    one whole-column pass gives, whatever the block size."""
    from polyprof.formats.perfetto import _perf

    rng = np.random.default_rng(5)
    keys = [rng.integers(0, 3, 1000).astype(np.int8), rng.integers(4000, 4010, 1000).astype(np.int32)]
    whole = _small_rows(keys)
    assert whole is not None
    table = rng.integers(-5, 5, 50).astype(np.int32)
    col = rng.integers(0, 50, 1000).astype(np.int32)
    parts = [rng.integers(0, 1 << 40, (m, 1)) for m in (3, 0, 10, 7)]
    monkeypatch.setattr(_perf, "_BLOCK", 7)
    monkeypatch.setattr(_perf, "_TRIM_EVERY", 16)
    ids, uniq = _small_rows(keys)  # type: ignore[misc]
    assert ids.tolist() == whole[0].tolist() and uniq.tolist() == whole[1].tolist()
    assert _perf.remap_in_place(table, col.copy()).tolist() == table[col].tolist()
    filled = _perf._fill([{"values": p} for p in parts], "values", np.int64, counted=True)
    assert filled.tolist() == [[1, int(v)] for p in parts for v in p[:, 0]]


def test_compact_builder_keeps_int32_values_and_constant_columns_without_memory() -> None:
    b = ProfileBuilder("test", compact=True)
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    values = np.array([[1, 2**31 - 1], [1, -(2**31)], [1, 5]], np.int32)
    b.add_samples_bulk(np.full(3, -1), values, pid=np.full(3, 4242), tid=np.array([1, 2, 1]), cpu=np.zeros(3))
    s = b.finish().samples
    assert s.values.dtype == np.int32 and s.values.tolist() == values.tolist()
    assert s.pid.strides == (0,) and s.pid.tolist() == [4242] * 3 and not s.pid.flags.writeable
    assert s.cpu.strides == (0,) and s.tid.tolist() == [1, 2, 1] and s.tid.strides != (0,)
    assert (s.pid.dtype, s.tid.dtype, s.cpu.dtype) == (np.int16, np.int8, np.int8)  # narrowest that holds them
    assert s.values[:, 1].sum() == 2**31 - 1 - 2**31 + 5  # sums widen
    wide = ProfileBuilder("test", compact=True)
    wide.set_sample_types([("samples", "count")])
    wide.add_samples_bulk(np.full(2, -1), np.array([[1], [2**31]]), pid=np.array([1, 2**20]),
                          tid=np.array([0, 2**40]), cpu=np.array([1, 2], np.uint64))
    s = wide.finish().samples  # values beyond int32 stay int64; varying columns stay whole
    assert s.values.dtype == np.int64 and s.values[:, 0].tolist() == [1, 2**31]
    assert (s.pid.dtype, s.tid.dtype, s.cpu.dtype) == (np.int32, np.int64, np.int8)
    assert s.pid.tolist() == [1, 2**20] and s.tid.tolist() == [0, 2**40] and s.cpu.tolist() == [1, 2]
