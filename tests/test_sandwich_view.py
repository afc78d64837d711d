"""The sandwich's cut callers tree (``sandwich(max_nodes=)``, the compiled ``caller_view``)
answers as the complete callers tree does: the same slice of the widest ``max_nodes`` nodes
(ids, numbers, names, merged count, narrowest width, path), the same node count, direct
callers and node details. Random profiles with deep, branching stacks (so paths part and the
cut has work to do) and real peer files; the complete tree is made by the numpy route."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import numpy_only, peer_files
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof import api
from polyprof.analysis.flame import flame_tree
from polyprof.analysis.flameview import FlameIndex
from polyprof.analysis.options import Options
from polyprof.analysis import sandwich as sandwich_module
from polyprof.analysis.sandwich import sandwich
from polyprof.model import tree
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Profile

view_kernel = pytest.importorskip("polyprof.analysis._sandwich_compiled", reason="numba is not installed: no compiled view")
tree_kernels = pytest.importorskip("polyprof.model._tree_compiled", reason="numba is not installed")


def _profile(seed: int) -> Profile:
    rng = random.Random(seed)
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    names = [f"fn{i}" for i in range(rng.randint(3, 9))] + ["leaf"]
    locs = [b.location(-1, 0x1000 + 16 * i, [(b.function(n, filename="a.c"), 1, 0)]) for i, n in enumerate(names)]
    for _ in range(rng.randint(20, 400)):
        depth = rng.randint(0, 14)
        stack = [locs[-1]] if rng.random() < 0.6 else []  # innermost first: "leaf" under many paths
        stack += [rng.choice(locs) for _ in range(depth)]
        b.add_sample(b.stack(stack) if stack else -1, [rng.randint(1, 60)])
    return b.finish()


def _same_answers(index: FlameIndex, name: str, max_nodes: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Compare the cut and the complete callers; the number of nodes the cut did not make."""
    monkeypatch.setenv("POLYPROF_KERNELS", "numpy")
    full = sandwich(index, name, min_fraction=0)
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    cut = sandwich(index, name, min_fraction=0, max_nodes=max_nodes)
    assert full.callers_complete is None
    assert (cut.flat, cut.cum, cut.total) == (full.flat, full.cum, full.total)
    a, b = FlameIndex(full.callers), FlameIndex(cut.callers, cut.callers_complete)
    assert len(a) == len(b)
    sa, sb = a.slice(0, min_fraction=0, max_nodes=max_nodes), b.slice(0, min_fraction=0, max_nodes=max_nodes)
    assert sa.columns.keys() == sb.columns.keys()
    for k in sa.columns:
        assert np.array_equal(sa.columns[k], sb.columns[k]), k
    assert (sa.root, sa.names, sa.path, sa.merged, sa.min_width) == (sb.root, sb.names, sb.path, sb.merged, sb.min_width)
    if len(a) > 1:
        assert a.children(1) == b.children(1)  # every direct caller, even the narrowest
        for c in a.children(1):
            assert a.details(c) == b.details(c)
    for node in sa.columns["id"].tolist():
        assert a.details(node) == b.details(node)
        if node:
            s1, s2 = a.slice(node, min_fraction=0, max_nodes=max_nodes), b.slice(node, min_fraction=0, max_nodes=max_nodes)
            assert np.array_equal(s1.columns["id"], s2.columns["id"]) and s1.merged == s2.merged
            break
    return len(a) - len(cut.callers)


@pytest.mark.parametrize("seed", range(12))
def test_the_cut_callers_answer_as_the_complete_ones(seed, monkeypatch):
    index = FlameIndex(flame_tree(_profile(seed), Options(), max_nodes=0, min_fraction=0))
    names = sorted(set(index.distinct))
    cut = 0
    for name in ("leaf", names[seed % len(names)]):
        if name in index.distinct:
            for max_nodes in (1, 3, 10, 40, 10_000):
                cut += _same_answers(index, name, max_nodes, monkeypatch)
    assert seed % 4 or cut > 0  # the cut left something out (else this test would test nothing)


def test_the_cut_callers_of_real_profiles(monkeypatch):
    files = peer_files("**/*.pb.gz")[:8]
    if not files:
        pytest.skip("peer data is absent: no real profiles")
    for f in files:
        index = FlameIndex(flame_tree(api.read(f), Options(), max_nodes=0, min_fraction=0))
        if len(index) < 3:
            continue
        hot = index.distinct[int(np.bincount(index.name_id, weights=np.abs(index.tree.self)).argmax())]
        if (index.tree.self < 0).any():
            continue
        for max_nodes in (5, 200):
            _same_answers(index, hot, max_nodes, monkeypatch)


