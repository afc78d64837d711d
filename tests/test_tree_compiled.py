"""The compiled tree kernels (numba) give exactly the numpy kernels' results.

Random forests (ids in any order, chains of 0 to 3 items, few labels so
paths merge) go through both forms of ``expand_chains``, ``path_sums``,
``intern_level``, ``intern_paths``, ``add_subtree_sums`` and ``place_children``; whole flame graphs, filtered call trees and sandwiches of
real profiles are computed with ``POLYPROF_KERNELS=numpy`` and
``=compiled`` and compared. Without numba the compiled side is skipped,
visibly.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import REPO, numpy_only
from polyprof.model import tree

compiled = pytest.importorskip("polyprof.model._tree_compiled", reason="numba is not installed: no compiled kernels")


@st.composite
def forests(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(parent, count, label per item, number of labels): a forest whose ids are shuffled."""
    n = draw(st.integers(1, 60))
    above = [draw(st.integers(-1, i - 1)) if i else -1 for i in range(n)]  # topological, then shuffled
    perm = np.array(draw(st.permutations(range(n))), dtype=np.int64)
    where = np.empty(n, dtype=np.int64)
    where[perm] = np.arange(n)
    parent = np.array([above[i] for i in perm], dtype=np.int64)
    parent = np.where(parent >= 0, where[np.maximum(parent, 0)], -1)
    empty_ok = draw(st.booleans())
    count = np.array(draw(st.lists(st.integers(0 if empty_ok else 1, 3), min_size=n, max_size=n)), dtype=np.int64)
    n_labels = draw(st.integers(1, 4))
    label = np.array(draw(st.lists(st.integers(0, n_labels - 1), min_size=int(count.sum()),
                                   max_size=int(count.sum()))), dtype=np.int64)
    return parent, count, label, n_labels


def _same(a: tuple, b: tuple) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, list):
            assert x == y
        else:
            assert np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype


@settings(max_examples=300, deadline=None)
@given(forests())
def test_chain_and_path_twins_agree(forest):
    parent, count, label, n_labels = forest
    chains = numpy_only(tree, tree.expand_chains, parent, count)
    _same(chains, compiled.expand_chains(parent, count))
    sums = numpy_only(tree, tree.path_sums, parent, count)
    _same((sums,), (compiled.path_sums(parent, count),))
    owner, within, up, _ = chains
    order, bounds = tree.group_by_depth((sums - count)[owner] + within)
    want = numpy_only(tree, tree.intern_paths, up, label, order, bounds, n_labels)
    got = compiled.intern_paths(up, label, order, bounds, n_labels)
    if got is None:  # declined (empty chains make items hang under unrelated items): numpy answers
        assert (count == 0).any()
        return
    _same(want, got)
    if (count > 0).all():  # a real flame forest: the compiled kernels never decline it
        kept = order[: bounds[-2]] if bounds.size > 2 else order[:0]  # a subset of the items too
        _same(numpy_only(tree, tree.intern_paths, up, label, kept, bounds[:-1], n_labels),
              compiled.intern_paths(up, label, kept, bounds[:-1], n_labels))


@settings(max_examples=200, deadline=None)
@given(forests(), st.integers(0, 2))
def test_level_twins_agree(forest, step):
    parent, count, _, _ = forest
    n = parent.size
    levels = tree.tree_levels(parent, numpy_only(tree, tree.path_sums, parent, np.ones(n, dtype=np.int64)) - 1)
    values = count * 7 - 5  # negative values too
    want = numpy_only(tree, tree.subtree_sums, values, levels)
    got = compiled.add_subtree_sums(values.copy(), levels)
    _same((want,), (got,))
    want_above = np.zeros(n, dtype=np.int64)
    want_pos = numpy_only(tree, tree.place_children, want, levels, step, want_above)
    pos, above = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    roots = levels[0].nodes  # the twin places the levels below the roots
    pos[roots], above[roots] = want_pos[roots], -1
    assert compiled.place_children(want, levels, step, pos, above)
    _same((want_pos, want_above), (pos, above))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 5)), max_size=80), st.integers(0, 100))
def test_level_interning_twins_agree(pairs, first_id):
    parent = np.array([p for p, _ in pairs], dtype=np.int64)
    label = np.array([lab for _, lab in pairs], dtype=np.int64)
    _same(numpy_only(tree, tree.intern_level, parent, label, 6, first_id),
          compiled.intern_level(parent, label, 6, first_id))


