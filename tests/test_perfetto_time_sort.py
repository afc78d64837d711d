"""The Perfetto reader's in-place sort of samples by time (``_build.sort_by_time_in_place``)
against numpy's stable argsort applied to every column."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.perfetto._build import sort_by_time_in_place


def _check(time: np.ndarray, window: int, chunk: int = 1 << 16) -> None:
    n = time.size
    order = np.argsort(time, kind="stable")
    rows = np.arange(n, dtype=np.int32)
    pairs = np.stack([np.arange(n), -np.arange(n)], axis=1).astype(np.int64)
    sorted_time = time.copy()
    sort_by_time_in_place(sorted_time, [rows, pairs], window=window, chunk=chunk)
    assert sorted_time.tolist() == time[order].tolist()
    assert rows.tolist() == order.tolist()  # ties keep their order: the stable permutation
    assert pairs.tolist() == np.stack([order, -order], axis=1).tolist()


def _per_cpu_batches(rng: np.random.Generator, n: int, cpus: int, batch: int) -> np.ndarray:
    """Times as traced_perf writes them: each cpu's samples of a period in turn."""
    cpu = rng.integers(0, cpus, n)
    t = np.cumsum(rng.integers(0, 3, n))  # ties included
    period = t // batch
    return t[np.lexsort((cpu, period))]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3000), st.integers(1, 16), st.integers(1, 400),
       st.sampled_from([1, 2, 7, 64, 1 << 18]), st.sampled_from([1, 5, 64, 1 << 16]))
def test_sort_matches_a_stable_argsort(seed, n, cpus, batch, window, chunk):
    rng = np.random.default_rng(seed)
    _check(_per_cpu_batches(rng, n, cpus, batch), window, chunk)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=300), st.sampled_from([1, 3, 16]), st.sampled_from([1, 4, 1 << 16]))
def test_sort_matches_on_any_order(values, window, chunk):
    _check(np.array(values, dtype=np.int64), window, chunk)


def test_a_trace_written_twice_over_and_a_reversed_one():
    once = np.arange(0, 200_000, 2, dtype=np.int64)
    _check(np.concatenate([once, once]), 1 << 10)
    _check(once[::-1].copy(), 1 << 10)
    _check(once.copy(), 1 << 10)  # already sorted: untouched
    _check(np.concatenate([once, once + 1]), 1 << 10)  # each window places a few rows only
