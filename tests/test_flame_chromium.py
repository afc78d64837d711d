"""A real headless Chromium opens the HTML flame graph; the test reads what it rendered.

``chromium --dump-dom`` prints the DOM after the page's script ran, so the
frames (``div.f``) it drew, their text, widths and classes are what a user
would see. The view state in the URL fragment (``#q=…&zoom=…&view=icicle``)
drives search, zoom and the icicle layout without clicking.
Skips (with the reason) when Debian's chromium is not installed; CI has it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

import polyprof
from polyprof.analysis.flame import flame_tree
from polyprof.render.flame import clean, to_html

from viewer_profiles import HOSTILE, hostile_profile

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian package 'chromium'); "
                                                         "CI installs it")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,800"]
SIMPLE = "jlfwong__speedscope/sample/profiles/pprof/simple.prof"


def dump_dom(page: Path, fragment: str = "") -> str:
    with tempfile.TemporaryDirectory() as profile_dir:
        run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile_dir}", "--dump-dom",
                              page.as_uri() + fragment], capture_output=True, timeout=90, check=False)
    dom = run.stdout.decode("utf-8", errors="replace")
    assert "<html" in dom, run.stderr.decode(errors="replace")[-2000:]
    return dom


class Frames(HTMLParser):
    """The ``div.f`` frames of a dumped DOM, and every tag seen."""

    def __init__(self, dom: str) -> None:
        super().__init__(convert_charrefs=True)
        self.frames: list[dict] = []
        self.tags: list[str] = []
        self.text: dict[str, str] = {}
        self._cur: dict | None = None
        self._id: str | None = None
        self.feed(dom)

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        a = dict(attrs)
        self.tags.append(tag)
        self._id = a.get("id")
        if tag == "div" and "f" in (a.get("class") or "").split():
            style = dict(re.findall(r"([\w-]+):\s*([^;]+)", a.get("style", "")))
            self._cur = {"classes": a["class"].split(), "i": int(a["data-i"]), "text": "",
                         "width": float(style["width"].removesuffix("px")),
                         "top": float(style["top"].removesuffix("px"))}
            self.frames.append(self._cur)

    def handle_data(self, data):  # noqa: ANN001
        if self._cur is not None:
            self._cur["text"] += data
        elif self._id:
            self.text[self._id] = self.text.get(self._id, "") + data

    def handle_endtag(self, tag):  # noqa: ANN001
        self._cur = None
        self._id = None


@pytest.fixture(scope="module")
def simple_page(tmp_path_factory) -> tuple[Path, object]:
    from helpers import PEER

    if not (PEER / SIMPLE).exists():
        pytest.skip(f"peer data not found at {PEER}")
    tree = flame_tree(polyprof.read(PEER / SIMPLE))
    page = tmp_path_factory.mktemp("flame") / "simple.html"
    page.write_text(to_html(tree, title="simple.prof"), encoding="utf-8")
    return page, tree


def test_chromium_renders_every_frame_of_simple_prof(simple_page, peer):
    page, tree = simple_page
    seen = Frames(dump_dom(page))
    snapshot = (peer / "jlfwong__speedscope/src/import/__snapshots__/pprof.test.ts.snap").read_text()
    functions = set(re.findall(r'^      "name": "([^"]+)",$', snapshot, flags=re.M))  # Frame entries
    assert len(functions) == 25  # the frames of speedscope's import of the same file
    assert {f["text"] for f in seen.frames} == functions | {"root"}
    assert len(seen.frames) == len(tree)  # every node is at least half a pixel wide here
    width = {f["text"]: f["width"] for f in seen.frames if f["text"] in ("root", "main.delta")}
    assert width["main.delta"] / width["root"] == pytest.approx(580 / 1500, abs=0.002)
    assert seen.text["title"] == "simple.prof"


def test_chromium_search_zoom_and_icicle_from_the_url(simple_page):
    page, tree = simple_page
    delta = tree.names.index("main.delta")
    seen = Frames(dump_dom(page, f"#q=alpha&zoom={delta}&view=icicle"))
    drawn = [(f["text"], "anc" in f["classes"], "m" in f["classes"]) for f in seen.frames]
    assert drawn == [("root", True, False), ("runtime.main", True, False), ("main.main", True, False),
                     ("main.delta", False, False), ("main.alpha", False, True), ("main.beta", False, False)]
    tops = [f["top"] for f in seen.frames]
    assert tops == sorted(tops) and tops[0] == 0  # icicle: the root on top
    assert seen.text["matched"] == "matched 480ms (32.00%)"  # main.alpha: 260ms + 220ms of 1.5s
    zoomed = {f["text"]: f["width"] for f in seen.frames}
    assert zoomed["main.delta"] == zoomed["root"]  # the zoomed frame fills the width


def test_chromium_shows_hostile_names_as_text_only(tmp_path):
    page = tmp_path / "hostile.html"
    page.write_text(to_html(flame_tree(hostile_profile()), title="<b>hostile</b>"), encoding="utf-8")
    seen = Frames(dump_dom(page))
    assert sorted(f["text"] for f in seen.frames) == sorted(["root", "main"] + [clean(n) for n in HOSTILE])
    assert "img" not in seen.tags and "b" not in seen.tags and seen.tags.count("script") == 2
    assert seen.text["title"] == "<b>hostile</b>"