@settings(max_examples=60, deadline=None)
@given(st.integers(49, 3000), st.sampled_from([3, 200, 70_000, 1 << 40]), st.integers(1, 4), st.integers(0, 2**32))
def test_level_interning_of_long_runs_agrees(n, n_labels, parents, seed):
    """Runs of one parent longer than the insertion sort takes (the callers of a hot function:
    millions), with labels spanning little (one counting pass) or much (16-bit radix passes)."""
    rng = np.random.default_rng(seed)
    parent = rng.integers(-1, parents - 1, n, endpoint=True)
    label = rng.integers(0, n_labels, n)
    _same(numpy_only(tree, tree.intern_level, parent, label, n_labels, 7),
          compiled.intern_level(parent, label, n_labels, 7))


def _flame_of(sides, n_names: int, prune: tuple[float, int], mode: str) -> list:
    """Every column of the flame graph of ``sides`` built with the ``mode`` kernels."""
    from polyprof.analysis import flame

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPROF_KERNELS", mode)
        mp.setattr(tree, "_compiled", compiled if mode == "compiled" else False)
        laid = flame._layout(sides, n_names)
    assert laid.preordered == (mode == "compiled")
    names = [f"f{i}" for i in range(n_names)]
    g = flame._finish((names, laid.name), laid.parent, laid.depth, laid.selfs, laid.totals, laid.width,
                      laid.start, laid.order, sides[0].sample_type, *prune, preordered=laid.preordered)
    return [g.names, g.parent, g.depth, g.self, g.total, g.start, g.width, g.subtree_size, g.name_ids,
            g.base_self, g.base_total, g.dropped, g.min_width, g.base_only]


@settings(max_examples=200, deadline=None)
@given(st.lists(forests(), min_size=1, max_size=2), st.sampled_from([(0.0, 0), (0.1, 0), (0.0, 3), (0.02, 5)]),
       st.integers(0, 2**32), st.booleans())
def test_flame_walk_gives_the_level_wise_flame_graph(forests_, prune, seed, signed):
    """The compiled depth-first build of a flame graph (nodes made in pre-order) against the
    numpy level-wise build, pruned or not, one profile or a diff's two, column for column and
    dtype for dtype; with negative weights (width apart from the totals) or none (the compiled
    width is the totals' array)."""
    from polyprof.analysis.flame import _Side
    from polyprof.model.profile import ValueType

    rng = np.random.default_rng(seed)
    n_names = max(f[3] for f in forests_)
    sides = []
    for parent, count, label, _ in forests_:
        count = np.maximum(count, 1)  # a flame forest: every callsite has a frame
        frames = rng.integers(0, n_names, int(count.sum()))
        leaf = rng.integers(-3 if signed else 0, 10, parent.size) * (rng.random(parent.size) < 0.7)
        sides.append(_Side(parent, count, frames, leaf, int(rng.integers(0, 5)), ValueType("samples", "count")))
    want = _flame_of(sides, n_names, prune, "numpy")
    got = _flame_of(sides, n_names, prune, "compiled")
    for x, y in zip(want, got):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y) and x.dtype == y.dtype
        else:
            assert x == y


def test_twins_decline_what_they_cannot_answer():
    assert compiled.path_sums(np.array([1, 0]), np.ones(2, dtype=np.int64)) is None  # a cycle
    assert compiled.path_sums(np.array([5]), np.ones(1, dtype=np.int64)) is None
    assert compiled.expand_chains(np.array([-1]), np.array([-1])) is None
    assert compiled.intern_paths(np.array([-1]), np.array([3]), np.array([0]), np.array([0, 1]), 2) is None


def test_compiled_kernels_take_mid_sized_trees_once_loaded(monkeypatch):  # noqa: ANN001
    """Below COMPILED_FROM a tree stays numpy while numba is not loaded (its load would cost more),
    and goes compiled from COMPILED_WHEN_LOADED once an earlier large tree has paid the load."""
    monkeypatch.delenv("POLYPROF_KERNELS", raising=False)
    mid = (tree.COMPILED_WHEN_LOADED + tree.COMPILED_FROM) // 2
    monkeypatch.setattr(tree, "_compiled", None)
    assert tree.compiled(mid) is None and tree._compiled is None  # not even imported
    assert tree.compiled(tree.COMPILED_FROM) is compiled
    assert tree.compiled(mid) is compiled
    assert tree.compiled(tree.COMPILED_WHEN_LOADED - 1) is None


