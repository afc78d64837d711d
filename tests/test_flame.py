"""Flame trees (polyprof.analysis.flame) against peers' numbers and their own invariants.

- speedscope's import snapshot of simple.prof lists every stack with its
  weight: the flame tree's self weights per path must be exactly those.
- ``go tool pprof -top`` gives flat and cum per function (66 references,
  compared as pprof printed them): the flame tree's self summed per name is
  pprof's flat, and its total summed over the outermost occurrence of each
  name on a path is pprof's cum.
- Properties on random profiles: weights add up, children nest inside their
  parent and do not overlap, pruning keeps ancestors.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.analysis.flame import FlameTree, flame_tree
from polyprof.analysis.options import Options
from polyprof.model.builder import ProfileBuilder
from polyprof.render import units

from helpers import PEER, peer_files, peer_id

SIMPLE = "jlfwong__speedscope/sample/profiles/pprof/simple.prof"
SNAPSHOT = "jlfwong__speedscope/src/import/__snapshots__/pprof.test.ts.snap"
EXACT = "generated/go_tool_pprof_exact/"


def paths(tree: FlameTree) -> list[tuple[str, ...]]:
    """Root-first names of every node (the root's own name left out)."""
    out: list[tuple[str, ...]] = []
    for i in range(len(tree)):
        par = int(tree.parent[i])
        out.append(() if par < 0 else out[par] + (tree.names[i],))
    return out


def snapshot_stacks(peer: Path) -> Counter:
    """``"a;b;c 260.00ms"`` lines of speedscope's snapshot, summed per stack, in ns."""
    text = (peer / SNAPSHOT).read_text()
    found = Counter()
    for stack, ms in re.findall(r'^\s+"([^"\n]+) ([0-9.]+)ms",$', text, flags=re.M):
        found[tuple(stack.split(";"))] += round(float(ms) * 1e6)
    return found


def test_self_weights_equal_speedscope_stacks(peer, golden):
    tree = flame_tree(polyprof.read(peer / SIMPLE))
    expected = snapshot_stacks(peer)
    assert len(expected) == 9
    got = Counter({path: int(s) for path, s in zip(paths(tree), tree.self.tolist()) if s})
    assert got == expected
    assert tree.root_total == sum(expected.values())
    golden("viewers/simple.prof.flame.txt", "\n".join(tree.lines()) + "\n")


def _top_rows(ref: Path) -> tuple[str, list[list[str]]]:
    """(total, [[name, flat, cum]]) of a ``pprof -top`` reference, values as printed (``43012.05kB``)."""
    text = ref.read_bytes().decode("utf-8", errors="replace")
    lines = text.rstrip("\n").split("\n")  # not splitlines(): names may hold \v, \f and \r
    total = re.search(r"of (\S+) total", next(ln for ln in lines if ln.startswith("Showing nodes"))).group(1)
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("flat")) + 1
    rows: list[list[str]] = []
    for ln in lines[start:]:
        m = re.match(r"^\s*(\S+)\s+\S+%\s+\S+%\s+(\S+)\s+\S+%  (.*?)( \((partial-)?inline\))?$", ln)
        if m:
            rows.append([m.group(3), m.group(1), m.group(2)])
        else:  # a name with a line break in it
            rows[-1][0] += "\n" + ln
    return total, rows


def _as_printed(value: int, token: str, unit: str) -> str:
    """``value`` the way pprof printed ``token``: raw, or scaled to the token's unit."""
    suffix = re.sub(r"^-?[0-9.]+", "", token)
    return str(value) if not suffix else units.scaled_label(value, unit, suffix)


def _flat_cum(tree: FlameTree) -> tuple[Counter, Counter]:
    flat, cum = Counter(), Counter()
    for i, path in enumerate(paths(tree)):
        if not path:
            continue
        flat[path[-1]] += int(tree.self[i])
        if path[-1] not in path[:-1]:  # recursion counts once, at the outermost occurrence
            cum[path[-1]] += int(tree.total[i])
    return flat, cum


CASES = [(ref, str(ref.relative_to(PEER / EXACT))[: -len(".top.txt")]) for ref in peer_files(EXACT + "**/*.top.txt")]


@pytest.mark.parametrize("ref,rel", CASES, ids=[peer_id(c[0]) for c in CASES])
def test_flat_and_cum_equal_go_tool_pprof(ref, rel):
    source, sample_type = rel.rsplit(".", 1)
    p = polyprof.read(PEER / source)
    unit = p.sample_types[p.sample_index(sample_type)].unit
    tree = flame_tree(p, Options(sample_index=sample_type), max_nodes=0, min_fraction=0)
    flat, cum = _flat_cum(tree)
    total, rows = _top_rows(ref)
    assert _as_printed(int(np.abs(tree.self).sum()), total, unit) == total
    for name, f, c in rows:
        assert (name, _as_printed(flat[name], f, unit), _as_printed(cum[name], c, unit)) == (name, f, c)


def test_there_are_pprof_references(peer):
    assert len(CASES) >= 60


# ---------------------------------------------------------------- properties

