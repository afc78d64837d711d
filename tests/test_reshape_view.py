"""The top table of a hide or prune_from filter without its stacks remade (ReshapeView).

``polyprof serve`` answers the top table of a hide or prune_from filter from
the input's own callsites with the samples moved (:mod:`polyprof.analysis.reshape_view`)
instead of the remade stacks of ``filters.apply``. The table, and the
filters reported as unmatched, must be the ones of the remade stacks and of
``polyprof top --format json``: on real files of every format (the web
API against the command line), and on random profiles with inline frames,
recursion, lineless frames and negative values, at every granularity, with
the numpy and the compiled kernels.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from polyprof.analysis import filters
from polyprof.analysis.options import Options, parse_time_range
from polyprof.analysis.reshape_view import reshape_view
from polyprof.analysis.top import top
from polyprof.render.top import top_json
from test_filters_properties import REGEX, SETTINGS, profiles
from web_support import app, cli_json, get, input_path

KINDS = ["pprof", "perfetto", "simpleperf", "uma"]
GRANULARITIES = ["functions", "filefunctions", "files", "lines", "addresses", "modules"]


def _plain(answer: dict) -> dict:
    out = {k: v for k, v in answer.items() if k not in ("text", "header", "unmatched")}
    out["rows"] = [{k: v for k, v in r.items() if k != "text"} for r in out["rows"]]
    return out


def _q(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@contextlib.contextmanager
def _kernels(mode: str) -> Iterator[None]:
    saved = os.environ.get("POLYPROF_KERNELS")
    os.environ["POLYPROF_KERNELS"] = mode
    try:
        yield
    finally:
        if saved is None:
            del os.environ["POLYPROF_KERNELS"]
        else:
            os.environ["POLYPROF_KERNELS"] = saved


def _both(p, o: Options) -> tuple[tuple[dict, list[str]], tuple[dict, list[str]]]:  # noqa: ANN001
    """(table, unmatched) of ``o`` by the remade stacks and by the view (which must apply)."""
    kind = filters.name_tree_filter(o)
    assert kind is not None, o
    fr = filters.apply(p, o)
    view = reshape_view(filters.apply(p, filters.without(o, kind)), o)
    assert view is not None, o
    return (top_json(top(fr, o)), fr.unmatched()), (top_json(top(view, o)), view.result.unmatched())


@pytest.mark.parametrize("kind", KINDS)
def test_the_web_top_of_hide_and_prune_from_is_the_command_line_s(kind, tmp_path, cli):  # noqa: ANN001
    """``/api/top`` with a hide or prune_from (on the hottest function, the root's function, every
    function), alone or with a focus, ignore, sample type, granularity, noinlines or time range,
    is ``polyprof top --format json``, and its unmatched filters are ``filters.apply``'s."""
    import polyprof

    path = input_path(kind, tmp_path)
    a = app(path)
    p = polyprof.read(path)
    rows = get(a, "/api/top?nodecount=0&nodefraction=0")["rows"]
    assert rows
    hot = rows[0]["name"]
    root = next(r["name"] for r in rows if r["cum"] == max(x["cum"] for x in rows))
    types = [t["type"] for t in get(a, "/api/session")["inputs"][0]["sample_types"]]
    extras: list[dict[str, str]] = [{}, {"focus": re.escape(hot)}, {"ignore": re.escape(rows[-1]["name"])},
                                    {"granularity": "lines"}, {"granularity": "files", "noinlines": "true"},
                                    {"granularity": "modules"}]
    if len(types) > 1:
        extras.append({"sample_index": types[-1]})
    if p.samples.time is not None:
        times = p.samples.time[p.samples.time > 0]
        if times.size:
            extras.append({"time_range": f":{(int(times.max()) - int(times.min())) // 2}"})
    cases = [("hide", re.escape(hot)), ("prune_from", re.escape(hot.split("(")[0])), ("hide", "."),
             ("prune_from", re.escape(root.split("(")[0])), ("hide", "zzz_nothing")]
    for i, (name, regex) in enumerate(cases):
        for extra in (extras if i < 2 else extras[:2]):
            o = {name: regex, **extra}
            query = "&".join(f"{k}={_q(v)}" for k, v in o.items())
            flags = [x for k, v in o.items() for x in ([_flag(k)] if v == "true" else [_flag(k), v])]
            answer = get(a, f"/api/top?nodecount=0&nodefraction=0&{query}")
            expected = cli_json(cli, "top", path, "--nodecount", "0", "--nodefraction", "0", *flags)
            assert _plain(answer) == expected, (kind, o)
            parse = {"noinlines": lambda v: v == "true", "time_range": parse_time_range}
            options = Options(**{k: parse.get(k, str)(v) for k, v in o.items()})
            assert answer["unmatched"] == filters.apply(p, options).unmatched(), (kind, o)


@st.composite
def cases(draw):  # noqa: ANN001, ANN201
    """A random profile (some values negative: a diff) and the options of a hide or prune_from."""
    p = draw(profiles())
    if draw(st.booleans()) and len(p.samples):
        flip = np.array(draw(st.lists(st.booleans(), min_size=len(p.samples), max_size=len(p.samples))))
        p.samples.values[flip] *= -1
    kind = draw(st.sampled_from(["hide", "prune_from"]))
    regex = draw(st.one_of(REGEX, st.just(".")))
    extra = draw(st.fixed_dictionaries({}, optional={
        "focus": REGEX, "ignore": REGEX, "tagfocus": st.sampled_from(["worker=a", "bytes=1kb:"]),
        "tagignore": st.sampled_from(["worker=b", "bytes=:1kb"]),
        "sample_index": st.sampled_from(["samples", "cpu"]), "noinlines": st.booleans(),
        "granularity": st.sampled_from(GRANULARITIES), "mean": st.booleans(), "cum": st.booleans(),
        "relative_percentages": st.booleans(), "nodecount": st.integers(0, 4),
        "nodefraction": st.sampled_from([0.0, 0.1]), "edgefraction": st.sampled_from([0.0, 0.3])}))
    return p, Options(**{kind: regex}, **extra)