_VIEWS = """
import sys, hashlib
import numpy as np
import polyprof
from polyprof.analysis import filters
from polyprof.analysis.flame import flame_tree
from polyprof.analysis.options import Options
from polyprof.analysis.sandwich import sandwich
from polyprof.analysis.flameview import FlameIndex
for f in sys.argv[1:]:
    p = polyprof.read(f)
    for o in (Options(), Options(focus="main|run", ignore="runtime"), Options(hide="^runtime")):
        for inverted in (False, True):
            g = flame_tree(filters.apply(p, o), o, max_nodes=0, min_fraction=0, inverted=inverted)
            print(f, len(g), "\\n".join(g.lines()))
        if len(g) > 1:
            print(sandwich(FlameIndex(g), g.names[1]).callers.lines())
            print(sandwich(FlameIndex(g), g.names[-1], min_fraction=0.01).callers.lines())
"""


@pytest.mark.slow
def test_flame_graphs_are_the_same_with_both_kernels(peer):
    """Flame graphs (plain, filtered, inverted) and sandwiches of real pprof profiles."""
    files = [str(p) for p in sorted(peer.rglob("*.pb.gz"))[:10]] + [str(REPO / "examples" / "demo.pb.gz")]
    runs = {}
    for mode in ("numpy", "compiled"):
        runs[mode] = subprocess.run([sys.executable, "-c", _VIEWS, *files], capture_output=True, text=True,
                                    env={"POLYPROF_KERNELS": mode, "PYTHONPATH": str(REPO / "src"),
                                         "PATH": "/usr/bin:/bin"}, check=True).stdout
    assert runs["numpy"].count("\n") > 1000
    assert runs["numpy"] == runs["compiled"]


def _columns(g) -> list:  # noqa: ANN001
    return [list(g.names), g.parent, g.depth, g.self, g.total, g.start, g.width, g.subtree_size,
            g.dropped, g.min_width, g.hint, g.identity, g.active_filters]


@pytest.mark.parametrize("prune", [(0.0, 0), (0.01, 0), (0.0, 7)])
def test_a_flame_shape_gives_the_flame_graph_of_every_filter(monkeypatch, prune):  # noqa: ANN001
    """The unfiltered profile's weightless tree, weighed with a filtered profile's samples, is
    that profile's flame graph as the numpy build makes it (filters that only select samples);
    a filter that remakes the stacks, or another granularity, does not fit and builds anew."""
    import polyprof
    from polyprof.analysis import filters
    from polyprof.analysis.flame import flame_shape, flame_tree
    from polyprof.analysis.options import Options

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(tree, "_compiled", compiled)
    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    shape = flame_shape(p, Options())
    assert shape is not None and len(shape.at) == len(p.callsites)
    before = shape.name.copy()
    cases = [(Options(), True), (Options(focus="json"), True), (Options(ignore="sha256"), True),
             (Options(focus="Marshal", ignore="string", sample_index="cpu"), True),
             (Options(tagfocus="worker=hasher"), True), (Options(focus="no such function"), True),
             (Options(hide="^runtime"), False), (Options(granularity="files"), False)]
    for o, fits in cases:
        fr = filters.apply(p, o)
        assert shape.fits(fr.profile, o) == fits, o
        got = flame_tree(fr, o, min_fraction=prune[0], max_nodes=prune[1], shape=shape)
        want = numpy_only(tree, lambda fr=fr, o=o: flame_tree(fr, o, min_fraction=prune[0], max_nodes=prune[1]))
        assert len(got) > (1 if o.focus != "no such function" else 0)
        for x, y in zip(_columns(want), _columns(got), strict=True):
            assert (np.array_equal(x, y) and x.dtype == y.dtype) if isinstance(x, np.ndarray) else x == y, o
        assert np.array_equal(shape.name, before)  # the cached tree is never written


def _paths(g) -> dict:  # noqa: ANN001
    """Each node's path of names -> (self, total, width): a graph's numbers, whatever its layout."""
    names, parent, out, path = list(g.names), g.parent.tolist(), {}, {}
    for i, p in enumerate(parent):
        path[i] = (*path[p], names[i]) if p >= 0 else ()
        out[path[i]] = (int(g.self[i]), int(g.total[i]), int(g.width[i]))
    return out


