"""The flame graph grouped by a label key from the cached name tree (label_groups.grouped_flame,
the web view's group by) is the graph of the label-framed callsites (filters.apply with tagroot,
then flame_tree at full resolution): every column, the names, identity and legend, on the demo,
peer pprof files with labels and random labelled profiles; and where it does not apply it says so."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import polyprof
from polyprof.analysis import filters, label_groups
from polyprof.analysis.flame import flame_shape, flame_tree
from polyprof.analysis.flameview import FlameIndex
from polyprof.analysis.options import Options, parse_time_range
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label

pytest.importorskip("numba", reason="numba is not installed: no name tree (FlameShape), no grouped route")

COLUMNS = ("parent", "depth", "self", "total", "start", "width", "subtree_size", "name_ids")


def _same(p, o, *, tree=True):
    """The grouped graph from the name tree (``tree``), else from the distinct samples."""
    got = label_groups.grouped_flame(p, o, flame_shape(p, o) if tree else None)
    if not tree and label_groups.distinct_samples(p) is None:  # more pairs than samples
        assert got is None
        return None
    assert got is not None
    want = flame_tree(filters.apply(p, o), o, min_fraction=0, max_nodes=0)
    assert list(got.names) == list(want.names)
    # the names the graph holds, in the table's order (the callsite route's table also has the
    # names of nodes without weight, the name tree's route not): the same ids in a view
    # (FlameIndex) of either graph
    held = np.bincount(want.name_ids, minlength=len(want.name_table)) > 0
    if tree:
        assert got.name_table == [x for x, h in zip(want.name_table, held) if h]
        assert FlameIndex(got).name_id is got.name_ids  # no second column of ids
    assert np.array_equal(FlameIndex(got).name_id, FlameIndex(want).name_id)
    assert FlameIndex(got).distinct == FlameIndex(want).distinct
    for col in COLUMNS:
        a, b = getattr(got, col), getattr(want, col)
        assert a.dtype == b.dtype, col
        if col == "name_ids":  # the same name on every node
            a, b = np.asarray(got.name_table, dtype=object)[a], np.asarray(want.name_table, dtype=object)[b]
        assert np.array_equal(a, b), col
    assert (got.dropped, got.min_width, got.hint, got.active_filters, got.sample_type, got.base_self) == \
        (want.dropped, want.min_width, want.hint, want.active_filters, want.sample_type, want.base_self)
    assert got.identity == want.identity
    return got


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")  # name trees and kernels on small profiles too


def _keys(p):
    return sorted({lab.key for ls in p.labelsets for lab in ls})


def test_demo_every_key_and_sample_type():
    from helpers import REPO

    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    keys = _keys(p)
    assert keys
    for key in [*keys, "absent"]:
        for index in range(len(p.sample_types)):
            _same(p, Options(tagroot=key, sample_index=index))
            _same(p, Options(tagroot=key, sample_index=index), tree=False)
    _same(p, Options(tagroot=keys[0], granularity="files"))
    _same(p, Options(tagroot=keys[0], unit="auto", noinlines=True))


def test_peer_pprof_files_with_labels():
    from helpers import PEER, peer_files

    files = [f for pattern in ("generated/**/*.pb.gz", "grafana__pyroscope/**/*.pb.gz", "grafana__pyroscope/**/*.pprof",
                               "google__pprof/**/*.pb.gz") for f in peer_files(pattern) if f.stat().st_size < 2_000_000]
    if not files:
        pytest.skip(f"no peer pprof files at {PEER}")
    seen = 0
    for path in files:
        try:
            p = polyprof.read(path)
        except polyprof.PolyprofError:
            continue
        if flame_shape(p, Options()) is None:
            continue
        for key in _keys(p)[:2]:
            _same(p, Options(tagroot=key))
            _same(p, Options(tagroot=key), tree=False)
            seen += 1
        if seen >= 12:
            break
    assert seen, "no peer pprof file with labels"


def _random(rng: random.Random) -> polyprof.Profile:
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("bytes", "bytes")])
    fns = [b.function(f"f{i}") for i in range(6)] + [b.function("v1")]  # a function named like a value
    locs = [b.location(-1, 0x10 * (i + 1), [(fns[i % 7], i, 0)]) for i in range(8)]
    locs.append(b.location(-1, 0x200, [(fns[2], 1, 0), (fns[3], 2, 0)]))  # an inlined frame
    values = [Label("k", str=f"v{i}") for i in range(rng.randint(1, 5))] + [
        Label("k", num=rng.choice([0, 1, 1024, 5 << 20]), unit="bytes"), Label("other", str="x")]
    timed = rng.random() < 0.5  # time, pid and tid columns (the distinct samples drop them)
    for t in range(rng.randint(1, 300)):
        path = [rng.choice(locs) for _ in range(rng.randint(0, 6))]
        chosen = rng.sample(values, rng.randint(0, 2))
        b.add_sample(b.stack(path), [rng.randint(0, 3), rng.choice([0, 1, 7, 4096])], labels=chosen,
                     **({"time": t, "pid": rng.randint(1, 3), "tid": rng.randint(1, 9)} if timed else {}))
    return b.finish()


@pytest.mark.parametrize("seed", range(40))
def test_random_labelled_profiles(monkeypatch, seed):
    from polyprof.analysis import _labels_compiled

    if seed % 2:  # the graph's columns start small and grow (the group that did not fit is redone)
        monkeypatch.setattr(_labels_compiled, "ROOM", [0, 1 + seed % 5])
    # the groups made in 1 to 4 parts (threads), joined after
    monkeypatch.setattr(_labels_compiled, "THREADS", [1 + seed % 4])
    if seed % 4 < 2:  # each group's nodes in turn (grouped_graph), not the nodes' group bits
        monkeypatch.setattr(_labels_compiled, "MASK_WORDS", 0)
    monkeypatch.setattr(_labels_compiled.os, "cpu_count", lambda: 4)
    rng = random.Random(seed)
    p = _random(rng)
    for index in (0, 1):
        o = Options(tagroot="k", sample_index=index)
        got = label_groups.grouped_flame(p, o, flame_shape(p, o))
        if got is None:  # a label frame named like a function ("v1"): the callsite route answers
            used = np.flatnonzero(np.bincount(p.samples.labelset, minlength=len(p.labelsets)))
            assert "v1" in label_groups._frame_names(p, o, used)[1]
        else:
            _same(p, o)
            _same(p, o, tree=False)
        _same(p, Options(tagroot="other", sample_index=index))


def test_where_it_does_not_apply():
    from helpers import REPO

    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    key = _keys(p)[0]
    shape = flame_shape(p, Options())
    for o in (Options(tagroot=f"{key},{key}"), Options(tagroot=key, tagleaf=key), Options(tagroot=key, focus="main"),
              Options(tagroot=key, hide="x"), Options()):
        assert not label_groups.applies(o) and label_groups.grouped_flame(p, o, shape) is None


def test_distinct_samples():
    """One sample per (stack, label set) with the summed values, and None when the table of
    pairs would outgrow the samples (then the callsites' route answers, no graph from here)."""
    rng = random.Random(7)
    p = _random(rng)
    got = label_groups.distinct_samples(p)
    want: dict[tuple[int, int], np.ndarray] = {}
    s = p.samples
    for i in range(len(s)):
        key = (int(s.stack[i]), int(s.labelset[i]))
        want[key] = want.get(key, 0) + s.values[i]
    g = got.samples
    assert g.time is None and g.pid is None and len(g) == len(want)
    assert {(int(a), int(b)): list(v) for a, v, b in zip(g.stack, g.values, g.labelset)} == \
        {k: list(v) for k, v in want.items()}
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    fn = b.function("f")
    stacks = [b.stack([b.location(-1, 0x10 * (i + 1), [(fn, i, 0)])]) for i in range(300)]
    for i in range(300):
        b.add_sample(stacks[i], [1], labels=[Label("k", num=i)])
    wide = b.finish()  # 300 x 301 pairs, 300 samples
    assert label_groups.distinct_samples(wide) is None
    assert label_groups.grouped_flame(wide, Options(tagroot="k"), None) is None


@pytest.mark.parametrize("seed", range(12))
def test_group_bits_kernel_is_the_per_group_kernel(monkeypatch, seed):
    """grouped_by_masks (each node's groups as bits, up to 4 words, in 1 to 4 threads) makes
    grouped_graph's columns on random name trees, zero weights, empty groups and up to 300 groups."""
    from polyprof.analysis import _labels_compiled as k

    monkeypatch.setattr(k, "MASK_THREADS", [1 + seed % 4])
    monkeypatch.setattr(k.os, "cpu_count", lambda: 4)

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    parent = np.full(n, -1, np.int32)
    for v in range(1, n):  # pre-order: a node's parent comes before it, its subtree after it
        parent[v] = rng.integers(max(0, v - 8), v) if rng.random() < 0.8 else 0
    parent = _preorder(parent)
    groups = int(rng.choice([1, 3, 64, 65, 200, 256, 300]))
    samples = int(rng.integers(0, 3000))
    node = rng.integers(0, n, samples).astype(np.int32)
    weight = rng.choice([0, 0, 1, 5, 1 << 40], samples).astype(np.int64)
    group = rng.integers(0, groups, samples).astype(np.int32)
    names = 7 + groups
    name = rng.integers(0, 5, n).astype(np.int32)  # the tree's name ids, through lookup (the root's -1: 6)
    name[0] = -1
    lookup = np.array([*rng.permutation(5), 6], np.int32)
    group_name = np.arange(7, 7 + groups, dtype=np.int64)
    got = k.grouped_by_masks(parent, name, lookup, node, weight, group, group_name, 5, names)
    if groups > 64 * k.MASK_WORDS:
        assert got is None
        return
    order = np.argsort(group, kind="stable")
    bounds = np.zeros(groups + 1, np.int64)
    np.cumsum(np.bincount(group, minlength=groups), out=bounds[1:])
    want = k.grouped_graph(parent, lookup[name], node[order], weight[order], bounds, group_name, 5, names)
    for a, b in zip(got[0], want[0], strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(got[1], want[1])


def _preorder(parent):
    """The tree of ``parent`` renumbered in pre-order (children in id order)."""
    children = [[] for _ in parent]
    for v in range(1, parent.size):
        children[parent[v]].append(v)
    order, todo = [], [0]
    while todo:
        v = todo.pop()
        order.append(v)
        todo.extend(reversed(children[v]))
    new = np.empty(parent.size, np.int64)
    new[order] = np.arange(parent.size)
    out = np.full(parent.size, -1, np.int32)
    out[new[1:]] = new[parent[1:]]
    return out


def test_session_takes_the_grouped_route(monkeypatch):
    """The web view's group by answers from the name tree, the same graph as the callsite route."""
    from helpers import REPO

    from polyprof.web.session import Input, Session

    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    o = Options(tagroot=_keys(p)[0])
    s = Session([Input("demo", "demo.pb.gz", p)])
    calls = []
    real = label_groups.grouped_index
    monkeypatch.setattr("polyprof.web.session.grouped_index", lambda *a: calls.append(1) or real(*a))
    got = s.flame(0, o).tree
    assert calls and got.name_table is not None
    want = flame_tree(filters.apply(p, o), o, min_fraction=0, max_nodes=0)
    assert list(got.names) == list(want.names) and np.array_equal(got.start, want.start)


def test_session_small_tree_takes_the_distinct_samples(monkeypatch):
    """On numpy kernels (no name tree) the web view's group by labels the distinct samples: the
    same graph, and no filtered copy of the profile is made or cached."""
    from helpers import REPO

    from polyprof.web.session import Input, Session

    monkeypatch.setenv("POLYPROF_KERNELS", "numpy")
    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    o = Options(tagroot=_keys(p)[0])
    s = Session([Input("demo", "demo.pb.gz", p)])
    monkeypatch.setattr(s, "filtered", lambda *a, **k: pytest.fail("the group by filtered the whole profile"))
    got = s.flame(0, o).tree
    want = flame_tree(filters.apply(p, o), o, min_fraction=0, max_nodes=0)
    assert list(got.names) == list(want.names)
    for col in COLUMNS:
        assert np.array_equal(getattr(got, col), getattr(want, col)), col


def test_formats_with_labels(tmp_path):
    """Every label key of real files of several formats (a pprof, a simpleperf trace with thread
    names, a Perfetto trace with string labels), each sample type: the grouped graph from the
    name tree is the callsite route's."""
    from web_support import input_path

    seen = 0
    for kind in ("pprof", "simpleperf", "perfetto"):
        p = polyprof.read(input_path(kind, tmp_path))
        if flame_shape(p, Options()) is None:  # POLYPROF_KERNELS=compiled: every tree has one
            continue
        for key in _keys(p):
            for index in range(len(p.sample_types)):
                o = Options(tagroot=key, sample_index=index)
                if label_groups.grouped_flame(p, o, flame_shape(p, o)) is not None:
                    _same(p, o)
                    seen += 1
    assert seen >= 3


def _web_and_cli(p, o):
    """The web view's flame graph of ``o`` (a Session: the name tree's route where it applies)
    and the command line's (the label frames on the callsites), compared column by column."""
    from polyprof.web.session import Input, Session

    got = Session([Input("p", "p", p)]).flame(0, o).tree
    want = flame_tree(filters.apply(p, o), o, min_fraction=0, max_nodes=0)
    assert list(got.names) == list(want.names), o
    for col in COLUMNS[:-1]:
        assert np.array_equal(getattr(got, col), getattr(want, col)), (col, o)
    assert got.hint == want.hint and got.active_filters == want.active_filters
    return got


def test_web_group_by_with_other_filters_is_the_command_lines():
    """Group by with focus, hide, a time range, a tag focus, a thread, or another key's leaf
    frames (the callsites' route), and alone (the name tree's): the command line's graph."""
    from helpers import REPO
    from web_support import input_path

    p = polyprof.read(input_path("simpleperf", None))
    key = _keys(p)[0]
    name = flame_tree(p, Options(), max_nodes=2).names[-1]
    for extra in ({}, {"focus": re.escape(name)}, {"hide": "^lib"}, {"time_range": parse_time_range("200ms:1.2s")},
                  {"tagfocus": f"{key}=."}, {"thread": "."}, {"tagleaf": key}, {"sample_index": 0}):
        _web_and_cli(p, Options(tagroot=key, **extra))
    demo = polyprof.read(REPO / "examples" / "demo.pb.gz")
    for extra in ({}, {"focus": "main"}, {"hide": "runtime"}, {"ignore": "sha"}, {"granularity": "lines"}):
        _web_and_cli(demo, Options(tagroot="worker", **extra))


def _framed_both(p, key, monkeypatch):
    """``label_frames(p, key)`` with the framed callsites made from ``p``'s (``_framed_tree``),
    and with the paths interned (the route it replaces): the same profile, array for array.
    Returns whether the fast route applied."""
    from polyprof.analysis import labels

    taken = []
    real = labels._framed_tree
    monkeypatch.setattr(labels, "_framed_tree", lambda *a: taken.append(real(*a)) or taken[-1])
    fast, _ = labels.label_frames(p, key, None)
    monkeypatch.setattr(labels, "_framed_tree", lambda *a: None)
    slow, _ = labels.label_frames(p, key, None)
    monkeypatch.setattr(labels, "_framed_tree", real)
    a, b = fast.callsites, slow.callsites
    for x, y in ((a.parent, b.parent), (a.location, b.location), (a.depth(), b.depth())):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    for col in ("stack", "values", "labelset", *fast.samples.OPTIONAL_COLUMNS):
        x, y = getattr(fast.samples, col), getattr(slow.samples, col)
        assert (x is None) == (y is None) and (x is None or (x.dtype == y.dtype and np.array_equal(x, y))), col
    assert fast.labelsets == slow.labelsets and fast.strings == slow.strings
    assert np.array_equal(fast.locations.line_start, slow.locations.line_start)
    assert np.array_equal(fast.functions.name, slow.functions.name)
    return taken[-1] is not None if taken else False


def test_framed_callsites_are_the_interners(monkeypatch, tmp_path):
    """tagroot's label frames made from the input's callsites (numbered as the interner numbers
    them: read files) are the interned paths' profile on real files of several formats, every
    key, and on random labelled profiles written and read back (string and numeric values,
    samples without the key, two values of the key on one sample); a profile numbered otherwise
    (made stack by stack) gives the same profile by either route."""
    from web_support import input_path

    applied = 0
    for kind in ("pprof", "simpleperf", "perfetto"):
        p = polyprof.read(input_path(kind, tmp_path))
        for key in _keys(p):
            applied += _framed_both(p, key, monkeypatch)
    for seed in range(12):
        made = _random(random.Random(seed))
        _framed_both(made, "k", monkeypatch)
        path = tmp_path / f"r{seed}.pb.gz"
        polyprof.write(made, path)
        for key in ("k", "other", "absent"):
            applied += _framed_both(polyprof.read(path), key, monkeypatch)
    for values in (100, 300):  # frames in two words of bits; more than four words: the paths
        b = ProfileBuilder("test")
        b.set_sample_types([("samples", "count")])
        locs = [b.location(-1, 0x10 * (i + 1), [(b.function(f"f{i}"), i, 0)]) for i in range(5)]
        rng = random.Random(values)
        for i in range(3 * values):
            b.add_sample(b.stack([rng.choice(locs) for _ in range(rng.randint(0, 4))]), [1],
                         labels=[Label("n", num=i % values)])
        path = tmp_path / f"n{values}.pb.gz"
        polyprof.write(b.finish(), path)
        assert _framed_both(polyprof.read(path), "n", monkeypatch) == (values <= 256)
    assert applied >= 20


def test_loaded_kernels_serve_the_label_frames():
    """After load_kernels (the labels panel's warm-up) the label frames of a group by's top table
    call the framed-tree kernels with the types already loaded: nothing more to load."""
    from helpers import REPO

    from polyprof.analysis import _labels_compiled as k
    from polyprof.analysis.labels import label_frames

    assert label_groups.load_kernels(10**7)
    names = ("_framed_marks", "_framed_fill")
    loaded = {name: set(getattr(k, name).signatures) for name in names}
    assert all(loaded.values())
    label_frames(polyprof.read(REPO / "examples" / "demo.pb.gz"), "worker", None)
    assert {name: set(getattr(k, name).signatures) for name in names} == loaded
