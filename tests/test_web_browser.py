"""The page in a real browser: Debian's Chromium driven by Playwright (never a downloaded browser).

One browser for the module; each test serves its inputs on a loopback port
and checks what a user sees: the top table's numbers are ``polyprof top``'s,
clicking a frame zooms, a search shows the right share, brushing the
timeline gives ``--time-range``'s top table, the diff colours a grown
function, a URL reopens its view, hostile names are text. Screenshots of the
views go to tests/output/web/ (not committed) for a reviewer to look at.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from pathlib import Path

import pytest

from helpers import REPO
from web_support import app, cli_json, get, input_path, served

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = REPO / "tests" / "output" / "web"
ROW = 18  # flame graph row height in the page (flamechart.js)

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not found (.ci/run installs chromium)")


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # 400 answers are deliberate (a bad regex is a message in the page); anything else is a problem
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
          if m.type == "error" and "status of 400" not in m.text else None)
    pg.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    yield pg
    context.close()
    assert not problems, problems


def _open(pg, url: str, query: str = "") -> None:
    pg.goto(url + (f"?{query}" if query else ""))
    _ready(pg)


def _until(pg, expression: str, timeout: float = 60.0) -> object:
    """Poll ``expression`` in the page until it is truthy (the page's CSP forbids
    Playwright's eval-based wait_for_function, which is as it should be)."""
    deadline = time.monotonic() + timeout
    while True:
        value = pg.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {expression}")
        time.sleep(0.05)


def _ready(pg) -> None:
    """The current view has rendered and no answer is awaited."""
    _until(pg, "document.body.dataset.ready !== undefined && document.body.dataset.busy === '0'"
               " && document.querySelectorAll('main').length === 1")
    time.sleep(0.05)
    _until(pg, "document.body.dataset.busy === '0'")


def _until_url(pg, key: str, value: str | None = None) -> None:
    _until(pg, f"(new URLSearchParams(location.search).get({json.dumps(key)}) ?? '!none') "
               + (f"=== {json.dumps(value)}" if value is not None else "!== '!none'"))


def _shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _state(pg) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(pg.url).query))


def _table_rows(pg, box: str) -> list[dict]:
    return pg.eval_on_selector_all(f"#{box} tbody tr", """rows => rows.map(r => ({
        flat: Number(r.dataset.flat), cum: Number(r.dataset.cum),
        cells: Array.from(r.cells).map(c => c.textContent)}))""")


def _cli_top_text(cli, path: Path, *flags: str) -> list[list[str]]:
    done = cli("top", path, "--nodecount", "0", "--nodefraction", "0", *flags)
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["flat", "flat%"]) + 1
    return [line.split(None, 5) for line in lines[start:]]


@pytest.mark.parametrize("kind", ["pprof", "perfetto", "simpleperf", "uma"])
def test_the_top_table_shows_polyprof_tops_numbers(page, kind, cli, tmp_path):
    path = input_path(kind, tmp_path)
    expected = cli_json(cli, "top", path, "--nodecount", "0", "--nodefraction", "0")["rows"]
    text = _cli_top_text(cli, path)
    with served(app(path)) as url:
        _open(page, url)  # the landing page: flame graph and top table together
        assert page.locator("canvas").first.get_attribute("data-frames")
        more = page.get_by_role("button", name=re.compile(r"^show all [\d,]+ rows$"))
        if more.count():  # long tables show 1000 rows until asked
            more.click()
        rows = _table_rows(page, "flame-top")
        _shot(page, f"landing-{kind}")
    assert [(r["flat"], r["cum"]) for r in rows] == [(r["flat"], r["cum"]) for r in expected]
    # every cell reads exactly as the text report prints it: flat, flat%, sum%, cum, cum%, name
    for shown, printed in zip(rows, text):
        assert shown["cells"][:5] == printed[:5]
        assert shown["cells"][5].startswith(printed[5].split(" (inline)")[0][:300])