@pytest.mark.parametrize("o", [{}, {"focus": "json"}, {"hide": "^runtime"}, {"sample_index": "cpu"}])
def test_the_inverted_graph_made_from_the_complete_graph_is_flame_tree_s(monkeypatch, o):  # noqa: ANN001
    """``inverted_graph`` (the web view's: reversed paths of the complete graph's self weights)
    gives ``flame_tree(inverted=True)``'s graph column for column; at a resolution, the same
    nodes and numbers as flame_tree's pruned graph (only the left edges differ: the merged
    narrow children are drawn after the kept ones)."""
    import polyprof
    from polyprof.analysis import filters
    from polyprof.analysis.flame import flame_tree
    from polyprof.analysis.flameview import FlameIndex
    from polyprof.analysis.options import Options
    from polyprof.analysis.sandwich import inverted_graph

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(tree, "_compiled", compiled)
    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    opts = Options(**o)
    fr = filters.apply(p, opts)
    graph = FlameIndex(flame_tree(fr, opts, max_nodes=0, min_fraction=0))
    want = numpy_only(tree, lambda: flame_tree(fr, opts, max_nodes=0, min_fraction=0, inverted=True))
    got = inverted_graph(graph)
    assert got is not None and len(got) == len(want) > 10 and got.inverted
    for x, y in zip(_columns(want)[:7], _columns(got)[:7], strict=True):
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
    for fraction in (0.01, 0.05):
        pruned = numpy_only(tree, lambda f=fraction: flame_tree(fr, opts, max_nodes=0, min_fraction=f, inverted=True))
        coarse = inverted_graph(graph, min_fraction=fraction)
        assert coarse is not None and 1 < len(coarse) < len(got)
        assert _paths(coarse) == _paths(pruned)



@pytest.mark.parametrize("seed", range(4))
def test_the_hide_pass_on_the_name_tree_is_the_hide_filter_s_flame_graph(monkeypatch, seed):  # noqa: ANN001
    """``polyprof serve`` makes a hide filter's flame graph from the input's name tree with the
    hidden frames taken out (FlameShape.hiding); random hide regexes (pieces of the demo's
    function names, sometimes with a sample filter) give flame_tree's graph of the filtered
    profile, column for column, and the pass is taken for most of them."""
    import random

    import polyprof
    from polyprof.analysis import filters
    from polyprof.analysis.flame import flame_shape, flame_tree
    from polyprof.analysis.options import Options
    from polyprof.web.session import Input, Session

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(tree, "_compiled", compiled)
    path = REPO / "examples" / "demo.pb.gz"
    p = polyprof.read(path)
    shape = flame_shape(p, Options())
    assert shape is not None
    rng = random.Random(seed)
    names = sorted(set(shape.names))
    taken = 0
    for _ in range(12):
        name = rng.choice(names)
        lo = rng.randrange(len(name))
        piece = re.escape(name[lo:lo + rng.randint(1, 12)])
        hide = rng.choice([piece, "^" + re.escape(name.split("(")[0][:rng.randint(1, 20)]), piece + "|" +
                           re.escape(rng.choice(names)[:8])])
        extra = rng.choice([{}, {}, {"focus": "json"}, {"ignore": "sha256"}, {"sample_index": "cpu"},
                            {"tagfocus": "worker=hasher"}])
        o = Options(hide=hide, **extra)
        want = flame_tree(filters.apply(p, o), o, max_nodes=0, min_fraction=0)
        taken += shape.hiding(p, o) is not None
        got = Session([Input("demo", str(path), p)])._flame_tree(0, o, None, False)
        for x, y in zip(_columns(want), _columns(got), strict=True):
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, o
    assert taken >= 6