@SETTINGS
@given(cases(), st.sampled_from(["numpy", "compiled"]))
def test_the_view_s_table_is_the_remade_stacks_table(case, kernels):  # noqa: ANN001
    """On random profiles (inline lines, recursion, lineless frames, some negative values) the
    top table of a hide or prune_from, with other filters, granularities and report options,
    is the same from the view as from ``filters.apply``'s remade stacks, unmatched filters too;
    where the view declines (relative percentages of negative values, a hide with a tagignore)
    it says so."""
    p, o = case
    kind = filters.name_tree_filter(o)
    assert kind is not None
    with _kernels(kernels):
        selected = filters.apply(p, filters.without(o, kind))
        if (o.relative_percentages and bool((selected.profile.samples.values < 0).any())) or (
                kind == "hide" and o.tagignore):
            assert reshape_view(selected, o) is None
            return
        want, got = _both(p, o)
    assert got == want, o


def test_the_view_passes_over_vanished_frames_and_keeps_the_input_s_callsites() -> None:
    """A hide that empties frames leaves them in the view's callsites but lists no report node
    for them: flat moves to the caller, recursion through a hidden frame counts once, the
    inline mark follows the lines left, and samples left without frames are dropped."""
    from polyprof.model.builder import ProfileBuilder

    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    f = {name: b.function(name) for name in ("main", "f", "g", "h")}
    main, f_loc, g_loc = (b.location(-1, 0x10 * (i + 1), [(f[n], 1, 0)]) for i, n in enumerate(("main", "f", "g")))
    inl = b.location(-1, 0x100, [(f["h"], 2, 0), (f["g"], 3, 0), (f["f"], 4, 0)])  # h inlined in g in f
    b.add_sample(b.stack([g_loc, f_loc, main]), [5])           # main > f > g
    b.add_sample(b.stack([f_loc, g_loc, f_loc, main]), [7])    # main > f > g > f (recursion through g)
    b.add_sample(b.stack([inl, main]), [3])                    # main > f > g > h (inlined)
    b.add_sample(b.stack([g_loc]), [2])                        # only g: dropped by hide=^g$
    p = b.finish()
    o = Options(hide="^g$", nodecount=0, nodefraction=0, edgefraction=0)
    want, got = _both(p, o)
    assert got == want
    view = reshape_view(filters.apply(p, filters.without(o, "hide")), o)
    assert view is not None
    cs = view.result.profile.callsites
    assert cs.parent is p.callsites.parent and cs.location is p.callsites.location and view.vanished.sum() == 1
    rows = {r["name"]: r for r in got[0]["rows"]}
    assert (rows["f"]["flat"], rows["f"]["cum"], rows["main"]["cum"]) == (12, 15, 15)
    assert "g" not in rows and rows["h"]["inline"] == "(inline)"


def test_the_web_top_of_a_hide_makes_no_filtered_copy() -> None:
    """``/api/top`` of a hide or prune_from takes the view: the session's filtered copies hold
    the other filters' samples only; a filter the view declines (hide with show) makes one."""
    from helpers import REPO
    from polyprof.web.session import FILTER_FIELDS

    a = app(REPO / "examples" / "demo.pb.gz")
    for query in ("hide=runtime", "prune_from=main&focus=json", "hide=sha256&tagfocus=worker%3Dhasher"):
        get(a, f"/api/top?{query}")
    remade = [k for k in a.session._filtered.items
              if any(k[1][FILTER_FIELDS.index(name)] != "None" for name in ("hide", "prune_from", "show"))]
    assert remade == []
    get(a, "/api/top?hide=runtime&show=main")
    assert len([k for k in a.session._filtered.items if k[1][FILTER_FIELDS.index("show")] != "None"]) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_the_command_line_top_of_hide_and_prune_from_takes_the_view_and_the_same_table(kind, tmp_path, cli,  # noqa: ANN001
                                                                                     monkeypatch):  # noqa: ANN001
    """``polyprof top --hide/--prune-from`` (alone, with a focus, at another granularity) answers
    from the view (``common.load_for_top``), and prints what the remade stacks give: the same
    JSON and the same warnings as with the view turned off."""
    import polyprof.analysis.reshape_view as module

    path = input_path(kind, tmp_path)
    hot = cli_json(cli, "top", path, "--nodecount", "1")["rows"][0]["name"]
    made = []

    def counted(*args: object) -> object:
        view = real(*args)
        made.append(view is not None)
        return view

    real = module.reshape_view
    for flags in (["--hide", re.escape(hot)], ["--prune-from", re.escape(hot.split("(")[0])], ["--hide", "."],
                  ["--hide", "no such function"], ["--hide", re.escape(hot), "--focus", "."],
                  ["--prune-from", re.escape(hot.split("(")[0]), "--granularity", "lines"]):
        argv = ("top", str(path), *flags, "--format", "json")
        monkeypatch.setattr(module, "reshape_view", counted)
        got = cli(*argv)
        monkeypatch.setattr(module, "reshape_view", lambda *args: None)  # the remade stacks
        want = cli(*argv)
        assert (got.code, got.out, got.err) == (want.code, want.out, want.err), flags
    assert any(made), kind  # the view answered (it may decline a case, never all)