def test_clicking_a_frame_zooms_and_escape_zooms_out(page):
    path = REPO / "examples" / "demo.pb.gz"
    a = app(path)
    full = get(a, "/api/flame?min_fraction=0&max_nodes=0")
    n = full["nodes"]
    names = [full["names"][i] for i in n["name"]]
    target = names.index("main.hashWork")
    with served(a) as url:
        _open(page, url)
        canvas = page.locator("canvas").first
        box = canvas.bounding_box()
        x = box["width"] * (n["start"][target] + n["width"][target] / 2) / n["width"][0]
        canvas.click(position={"x": x, "y": n["depth"][target] * ROW + ROW / 2})
        _until_url(page, "zoom", str(n["id"][target]))
        _ready(page)
        crumbs = page.locator("nav.crumbs").inner_text()
        assert "root" in crumbs and "main.hashWork" in crumbs
        _shot(page, "flame-zoomed")
        # keyboard: the graph takes focus, arrows move, Enter zooms, Escape zooms out
        canvas.focus()
        page.keyboard.press("Escape")
        _until(page, f"new URLSearchParams(location.search).get('zoom') !== '{n['id'][target]}'")
        _ready(page)
        page.go_back()  # back to the zoomed view
        _ready(page)
        assert _state(page)["zoom"] == str(n["id"][target])


def test_keyboard_moves_between_frames_and_describes_them(page):
    path = REPO / "examples" / "demo.pb.gz"
    with served(app(path)) as url:
        _open(page, url)
        page.locator("canvas").first.focus()
        page.keyboard.press("Home")
        page.keyboard.press("ArrowDown")
        _until(page, "document.querySelector('.details').textContent.includes('main.worker')")
        details = page.locator(".details").inner_text()
        assert "flat" in details and "cum" in details and "%" in details
        assert _state(page)["sel"]  # the selection is in the URL
        page.keyboard.press("Enter")
        _until_url(page, "zoom", _state(page)["sel"])


def test_search_highlights_the_matched_share(page):
    path = REPO / "examples" / "demo.pb.gz"
    a = app(path)
    expected = get(a, "/api/flame?search=" + urllib.parse.quote("^sort\\."))["search"]
    with served(a) as url:
        _open(page, url)
        box = page.get_by_label("search frames (regular expression)")
        box.fill("^sort\\.")
        box.press("Enter")
        _until(page, "document.querySelector('.share').textContent.includes('matches')")
        _ready(page)
        share = page.locator(".share").inner_text()
        assert share.startswith(f"matches {expected['share_text']} of the total ({expected['matched_text']})")
        assert _state(page)["q"] == "^sort\\."
        _shot(page, "flame-search")
        # a bad regular expression is a message in the page, not a failure
        box.fill("(")
        box.press("Enter")
        _until(page, "!document.getElementById('error').hidden")
        assert "bad regular expression search='('" in page.locator("#error").inner_text()


def test_brushing_the_timeline_gives_the_time_range_top_table(page, cli):
    path = input_path("simpleperf", None)
    with served(app(path)) as url:
        _open(page, url, "view=timeline")
        canvas = page.locator(".heat canvas")
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + 5)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.55, box["y"] + 30, steps=5)
        page.mouse.up()
        _until_url(page, "time_range")
        _ready(page)
        window = _state(page)["time_range"]
        assert re.fullmatch(r"\d+:\d+", window)
        rows = _table_rows(page, "tl-top")
        _shot(page, "timeline-brushed")
        every = ("--nodecount", "0", "--nodefraction", "0")
        expected = cli_json(cli, "top", path, *every, "--time-range", window)["rows"]
        whole = cli_json(cli, "top", path, *every)["rows"]
        assert [(r["flat"], r["cum"]) for r in rows] == [(r["flat"], r["cum"]) for r in expected]
        assert sum(r["flat"] for r in expected) < sum(r["flat"] for r in whole)
        # the thread table filters: a click sets tid
        page.locator(".timeline + p + .cols tbody tr button").first.click()
        _until_url(page, "tid")
        _ready(page)


