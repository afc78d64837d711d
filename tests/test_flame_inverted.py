"""flame --inverted: leaf functions next to the root, their callers beyond; the page toggles it;
a hint when most weight is self weight spread over many call paths."""

from __future__ import annotations

import numpy as np
import pytest

import polyprof
from polyprof.analysis.flame import flame_tree
from polyprof.analysis.top import top
from polyprof.analysis.options import Options
from polyprof.render.flame import to_html

from helpers import PEER

DEMO = "examples/demo.pb.gz"
LARGE = "google__pprof/internal/proftest/testdata/large.cpu"
SIMPLE = "jlfwong__speedscope/sample/profiles/pprof/simple.prof"


def test_inverted_first_level_is_flat_weight_per_function():
    p = polyprof.read(DEMO)
    inv = flame_tree(p, max_nodes=0, inverted=True)
    assert inv.inverted and int(inv.total[0]) == int(flame_tree(p, max_nodes=0).total[0])
    first = {inv.names[i]: int(inv.total[i]) for i in np.flatnonzero(inv.depth == 1)}
    flat = {r.name: r.flat for r in top(p, Options(nodecount=0, nodefraction=0)).rows if r.flat}
    assert first == flat  # one frame per function with self weight, as wide as its flat


def test_inverted_children_are_callers():
    p = polyprof.read(DEMO)
    inv = flame_tree(p, max_nodes=0, inverted=True)
    block = inv.names.index("crypto/sha256.block")
    callers = [inv.names[i] for i in np.flatnonzero(inv.parent == block)]
    assert callers == ["crypto/sha256.(*digest).Write"]


def test_large_cpu_hot_leaf_is_one_frame_and_hinted(peer):
    p = polyprof.read(PEER / LARGE)
    normal = flame_tree(p)
    assert "time.Now" in normal.hint and "--inverted" in normal.hint
    inv = flame_tree(p, inverted=True)
    now = inv.names.index("time.Now")
    assert inv.depth[now] == 1 and int(inv.total[now]) / int(inv.total[0]) == pytest.approx(0.8538, abs=1e-3)
    assert not inv.hint


def test_no_hint_when_weight_is_not_concentrated():
    assert flame_tree(polyprof.read(DEMO)).hint == ""


def test_cli_inverted_and_hint(cli, tmp_path, peer):
    out = tmp_path / "inv.svg"
    r = cli("flame", PEER / LARGE, "-o", out, "--inverted")
    assert r.code == 0 and "inverted:" in out.read_text()
    assert "hint:" not in r.err
    r = cli("flame", PEER / LARGE, "-o", tmp_path / "normal.html")
    assert r.code == 0 and "hint: 85% of the weight is self time of time.Now" in r.err
    page = (tmp_path / "normal.html").read_text()
    assert 'id="callers"' in page and '"inv":' in page


@pytest.mark.skipif(not __import__("shutil").which("chromium"), reason="chromium not installed (CI installs it)")
def test_chromium_shows_callers_view_from_the_url(tmp_path, peer):
    from test_flame_chromium import Frames, dump_dom

    p = polyprof.read(PEER / SIMPLE)
    page = tmp_path / "simple.html"
    tree = flame_tree(p)
    page.write_text(to_html(tree, title="simple", other=flame_tree(p, inverted=True)), encoding="utf-8")
    normal = Frames(dump_dom(page, "#view=icicle"))
    inverted = Frames(dump_dom(page, "#view=icicle&tree=callers"))
    row1 = lambda seen: sorted(f["text"] for f in seen.frames if f["top"] == 18)  # noqa: E731
    assert row1(normal) == sorted(tree.names[i] for i in np.flatnonzero(tree.depth == 1))
    leaves = {r.name for r in top(p, Options(nodecount=0, nodefraction=0)).rows if r.flat}
    assert set(row1(inverted)) == leaves
    assert {f["text"] for f in inverted.frames} == {f["text"] for f in normal.frames}
