"""Samples as a table: Profile.to_arrow/to_pandas and polyprof.from_arrow/from_pandas."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import polyprof
from helpers import REPO

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

DEMO = REPO / "examples" / "demo.pb.gz"
GO = shutil.which("go")


@pytest.fixture(scope="module")
def demo():
    return polyprof.read(DEMO)


def _names_of_stack(p, leaf: int) -> list[str]:
    """Frame names root to leaf, walked one sample at a time (the slow, obvious way)."""
    out = []
    for loc in reversed(p.callsites.path(leaf)):
        lines = list(p.locations.lines_of(loc))
        for row in reversed(lines):  # lines run innermost first
            fn = int(p.lines.function[row])
            out.append(p.function_name(fn) or p.strings[p.functions.system_name[fn]])
        if not lines:
            out.append(f"0x{int(p.locations.address[loc]):x}")
    return out


def test_samples_table_has_every_column(demo):
    t = demo.to_arrow(stacks="both")
    assert t.num_rows == len(demo.samples)
    assert t.column_names == ["stack", "frames", "samples", "cpu", "worker"]
    assert t.column("stack").to_numpy().tolist() == demo.samples.stack.tolist()
    assert t.column("cpu").to_numpy().tolist() == demo.samples.values[:, 1].tolist()
    assert t.schema.field("cpu").metadata == {b"unit": b"nanoseconds", b"type": b"cpu"}
    assert pa.types.is_dictionary(t.schema.field("worker").type)
    workers = [dict((lab.key, lab.str) for lab in demo.labelsets[ls]).get("worker")
               for ls in demo.samples.labelset.tolist()]
    assert t.column("worker").to_pylist() == workers
    frames = t.column("frames").to_pylist()
    for i in range(0, len(demo.samples), 7):
        assert frames[i] == _names_of_stack(demo, int(demo.samples.stack[i]))


def test_callsites_table_links_the_stack_ids(demo):
    c = demo.to_arrow("callsites")
    assert c.num_rows == len(demo.callsites)
    parent = c.column("parent").to_pylist()
    depth = c.column("depth").to_pylist()
    assert all((p is None and d == 0) or depth[p] == d - 1 for p, d in zip(parent, depth))
    leaf = int(demo.samples.stack[0])
    frames = c.column("frames").to_pylist()
    chain = []
    while leaf is not None:
        chain = frames[leaf] + chain
        leaf = parent[leaf]
    assert chain == _names_of_stack(demo, int(demo.samples.stack[0]))


def test_pandas_equals_arrow_and_keeps_metadata(demo):
    df = demo.to_pandas()
    t = demo.to_arrow()
    assert list(df.columns) == t.column_names and len(df) == t.num_rows
    assert df["cpu"].sum() == demo.totals()[1]
    assert df.attrs["polyprof"]["sample_types"] == [["samples", "count"], ["cpu", "nanoseconds"]]


def test_value_columns_are_renamed_only_on_clashes():
    b = polyprof.ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds"), ("samples", "count"), ("samples", "events")])
    leaf = b.stack([b.frame("main")])
    b.add_sample(leaf, [1, 2, 3], cpu=0, labels=[polyprof.Label("samples", str="x"), polyprof.Label("cpu", num=7)])
    t = b.finish().to_arrow(stacks="both")
    assert t.column_names == ["stack", "frames", "cpu/nanoseconds", "samples/count", "samples/events", "cpu", "samples",
                              "label:cpu"]
    assert polyprof.from_arrow(t).labelsets[1] == (polyprof.Label("samples", str="x"), polyprof.Label("cpu", num=7))


def test_round_trip_through_arrow_keeps_stacks_values_labels(demo):
    q = polyprof.from_arrow(demo.to_arrow(stacks="names"))
    assert q.sample_types == demo.sample_types and q.duration_nanos == demo.duration_nanos
    assert q.totals() == demo.totals()
    assert polyprof.top(q, nodecount=0).rows == polyprof.top(demo, nodecount=0).rows or [
        (r.name, r.flat, r.cum) for r in polyprof.top(q, nodecount=0).rows] == [
        (r.name, r.flat, r.cum) for r in polyprof.top(demo, nodecount=0).rows]
    assert [q.labelsets[i] for i in q.samples.labelset] == [demo.labelsets[i] for i in demo.samples.labelset]
    via_pandas = polyprof.from_pandas(demo.to_pandas(stacks="names"))
    assert via_pandas.totals() == demo.totals() and len(via_pandas.callsites) == len(q.callsites)


def _frame_df():
    return pd.DataFrame({
        "frames": ["main;parse;alloc", "main;parse", "main;render;alloc", "main;render;;alloc", None],
        "cpu": [10_000_000, 20_000_000, 30_000_000, 5_000_000, 1_000_000],
        "tid": [1, 1, 2, 2, 2],
        "request": ["a", "b", None, "a", "a"],
        "bytes": [512, None, 1024, 1024, None],
    })


def test_a_dataframe_becomes_a_profile():
    p = polyprof.from_pandas(_frame_df(), sample_types={"cpu": "nanoseconds"})
    assert p.sample_types == [polyprof.ValueType("cpu", "nanoseconds")]
    assert p.samples.tid.tolist() == [1, 1, 2, 2, 2] and p.samples.stack[4] == -1
    top = {r.name: (r.flat, r.cum) for r in polyprof.top(p, nodecount=0).rows}
    assert top == {"alloc": (45_000_000, 45_000_000), "parse": (20_000_000, 30_000_000),
                   "render": (0, 35_000_000), "main": (0, 65_000_000)}
    labels = [dict((lab.key, lab.str if lab.str is not None else lab.num) for lab in p.labelsets[i])
              for i in p.samples.labelset]
    assert labels == [{"request": "a", "bytes": 512}, {"request": "b"}, {"bytes": 1024},
                      {"request": "a", "bytes": 1024}, {"request": "a"}]


def test_from_arrow_says_what_it_needs():
    t = pa.table({"frames": [["main"]], "cpu": [1]})
    with pytest.raises(polyprof.OptionsError, match=r"pass sample_types=\{'column': 'unit'"):
        polyprof.from_arrow(t)
    with pytest.raises(polyprof.OptionsError, match="no stack column 'stack'"):
        polyprof.from_arrow(t, sample_types=["cpu"], frames="stack")
    with pytest.raises(polyprof.OptionsError, match="does not have: wall"):
        polyprof.from_arrow(t, sample_types={"wall": "nanoseconds"})


def test_stack_expansion_matches_a_walk_on_inline_frames(peer):
    """Profiles with inline lines: every frame, outermost first within a location."""
    p = polyprof.read(peer / "google__pprof/internal/proftest/testdata/large.cpu")
    inline = np.diff(p.locations.line_start) > 1
    assert inline.any()
    frames = p.to_arrow(stacks="names").column("frames")
    rng = np.random.default_rng(0)
    for i in rng.choice(len(p.samples), 40, replace=False).tolist():
        assert frames[i].as_py() == _names_of_stack(p, int(p.samples.stack[i]))


@pytest.mark.skipif(GO is None, reason="go tool pprof not installed (apt-get install golang-go)")
def test_go_tool_pprof_reads_a_dataframe_built_profile(tmp_path, cli):
    p = polyprof.from_pandas(_frame_df(), sample_types={"cpu": "nanoseconds"})
    out = tmp_path / "df.pb.gz"
    polyprof.write(p, out)
    flags = ["-top", "-nodefraction=0", "-edgefraction=0", "-nodecount=0"]
    theirs = subprocess.run([GO, "tool", "pprof", *flags, str(out)], capture_output=True, timeout=120, check=True)
    ours = cli("top", out, "--nodecount", "0")
    assert ours.code == 0
    assert theirs.stdout.decode().strip() == ours.out.strip()
    assert "      45ms 68.18% 68.18%       45ms 68.18%  alloc" in ours.out


def test_empty_stacks_and_empty_profiles():
    b = polyprof.ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    b.add_sample(-1, [5])
    t = b.finish().to_arrow(stacks="both")
    assert t.to_pylist() == [{"stack": None, "frames": [], "cpu": 5}]
    assert polyprof.from_arrow(t).totals() == [5]
    empty = polyprof.ProfileBuilder("test").finish()
    assert empty.to_arrow(stacks="both").num_rows == 0 and empty.to_arrow("callsites").num_rows == 0


def test_inline_frames_in_a_tree_built_item_by_item():
    """No pre-order ids: the extra inline frames are counted one tree level at a time."""
    b = polyprof.ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    main, work, inlined = (b.function(n) for n in ("main", "work", "inlined"))
    both = b.location(-1, 0x20, [(inlined, 3, 0), (work, 7, 0)])  # innermost first
    top = b.location(-1, 0x10, [(main, 1, 0)])
    leaf = b.location(-1, 0x30, [(b.function("leaf"), 9, 0)])
    b.add_sample(b.stack([leaf, both, top]), [1])
    b.add_sample(b.stack([both, top]), [2])
    p = b.finish()
    assert p.callsites.preorder_size() is None
    frames = p.to_arrow(stacks="names").column("frames").to_pylist()
    assert frames == [["main", "work", "inlined", "leaf"], ["main", "work", "inlined"]]
    assert frames == [_names_of_stack(p, int(s)) for s in p.samples.stack]
