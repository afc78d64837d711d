"""The grouped flame graph at a view's resolution (label_groups.GroupedIndex: the rows at least
RESOLUTION of the total wide, each value's subtree made on request) answers exactly as the
complete grouped graph (FlameIndex of label_groups.grouped_flame): every slice (every column,
ids, hidden widths, path, merged count, threshold) at the root, the values' rows, made and unmade
nodes, at several resolutions and node limits, the search share overall and under those roots,
children and details of every node; on random labelled profiles (hypothesis) and a real one."""

from __future__ import annotations

import random
import urllib.parse

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.analysis import label_groups
from polyprof.analysis.flame import flame_shape
from polyprof.analysis.flameview import FlameIndex
from polyprof.analysis.options import Options
from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label

pytest.importorskip("numba", reason="numba is not installed: no name tree (FlameShape), no grouped route")

FRACTIONS = (0.0, 1e-4, 0.01, 0.05, 0.3)
LIMITS = (0, 1, 3, 17, 40_000)
SEARCHES = ("f1", "^v", "f[23]", "root", "nothing", "f0|f5")


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")  # name trees and kernels on small profiles too


def _both(p, o, *, resolution, batch, monkeypatch):
    """(complete index, cut index) of ``p`` grouped as ``o``: the cut made whatever its size,
    at ``resolution``, ``batch`` rows per batch."""
    monkeypatch.setattr(label_groups, "CUT_ROWS", [0])
    monkeypatch.setattr(label_groups, "RESOLUTION", resolution)
    monkeypatch.setattr(label_groups, "BATCH_ROWS", [batch])
    shape = flame_shape(p, o)
    whole = label_groups.grouped_flame(p, o, shape)
    if whole is None:
        return None, None
    cut = label_groups.grouped_index(p, o, shape)
    assert isinstance(cut, label_groups.GroupedIndex)
    return FlameIndex(whole), cut


def _same_slice(a, b):
    assert (a.root, a.names, a.path, a.graph_total, a.merged, a.min_width, a.search, a.base_graph_total) == \
        (b.root, b.names, b.path, b.graph_total, b.merged, b.min_width, b.search, b.base_graph_total)
    assert a.columns.keys() == b.columns.keys()
    for k in a.columns:
        assert np.array_equal(a.columns[k], b.columns[k]), k


def _compare(whole, cut, rng, *, every=True):
    """Every view of ``cut`` is ``whole``'s; ``every``: children and details of every node."""
    n = len(whole)
    assert len(cut) == n and cut.tree.root_total == whole.tree.root_total
    assert cut.tree.hint == whole.tree.hint and cut.tree.identity == whole.tree.identity
    made = set(cut.complete[0].tolist())
    unmade = [i for i in range(n) if i not in made]
    groups = np.flatnonzero(whole.tree.depth == 1).tolist()
    roots = sorted({0, *groups[:3], *rng.sample(sorted(made), min(4, len(made))),
                    *rng.sample(unmade, min(4, len(unmade)))})
    for root in roots:
        for mf in FRACTIONS:
            for mn in LIMITS:
                _same_slice(cut.slice(root, min_fraction=mf, max_nodes=mn),
                            whole.slice(root, min_fraction=mf, max_nodes=mn))
        for regex in SEARCHES:
            assert cut.search(regex, root) == whole.search(regex, root), (regex, root)
            _same_slice(cut.slice(root, search=regex), whole.slice(root, search=regex))
    nodes = range(n) if every else rng.sample(range(n), min(n, 300))
    for node in nodes:
        assert cut.children(node) == whole.children(node), node
        assert cut.details(node) == whole.details(node), node
    for bad in (-1, n):
        with pytest.raises(OptionsError):
            cut.slice(bad)
        with pytest.raises(OptionsError):
            cut.details(bad)
    with pytest.raises(OptionsError):
        cut.search("(", 0)
    return len(unmade)


def _profile(rng: random.Random) -> polyprof.Profile:
    """Random stacks over a few functions (an inlined frame), 1 to 9 string values of key "k"
    and numeric ones, samples without a stack or labels, zero weights."""
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("bytes", "bytes")])
    fns = [b.function(f"f{i}") for i in range(7)]
    locs = [b.location(-1, 0x10 * (i + 1), [(fns[i % 7], i, 0)]) for i in range(10)]
    locs.append(b.location(-1, 0x200, [(fns[2], 1, 0), (fns[3], 2, 0)]))  # an inlined frame
    values = [Label("k", str=f"v{i}") for i in range(rng.randint(1, 9))] + [
        Label("k", num=rng.choice([0, 1, 1024]), unit="bytes")]
    for _ in range(rng.randint(1, 400)):
        path = [rng.choice(locs) for _ in range(rng.randint(0, 7))]
        chosen = rng.sample(values, rng.randint(0, 1))
        b.add_sample(b.stack(path), [rng.randint(0, 3), rng.choice([0, 1, 7, 4096, 1 << 20])], labels=chosen)
    return b.finish()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), resolution=st.sampled_from([1e-3, 0.01, 0.05, 0.2]),
       batch=st.sampled_from([1, 10, 100, 1 << 20]), index=st.sampled_from([0, 1]))
