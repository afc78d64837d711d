"""Render a FlameTree as a static SVG or as one self-contained interactive HTML file.

Names come from untrusted files. Before anything is written they pass
:func:`clean` (control characters become visible ``\\xNN`` escapes, lone
surrogates and XML-illegal code points become U+FFFD), then are escaped for
their context: XML text for SVG, JSON inside ``<script type=
"application/json">`` with ``<``, ``>`` and ``&`` as ``\\u`` escapes for
HTML, where the page's script only ever assigns them with ``textContent``.

Colours: a warm palette hashed from the name; for a diff tree, red for
growth and blue for shrinkage of a node's share of its profile's total,
the strongest change at full saturation.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence

from polyprof.analysis.flame import FlameTree
from polyprof.render import units
from polyprof.render.flame_assets import PAGE_CSS, PAGE_JS

__all__ = ["clean", "to_html", "to_svg"]

_BAD = re.compile("[\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
SVG_WIDTH = 1200
ROW = 16
TOP = 56
BOTTOM = 10
FONT_PX = 11
CHAR_PX = 6.7  # average advance of the monospace font at FONT_PX


def clean(text: str) -> str:
    """``text`` made printable and legal in XML 1.0 (escaping is still needed)."""
    def fix(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x80 else "\ufffd"
    return _BAD.sub(fix, text)


def _x(text: str) -> str:
    return html.escape(clean(text), quote=True)


def _pct(part: int, whole: int) -> str:
    if not whole:
        return "n/a"
    ratio = 100.0 * part / whole
    return f"{ratio:.2f}%" if abs(ratio) >= 0.01 or ratio == 0 else f"{ratio:.2g}%"


def _label(tree: FlameTree, value: int) -> str:
    unit = tree.sample_type.unit
    text = units.label(value, unit)
    if text[-1:].isdigit() and unit not in ("", "count", "counts", "sample", "samples"):
        text += " " + clean(unit)  # a unit pprof does not scale: say what the number counts
    return text


def subtitle(tree: FlameTree, notes: Sequence[str] = ()) -> list[str]:
    """The lines under the title: what is measured, what was left out, and ``notes``."""
    vt = tree.sample_type
    lines = [f"{vt.type or 'samples'} ({vt.unit or 'count'}), total {_label(tree, tree.root_total)}"]
    if tree.is_diff:
        lines[0] += (f"; base total {_label(tree, tree.base_root_total)}. Red: share grew, blue: share shrank"
                     f" (shares of each profile's own total)")
        if tree.base_only:
            lines.append(f"code only in the base ({_label(tree, tree.base_only)}) has no width and is not drawn")
    if tree.dropped:
        lines.append(f"{tree.dropped} nodes narrower than {_label(tree, tree.min_width)} "
                     f"({_pct(tree.min_width, int(tree.width[0]) if len(tree) else 0)} of the total) not shown")
    if tree.active_filters:
        lines.append("active filters: " + " ".join(tree.active_filters))
    if tree.inverted:
        lines.append("inverted: functions with self weight next to the root, their callers beyond them")
    if tree.hint:
        lines.append(tree.hint)
    return lines + list(notes)


def tooltip(tree: FlameTree, i: int) -> str:
    """The hover text of node ``i`` (flat = self, cum = total), already :func:`clean`."""
    total = tree.root_total
    s, t = int(tree.self[i]), int(tree.total[i])
    text = (f"{clean(tree.names[i])}\nflat {_label(tree, s)} ({_pct(s, total)}), "
            f"cum {_label(tree, t)} ({_pct(t, total)})")
    if tree.base_self is not None and tree.base_total is not None:
        bs, bt = int(tree.base_self[i]), int(tree.base_total[i])
        change = _share(t, total) - _share(bt, tree.base_root_total)
        text += (f"\nbase: flat {_label(tree, bs)} ({_pct(bs, tree.base_root_total)}), "
                 f"cum {_label(tree, bt)} ({_pct(bt, tree.base_root_total)})\n"
                 f"cum share {'+' if change >= 0 else ''}{100 * change:.2f} points")
    return text


def _share(value: int, total: int) -> float:
    return value / total if total else 0.0


def _hash(text: str) -> int:
    h = 2166136261
    for ch in text.encode("utf-8", "surrogatepass"):
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


def warm(name: str) -> str:
    """A stable red-orange-yellow colour for ``name``."""
    h = _hash(name)
    return f"rgb({205 + h % 50},{(h >> 8) % 200 + 30},{(h >> 16) % 55})"


def diff_colours(tree: FlameTree) -> list[str]:
    """Red for growth, blue for shrinkage of each node's share, white for no change."""
    new = [_share(int(t), tree.root_total) for t in tree.total.tolist()]
    base = tree.base_total.tolist() if tree.base_total is not None else [0] * len(tree)
    old = [_share(int(t), tree.base_root_total) for t in base]
    deltas = [a - b for a, b in zip(new, old)]
    peak = max((abs(d) for d in deltas), default=0.0) or 1.0
    out = []
    for d in deltas:
        v = int(235 - 200 * min(abs(d) / peak, 1.0))
        out.append(f"rgb(255,{v},{v})" if d > 0 else f"rgb({v},{v},255)" if d < 0 else "rgb(235,235,235)")
    return out