def test_a_node_the_cut_did_not_make_is_refused(monkeypatch):
    index = FlameIndex(flame_tree(_profile(0), Options(), max_nodes=0, min_fraction=0))
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    cut = sandwich(index, "leaf", min_fraction=0, max_nodes=1)
    view = FlameIndex(cut.callers, cut.callers_complete)
    ids = set(cut.callers_complete[0].tolist())
    missing = next(i for i in range(len(view)) if i not in ids)
    from polyprof.errors import OptionsError
    with pytest.raises(OptionsError, match="of them made"):
        view.details(missing)


@st.composite
def _paths(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A tree (parent before child, node 0 the root) with few names (recursion, paths that part
    and merge again), and some of its nodes with weights: (parent, name, depth, nodes, weight).
    One name is on many nodes (a function called from everywhere)."""
    n = draw(st.integers(2, 90))
    parent = np.array([-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)], dtype=np.int64)
    n_names = draw(st.integers(1, 7))
    name = np.array([0] + draw(st.lists(st.integers(1, n_names), min_size=n - 1, max_size=n - 1)), dtype=np.int64)
    everywhere = draw(st.sets(st.integers(1, n - 1), max_size=n - 1))
    name[sorted(everywhere)] = 1
    depth = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    nodes = np.array(sorted(draw(st.sets(st.integers(1, n - 1), min_size=1))), dtype=np.int64)
    weight = np.array(draw(st.lists(st.integers(1, 50), min_size=nodes.size, max_size=nodes.size)), dtype=np.int64)
    return parent, name, depth, nodes, weight


def _index(parent: np.ndarray, name: np.ndarray, dtype: type) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(tree=SimpleNamespace(parent=parent.astype(dtype)), name_id=name.astype(dtype),
                           distinct=[f"f{i}" for i in range(int(name.max()) + 1)])


def _cut(full: sandwich_module._Merged, threshold: int) -> tuple[np.ndarray, ...]:
    """The complete callers tree cut as ``caller_view`` cuts it: the root, and the children of
    every made node at least ``threshold`` wide (the root counts as wide); each made node's
    count is 1, or its complete subtree's size for a narrow one."""
    n = full.parent.size
    size = np.ones(n, dtype=np.int64)
    for v in range(n - 1, 0, -1):
        size[full.parent[v]] += size[v]
    wide = np.abs(full.total) >= threshold
    wide[0] = True
    made = np.zeros(n, dtype=bool)
    made[0] = True
    for v in range(1, n):  # level by level: parents first
        made[v] = made[full.parent[v]] and wide[full.parent[v]]
    ids = np.flatnonzero(made)
    new = np.full(n, -1, dtype=np.int64)
    new[ids] = np.arange(ids.size)
    parent = np.where(full.parent[ids] >= 0, new[np.maximum(full.parent[ids], 0)], -1)
    level = np.repeat(np.arange(full.levels.size - 1), np.diff(full.levels))[ids]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(level))))
    return parent, full.name[ids], full.self[ids], full.total[ids], np.where(wide[ids], 1, size[ids]), bounds


@settings(max_examples=300, deadline=None)
@given(_paths(), st.integers(1, 400), st.sampled_from([np.int32, np.int64]))
def test_the_compiled_callers_view_is_the_complete_callers_tree_cut(paths, threshold, dtype):
    """``caller_view`` (its hash grouping grown with the groups, the walk on int32 ids) against
    the numpy level-wise merge of every reversed path, cut afterwards: the same nodes, ids,
    numbers, counts of the complete tree and level bounds."""
    parent, name, depth, nodes, weight = paths
    index = _index(parent, name, dtype)
    full = numpy_only(tree, sandwich_module._callers, index, nodes, weight, None)
    got = view_kernel.caller_view(parent.astype(dtype), name.astype(dtype), depth.astype(dtype), nodes, weight,
                                  threshold)
    assert got is not None
    for field, want, have in zip(("parent", "name", "self", "total", "count", "levels"), _cut(full, threshold), got,
                                 strict=True):
        assert np.array_equal(want, have), field
    assert int(got[4].sum()) == full.parent.size  # every node of the complete tree, made or counted