def test_random_profiles(seed, resolution, batch, index):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPROF_KERNELS", "compiled")
        rng = random.Random(seed)
        p = _profile(rng)
        whole, cut = _both(p, Options(tagroot="k", sample_index=index), resolution=resolution, batch=batch,
                           monkeypatch=mp)
        if whole is not None:
            _compare(whole, cut, rng)


def test_demo_has_unmade_rows(monkeypatch):
    """On the demo profile at a coarse resolution most rows are not made, and every answer
    is still the complete graph's (several batches of values)."""
    from helpers import REPO

    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    key = sorted({lab.key for ls in p.labelsets for lab in ls})[0]
    whole, cut = _both(p, Options(tagroot=key), resolution=0.02, batch=50, monkeypatch=monkeypatch)
    assert len(cut.tree) < len(whole) / 2
    assert _compare(whole, cut, random.Random(1)) > 0


def _real(name: str):  # noqa: ANN202
    """The demo profile, or a real Go heap profile with ``bytes`` labels from peer data (a fresh
    clone has no generated benchmark profiles)."""
    from helpers import PEER, REPO

    path = REPO / "examples" / "demo.pb.gz" if name == "demo" else \
        PEER / "grafana__pyroscope" / "pkg" / "og" / "convert" / "pprof" / "testdata" / "heap.pb.gz"
    if not path.exists():
        pytest.skip(f"peer data not found: {path}")
    return path


def test_real_profile(monkeypatch):
    """A real Go heap profile at a fine resolution: far fewer rows made, and slices, searches,
    children and details as the complete graph's."""
    p = polyprof.read(_real("go_heap"))
    key = sorted({lab.key for ls in p.labelsets for lab in ls})[0]
    whole, cut = _both(p, Options(tagroot=key), resolution=1e-3, batch=1 << 14, monkeypatch=monkeypatch)
    assert len(cut.tree) < len(whole) / 2
    assert _compare(whole, cut, random.Random(2), every=False) > 0


def test_session_holds_the_cut_and_makes_parts(monkeypatch):
    """The web session holds the cut graph, makes a value's subtree into its result cache when
    a view reaches below the made rows, and the sandwich and the inverted graph (made from the
    samples, GroupedIndex.sandwich/inverted) give what they give on the complete graph."""
    from helpers import REPO

    from polyprof.analysis.sandwich import sandwich
    from polyprof.web.session import Input, Session

    monkeypatch.setattr(label_groups, "CUT_ROWS", [0])
    monkeypatch.setattr(label_groups, "RESOLUTION", 0.02)
    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    key = sorted({lab.key for ls in p.labelsets for lab in ls})[0]
    o = Options(tagroot=key)
    s = Session([Input("demo", "demo.pb.gz", p)])
    cut = s.flame(0, o)
    assert isinstance(cut, label_groups.GroupedIndex)
    whole = FlameIndex(label_groups.grouped_flame(p, o, flame_shape(p, o)))
    # the cache weighs what the cut holds of its own: its rows and the samples' columns, not the
    # name tree and profile it is made from
    held = s._own_bytes(cut)
    assert cut.tree.total.nbytes + cut.grouping.node.nbytes <= held < s._own_bytes([cut.held(), cut.grouping.shape])
    deep = next(i for i in range(len(whole)) if cut._made(i) < 0)
    _same_slice(cut.slice(deep, min_fraction=0), whole.slice(deep, min_fraction=0))
    assert any(k[0] == "group" for k in s._results.items)
    name = whole.tree.names[deep]
    got, callers, _ = s.sandwich(0, o, name, 0.0)
    want = sandwich(whole, name)
    assert (got.flat, got.cum, list(got.callers.names)) == (want.flat, want.cum, list(want.callers.names))
    inverted = s.flame(0, o, inverted=True)
    assert len(inverted) > 1 and inverted.tree.root_total == whole.tree.root_total


