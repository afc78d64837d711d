"""label_frames (tagroot/tagleaf: the web view's group by label): its vectorized parts agree
with the plain numpy forms they replace (the frames themselves are checked against go tool
pprof by test_pprof_flags)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("seed", range(4))
def test_distinct_stack_and_labelset_pairs_are_numpy_s_row_unique(seed):
    """label_frames' pairs (one int64 key per pair, counted or sorted) are np.unique(axis=1)'s."""
    from polyprof.analysis.labels import _distinct_pairs

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    stacks = rng.integers(-1, 50 if seed % 2 else 10**9, n)  # small range: counted; huge: sorted
    sets = rng.integers(0, 1 + 7 * seed, n)
    want, want_inverse = np.unique(np.stack([stacks, sets]), axis=1, return_inverse=True)
    got, got_inverse = _distinct_pairs(stacks, sets)
    assert np.array_equal(want, got) and np.array_equal(want_inverse.reshape(-1), got_inverse)