@settings(max_examples=300, deadline=None)
@given(_paths(), st.integers(0, 400), st.sampled_from([np.int32, np.int64]))
def test_the_compiled_reversed_paths_are_the_numpy_merge(paths, threshold, dtype):
    """``reversed_paths`` (the callers at a resolution and the inverted graph: the shared
    grouping, a table grown from 16 slots) against the numpy level-wise merge."""
    parent, name, _, nodes, weight = paths
    index = _index(parent, name, dtype)
    want = numpy_only(tree, sandwich_module._callers, index, nodes, weight, threshold or None)
    got = tree_kernels.reversed_paths(parent.astype(dtype), name.astype(dtype), nodes, weight, threshold or None)
    assert got is not None
    for field, have in zip(("parent", "name", "self", "total", "levels"), got, strict=True):
        assert np.array_equal(getattr(want, field), have), field


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32))
def test_random_profiles_cut_callers_answer_as_the_complete_ones(seed):
    """The end-to-end comparison above on more random profiles (hypothesis draws the seeds)."""
    index = FlameIndex(flame_tree(_profile(seed), Options(), max_nodes=0, min_fraction=0))
    if "leaf" not in index.distinct:
        return
    with pytest.MonkeyPatch.context() as mp:
        for max_nodes in (2, 25):
            _same_answers(index, "leaf", max_nodes, mp)


@st.composite
def _tailed(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """:func:`_paths` with ``k`` nodes appended under the root (a grouped graph's value rows) and
    each path's tail: one of them (or, drawn for all, 0: every path ends at the root, the depths
    then the tree's: the kernel reads a node's remaining frames); paths from an appended node have
    none. (parent, name, depth, nodes, weight, tail), ``depth`` counting the tail."""
    parent, name, depth, nodes, weight = draw(_paths())
    n, k = parent.size, draw(st.integers(1, 4))
    parent = np.concatenate([parent, np.zeros(k, np.int64)])
    name = np.concatenate([name, int(name.max()) + 1 + np.array(draw(st.lists(st.integers(0, 2), min_size=k,
                                                                              max_size=k)), np.int64)])
    tail = n + np.array(draw(st.lists(st.integers(0, k - 1), min_size=nodes.size, max_size=nodes.size)), np.int64)
    tailed = draw(st.booleans())
    tail *= tailed
    depth = np.concatenate([depth + tailed, np.ones(k, np.int64)])
    depth[0] = 0
    top = np.array(sorted(draw(st.sets(st.integers(n, n + k - 1), max_size=k))), np.int64)  # paths from a value row
    nodes, weight = np.concatenate([nodes, np.sort(top)]), np.concatenate([weight, np.full(top.size, 3, np.int64)])
    return parent, name, depth, nodes, weight, np.concatenate([tail, np.zeros(top.size, np.int64)])


@settings(max_examples=300, deadline=None)
@given(_tailed(), st.integers(0, 400), st.sampled_from([np.int32, np.int64]))
def test_tailed_paths_compiled_and_numpy(paths, threshold, dtype):
    """Paths going on from the root to a last node (``tail``: the grouped graph's value rows,
    ``GroupedIndex.sandwich``/``inverted``): ``reversed_paths`` and ``caller_view`` against the
    numpy level-wise merge of the same paths (cut afterwards for the view)."""
    parent, name, depth, nodes, weight, tail = paths
    index = _index(parent, name, dtype)
    walk = sandwich_module.Walk(parent.astype(dtype), name.astype(dtype), depth, tail)
    want = numpy_only(tree, sandwich_module._callers, index, nodes, weight, threshold or None, walk)
    got = tree_kernels.reversed_paths(parent.astype(dtype), name.astype(dtype), nodes, weight, threshold or None, tail)
    assert got is not None
    for field, have in zip(("parent", "name", "self", "total", "levels"), got, strict=True):
        assert np.array_equal(getattr(want, field), have), field
    full = numpy_only(tree, sandwich_module._callers, index, nodes, weight, None, walk)
    if len(set(nodes.tolist())) == nodes.size:  # the view's nodes: distinct (a graph's rows)
        got = view_kernel.caller_view(parent.astype(dtype), name.astype(dtype), depth.astype(dtype), nodes, weight,
                                      max(threshold, 1), tail)
        assert got is not None
        for field, want_, have in zip(("parent", "name", "self", "total", "count", "levels"),
                                      _cut(full, max(threshold, 1)), got, strict=True):
            assert np.array_equal(want_, have), field
        assert int(got[4].sum()) == full.parent.size