def test_the_diff_colours_a_grown_function(page, tmp_path):
    path = REPO / "examples" / "demo.pb.gz"
    base = tmp_path / "base.pb.gz"
    base.write_bytes(get(app(path), "/api/download?format=pprof&ignore=" + urllib.parse.quote("^sort\\.Sort$")).body)
    a = app(path, base=base)
    s = get(a, "/api/flame?min_fraction=0&max_nodes=0")
    n = s["nodes"]
    names = [s["names"][i] for i in n["name"]]
    grown = names.index("sort.Sort")
    assert n["change"][grown] > 0
    with served(a) as url:
        _open(page, url)
        canvas = page.locator("canvas").first
        box = canvas.bounding_box()
        x = box["width"] * (n["start"][grown] + n["width"][grown] / 2) / n["width"][0]
        y = n["depth"][grown] * ROW + 3
        r, g, b, _ = page.evaluate(
            "([x, y]) => { const c = document.querySelector('canvas'); const k = window.devicePixelRatio || 1;"
            " return Array.from(c.getContext('2d').getImageData(Math.round(x * k), Math.round(y * k), 1, 1).data); }",
            [x, y])
        assert r > 200 and b < 120 and r > g, (r, g, b)  # orange: the share grew
        assert "orange: share grew" in page.locator(".legend").first.inner_text()
        _shot(page, "flame-diff")
        _open(page, url, "view=diff&normalize=total")
        grew = page.locator(".grow-box tbody tr").first.inner_text()
        assert "sort.Sort" in page.locator(".grow-box").inner_text() and "+" in grew
        _shot(page, "diff")


def test_a_url_reopens_the_same_view(page, browser):
    path = REPO / "examples" / "demo.pb.gz"
    query = "view=sandwich&fn=sort.partition&focus=sort&granularity=functions&sample_index=samples"
    with served(app(path)) as url:
        _open(page, url, query)
        first = page.locator("main").inner_text()
        assert "sort.partition" in first and page.locator("#f-focus").input_value() == "sort"
        assert page.locator("#sample_index").input_value() == "samples"
        _shot(page, "sandwich")
        other = browser.new_page()
        _open(other, url, query)
        assert other.locator("main").inner_text() == first
        other.close()
        page.locator("#tab-tree").click()
        _ready(page)
        assert _state(page)["view"] == "tree" and _state(page)["focus"] == "sort"
        page.go_back()
        _ready(page)
        assert page.locator("main").inner_text() == first


def test_the_call_tree_expands_and_remembers(page):
    path = REPO / "examples" / "demo.pb.gz"
    with served(app(path)) as url:
        _open(page, url, "view=tree")
        first = page.locator("tr.tree-row").first
        first.focus()
        page.keyboard.press("ArrowRight")
        _until_url(page, "open")
        _ready(page)
        assert page.locator("tr.tree-row").count() > 1
        opened = _state(page)["open"]
        _shot(page, "tree")
        _open(page, url, f"view=tree&open={opened}")
        assert page.locator("tr.tree-row[aria-expanded=true]").count() == 1


def test_hostile_names_render_as_text(page):
    from viewer_profiles import HOSTILE

    from polyprof.model.builder import ProfileBuilder

    long_name = "L" * 10_000_000
    names = [*HOSTILE, "\u202eexe.tab\u202c right-to-left", long_name]
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    main = b.frame("main")
    for k, name in enumerate(names):
        b.add_sample(b.stack([b.frame(name), main]), [1000 * (k + 1)])
    with served(app(("hostile", b.finish()))) as url:
        _open(page, url, "view=top")
        cells = page.eval_on_selector_all("#top-table tbody td.name", "cells => cells.map(c => c.textContent)")
        assert "<script>alert(1)</script>" in cells and "</script><img src=x onerror=alert(2)>" in cells
        assert "\u202eexe.tab\u202c right-to-left" in cells
        assert any(c.startswith("L" * 400 + "… (10,000,000 characters)") for c in cells)
        assert page.evaluate("document.querySelectorAll('img, script:not([src])').length") == 0
        _shot(page, "hostile-top")
        _open(page, url, "view=flame&q=script")
        _open(page, url, "view=sandwich&fn=" + urllib.parse.quote("<script>alert(1)</script>"))
        assert "<script>alert(1)</script>" in page.locator("main h2").first.inner_text()


def test_every_view_renders(page, tmp_path):
    path = input_path("simpleperf", tmp_path)
    a = app(path, base=path)
    fn = get(a, "/api/top?nodecount=1")["rows"][0]["name"]
    with served(a) as url:  # one server and one page for all of them
        for view in ("flame", "top", "sandwich", "tree", "timeline", "labels", "diff"):
            _open(page, url, f"view={view}&fn={urllib.parse.quote(fn)}")
            assert page.locator("#error").is_hidden(), (view, page.locator("#error").inner_text())
            assert page.locator(f"#tab-{view}").get_attribute("aria-selected") == "true", view
            _shot(page, f"view-{view}")


