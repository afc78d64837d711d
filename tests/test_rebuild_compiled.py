"""The compiled stack rebuild (``analysis._rebuild_compiled``) gives exactly the numpy one.

Random callsite forests with random kept, cut and renamed callsites go
through both forms of :func:`polyprof.analysis.stacks.rebuild` (new table,
where every old callsite went, and the depths and levels it caches); the
filters that rebuild stacks (hide, show, show_from, prune_from) on the demo
and the small peer pprof files give the same profile and the same ``top``
table (whose order of equal rows follows the callsite ids) both ways.
Without numba the compiled side is skipped, visibly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import PEER, REPO, numpy_only, small_peer_profiles
from polyprof.analysis import stacks
from polyprof.model import bulk_stacks, tree
from polyprof.model.profile import CallsiteTable

compiled = pytest.importorskip("polyprof.analysis._rebuild_compiled",
                               reason="numba is not installed: no compiled rebuild")


@pytest.fixture
def both(monkeypatch):  # noqa: ANN001, ANN201
    """Compiled kernels at any size (the numpy side switches ``stacks``' twin off)."""
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(stacks._kernels, "_compiled", None)


@st.composite
def rebuilds(draw: st.DrawFn) -> tuple[CallsiteTable, np.ndarray, np.ndarray, np.ndarray]:
    """(callsites with parents before children, keep, new location per callsite, cut)."""
    n = draw(st.integers(0, 80))
    parent = np.array([draw(st.integers(-1, i - 1)) if i else -1 for i in range(n)], dtype=np.int32)
    n_locs = draw(st.integers(1, 5))
    loc = np.array(draw(st.lists(st.integers(0, n_locs - 1), min_size=n, max_size=n)), dtype=np.int32)
    flags = st.lists(st.booleans(), min_size=n, max_size=n)
    keep = np.array(draw(flags), dtype=bool)
    cut = np.array(draw(flags), dtype=bool) & draw(st.booleans())
    rename = np.array(draw(st.lists(st.integers(0, n_locs), min_size=n_locs, max_size=n_locs)), dtype=np.int64)
    return CallsiteTable(parent, loc), keep, rename[loc], cut


def _same_tables(a: tuple[CallsiteTable, np.ndarray], b: tuple[CallsiteTable, np.ndarray]) -> None:
    (ta, na), (tb, nb) = a, b
    for x, y in ((ta.parent, tb.parent), (ta.location, tb.location), (na, nb), (ta.depth(), tb.depth())):
        assert np.array_equal(x, y) and x.dtype == y.dtype
    fresh = CallsiteTable(ta.parent, ta.location)  # what the cached depths and levels must be
    assert np.array_equal(fresh.depth(), ta.depth())
    for mine, want in zip(ta.levels(), fresh.levels(), strict=True):
        assert np.array_equal(tree._ids(mine.nodes), tree._ids(want.nodes))
        assert np.array_equal(mine.parent, want.parent) and np.array_equal(mine.starts, want.starts)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rebuilds())
def test_the_compiled_rebuild_and_nearest_are_the_numpy_ones(both, case):  # noqa: ANN001
    cs, keep, location, cut = case
    want = numpy_only(stacks._kernels, stacks.rebuild, cs, keep, location, cut)
    assert stacks._kernels(len(cs)) is compiled
    got = stacks.rebuild(cs, keep, location, cut)
    _same_tables(want, got)
    _same_tables(got, want)
    near = numpy_only(stacks._kernels, stacks.nearest, cs, cut)
    assert np.array_equal(near, stacks.nearest(cs, cut)) and near.dtype == stacks.nearest(cs, cut).dtype


def test_the_compiled_rebuild_declines_a_parent_after_its_child():
    one = np.ones(2, dtype=bool)
    assert compiled.rebuild(np.array([1, -1], np.int32), one, np.zeros(2, np.int64), ~one, 2) is None
    assert compiled.nearest(np.array([1, -1], np.int32), one) is None


_FILTERS = [{"hide": "json|sha"}, {"hide": "^runtime"}, {"show": "main|json"}, {"show_from": "json"},
            {"prune_from": "runtime"}, {"hide": "e", "focus": "json"}]


def _profiles() -> list:
    import polyprof

    demo = REPO / "examples" / "demo.pb.gz"
    peers = [p for _, p in small_peer_profiles(PEER / "pprof")][:8] if (PEER / "pprof").is_dir() else []
    return [polyprof.read(demo), *peers]


@pytest.mark.parametrize("o", _FILTERS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_filters_that_rebuild_stacks_give_the_same_profile_and_top_both_ways(both, o):  # noqa: ANN001
    from polyprof.analysis import filters
    from polyprof.analysis.options import Options
    from polyprof.analysis.top import top

    opts = Options(nodecount=0, nodefraction=0, **o)
    for p in _profiles():
        want = numpy_only(stacks._kernels, filters.apply, p, opts)
        got = filters.apply(p, opts)
        assert np.array_equal(want.profile.samples.stack, got.profile.samples.stack)
        _same_tables((want.profile.callsites, want.rows), (got.profile.callsites, got.rows))
        table = top(got, opts).to_records()
        assert top(want, opts).to_records() == table
        # a rebuilt tree is not in pre-order: the compiled outermost walk permutes it, same table
        assert numpy_only(bulk_stacks, top, got, opts).to_records() == table
