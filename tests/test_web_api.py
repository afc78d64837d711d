"""The JSON API of ``polyprof serve``, in-process, against the command line on real files of every format.

``top``, ``tree``, ``peek`` and ``diff`` answers must be exactly what
``polyprof VERB --format json`` prints with the same options (the page's
extra display text aside); the flame-graph views must keep every weight;
the server must refuse what it should refuse.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import polyprof
from polyprof.analysis.flame import flame_tree
from helpers import REPO
from web_support import app, cli_json, get, input_path

KINDS = ["pprof", "perfetto", "simpleperf", "uma"]
DISPLAY = ("text", "header", "unmatched", "totals_text")


def _plain(answer: dict) -> dict:
    """An API answer without the display text the page adds."""
    out = {k: v for k, v in answer.items() if k not in DISPLAY}
    for key in ("rows", "functions", "stacks"):
        if key in out:
            out[key] = [{k: v for k, v in r.items() if k != "text"} for r in out[key]]
    return out


@pytest.fixture(params=KINDS)
def kind_path(request, tmp_path):
    return request.param, input_path(request.param, tmp_path)


def test_top_equals_the_command_line(kind_path, cli):
    kind, path = kind_path
    a = app(path)
    types = [t["type"] for t in get(a, "/api/session")["inputs"][0]["sample_types"]]
    for sample_type in [None, *types[1:2]]:
        query = "nodecount=0" + (f"&sample_index={sample_type}" if sample_type else "")
        flags = ["--nodecount", "0"] + (["--sample-index", sample_type] if sample_type else [])
        answer = get(a, f"/api/top?{query}")
        assert _plain(answer) == cli_json(cli, "top", path, *flags), (kind, sample_type)
        assert answer["rows"], kind
        first = answer["rows"][0]
        assert first["text"]["flat_percent"].endswith("%")


def test_tree_and_peek_equal_the_command_line(kind_path, cli):
    kind, path = kind_path
    a = app(path)
    assert get(a, "/api/tree?nodecount=8") == cli_json(cli, "tree", path, "--nodecount", "8")
    name = get(a, "/api/top?nodecount=1")["rows"][0]["name"]
    regex = "^" + re.escape(name) + "$"
    answer = get(a, "/api/peek?regex=" + _q(regex))
    assert answer == cli_json(cli, "peek", path, regex)
    assert [n["name"] for n in answer["nodes"]] == [name]


def _q(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def test_diff_equals_the_command_line(kind_path, cli, tmp_path):
    kind, path = kind_path
    a = app(path)
    # the base: the same profile without its hottest function (or, unsymbolized, its module),
    # downloaded through the API
    hot, ignore = next((r, rx) for r in get(a, "/api/top?nodecount=10")["rows"]
                       for rx in ("^" + re.escape(r["name"]) + "$", re.escape(r["module"]) + "$")
                       if not get(a, "/api/top?ignore=" + _q(rx))["unmatched"])
    base = tmp_path / "base.pb.gz"
    base.write_bytes(get(a, f"/api/download?format=pprof&ignore={_q(ignore)}").body)
    with_base = app(path, base=base)
    for normalize in ("none", "total"):
        answer = get(with_base, f"/api/diff?normalize={normalize}&by=both&nodecount=0")
        expected = cli_json(cli, "diff", base, path, "--normalize", normalize, "--by", "both", "--nodecount", "0")
        assert _plain(answer) == expected, (kind, normalize)
    # the defaults are the command line's too (25 rows)
    assert _plain(get(with_base, "/api/diff")) == cli_json(cli, "diff", base, path)
    grown = [f for f in answer["functions"] if f["name"] == hot["name"]]
    assert grown and grown[0]["delta_flat"] > 0 and grown[0]["text"]["delta_flat"].startswith("+")


def test_filters_as_parameters_equal_the_flags(cli):
    path = input_path("simpleperf", None)
    a = app(path)
    cases = [("focus=art%3A%3A", ["--focus", "art::"]),
             ("thread=Jit", ["--thread", "Jit"]),
             ("time_range=200ms%3A1.2s", ["--time-range", "200ms:1.2s"]),
             ("tid=7657&hide=%5Elib", ["--tid", "7657", "--hide", "^lib"])]
    for query, flags in cases:
        assert _plain(get(a, f"/api/top?nodecount=0&{query}")) == cli_json(cli, "top", path, "--nodecount", "0", *flags), query


def _slice_invariants(s: dict) -> None:
    n = s["nodes"]
    kids: dict[int, int] = {}
    for i, parent in enumerate(n["parent"]):
        if parent >= 0:
            kids[parent] = kids.get(parent, 0) + n["width"][i]
            assert n["depth"][i] == n["depth"][parent] + 1
            assert n["start"][parent] <= n["start"][i] <= n["start"][parent] + n["width"][parent]
    for i in range(len(n["id"])):
        # every weight is somewhere: own self, kept children, or merged (hidden) children
        assert n["width"][i] == max(n["self"][i], 0) + kids.get(i, 0) + n["hidden"][i]


def test_flame_slices_keep_every_weight(kind_path):
    kind, path = kind_path
    a = app(path)
    p = polyprof.read(path)
    full = flame_tree(p, max_nodes=0, min_fraction=0)
    whole = get(a, "/api/flame?min_fraction=0&max_nodes=0")
    assert whole["nodes"]["total"] == full.total.tolist() and whole["merged"] == 0
    assert [whole["names"][i] for i in whole["nodes"]["name"]] == full.names
    coarse = get(a, "/api/flame?min_fraction=0.05")
    _slice_invariants(coarse)
    assert coarse["merged"] == len(full) - len(coarse["nodes"]["id"])
    assert coarse["nodes"]["width"][0] == full.root_total
    # zooming into a node shows its subtree, narrow nodes included, starting at 0
    child = int(np.argmax(np.where(full.parent == 0, full.total, -1)))
    zoomed = get(a, f"/api/flame?root={child}&min_fraction=0&max_nodes=0")
    _slice_invariants(zoomed)
    assert zoomed["root"] == child and zoomed["nodes"]["start"][0] == 0 and zoomed["nodes"]["depth"][0] == 0
    assert [x["id"] for x in zoomed["path"]] == [0]
    assert zoomed["nodes"]["width"][0] == int(full.width[child])


def test_search_share_equals_the_focus_filter(kind_path):
    kind, path = kind_path
    a = app(path)
    for row in get(a, "/api/top?nodecount=3")["rows"]:
        regex = _q("^" + re.escape(row["name"]) + "$")
        found = get(a, f"/api/flame?search={regex}")["search"]
        assert found["matched"] == row["cum"], (kind, row["name"])
        focused = get(a, f"/api/top?nodecount=0&nodefraction=0&focus={regex}")
        if not focused["unmatched"]:  # pprof's focus sees function names; unsymbolized frames have none
            assert sum(r["flat"] for r in focused["rows"]) == row["cum"], (kind, row["name"])
        assert found["share_text"] == row["text"]["cum_percent"]


def test_sandwich_numbers_equal_top(kind_path):
    kind, path = kind_path
    a = app(path)
    for row in get(a, "/api/top?nodecount=5")["rows"]:
        s = get(a, "/api/sandwich?fn=" + _q(row["name"]))
        assert (s["flat"], s["cum"]) == (row["flat"], row["cum"]), (kind, row["name"])
        for side in ("callers", "callees"):
            n = s[side]["nodes"]
            assert s[side]["names"][n["name"][1]] == row["name"]  # the function is the root's one child
            assert n["total"][0] == n["total"][1] == row["cum"]
            _slice_invariants(s[side])
        assert sum(c["weight"] for c in s["callees_list"]) <= row["cum"] - row["flat"] + sum(
            c["weight"] for c in s["callees_list"] if c["name"] == row["name"])
    bad = get(a, "/api/sandwich?fn=no.such.function", 400)
    assert "no frame named" in bad["error"]


def test_calltree_children_are_the_flame_graph_children(kind_path):
    kind, path = kind_path
    a = app(path)
    full = flame_tree(polyprof.read(path), max_nodes=0, min_fraction=0)
    root = get(a, "/api/calltree?id=0")
    kids = np.flatnonzero(full.parent == 0)
    assert sorted(r["id"] for r in root["rows"]) == kids.tolist()
    totals = [r["total"] for r in root["rows"]]
    assert totals == sorted(totals, key=abs, reverse=True)
    assert root["node"]["total"] == full.root_total


def test_timeline_adds_up_and_its_windows_are_time_ranges(cli):
    path = input_path("simpleperf", None)
    a = app(path)
    t = get(a, "/api/timeline?rows=0&bins=50")
    top = get(a, "/api/top?nodecount=0&nodefraction=0")
    assert t["has_time"] and t["untimed"] == 0
    assert sum(map(sum, t["counts"])) == sum(th["weight"] for th in t["threads"]) == top["total"]
    assert [sum(row) for row in t["counts"]] == [th["weight"] for th in t["threads"]]
    from polyprof.analysis.timeline import timeline  # the page bins the server's cached samples as this does
    assert timeline(polyprof.read(path), bins=50).counts.tolist() == t["counts"]
    n = len(t["counts"][0])
    for b in (0, n - 1):  # the first and last bins (edges of the binary searches) are time_range windows too
        lo, hi = t["start"] + b * t["bin_nanos"], t["start"] + (b + 1) * t["bin_nanos"]
        window = get(a, f"/api/top?nodecount=0&nodefraction=0&time_range={lo}%3A{hi}")
        assert sum(r["flat"] for r in window["rows"]) == sum(row[b] for row in t["counts"])
    # the weight of bins 10..19 is what time_range selects for that window
    lo, hi = t["start"] + 10 * t["bin_nanos"], t["start"] + 20 * t["bin_nanos"]
    window = get(a, f"/api/top?nodecount=0&nodefraction=0&time_range={lo}%3A{hi}")
    assert sum(r["flat"] for r in window["rows"]) == sum(sum(row[10:20]) for row in t["counts"])
    assert _plain(window) == cli_json(cli, "top", path, "--nodecount", "0", "--nodefraction", "0",
                                      "--time-range", f"{lo}:{hi}")
    drawn = get(a, f"/api/timeline?time_range={lo}%3A{hi}")  # the axis stays whole, the window is drawn
    assert drawn["window"] == [lo, hi] and drawn["start"] == t["start"]
    by_process = get(a, "/api/timeline?group=process")
    assert sum(p["weight"] for p in by_process["threads"]) == top["total"]


def test_timeline_bins_do_not_depend_on_sample_order():
    """Samples are grouped and sorted by time once; shuffled samples (a thread's out of time
    order) bin exactly as the original order does."""
    from polyprof.analysis.timeline import timeline
    from polyprof.analysis.stacks import with_samples
    from polyprof.model.profile import SampleTable

    p = polyprof.read(input_path("simpleperf", None))
    s, idx = p.samples, np.random.default_rng(1).permutation(len(p.samples))
    optional = {k: None if getattr(s, k) is None else getattr(s, k)[idx] for k in s.OPTIONAL_COLUMNS}
    shuffled = with_samples(p, SampleTable(stack=s.stack[idx], values=s.values[idx], labelset=s.labelset[idx],
                                           **optional))
    for bins in (1, 37, 400):
        want, got = timeline(p, bins=bins), timeline(shuffled, bins=bins)
        assert got.counts.tolist() == want.counts.tolist() and got.counts.sum() == want.total


def test_download_is_the_filtered_profile(tmp_path):
    path = input_path("pprof", tmp_path)
    a = app(path)
    focused = get(a, "/api/top?nodecount=0&nodefraction=0&focus=sort")
    got = get(a, "/api/download?format=pprof&focus=sort")
    assert 'filename="demo.filtered.pb.gz"' in got.header("Content-Disposition")
    again = polyprof.read(got.body)
    assert again.totals()[again.sample_index(None)] == sum(r["flat"] for r in focused["rows"])
    dry = get(a, "/api/download?format=folded&dry=1&focus=sort")
    assert dry["format"] == "folded" and dry["bytes"] > 0 and isinstance(dry["not_kept"], list)
    bad = get(a, "/api/download?format=nonsense", 400)
    assert "writable" in bad["error"]


def test_several_inputs_are_picked_by_index(tmp_path):
    pprof, uma = input_path("pprof", tmp_path), input_path("uma", tmp_path)
    a = app(pprof, uma)
    inputs = get(a, "/api/session")["inputs"]
    assert [x["format"] for x in inputs] == ["pprof", "chromium"]
    assert get(a, "/api/top?p=1")["total"] != get(a, "/api/top?p=0")["total"]
    assert "no input p=2" in get(a, "/api/top?p=2", 400)["error"]


# ---------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def demo_app():
    from helpers import REPO

    return app(REPO / "examples" / "demo.pb.gz")


@pytest.mark.parametrize("host", ["evil.example:8080", "127.0.0.1.evil.example:8080", "", "127.0.0.1:9999",
                                  "192.168.1.10:8080"])
def test_a_host_header_naming_another_server_is_refused(demo_app, host):
    for url in ("/", "/api/top", "/static/main.js"):
        resp = demo_app.handle("GET", url, {"Host": host} if host else {})
        assert resp.status == 403 and b"DNS rebinding" in resp.body


def test_cross_origin_requests_are_refused_and_nothing_allows_them(demo_app):
    resp = demo_app.handle("GET", "/api/top", {"Host": "127.0.0.1:8080", "Origin": "http://evil.example"})
    assert resp.status == 403
    for url in ("/", "/api/top", "/api/session", "/static/style.css", "/api/download?format=pprof"):
        resp = demo_app.handle("GET", url, {"Host": "127.0.0.1:8080", "Origin": "http://127.0.0.1:8080"})
        assert resp.status == 200
        names = {k.lower() for k, _ in resp.headers}
        assert not any(n.startswith("access-control-") for n in names)
        csp = resp.header("Content-Security-Policy")
        assert "default-src 'none'" in csp and "unsafe" not in csp and "http" not in csp
        assert resp.header("X-Content-Type-Options") == "nosniff"


def test_only_known_assets_and_get_are_served(demo_app):
    h = {"Host": "127.0.0.1:8080"}
    for url in ("/static/../app.py", "/static/%2e%2e/app.py", "/static//etc/passwd", "/../../etc/passwd",
                "/static/", "/static/app.py", "/etc/passwd"):
        assert demo_app.handle("GET", url, h).status == 404, url
    assert demo_app.handle("POST", "/api/top", h).status == 405
    assert demo_app.handle("HEAD", "/", h).status == 200


@pytest.mark.parametrize("query, fragment", [
    ("focus=(", "bad regular expression focus="), ("search=[", "bad regular expression search="),
    ("nodecount=ten", "nodecount='ten': expected an integer"), ("pid=1,x", "pid='x'"),
    ("granularity=bogus", "unknown granularity="), ("time_range=5", "time_range takes START:END"),
    ("bogus=1", "unknown parameter(s) bogus"), ("root=-3", "no flame graph node root=-3"),
    ("sample_index=nope", "nope"), ("tagfocus=k%3D(", "tagfocus"), ("inverted=maybe", "expected 1 or 0"),
])
def test_bad_parameters_are_a_message_not_a_failure(demo_app, query, fragment):
    endpoint = "flame" if query.split("=")[0] in ("search", "root", "inverted") else "top"
    resp = demo_app.handle("GET", f"/api/{endpoint}?{query}", {"Host": "127.0.0.1:8080"})
    assert resp.status == 400, (query, resp.body)
    assert fragment in json.loads(resp.body)["error"]


def test_too_many_parameters_are_refused(demo_app):
    resp = demo_app.handle("GET", "/api/top?" + "&".join(f"x{i}=1" for i in range(300)), {"Host": "127.0.0.1:8080"})
    assert resp.status == 400


def test_hostile_names_travel_as_exact_ascii_json():
    from viewer_profiles import HOSTILE

    from polyprof.model.builder import ProfileBuilder

    names = [*HOSTILE, "\u202eexe.tab\u202c right-to-left", "\u200fRLM\u200e", "N" * 10_000_000]
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    main = b.frame("main")
    for k, name in enumerate(names):
        b.add_sample(b.stack([b.frame(name), main]), [1000 * (k + 1)])
    a = app(("hostile", b.finish()))
    resp = a.handle("GET", "/api/top?nodecount=0", {"Host": "127.0.0.1:8080"})
    assert resp.status == 200
    resp.body.decode("ascii")  # every non-ASCII character (and U+2028) is escaped
    assert b"<" not in resp.body and b"\xe2\x80\xa8" not in resp.body
    got = {r["name"] for r in json.loads(resp.body)["rows"]}
    assert names[-1] in got and "<script>alert(1)</script>" in got
    flame = get(a, "/api/flame?search=" + _q("script"))
    assert flame["search"]["names"] >= 1 and names[-1] in flame["names"]


def test_labels_equal_polyprof_tags_and_select_their_values(cli):
    from helpers import REPO

    path = REPO / "examples" / "demo.pb.gz"
    a = app(path)
    answer = get(a, "/api/labels")
    expected = cli_json(cli, "tags", path)
    assert [{**k, "values": [{f: v[f] for f in v if f not in ("text", "percent", "focus")} for v in k["values"]]}
            for k in answer["keys"] if k.pop("text")] == expected["keys"]
    worker = next(k for k in answer["keys"] if k["key"] == "worker")
    for value in worker["values"]:
        focused = get(a, "/api/top?nodecount=0&nodefraction=0&tagfocus=" + _q(value["focus"]))
        assert sum(r["flat"] for r in focused["rows"]) == value["weight"]
        ignored = get(a, "/api/top?nodecount=0&nodefraction=0&tagignore=" + _q(value["focus"]))
        assert sum(r["flat"] for r in ignored["rows"]) == ignored["total"] - value["weight"]  # unlabelled stay
    # group by a key: one synthetic root child per value, as wide as the value's weight
    grouped = get(a, "/api/flame?tagroot=worker&min_fraction=0")
    n = grouped["nodes"]
    children = {grouped["names"][n["name"][i]]: n["total"][i] for i, par in enumerate(n["parent"]) if par == 0}
    unlabelled = children.pop("<unknown>", 0)  # pprof's frame for samples without the label
    assert children == {v["value"]: v["weight"] for v in worker["values"]}
    assert unlabelled == n["total"][0] - worker["total"]


def test_inverted_flame_graph_is_the_analysis(kind_path):
    kind, path = kind_path
    a = app(path)
    full = flame_tree(polyprof.read(path), max_nodes=0, min_fraction=0, inverted=True)
    answer = get(a, "/api/flame?inverted=1&min_fraction=0&max_nodes=0")
    assert answer["inverted"] and answer["nodes"]["total"] == full.total.tolist()
    assert [answer["names"][i] for i in answer["nodes"]["name"]] == full.names
    tree = get(a, "/api/calltree?inverted=1&id=0")
    assert sorted(r["id"] for r in tree["rows"]) == np.flatnonzero(full.parent == 0).tolist()


def test_the_page_is_self_contained():
    """Every asset is package data and names nothing remote (the CSP would block it anyway)."""
    from importlib.resources import files

    static = files("polyprof.web") / "static"
    names = sorted(p.name for p in static.iterdir())
    assert {"index.html", "main.js", "style.css", "flamechart.js"} <= set(names)
    for name in names:
        text = (static / name).read_text()
        assert not re.search(r"https?://|//cdn", text), name
        if name.endswith(".css"):
            assert not re.search(r"@import|url\(", text), name
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text, name
    index = (static / "index.html").read_text()
    for ref in re.findall(r'(?:src|href)="/static/([^"]+)"', index):
        assert ref in names


def test_the_inverted_graph_has_one_resolution_with_or_without_the_compiled_kernels(monkeypatch):
    """The inverted graph is made from the cached graph by a compiled kernel, or (no numba,
    negative weights) built from the samples: both at the session's resolution (coarse here,
    so that it prunes), with the same nodes and numbers."""
    from polyprof.analysis.options import Options
    from polyprof.model import _tree_compiled, tree
    from polyprof.web import session as web_session

    def paths(g) -> dict:
        names, out, path = list(g.names), {}, {}
        for i, p in enumerate(g.parent.tolist()):
            path[i] = (*path[p], names[i]) if p >= 0 else ()
            out[path[i]] = (int(g.self[i]), int(g.total[i]), int(g.width[i]))
        return out

    monkeypatch.setattr(web_session, "INVERTED_RESOLUTION", 0.02)
    profile = polyprof.read(REPO / "examples" / "demo.pb.gz")
    graphs = {}
    for mode, module in (("compiled", _tree_compiled), ("numpy", False)):
        monkeypatch.setenv("POLYPROF_KERNELS", mode)
        monkeypatch.setattr(tree, "_compiled", module)
        s = web_session.Session([web_session.Input("demo", "demo.pb.gz", profile)])
        graphs[mode] = s.flame(0, Options(), inverted=True).tree
    full = flame_tree(profile, max_nodes=0, min_fraction=0, inverted=True)
    assert 1 < len(graphs["numpy"]) < len(full)  # pruned at the resolution, by both routes
    assert paths(graphs["numpy"]) == paths(graphs["compiled"])