@pytest.mark.parametrize("seed", range(10))
def test_marked_rows_of_a_span_are_its_groups_alone(monkeypatch, seed):
    """marked_rows over groups lo:hi from the marks of every group (up to 4 words of them, in 1 to
    3 threads) is grouped_by_masks of those groups' samples alone: the batches of the cut graph."""
    from polyprof.analysis import _labels_compiled as k
    from test_label_groups import _preorder

    monkeypatch.setattr(k, "MASK_THREADS", [1 + seed % 3])
    monkeypatch.setattr(k.os, "cpu_count", lambda: 4)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    parent = np.full(n, -1, np.int32)
    for v in range(1, n):
        parent[v] = rng.integers(max(0, v - 8), v) if rng.random() < 0.8 else 0
    parent = _preorder(parent)
    groups = int(rng.choice([1, 5, 64, 65, 200, 256]))
    samples = int(rng.integers(0, 3000))
    node = rng.integers(0, n, samples).astype(np.int32)
    weight = rng.choice([0, 1, 5, 1 << 40], samples).astype(np.int64)
    group = rng.integers(0, groups, samples).astype(np.int32)
    name = rng.integers(0, 5, n).astype(np.int32)
    name[0] = -1
    lookup = np.array([*rng.permutation(5), 6], np.int32)
    group_name = np.arange(7, 7 + groups, dtype=np.int64)
    marks = k.group_marks(parent, node, weight, group, groups)
    assert marks is not None
    cuts = sorted({0, groups, *rng.integers(0, groups + 1, 3).tolist()})
    for lo, hi in zip(cuts, cuts[1:]):
        got = k.marked_rows(marks, parent, name, lookup, weight, group, group_name, 5, 7 + groups, lo, hi)
        sel = (group >= lo) & (group < hi)
        want = k.grouped_by_masks(parent, name, lookup, node[sel], weight[sel], group[sel] - lo, group_name[lo:hi],
                                  5, 7 + groups)
        assert want is not None
        for a, b in zip(got[0], want[0], strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert np.array_equal(got[1], want[1])
        assert int(marks.count[lo:hi].sum()) + 1 == got[0][0].size


def test_api_answers_are_the_complete_graphs(monkeypatch):
    """Through the web API (flame slices with path and search, node details, call tree
    children, sandwich of a function and of a value at the page's and full resolution, inverted
    graph) a group by answers the same JSON whether the session holds the cut graph (sandwich
    and inverted graph made without the complete one) or the complete one: deep zooms and
    unmade nodes included."""
    from helpers import REPO
    from web_support import app, get

    path = REPO / "examples" / "demo.pb.gz"
    p = polyprof.read(path)
    key = sorted({lab.key for ls in p.labelsets for lab in ls})[0]
    whole = FlameIndex(label_groups.grouped_flame(p, Options(tagroot=key), flame_shape(p, Options(tagroot=key))))
    nodes = sorted({0, 1, 2, *range(3, len(whole), max(1, len(whole) // 40)), len(whole) - 1})
    hot = whole.tree.names[int(np.argmax(np.where(whole.tree.depth > 1, whole.tree.self, -1)))]
    urls = [f"/api/flame?tagroot={key}", f"/api/flame?tagroot={key}&min_fraction=0&max_nodes=0",
            f"/api/flame?tagroot={key}&search=main", f"/api/sandwich?tagroot={key}&fn={hot}",
            f"/api/flame?tagroot={key}&inverted=1", f"/api/calltree?tagroot={key}&id={len(whole)}",
            f"/api/sandwich?tagroot={key}&fn={hot}&min_fraction=0", f"/api/sandwich?tagroot={key}&fn={hot}&max_nodes=0",
            f"/api/sandwich?tagroot={key}&fn={hot}&min_fraction=0&side=callers&id=2",
            f"/api/sandwich?tagroot={key}&fn={urllib.parse.quote(whole.tree.names[1])}&min_fraction=0",
            f"/api/calltree?tagroot={key}&id=1&inverted=1", f"/api/flame?tagroot={key}&inverted=1&min_fraction=0"]
    for node in nodes:
        urls += [f"/api/flame?tagroot={key}&root={node}&search=sha", f"/api/node?tagroot={key}&id={node}",
                 f"/api/calltree?tagroot={key}&id={node}", f"/api/flame?tagroot={key}&root={node}&min_fraction=0.01"]
    answers = []
    for rows in (1 << 30, 0):  # the complete graph, then the cut one
        monkeypatch.setattr(label_groups, "CUT_ROWS", [rows])
        monkeypatch.setattr(label_groups, "RESOLUTION", 0.02)
        a = app(path)
        answers.append([get(a, url, 400 if url.endswith(f"id={len(whole)}") else 200) for url in urls])
        held = a.session.flame(0, Options(tagroot=key))
        assert isinstance(held, label_groups.GroupedIndex) == (rows == 0)
    assert answers[0] == answers[1]


INVERTED_FRACTIONS = (0.0, 1e-5, 1e-3, 0.05, 0.3)


def _same_tree(a, b):
    """Two FlameTrees alike in every field (arrays element by element, names as lists)."""
    import dataclasses

    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert x is not None and y is not None and x.dtype == y.dtype and np.array_equal(x, y), f.name
        elif f.name == "names":
            assert list(x) == list(y)
        else:
            assert x == y, f.name


def _same_inverted(whole, cut):
    """``cut.inverted`` (from the samples) is ``inverted_graph`` of the complete graph at every
    resolution: every field, and slices of it."""
    from polyprof.analysis.sandwich import inverted_graph

    for mf in INVERTED_FRACTIONS:
        want, got = inverted_graph(whole, min_fraction=mf), cut.inverted(mf)
        assert want is not None and got is not None
        _same_tree(got, want)
        a, b = FlameIndex(got), FlameIndex(want)
        for root in sorted({0, min(1, len(b) - 1), len(b) // 2, len(b) - 1}):
            for mn in (0, 3):
                _same_slice(a.slice(root, min_fraction=0, max_nodes=mn), b.slice(root, min_fraction=0, max_nodes=mn))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), index=st.sampled_from([0, 1]))
def test_inverted_from_the_samples(seed, index):
    """The inverted grouped graph made from the samples on the name tree (each path on to its
    value's row) is the complete grouped graph's, on random labelled profiles."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPROF_KERNELS", "compiled")
        whole, cut = _both(_profile(random.Random(seed)), Options(tagroot="k", sample_index=index), resolution=0.01,
                           batch=10, monkeypatch=mp)
        if whole is not None:
            _same_inverted(whole, cut)


@pytest.mark.parametrize("name", ["demo", "go_heap"])
def test_inverted_from_the_samples_real(monkeypatch, name):
    """The same on the demo profile and a real Go heap profile."""
    p = polyprof.read(_real(name))
    for key in sorted({lab.key for ls in p.labelsets for lab in ls})[:2]:
        whole, cut = _both(p, Options(tagroot=key), resolution=1e-3, batch=1 << 14, monkeypatch=monkeypatch)
        _same_inverted(whole, cut)


SANDWICH_CUTS = ((0.0, 0), (0.0, 1), (0.0, 5), (0.0, 40_000), (0.01, 0), (0.2, 0), (1 / 4000, 40_000))


def _same_sandwich(whole, cut, names, cuts=SANDWICH_CUTS):
    """``cut.sandwich`` (no complete graph) is ``sandwich`` of the complete graph for each of
    ``names`` at several resolutions and node limits: every field of both trees, the numbers,
    ``callers_complete``."""
    from polyprof.analysis.sandwich import sandwich

    for name in names:
        for mf, mn in cuts:
            want, got = sandwich(whole, name, min_fraction=mf, max_nodes=mn), cut.sandwich(name, min_fraction=mf,
                                                                                           max_nodes=mn)
            assert got is not None
            assert (got.name, got.flat, got.cum, got.total) == (want.name, want.flat, want.cum, want.total)
            _same_tree(got.callers, want.callers)
            _same_tree(got.callees, want.callees)
            assert (got.callers_complete is None) == (want.callers_complete is None)
            if want.callers_complete is not None:
                for a, b in zip(got.callers_complete, want.callers_complete, strict=True):
                    assert np.array_equal(a, b)
    with pytest.raises(OptionsError):
        cut.sandwich("no such function")


def _names(whole):
    """Every name of the graph but the root's (the values' frames included)."""
    return [x for x in whole.distinct if x != whole.tree.names[0]]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), index=st.sampled_from([0, 1]))
def test_sandwich_from_the_samples(seed, index):
    """The sandwich of every function and value under a group by, made without the complete
    grouped graph, is the complete graph's (random labelled profiles: recursion, inlined
    frames, samples without a stack or labels, zero weights)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPROF_KERNELS", "compiled")
        whole, cut = _both(_profile(random.Random(seed)), Options(tagroot="k", sample_index=index), resolution=0.01,
                           batch=10, monkeypatch=mp)
        if whole is not None:
            _same_sandwich(whole, cut, _names(whole))
            assert cut.sandwich(whole.tree.names[0]) is None  # the root's: the complete graph's


@pytest.mark.parametrize("name", ["demo", "go_heap"])
def test_sandwich_from_the_samples_real(monkeypatch, name):
    """The same on the demo profile and a real Go heap profile: its widest functions and a few
    values."""
    p = polyprof.read(_real(name))
    key = sorted({lab.key for ls in p.labelsets for lab in ls})[0]
    whole, cut = _both(p, Options(tagroot=key), resolution=1e-3, batch=1 << 14, monkeypatch=monkeypatch)
    t = whole.tree
    by_total = np.argsort(-t.total, kind="stable")
    names = list(dict.fromkeys(t.names[i] for i in by_total[:400].tolist() if i))[:12]
    names += [t.names[i] for i in np.flatnonzero(t.depth == 1)[:3].tolist()]
    _same_sandwich(whole, cut, names if name == "go_heap" else _names(whole))