def test_labels_focus_a_value_and_split_the_flame_graph(page):
    path = REPO / "examples" / "demo.pb.gz"
    with served(app(path)) as url:
        _open(page, url, "view=labels")
        assert "hasher" in page.locator("main").inner_text() and "50.52%" in page.locator("main").inner_text()
        _shot(page, "labels")
        page.get_by_role("button", name="focus on worker=hasher").click()
        _until_url(page, "tagfocus", "worker=^hasher$")
        _ready(page)
        assert [k for k in page.locator("main section h2").all_inner_texts() if k.startswith("worker")]
        page.get_by_role("button", name="group the flame graph by worker").click()
        _until_url(page, "tagroot", "worker")
        _ready(page)
        assert _state(page)["view"] == "flame"
        page.locator("canvas").first.focus()
        page.keyboard.press("Home")
        page.keyboard.press("ArrowDown")
        _until(page, "document.querySelector('.details').textContent.includes('hasher')")
        _shot(page, "flame-grouped")


def test_the_inverted_flame_graph_puts_leaf_functions_first(page):
    path = REPO / "examples" / "demo.pb.gz"
    with served(app(path)) as url:
        _open(page, url)
        page.get_by_label("inverted (callers of leaf functions)").check()
        _until_url(page, "inv", "1")
        _ready(page)
        page.locator("canvas").first.focus()
        page.keyboard.press("Home")
        page.keyboard.press("ArrowDown")
        _until(page, "document.querySelector('.details').textContent.includes('crypto/sha256.block')")
        _shot(page, "flame-inverted")


def test_store_cohort_picker_drives_the_top_table(page, cli, tmp_path):
    """``serve --store``: choosing a label facet, then typing a where, shows the store's top for
    that cohort; a hostile where is a message in the page, the view stays."""
    pytest.importorskip("duckdb")
    import polyprof.store
    from polyprof.web.app import App
    from polyprof.web.session import Session
    from store_support import write_fleet
    from web_support import HOST

    for version, seed in (("1", 0), ("2", 10)):
        polyprof.store.ingest(tmp_path / "s", [str(p) for p in write_fleet(tmp_path / version, 2, start_seed=seed)],
                              labels={"version": version})
    store_path = str(tmp_path / "s")

    def store_top(*flags: str) -> list[tuple[int, int]]:
        rows = cli_json(cli, "store", "top", store_path, "--nodecount", "0", *flags)["rows"]
        return [(r["flat"], r["cum"]) for r in rows]

    with polyprof.store.open(store_path) as store, served(App(Session([], store=store), [HOST],
                                                               log=lambda text: None)) as url:
        _open(page, url, "view=top")
        assert [(r["flat"], r["cum"]) for r in _table_rows(page, "top-table")] == store_top()
        page.select_option("select[data-facet='label:version']", "2")
        _until_url(page, "where", "labels['version'] = '2'")
        _ready(page)
        assert [(r["flat"], r["cum"]) for r in _table_rows(page, "top-table")] == \
            store_top("--where", "labels['version'] = '2'")
        _shot(page, "store-cohort")
        page.fill("#c-where", "labels['version'] = '1' AND n_samples > 0")
        page.click("#cohort button[type=submit]")
        _ready(page)
        assert [(r["flat"], r["cum"]) for r in _table_rows(page, "top-table")] == \
            store_top("--where", "labels['version'] = '1' AND n_samples > 0")
        page.fill("#c-where", "1 = (SELECT count(*) FROM samples); --<script>")
        page.click("#cohort button[type=submit]")
        _ready(page)
        error = page.locator("#error")
        assert error.is_visible() and "--where" in error.text_content()
        assert page.locator("script:not([src])").count() == 0


def test_nodecount_trims_the_top_table_as_the_cli(page, cli, tmp_path):
    """``serve --nodecount 3`` starts the page at ``nodecount=3``: the top table is ``top --nodecount 3``'s."""
    path = input_path("pprof", tmp_path)
    expected = cli_json(cli, "top", path, "--nodecount", "3", "--nodefraction", "0")["rows"]
    with served(app(path)) as url:
        _open(page, url, "view=top&nodecount=3")
        rows = _table_rows(page, "top-table")
    assert [(r["flat"], r["cum"]) for r in rows] == [(r["flat"], r["cum"]) for r in expected] and len(rows) == 3
