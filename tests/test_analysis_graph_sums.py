"""``graph.sum_by`` and ``graph.sum_by_stack`` in chunks against one exact sum (small chunks
forced), with and without a node map, empty stacks, negative and huge values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.analysis import graph


def _exact(keys: np.ndarray, values: np.ndarray, size: int) -> list[int]:
    out = [0] * size
    for k, v in zip(keys.tolist(), values.tolist()):
        out[k] += v
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(0, 3000), st.booleans(), st.booleans(),
       st.sampled_from([1, 3, 64, 1 << 17]))
def test_sums_in_chunks_are_exact(seed, size, n, mapped, huge, chunk):
    rng = np.random.default_rng(seed)
    stack = rng.integers(-1, size, n).astype(np.int32)
    high = 2**62 // (n + 1) if huge else 1000  # past float64's exact integers (the scatter-add), within int64
    values = rng.integers(-high, high, n, dtype=np.int64)
    at = rng.integers(-1, size, size).astype(np.int32) if mapped else None
    old = graph._CHUNK, graph._STACK_CHUNK
    graph._CHUNK = graph._STACK_CHUNK = chunk
    try:
        sums, empty = graph.sum_by_stack(stack, values, size, at=at)
        whole = graph.sum_by(np.maximum(stack, 0), values, size)
    finally:
        graph._CHUNK, graph._STACK_CHUNK = old
    has = stack >= 0
    keys = stack[has] if at is None else at[stack[has]]
    kept = keys >= 0
    assert sums.tolist() == _exact(keys[kept], values[has][kept], size)
    assert empty == int(values[~has].sum())
    assert whole.tolist() == _exact(np.maximum(stack, 0), values, size)
