"""``polyprof flame``: output type from the extension, atomic writes, filters, clear errors."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

SIMPLE = "jlfwong__speedscope/sample/profiles/pprof/simple.prof"


def test_svg_and_html_by_extension(cli, peer, tmp_path):
    svg, page = tmp_path / "out.svg", tmp_path / "out.html"
    r = cli("flame", peer / SIMPLE, "-o", svg, "--title", "simple & <co>")
    assert r.code == 0, r.err
    assert "wrote" in r.err and svg.stat().st_mode & 0o044  # readable by others, like any output
    root = ET.fromstring(svg.read_bytes())
    assert next(root.iter("{http://www.w3.org/2000/svg}text")).text == "simple & <co>"
    r = cli("flame", peer / SIMPLE, "-o", page, "--sample-index", "samples")
    assert r.code == 0, r.err
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page.read_text()).group(1))
    assert data["type"] == "samples" and data["t"][0] == 150  # 1.5 s of cpu at 10 ms per sample
    assert [p.name for p in tmp_path.iterdir()] and not list(tmp_path.glob(".polyprof-*"))


def test_stdout_needs_to(cli, peer):
    r = cli("flame", peer / SIMPLE, "-o", "-", "--to", "svg")
    assert r.code == 0 and r.out.startswith("<?xml")
    r = cli("flame", peer / SIMPLE, "-o", "-")
    assert r.code == 6 and "pass --to" in r.err


def test_unknown_extension_and_unwritable_directory(cli, peer, tmp_path):
    r = cli("flame", peer / SIMPLE, "-o", tmp_path / "out.png")
    assert r.code == 6 and "use .svg or .html" in r.err
    r = cli("flame", peer / SIMPLE, "-o", tmp_path / "missing" / "out.svg")
    assert r.code == 7 and "cannot write" in r.err


def test_granularity_and_focus(cli, peer, tmp_path):
    out = tmp_path / "f.svg"
    r = cli("flame", peer / SIMPLE, "-o", out, "--granularity", "files")
    assert r.code == 0, r.err
    titles = {t.text.split("\n")[0] for t in ET.fromstring(out.read_bytes()).iter("{http://www.w3.org/2000/svg}title")}
    assert titles == {"root", "/Users/jlfwong/code/speedscope/sample/programs/go/simple.go",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/proc.go",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/asm_amd64.s",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/stack.go",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/duff_amd64.s",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/time.go",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/lock_sema.go",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/os_darwin.go",
                      "/usr/local/Cellar/go/1.10.1/libexec/src/runtime/sys_darwin_amd64.s"}
    r = cli("flame", peer / SIMPLE, "-o", out, "--focus", "main.alpha")
    assert r.code == 0, r.err
    svg = out.read_text()
    # main.alpha: 260ms directly under main.main and 220ms under main.delta
    assert "total 480ms" in svg and "active filters: focus=main.alpha" in svg
