"""The compiled stack kernels (numba) give exactly the numpy results.

``model._stacks_compiled.intern_stacks`` (sort the stacks, then one walk) against
the level-by-level numpy walk of ``model.bulk_stacks``, and
``outermost_sums`` against ``analysis.graph.node_weights``' sort-based
cumulative column, over random stacks chosen to share prefixes, repeat, end
inside one another and use wide location ids. Without numba the compiled
side is skipped, visibly.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import numpy_only
from polyprof.model import bulk_stacks

fast = pytest.importorskip("polyprof.model._stacks_compiled", reason="numba is not installed: no compiled kernels")

# Stacks drawn as paths through a small tree of prefixes, so they share, repeat and nest.
_PREFIXES = st.lists(st.lists(st.integers(0, 5), max_size=6), min_size=1, max_size=6)
_PICKS = st.lists(st.tuples(st.integers(0, 10), st.lists(st.integers(0, 5), max_size=4)), min_size=1, max_size=40)
_WIDTH = st.sampled_from([np.uint8, np.uint16, np.int32, np.int64])


def _stacks(prefixes: list[list[int]], picks: list[tuple[int, list[int]]], scale: int) -> tuple[np.ndarray, ...]:
    stacks = [prefixes[i % len(prefixes)] + tail for i, tail in picks]
    flat = np.array([v * scale for s in stacks for v in s], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in stacks])]).astype(np.int64)
    return flat, offsets


@settings(max_examples=300, deadline=None)
@given(_PREFIXES, _PICKS, st.booleans(), _WIDTH, st.sampled_from([1, 7, 1 << 20, 1 << 36]))
@example([[1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]], [(0, [])] * 15 + [(0, [1])] * 15, False, np.int64, 1)
def test_sorted_intern_numbers_callsites_as_the_level_walk_does(prefixes, picks, leaf_first, width, scale):
    """Same leaf of every stack and same parent/location/depth/size of every callsite (pre-order,
    siblings by location), for narrow and wide ids, leaf-first and root-first stacks."""
    flat, offsets = _stacks(prefixes, picks, scale)
    if not flat.size or (np.dtype(width).itemsize < 8 and flat.max() > np.iinfo(width).max):
        return
    flat = flat.astype(width)
    want = numpy_only(bulk_stacks, bulk_stacks._intern, flat, offsets, leaf_first)
    # Words carried in the sort: 1 makes deep words come from the stacks; 0 radix-sorts whole
    # stacks (the quicksort's order, whatever the input's size).
    for keys in (1, fast._KEYS, 0):
        got = _with_keys(keys, fast.intern_stacks, flat, offsets, leaf_first)
        for name, column in zip(("leaf", "parent", "location", "depth", "size"), got, strict=True):
            expected = getattr(want, name)
            assert column.dtype == expected.dtype and np.array_equal(column, expected), name


def _with_keys(keys: int, kernel, *args):  # noqa: ANN001, ANN202
    """``kernel(*args)`` with ``keys`` words carried in the sort (and no more for small inputs):
    1 sends deeper partitions and the sorted copy to the stacks themselves; 0 carries whole
    stacks and radix-sorts them from the first stack on (else only for many stacks)."""
    saved = fast._KEYS, fast._KEYS_BYTES, fast._RADIX_FROM
    fast._KEYS, fast._KEYS_BYTES = max(keys, 1), (0 if keys == 1 else fast._KEYS_BYTES)
    fast._RADIX_FROM = 0 if keys == 0 else 1 << 62
    try:
        return kernel(*args)
    finally:
        fast._KEYS, fast._KEYS_BYTES, fast._RADIX_FROM = saved


@pytest.mark.parametrize("keys", [1, 4, 0])
def test_sorted_intern_of_many_random_stacks(keys):
    """Large enough to exercise the partitioning (not only the insertion sort), with long shared
    prefixes; with one word carried in the sort, partitions deeper down read the stacks."""
    rng = np.random.default_rng(5)
    n = 20_000
    lengths = rng.integers(0, 30, n)
    shared = rng.integers(0, 40, 30)
    flat = np.concatenate([np.where(rng.random(k) < 0.8, shared[:k], rng.integers(0, 40, k)) for k in lengths])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    for leaf_first in (True, False):
        want = numpy_only(bulk_stacks, bulk_stacks._intern, flat.astype(np.uint8), offsets, leaf_first)
        got = _with_keys(keys, fast.intern_stacks, flat.astype(np.uint8), offsets, leaf_first)
        for name, column in zip(("leaf", "parent", "location", "depth", "size"), got, strict=True):
            assert np.array_equal(column, getattr(want, name)), name


@settings(max_examples=100, deadline=None)
@given(_PREFIXES, _PICKS, st.lists(st.integers(-3, 5), min_size=1, max_size=40),
       st.sampled_from(["functions", "files", "addresses"]))
def test_outermost_and_subtree_sums_give_the_numpy_answers(prefixes, picks, values, granularity):
    """pprof's cum column (recursion counted once per stack) and subtree sums: compiled walks
    against the numpy sort and running sums."""
    from polyprof.analysis import graph
    from polyprof.analysis.nodes import node_map
    from polyprof.model.builder import ProfileBuilder

    flat, offsets = _stacks(prefixes, picks, 1)
    b = ProfileBuilder()
    funcs = [b.function(f"f{i % 3}", filename=f"file{i % 2}.go") for i in range(6)]
    locs = [b.location(address=0x1000 + i, lines=[(funcs[i], i, 0), (funcs[(i * 5) % 6], 1, 0)][:1 + i % 2])
            for i in range(6)]
    leaves = b.stacks_from_csr(np.array(locs)[flat] if flat.size else flat, offsets, leaf_first=True)
    b.set_sample_types([("alloc", "count")])
    b.add_samples_bulk(leaves, np.array([values[i % len(values)] for i in range(leaves.size)])[:, None])
    p = b.finish()
    nodes = node_map(p, granularity)
    w = graph.callsite_weights(p, p.samples.values[:, 0])
    want = numpy_only(bulk_stacks, graph.node_weights, p, nodes, w)
    leaf = w.leaf - 2 * (w.leaf % 3)  # some negative values too
    want_sums = numpy_only(bulk_stacks, p.callsites.subtree_sums, leaf)
    saved = bulk_stacks._compiled, os.environ.get("POLYPROF_KERNELS")
    bulk_stacks._compiled, os.environ["POLYPROF_KERNELS"] = fast, "compiled"
    try:
        got = graph.node_weights(p, nodes, w)
        assert np.array_equal(want_sums, p.callsites.subtree_sums(leaf))
    finally:
        bulk_stacks._compiled = saved[0]
        if saved[1] is None:
            del os.environ["POLYPROF_KERNELS"]
        else:
            os.environ["POLYPROF_KERNELS"] = saved[1]
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
