"""The compiled callsite-forest hash (numba) gives bit for bit the numpy path's ids.

Store ids are persisted content hashes: a store ingested with one path and
re-ingested with the other must see the same ids. Random forests (several
trees, merging paths, frame ids over the whole 64-bit range) and real
profiles are hashed both ways and compared; a parent cycle makes the
compiled twin decline. Without numba the compiled side is skipped, visibly.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import PEER, small_peer_profiles
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.model.profile import CallsiteTable
from polyprof.store import rows

compiled = pytest.importorskip("polyprof.store._ids_compiled", reason="numba is not installed: no compiled kernels")


def _both(trees: list, lids: list) -> tuple[list, list]:  # noqa: ANN001
    saved = rows._compiled
    try:
        rows._compiled = False
        slow = rows.callsite_ids_forest(trees, lids)
        rows._compiled = compiled
        mode = os.environ.get("POLYPROF_KERNELS")
        os.environ["POLYPROF_KERNELS"] = "compiled"  # at any size: the compiled twin runs
        try:
            assert rows._compiled_ids(0) is compiled
            fast = rows.callsite_ids_forest(trees, lids)
        finally:
            if mode is None:
                del os.environ["POLYPROF_KERNELS"]
            else:
                os.environ["POLYPROF_KERNELS"] = mode
    finally:
        rows._compiled = saved
    return slow, fast


def _assert_same(slow: list, fast: list) -> None:
    assert len(slow) == len(fast)
    for (cid, pid), (fcid, fpid) in zip(slow, fast):
        assert cid.dtype == fcid.dtype == np.int64 and pid.dtype == fpid.dtype == np.int64
        np.testing.assert_array_equal(fcid, cid)
        np.testing.assert_array_equal(fpid, pid)
        assert (cid > 0).all() and (pid >= 0).all()


@st.composite
def forests(draw: st.DrawFn) -> tuple[list, list]:
    """Trees (parents precede children, as in a Profile) with a frame id per location."""
    trees, lids = [], []
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, 40))
        parent = np.array([draw(st.integers(-1, i - 1)) if i else -1 for i in range(n)], dtype=np.int32)
        locations = draw(st.integers(1, 6))
        location = np.array(draw(st.lists(st.integers(0, locations - 1), min_size=n, max_size=n)), dtype=np.int32)
        lid = np.array(draw(st.lists(st.integers(1, 2**63 - 1), min_size=locations, max_size=locations)),
                       dtype=np.int64)
        trees.append(CallsiteTable(parent=parent, location=location))
        lids.append(lid)
    return trees, lids


@settings(max_examples=200, deadline=None)
@given(forests())
def test_compiled_forest_hash_equals_numpy(forest: tuple[list, list]) -> None:
    trees, lids = forest
    _assert_same(*_both(trees, lids))


def test_compiled_forest_hash_equals_numpy_on_real_profiles() -> None:
    profiles = [p for _, p in small_peer_profiles(PEER, max_bytes=2_000_000) if len(p.callsites)][:12]
    if not profiles:
        pytest.skip(f"no peer profiles under {PEER}")
    shredder = rows.Shredder()
    batch = rows.Batch()
    lids = [shredder._frame_ids(p, batch) for p in profiles]
    slow, fast = _both([p.callsites for p in profiles], lids)
    _assert_same(slow, fast)
    assert sum(len(c) for c, _ in slow) > 1000


def test_compiled_forest_hash_declines_a_cycle() -> None:
    parent = np.array([1, 0, -1], dtype=np.int64)
    assert compiled.callsite_hashes(parent, np.arange(3, dtype=np.uint64), rows._C_CALLSITE) is None