@pytest.mark.parametrize("extra", [{}, {"focus": "json"}, {"tagfocus": "worker=hasher"}, {"show": "main|json"}])
def test_flame_tree_and_the_flame_verb_take_the_name_pass_of_an_unfiltered_profile(monkeypatch, extra):  # noqa: ANN001
    """The route choice is flame_tree's: given the unfiltered profile, a hide or prune_from
    filter's graph comes from the name tree (name_pass) wherever it is the one filter that
    remakes stacks, and is the callsite route's graph; ``polyprof flame --hide`` and
    ``--prune-from`` draw the same SVG with the pass as without."""
    import polyprof
    from helpers import run_cli
    from polyprof.analysis import filters
    from polyprof.analysis.flame import flame_tree, name_pass
    from polyprof.analysis.options import Options

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(tree, "_compiled", compiled)
    path = REPO / "examples" / "demo.pb.gz"
    p = polyprof.read(path)
    for kind, regex in [(k, r) for k in ("hide", "prune_from") for r in ("^runtime", "json|sha256", "main", "crypto")]:
        o = Options(**{kind: regex}, **extra)
        assert (name_pass(p, o) is not None) == ("show" not in extra), o
        want = flame_tree(filters.apply(p, o), o, max_nodes=0, min_fraction=0)
        got = flame_tree(p, o, max_nodes=0, min_fraction=0)
        for x, y in zip(_columns(want), _columns(got), strict=True):
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, o
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in extra.items()]
    for kind in ("--hide", "--prune-from"):
        monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
        drawn = run_cli("flame", kind, "json|sha256", *flags, path, "--to", "svg", "-o", "-")
        monkeypatch.setenv("POLYPROF_KERNELS", "numpy")
        assert drawn.code == 0 and drawn.out == run_cli("flame", kind, "json|sha256", *flags, path, "--to", "svg",
                                                         "-o", "-").out


@pytest.mark.parametrize("hide", ["^runtime", "json|sha256", ""])
def test_a_diff_from_each_side_s_name_tree_is_the_diff_from_the_callsites(monkeypatch, hide):  # noqa: ANN001
    """The diff flame graph made by merging the two sides' name trees (FlameShape, as
    ``polyprof serve`` caches them per input) is the one merged from the callsites, base
    columns included: sides with other callsite tables (a base with frames hidden) and with
    the same ones (the input against itself, or a focus of it)."""
    import polyprof
    from polyprof.analysis import filters
    from polyprof.analysis.flame import flame_shape, flame_tree
    from polyprof.analysis.options import Options

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(tree, "_compiled", compiled)
    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    base = filters.apply(p, Options(hide=hide or None)).profile
    for new in (p, filters.apply(p, Options(focus="json")).profile):
        for o in (Options(), Options(sample_index="cpu")):
            want = flame_tree(new, o, base=base, max_nodes=0, min_fraction=0)
            shape = flame_shape(new, o)  # without a hide, the base has p's tables: one tree for both
            got = flame_tree(new, o, base=base, max_nodes=0, min_fraction=0, shape=shape,
                             base_shape=shape if not hide else flame_shape(base, o))
            assert len(got) > 1
            for x, y in zip(_columns(want) + [want.base_self, want.base_total],
                            _columns(got) + [got.base_self, got.base_total], strict=True):
                assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, (hide, o)


@pytest.mark.parametrize("seed", range(3))
def test_reversed_paths_with_many_keys_per_level_agree(seed):
    """The callers' compiled merge (a hash table grown with the keys found, not sized by the
    items) against the numpy level-wise merge, on levels of tens of thousands of distinct
    (parent, name) keys, int32 and int64 parents, with and without a resolution."""
    from types import SimpleNamespace

    from polyprof.analysis import sandwich

    rng = np.random.default_rng(seed)
    n, n_names = 60_000, 20_000
    parent = np.concatenate(([-1], rng.integers(0, np.arange(1, n))))  # parent before child
    name = np.concatenate(([0], rng.integers(1, n_names, n - 1)))
    nodes = np.unique(rng.integers(1, n, 25_000))
    weight = rng.integers(1, 6, nodes.size)
    for dtype in (np.int32, np.int64):
        index = SimpleNamespace(tree=SimpleNamespace(parent=parent.astype(dtype)), name_id=name.astype(dtype),
                                distinct=[f"f{i}" for i in range(n_names)])
        for threshold in (1, 3):
            want = numpy_only(tree, sandwich._callers, index, nodes, weight, threshold)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(tree, "_compiled", compiled)
                got = sandwich._callers(index, nodes, weight, threshold)
            assert len(got.parent) > (10_000 if threshold == 1 else 100), len(got.parent)
            for field in ("parent", "name", "self", "total", "levels"):
                assert np.array_equal(getattr(want, field), getattr(got, field)), field
