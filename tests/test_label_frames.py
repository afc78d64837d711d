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


@pytest.mark.parametrize("keys", [{"tagroot": "worker"}, {"tagleaf": "worker"}, {"tagroot": "worker,span", "tagleaf": "x"}])
def test_the_compiled_path_fill_gives_the_numpy_stacks(monkeypatch, keys):  # noqa: ANN001
    """The compiled walk per (stack, labelset) group writes the CSR the depth-by-depth numpy walk
    writes: the same label-framed profile (callsites, locations, sample stacks), demo and peers."""
    pytest.importorskip("polyprof.analysis._labels_compiled", reason="numba is not installed: no compiled fill")
    import polyprof
    from helpers import PEER, REPO, numpy_only, small_peer_profiles
    from polyprof.analysis import labels

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(labels._kernels, "_compiled", None)
    peers = [p for _, p in small_peer_profiles(PEER / "pprof")][:6] if (PEER / "pprof").is_dir() else []
    for p in [polyprof.read(REPO / "examples" / "demo.pb.gz"), *peers]:
        roots, leaves = keys.get("tagroot"), keys.get("tagleaf")
        want, hit = numpy_only(labels._kernels, labels.label_frames, p, roots, leaves)
        got, got_hit = labels.label_frames(p, roots, leaves)
        assert labels._kernels(len(p.callsites)) is not None and hit == got_hit
        for x, y in ((want.callsites.parent, got.callsites.parent), (want.callsites.location, got.callsites.location),
                     (want.samples.stack, got.samples.stack), (want.locations.line_start, got.locations.line_start),
                     (want.lines.function, got.lines.function)):
            assert np.array_equal(x, y)