def _random_profile(data: st.DataObject) -> tuple:
    names = ["a", "b", "c", "d"]
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    fns = [b.function(n) for n in names]
    locs = [b.location(-1, 0x10 * (i + 1), [(fns[i % 4], i, 0)]) for i in range(6)]
    # one location with an inlined frame: c inlined into d
    locs.append(b.location(-1, 0x100, [(fns[2], 1, 0), (fns[3], 2, 0)]))
    stacks = data.draw(st.lists(st.lists(st.integers(0, len(locs) - 1), max_size=7), min_size=1, max_size=30))
    for s in stacks:
        v = data.draw(st.integers(0, 1000))
        b.add_sample(b.stack([locs[i] for i in s]), [1, v])
    return b.finish(), stacks


def check_layout(tree: FlameTree) -> None:
    n = len(tree)
    assert tree.parent[0] == -1 and tree.names[0] == "root"
    kids: dict[int, list[int]] = {}
    for i in range(1, n):
        p = int(tree.parent[i])
        assert p < i, "pre-order: parents come first"
        assert tree.depth[i] == tree.depth[p] + 1
        kids.setdefault(p, []).append(i)
    for p, ch in kids.items():
        names = [tree.names[c] for c in ch]
        assert names == sorted(names) and len(set(names)) == len(names)
        edge = int(tree.start[p])
        for c in ch:  # children left to right inside the parent, not overlapping (gaps = pruned)
            assert int(tree.start[c]) >= edge
            edge = int(tree.start[c]) + int(tree.width[c])
        assert edge <= int(tree.start[p]) + int(tree.width[p])
        if not tree.dropped:
            assert int(tree.start[ch[0]]) == int(tree.start[p])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_weights_add_up_and_nest(data):
    p, _ = _random_profile(data)
    tree = flame_tree(p, Options(sample_index="cpu"), max_nodes=0, min_fraction=0)
    assert tree.root_total == p.totals()[1]
    assert int(tree.self.sum()) == tree.root_total
    for i in range(len(tree)):
        kids = np.nonzero(tree.parent == i)[0]
        assert int(tree.total[i]) == int(tree.self[i]) + int(tree.total[kids].sum())
    check_layout(tree)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(1, 6), st.sampled_from([0.0, 0.1, 0.3]))
def test_pruning_keeps_ancestors_and_caps(data, cap, fraction):
    """One rule: the web view's slice of the complete graph keeps the nodes flame_tree keeps."""
    from polyprof.analysis.flameview import FlameIndex

    p, _ = _random_profile(data)
    full = flame_tree(p, Options(sample_index="samples"), max_nodes=0, min_fraction=0)
    tree = flame_tree(p, Options(sample_index="samples"), max_nodes=cap, min_fraction=fraction)
    assert len(tree) <= cap  # ties go to the first in pre-order: ancestors come first
    cut = FlameIndex(full).slice(0, min_fraction=fraction, max_nodes=cap)
    assert [cut.names[i] for i in cut.columns["name"]] == list(tree.names)
    for column in ("parent", "depth", "start", "width", "self", "total"):
        assert cut.columns[column].tolist() == getattr(tree, column).tolist(), column
    assert cut.merged == len(full) - len(tree) and cut.min_width == tree.min_width
    assert tree.dropped == int(np.count_nonzero(full.width > 0)) - int(np.count_nonzero(tree.width > 0))
    assert tree.root_total == full.root_total
    check_layout(tree)
    kept = {path for path in paths(tree)}
    for path in kept:
        assert path[:-1] in kept or not path


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=200), st.integers(1, 7))
def test_names_present_marked_in_chunks_equal_a_count(ids, chunk):
    """FlameIndex marks the names a graph holds a chunk at a time (no int64 copy of the ids)."""
    from polyprof.analysis.flameview import _present

    name_ids = np.array(ids, dtype=np.int32)
    assert _present(name_ids, 41, chunk).tolist() == (np.bincount(name_ids, minlength=41) > 0).tolist()


def test_inlined_functions_are_frames_unless_noinlines():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    main, outer, inner = b.function("main"), b.function("outer"), b.function("inner")
    leaf = b.location(-1, 0x20, [(inner, 3, 0), (outer, 2, 0)])  # inner inlined into outer
    b.add_sample(b.stack([leaf, b.location(-1, 0x10, [(main, 1, 0)])]), [5])
    p = b.finish()
    assert paths(flame_tree(p))[1:] == [("main",), ("main", "outer"), ("main", "outer", "inner")]
    assert paths(flame_tree(p, Options(noinlines=True)))[1:] == [("main",), ("main", "outer")]


def test_empty_stacks_count_as_root_self():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    b.add_sample(-1, [3])
    b.add_sample(b.stack([b.frame("f")]), [2])
    tree = flame_tree(b.finish())
    assert (int(tree.self[0]), tree.root_total) == (3, 5)


def test_diff_weights_come_from_the_base_by_name():
    def prof(weights: dict[str, int]):
        b = ProfileBuilder("test")
        b.set_sample_types([("samples", "count")])
        for name, w in weights.items():
            b.add_sample(b.stack([b.frame(name), b.frame("main")]), [w])
        return b.finish()

    tree = flame_tree(prof({"a": 30, "b": 10}), base=prof({"a": 10, "c": 10}))
    by_path = dict(zip(paths(tree), zip(tree.total.tolist(), tree.base_total.tolist())))
    assert by_path[("main", "a")] == (30, 10)
    assert by_path[("main", "b")] == (10, 0)
    assert ("main", "c") not in by_path  # no width in the new profile
    assert tree.base_only == 10 and tree.base_root_total == 20
