"""The tree kernels (polyprof.model.tree) against plain Python walks of random trees."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.model import tree

SETTINGS = settings(max_examples=200, deadline=None)


@st.composite
def forests(draw, max_nodes=40):
    """A parent array where every parent precedes its child (-1 = root)."""
    n = draw(st.integers(0, max_nodes))
    return np.array([draw(st.integers(-1, i - 1)) for i in range(n)], dtype=np.int64)


def _ancestors(parent, i):
    out = []
    while i >= 0:
        out.append(i)
        i = int(parent[i])
    return out  # self first


def _levels(parent):
    depth = tree.path_sums(parent, np.ones(parent.size, np.int64)) - 1
    return tree.tree_levels(parent, depth)


def _preorder(parent):
    """Pre-order by recursion: roots and children in id order."""
    children = {i: [] for i in range(-1, parent.size)}
    for i, p in enumerate(parent.tolist()):
        children[p].append(i)
    out = []

    def visit(i):
        out.append(i)
        for c in children[i]:
            visit(c)
    for r in children[-1]:
        visit(r)
    return out


def test_segments():
    counts = np.array([3, 0, 2, 1])
    assert tree.segment_positions(counts).tolist() == [0, 1, 2, 0, 1, 0]
    assert tree.segment_owner(counts).tolist() == [0, 0, 0, 2, 2, 3]
    assert tree.segment_positions(np.zeros(0, np.int64)).tolist() == []
    assert tree.run_starts(np.array([4, 4, 5, 7, 7])).tolist() == [0, 2, 3]
    assert tree.exclusive_within_runs(np.array([1, 2, 3, 4, 5]), np.array([0, 2, 3])).tolist() == [0, 1, 0, 0, 4]


@SETTINGS
@given(forests(), st.data())
def test_sums_depth_and_euler_match_a_walk(parent, data):
    n = parent.size
    values = np.array(data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n)), dtype=np.int64)
    levels = _levels(parent)
    anc = [_ancestors(parent, i) for i in range(n)]
    assert tree.path_sums(parent, values).tolist() == [int(values[a].sum()) for a in anc]
    sums = tree.subtree_sums(values, levels)
    assert sums.tolist() == [sum(int(values[j]) for j in range(n) if i in anc[j]) for i in range(n)]
    both = tree.subtree_sums(np.stack([values, -values], axis=1), levels)
    assert both[:, 0].tolist() == sums.tolist() and both[:, 1].tolist() == (-sums).tolist()
    tin, tout = tree.euler(levels, n)
    order = _preorder(parent)
    assert [order[t] for t in tin.tolist()] == list(range(n)) if n else True
    for i in range(n):
        inside = {j for j in range(n) if tin[i] <= tin[j] <= tout[i]}
        assert inside == {j for j in range(n) if i in anc[j]}
    # renumbered in pre-order, subtrees are id ranges: the running-sum path sums agree
    pre_parent = np.full(n, -1, np.int64)
    pre_parent[tin] = np.where(parent >= 0, tin[np.maximum(parent, 0)], -1)
    pre_values = np.zeros(n, np.int64)
    pre_values[tin] = values
    size = np.zeros(n, np.int64)
    size[tin] = tout - tin + 1
    assert tree.preorder_path_sums(pre_values, size).tolist() == tree.path_sums(pre_parent, pre_values).tolist()


@SETTINGS
@given(forests(), st.data())
def test_downward_propagation(parent, data):
    n = parent.size
    flag = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    levels = _levels(parent)
    anc = [_ancestors(parent, i) for i in range(n)]
    assert tree.any_above(flag, parent, levels).tolist() == [bool(flag[a].any()) for a in anc]
    nearest = tree.fill_down(np.where(flag, np.arange(n), -1), parent, levels)
    assert nearest.tolist() == [next((j for j in a if flag[j]), -1) for a in anc]
    widths = np.array(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), dtype=np.int64)
    start = tree.place_children(widths, levels, 0)
    for i in range(n):  # left edge: earlier siblings' widths after the parent's edge
        sibs = [j for j in range(i) if parent[j] == parent[i]]
        base = start[parent[i]] if parent[i] >= 0 else 0
        assert start[i] == base + int(widths[sibs].sum())


@SETTINGS
@given(forests(), st.data())
def test_intern_paths_merges_equal_label_paths(parent, data):
    n = parent.size
    label = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
    depth = tree.path_sums(parent, np.ones(n, np.int64)) - 1
    order, bounds = tree.group_by_depth(depth)
    node_of, node_parent, node_label, starts = tree.intern_paths(parent, label, order, bounds, 3)

    def path(i):
        return tuple(int(label[j]) for j in reversed(_ancestors(parent, i)))

    def node_path(k):
        out = []
        while k >= 0:
            out.append(int(node_label[k]))
            k = int(node_parent[k])
        return tuple(reversed(out))
    assert len(set(node_of.tolist())) == len({path(i) for i in range(n)}) == node_parent.size
    assert all(node_path(int(node_of[i])) == path(i) for i in range(n))
    for lo, hi in itertools.pairwise(starts):  # levels ordered by (parent, label)
        keys = list(zip(node_parent[lo:hi].tolist(), node_label[lo:hi].tolist()))
        assert keys == sorted(set(keys))


@SETTINGS
@given(forests(), st.data())
def test_outermost_counts_each_group_once_per_stack(parent, data):
    n = parent.size
    if not n:
        return
    tin, tout = tree.euler(_levels(parent), n)
    occ = data.draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, n - 1)), max_size=30))
    occ.sort(key=lambda o: (o[0], int(tin[o[1]])))
    group = np.array([g for g, _ in occ], dtype=np.int64)
    node = np.array([c for _, c in occ], dtype=np.int64)
    top = tree.outermost(group, node, tin, tout)
    anc = [_ancestors(parent, i) for i in range(n)]
    for k, (g, c) in enumerate(occ):
        covered = any(g2 == g and c2 in anc[c] and (c2 != c or k2 < k) for k2, (g2, c2) in enumerate(occ) if k2 != k)
        assert bool(top[k]) == (not covered)


def test_sorted_runs_skips_the_sort_when_in_order():
    order, key, fresh = tree.sorted_runs(np.array([1, 1, 2, 5]))
    assert order is None and fresh.tolist() == [True, False, True, True]
    order, key, fresh = tree.sorted_runs(np.array([5, 1, 5, 2]))
    assert order.tolist() == [1, 3, 0, 2] and key.tolist() == [1, 2, 5, 5]
    assert fresh.tolist() == [True, True, True, False]


@SETTINGS
@given(forests(), st.data())
def test_expand_chains_links_every_item_to_the_one_above(parent, data):
    n = parent.size
    count = np.array(data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)), dtype=np.int64)
    order = np.array(data.draw(st.permutations(range(n))), dtype=np.int64) if data.draw(st.booleans()) else None
    owner, within, up, first = tree.expand_chains(parent, count, order)
    laid = list(range(n)) if order is None else order.tolist()
    expected_owner = [node for node in laid for _ in range(count[node])]
    assert owner.tolist() == expected_owner
    assert within.tolist() == [k for node in laid for k in range(count[node])]
    for i, (node, k) in enumerate(zip(owner.tolist(), within.tolist())):
        assert first[node] + k == i
        if k:
            assert up[i] == i - 1
        elif parent[node] >= 0:
            assert up[i] == first[parent[node]] + count[parent[node]] - 1
        else:
            assert up[i] == -1
