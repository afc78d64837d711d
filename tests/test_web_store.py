"""``polyprof serve --store``: every view answers for the cohort the page picks, as ``polyprof store``."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

import polyprof.store  # noqa: E402
from store_support import write_fleet  # noqa: E402
from test_web_api import _plain  # noqa: E402
from web_support import HOST, cli_json, get  # noqa: E402

WHERE = "labels['version'] = '2'"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:  # noqa: ANN001
    root = tmp_path_factory.mktemp("webstore")
    write_fleet(root / "v1", 3, start_seed=0)
    write_fleet(root / "v2", 3, start_seed=10)
    polyprof.store.ingest(root / "s", [str(root / "v1")], labels={"version": "1"})
    polyprof.store.ingest(root / "s", [str(root / "v2")], labels={"version": "2"})
    return root / "s"


@pytest.fixture(scope="module")
def store_app(store_path: Path):  # noqa: ANN201
    from polyprof.web.app import App
    from polyprof.web.session import Session

    store = polyprof.store.open(store_path)
    yield App(Session([], store=store), [HOST], log=lambda text: None)
    store.close()


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def test_session_offers_the_stores_facets(store_app) -> None:  # noqa: ANN001
    s = get(store_app, "/api/session")
    assert s["store"]["facets"]["labels"]["version"] == {"1": 3, "2": 3}
    assert s["store"]["facets"]["profiles"] == 6
    assert {"where", "from", "to", "base_where"} <= set(s["options"])
    assert [t["type"] for t in s["inputs"][0]["sample_types"]] == ["cpu", "samples"]


def test_cohort_top_equals_polyprof_store_top(store_app, store_path: Path, cli) -> None:  # noqa: ANN001
    for where, flags in ((WHERE, ["--where", WHERE]), ("", []),
                         (WHERE, ["--where", WHERE, "--focus", "parse", "--sample-index", "cpu"])):
        extra = "&focus=parse&sample_index=cpu" if "--focus" in flags else ""
        answer = get(store_app, f"/api/top?nodecount=0&where={_q(where)}{extra}")
        expected = cli_json(cli, "store", "top", str(store_path), "--nodecount", "0", *flags)
        assert _plain(answer) == expected, flags
    one, both = (get(store_app, f"/api/top?nodecount=0&where={_q(w)}")["total"] for w in (WHERE, ""))
    assert 0 < one < both  # the cohort is a part of the store


def test_every_view_answers_for_the_cohort(store_app, store_path: Path, cli) -> None:  # noqa: ANN001
    w = f"where={_q(WHERE)}"
    flame = get(store_app, f"/api/flame?{w}")
    top = get(store_app, f"/api/top?{w}&nodecount=0")
    assert flame["graph_total"] == top["total"]
    store = str(store_path)
    assert get(store_app, f"/api/tree?{w}&nodecount=5") == cli_json(cli, "store", "tree", store, "--where", WHERE,
                                                                      "--nodecount", "5")
    fn = top["rows"][0]["name"]
    assert get(store_app, f"/api/sandwich?{w}&fn={_q(fn)}")["name"] == fn
    assert get(store_app, f"/api/labels?{w}")["keys"]
    base = "labels['version'] = '1'"
    d = get(store_app, f"/api/diff?{w}&base_where={_q(base)}&nodecount=0")
    expected = cli_json(cli, "store", "diff", store, "--where", WHERE, "--base-where", base, "--nodecount", "0")
    assert _plain(d) == expected
    coloured = get(store_app, f"/api/flame?{w}&base_where={_q(base)}")
    assert coloured["base_graph_total"] == d["base_total"] != d["new_total"]
    assert get(store_app, f"/api/timeline?{w}")["has_time"] is False  # a reduction keeps no sample times
    dl = get(store_app, f"/api/download?{w}&format=pprof&dry=1")
    assert dl["bytes"] > 0


@pytest.mark.parametrize("where", ["nonsense ===", "version = '1'; DROP TABLE profiles", "no_such_column = 1",
                                   "1 = (SELECT count(*) FROM samples)"])
def test_bad_or_hostile_where_is_a_message(store_app, where: str) -> None:  # noqa: ANN001
    for endpoint in ("top", "flame", "labels"):
        answer = get(store_app, f"/api/{endpoint}?where={_q(where)}", status=400)
        assert "--where" in answer["error"]


def test_time_window_selects_by_time(store_app) -> None:  # noqa: ANN001
    everything = get(store_app, "/api/top?nodecount=0")["total"]
    assert get(store_app, "/api/top?nodecount=0&from=2000-01-01")["total"] == everything
    assert "no profile" in get(store_app, "/api/top?nodecount=0&to=2000-01-01", status=400)["error"]
    assert "bad time" in get(store_app, "/api/top?from=yesterday", status=400)["error"]


def test_serve_store_process_starts_with_the_command_lines_cohort(store_path: Path, cli) -> None:  # noqa: ANN001
    import urllib.request

    from test_web_server import _start, _stop

    proc, url = _start("--store", str(store_path), "--where", WHERE, "--nodecount", "3", "--no-browser",
                       "--port", "0")
    try:
        with urllib.request.urlopen(url + "api/session") as resp:
            defaults = json.loads(resp.read())["defaults"]
        assert defaults == {"where": WHERE, "nodecount": "3"}  # the page starts there
        with urllib.request.urlopen(url + f"api/top?where={_q(WHERE)}&nodecount=3") as resp:
            served = _plain(json.loads(resp.read()))
    finally:
        code, _ = _stop(proc)
    assert code == 130
    assert served == cli_json(cli, "store", "top", str(store_path), "--where", WHERE, "--nodecount", "3")
    both = cli("serve", "--store", str(store_path), str(store_path), "--no-browser")
    assert both.code != 0 and "not both" in both.err and "Traceback" not in both.err
    neither = cli("serve", "--no-browser")
    assert neither.code != 0 and "nothing to serve" in neither.err
    stray = cli("serve", str(store_path), "--where", WHERE, "--no-browser")
    assert stray.code != 0 and "--store" in stray.err
