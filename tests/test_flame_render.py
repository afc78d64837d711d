"""SVG and HTML flame graphs: well-formed, and nothing from the profile reaches them unescaped.

Function names come from untrusted files. The hostile names below try to
close elements, start scripts, break attributes, inject entities and
comments, and carry bytes that are not legal in XML (control characters,
lone surrogates). The SVG must parse as XML with only our own elements; the
HTML must have exactly our elements and scripts; the names must come back
intact (after :func:`clean`) from the SVG text and the page's JSON data.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import polyprof
from polyprof.analysis.flame import flame_tree
from polyprof.model.builder import ProfileBuilder
from polyprof.render.flame import clean, to_html, to_svg

from viewer_profiles import HOSTILE, hostile_profile

SVG = "{http://www.w3.org/2000/svg}"


def test_clean_makes_text_printable_and_xml_legal():
    assert clean("a\x00b\x1fc\x7f") == "a\\x00b\\x1fc\\x7f"
    assert clean("x\ud800y") == "x\ufffdy"
    assert clean("\ufffe") == "\ufffd"
    for name in HOSTILE:
        clean(name).encode("utf-8")  # strict: no surrogates left
        assert not re.search("[\x00-\x1f\x7f]", clean(name))


def test_svg_parses_and_keeps_every_name_as_text():
    text = to_svg(flame_tree(hostile_profile()), title="<title>&\x00\ud800")
    root = ET.fromstring(text.encode("utf-8"))
    tags = {el.tag.replace(SVG, "") for el in root.iter()}
    assert tags <= {"svg", "rect", "text", "g", "title"}
    titles = [el.text.split("\n")[0] for el in root.iter(SVG + "title")]
    assert sorted(titles) == sorted(["root", "main"] + [clean(n) for n in HOSTILE])
    heading = next(root.iter(SVG + "text")).text
    assert heading == clean("<title>&\x00\ud800")
    for el in root.iter(SVG + "text"):  # frame labels are prefixes of names (cut with "..")
        label = (el.text or "").removesuffix("..")
        assert any(clean(n).startswith(label) for n in HOSTILE + ["root", "main"]) or el.text == heading \
            or el.get("fill") == "#555"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append(tag)
        self._in_script = tag == "script"

    def handle_data(self, data):  # noqa: ANN001
        if self._in_script:
            self.scripts.append(data)

    def handle_endtag(self, tag):  # noqa: ANN001
        self._in_script = False


def test_html_has_only_our_elements_and_the_names_as_json():
    title = "</title><script>alert(3)</script>"
    page = to_html(flame_tree(hostile_profile()), title=title)
    parser = _Tags()
    parser.feed(page)
    assert set(parser.tags) == {"html", "head", "meta", "title", "style", "body", "header", "h1", "div",
                                "input", "span", "button", "main", "script"}
    assert parser.tags.count("script") == 2 and len(parser.scripts) == 2
    assert page.count("<script") == 2 and page.count("</script") == 2
    assert "<img" not in page and "alert(3)</script>" not in page
    data = json.loads(parser.scripts[0])
    shown = {data["names"][i] for i in data["n"]}
    assert shown == {"root", "main"} | {clean(n) for n in HOSTILE}
    assert data["title"] == clean(title)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_diff_colours_red_for_growth_blue_for_shrinkage():
    def prof(a: int, b: int):
        pb = ProfileBuilder("test")
        pb.set_sample_types([("samples", "count")])
        pb.add_sample(pb.stack([pb.frame("grows"), pb.frame("main")]), [a])
        pb.add_sample(pb.stack([pb.frame("shrinks"), pb.frame("main")]), [b])
        return pb.finish()

    tree = flame_tree(prof(90, 10), base=prof(50, 50))
    root = ET.fromstring(to_svg(tree, title="diff").encode("utf-8"))
    fills = {}
    for g in root.iter(SVG + "g"):
        name = g.find(SVG + "title").text.split("\n")[0]
        fills[name] = g.find(SVG + "rect").get("fill")
    assert fills["grows"] == "rgb(255,35,35)"      # the strongest change: full red
    assert fills["shrinks"] == "rgb(35,35,255)"    # full blue
    assert fills["main"] == "rgb(235,235,235)"     # same share in both
    assert "cum share +40.00 points" in to_svg(tree)


def test_pruned_frames_are_announced(peer):
    p = polyprof.read(peer / "google__pprof/internal/proftest/testdata/large.cpu")
    tree = flame_tree(p, max_nodes=500)
    assert len(tree) <= 500 + int(tree.depth.max())
    svg = to_svg(tree, title="large")
    assert f"{tree.dropped} nodes narrower than" in svg
    ET.fromstring(svg.encode("utf-8"))
    assert f"{tree.dropped} nodes narrower than" in to_html(tree, title="large")