# ---------------------------------------------------------------- SVG

def to_svg(tree: FlameTree, title: str = "Flame graph", *, notes: Sequence[str] = (),
           width: int = SVG_WIDTH) -> str:
    """A static flame graph (root at the bottom) with a tooltip (``<title>``) per frame."""
    n = len(tree)
    max_depth = int(tree.depth.max(initial=0))
    height = TOP + 13 * max(len(subtitle(tree, notes)) - 2, 0) + (max_depth + 1) * ROW + BOTTOM
    scale = (width - 20) / int(tree.width[0]) if n and int(tree.width[0]) > 0 else 0.0
    colours = diff_colours(tree) if tree.is_diff else None
    out = [f'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
           f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT_PX}">\n'
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f4"/>\n'
           f'<text x="{width // 2}" y="20" text-anchor="middle" font-size="16">{_x(title)}</text>\n']
    lines = subtitle(tree, notes)
    top = TOP + 13 * max(len(lines) - 2, 0)
    for k, line in enumerate(lines):
        out.append(f'<text x="{width // 2}" y="{36 + 13 * k}" text-anchor="middle" fill="#555">{_x(line)}</text>\n')
    tiny = 0
    for i in range(n):
        w = int(tree.width[i]) * scale
        if w < 0.1:
            tiny += 1
            continue
        x = 10 + int(tree.start[i]) * scale
        y = top + (max_depth - int(tree.depth[i])) * ROW
        fill = colours[i] if colours else ("rgb(200,200,200)" if i == 0 else warm(tree.names[i]))
        chars = int((w - 6) / CHAR_PX)
        name = clean(tree.names[i])
        shown = name if len(name) <= chars else (name[:chars - 2] + ".." if chars >= 3 else "")
        out.append(f'<g><title>{html.escape(tooltip(tree, i), quote=True)}</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{ROW - 1}" fill="{fill}" rx="2"/>')
        if shown:
            out.append(f'<text x="{x + 3:.2f}" y="{y + ROW - 4}">{html.escape(shown, quote=True)}</text>')
        out.append("</g>\n")
    if tiny:
        out.append(f'<!-- {tiny} frames narrower than 0.1 px not drawn -->\n')
    out.append("</svg>\n")
    return "".join(out)


# ---------------------------------------------------------------- HTML

def _payload(tree: FlameTree, title: str, notes: Sequence[str], other: FlameTree | None = None) -> dict:
    """The page's data: ``tree`` and, when given, ``other`` (the same graph inverted or not)
    under ``inv``, sharing one name table; ``startInverted`` says which one opens."""
    trees = [tree] + ([other] if other is not None else [])
    if tree.inverted and other is not None:
        trees.reverse()  # ``inv`` always holds the inverted one
    table = list(dict.fromkeys(clean(x) for t in trees for x in t.names))
    index = {x: i for i, x in enumerate(table)}
    data = {"title": clean(title), "notes": [clean(x) for x in subtitle(tree, notes)],
            "type": clean(tree.sample_type.type), "unit": clean(tree.sample_type.unit), "names": table,
            **_columns(trees[0], index), "startInverted": tree.inverted}
    if len(trees) > 1:
        data["inv"] = _columns(trees[1], index)
    return data


def _columns(tree: FlameTree, index: dict[str, int]) -> dict:
    data = {"n": [index[clean(x)] for x in tree.names], "p": tree.parent.tolist(), "d": tree.depth.tolist(),
            "s": tree.self.tolist(), "t": tree.total.tolist(), "x": tree.start.tolist(), "w": tree.width.tolist()}
    if tree.base_self is not None and tree.base_total is not None:
        data["bs"] = tree.base_self.tolist()
        data["bt"] = tree.base_total.tolist()
    return data


def _script_json(data: dict) -> str:
    """JSON that cannot end its ``<script>`` element or start a comment or entity."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def to_html(tree: FlameTree, title: str = "Flame graph", *, notes: Sequence[str] = (),
            other: FlameTree | None = None) -> str:
    """One self-contained page: click to zoom, search, flame/icicle toggle, tooltips; with
    ``other`` (the inverted graph of the same data, or the normal one) a callers/callees toggle."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
        f"<title>{_x(title)}</title>\n<style>{PAGE_CSS}</style>\n</head>\n<body>\n"
        f"<header><h1 id=\"title\">{_x(title)}</h1><div id=\"notes\"></div>\n"
        "<div id=\"controls\"><input id=\"search\" type=\"search\" placeholder=\"search (regexp)\" "
        "aria-label=\"search\"> <span id=\"matched\"></span> "
        "<button id=\"reset\" type=\"button\">reset zoom</button> "
        "<button id=\"invert\" type=\"button\">icicle</button>"
        + (" <button id=\"callers\" type=\"button\" title=\"invert the stacks: leaf functions at the root, "
           "their callers above\">callers</button>" if other is not None else "")
        + "</div></header>\n"
        "<main id=\"chart\" role=\"img\" aria-label=\"flame graph\"></main>\n"
        "<div id=\"tip\" hidden></div>\n"
        f"<script type=\"application/json\" id=\"data\">{_script_json(_payload(tree, title, notes, other))}</script>\n"
        f"<script>{PAGE_JS}</script>\n</body>\n</html>\n"
    )
