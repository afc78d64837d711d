"""The sandwich's cut callers tree (``sandwich(max_nodes=)``, the compiled ``caller_view``)
answers as the complete callers tree does: the same slice of the widest ``max_nodes`` nodes
(ids, numbers, names, merged count, narrowest width, path), the same node count, direct
callers and node details. Random profiles with deep, branching stacks (so paths part and the
cut has work to do) and real peer files; the complete tree is made by the numpy route."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import peer_files

from polyprof import api
from polyprof.analysis.flame import flame_tree
from polyprof.analysis.flameview import FlameIndex
from polyprof.analysis.options import Options
from polyprof.analysis.sandwich import sandwich
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Profile

pytest.importorskip("polyprof.analysis._sandwich_compiled", reason="numba is not installed: no compiled view")


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
