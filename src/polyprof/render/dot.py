"""Render a GraphResult as Graphviz DOT, the text ``go tool pprof -dot`` prints.

Node boxes, label boxes ("nodelets"), edges, colours, font sizes and the
legend follow pprof's ``ComposeDot``. :func:`render_image` turns DOT into SVG,
PNG or PDF with Graphviz's ``dot`` when it is installed.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

from polyprof.analysis.callgraph import MAX_NODELETS, GraphEdge, GraphNode, GraphResult, Tag
from polyprof.errors import OptionsError, OutputError
from polyprof.render import units
from polyprof.render.top import report_header, value_formatter

__all__ = ["IMAGE_FORMATS", "dot_text", "render_image", "shorten_function_name"]

IMAGE_FORMATS = ("svg", "png", "pdf")
_ANON = re.compile(r"^\(anonymous namespace\)::", re.ASCII)
_GO_VER = re.compile(r"^(.*?)/v(?:[2-9]|[1-9][0-9]+)([./].*)$", re.ASCII | re.S)
_SHORTENERS = (
    re.compile(r"^(?:[\w\-\.]+\/)+(.+)", re.ASCII | re.S),  # Go: drop the package path
    re.compile(r"^(?:[a-z]\w*\.)*([A-Z][\w\$]*\.(?:<init>|[a-z][\w\$]*(?:\$\d+)?))(?:(?:\()|$)", re.ASCII),  # Java
    re.compile(r"^(?:[_a-zA-Z]\w*::)+(_*[A-Z]\w*::~?[_a-zA-Z]\w*(?:<.*>)?)", re.ASCII | re.S),  # C++
)


def shorten_function_name(name: str) -> str:
    """pprof's ShortenFunctionName: package paths, Java packages and C++ namespaces dropped."""
    name = _GO_VER.sub(r"\1\2", _ANON.sub("", name))
    for rx in _SHORTENERS:
        m = rx.search(name)
        if m:
            return "".join(g or "" for g in m.groups())
    return name


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l")


def dot_text(r: GraphResult, *, title: str = "") -> str:
    """pprof's ``-dot`` output for ``r``; ``title`` names the graph (pprof: the main binary)."""
    fmt = value_formatter(r.nodes, r.total, r.sample_type.unit, out_unit=r.unit)
    labels = report_header(r.summary, r.sample_type, r.total, fmt, r.shown_flat, len(r.nodes), r.node_count,
                           r.active_filters, dropped=(r.dropped_nodes, r.node_cutoff),
                           dropped_edges=(r.dropped_edges, r.edge_cutoff)) if r.summary is not None else []
    labels.append("\nSee https://git.io/JfYMW for how to read the graph")
    out = [f'digraph "{title or "unnamed"}" {{', 'node [style=filled fillcolor="#f8f8f8"]']
    legend = f'subgraph cluster_L {{ "{_escape(labels[0])}" [shape=box fontsize=16 label="' + \
        "\\l".join(_escape(x) for x in labels) + '\\l"' + (f' tooltip="{title}"' if title else "") + "] }"
    out.append(legend)
    if r.nodes:
        max_flat = max(abs(n.flat) for n in r.nodes)
        has_nodelets = []
        for i, n in enumerate(r.nodes, 1):
            out.append(_node(n, i, max_flat, r.total, fmt))
            lets = _nodelets(n, i, fmt, any(e.caller == i - 1 for e in r.edges))
            out.extend(lets)
            has_nodelets.append(bool(lets))
        out.extend(_edge(e, r, fmt, has_nodelets[e.caller]) for e in r.edges)
    out.append("}")
    return "\n".join(out) + "\n"


def _label_name(n: GraphNode) -> str:
    name = _escape(shorten_function_name(n.function)).replace("::", "\\n").replace("[...]", "[…]")
    name = name.replace(".", "\\n")
    parts = [f"{n.address:016x}"] if n.address else []
    if name:
        parts.append(name)
    file = os.path.basename(n.file) if n.file else ""
    if n.line:
        parts.append(f"{file}:{n.line}")
    elif file:
        parts.append(file)
    elif not name:
        parts.append(f"[{os.path.basename(n.objfile)}]" if n.objfile else "<unknown>")
    return "\\n".join(parts) + "\\n"


def _node(n: GraphNode, node_id: int, max_flat: int, total: int, fmt) -> str:  # noqa: ANN001
    label = _label_name(n)
    flat_text = fmt(n.flat)
    label += f"{flat_text} ({units.percentage(n.flat, total).strip()})" if n.flat else "0"
    cum_text = flat_text
    if n.cum != n.flat:
        cum_text = fmt(n.cum)
        label += ("\\n" if n.flat else " ") + f"of {cum_text} ({units.percentage(n.cum, total).strip()})"
    size = 8
    if max_flat and n.flat and abs(n.flat) <= max_flat:
        size += int(math.ceil(16.0 * math.sqrt(abs(n.flat) / max_flat)))
    score = n.cum / abs(total) if total else 0.0
    return (f'N{node_id} [label="{label}" id="node{node_id}" fontsize={size} shape=box '
            f'tooltip="{_escape(n.name)} ({cum_text})" color="{_color(score, False)}" '
            f'fillcolor="{_color(score, True)}"]')


def _sort_tags(ts: list[Tag], flat: bool) -> list[Tag]:
    return sorted(ts, key=lambda t: ((0 if flat else -abs(t.cum)), -abs(t.flat), t.name))


def _nodelets(n: GraphNode, node_id: int, fmt, has_out: bool) -> list[str]:  # noqa: ANN001
    out: list[str] = []
    for i, t in enumerate(_sort_tags(n.label_tags, has_out)[:MAX_NODELETS]):
        w = t.flat if has_out else t.cum
        if w == 0:
            continue
        weight = fmt(w)
        out.append(f'N{node_id}_{i} [label = "{t.name}" id="N{node_id}_{i}" fontsize=8 shape=box3d '
                   f'tooltip="{weight}"]')
        out.append(f'N{node_id} -> N{node_id}_{i} [label=" {weight}" weight=100 tooltip="{weight}" '
                   f'labeltooltip="{weight}"]')
        out.extend(_numeric_nodelets(n.numeric_tags.get(t.name, []), has_out, f"N{node_id}_{i}", fmt))
    out.extend(_numeric_nodelets(n.numeric_tags.get("", []), has_out, f"N{node_id}", fmt))
    return out


def _numeric_nodelets(ts: list[Tag], flat: bool, source: str, fmt) -> list[str]:  # noqa: ANN001
    out = []
    for j, t in enumerate(_collapsed(ts, flat)):
        w, attr = t.cum, ' style="dotted"'
        if flat or t.flat == t.cum:
            w, attr = t.flat, ""
        if w:
            weight = fmt(w)
            out.append(f'N{source}_{j} [label = "{t.name}" id="N{source}_{j}" fontsize=8 shape=box3d '
                       f'tooltip="{weight}"]')
            out.append(f'{source} -> N{source}_{j} [label=" {weight}" weight=100 tooltip="{weight}" '
                       f'labeltooltip="{weight}"{attr}]')
    return out


def _collapsed(ts: list[Tag], flat: bool) -> list[Tag]:
    """pprof's collapsedTags: more than four numbers grouped around the four heaviest."""
    ts = _sort_tags(ts, flat)
    if len(ts) <= MAX_NODELETS:
        return ts
    groups = [[t] for t in ts[:MAX_NODELETS]]
    for t in ts[MAX_NODELETS:]:
        best = min(range(MAX_NODELETS), key=lambda g: (abs(_scaled(groups[g][0], t.unit) - t.value), g))
        groups[best].append(t)
    out = []
    for g in groups:
        if len(g) == 1:
            out.append(Tag(units.label(g[0].value, g[0].unit), g[0].flat, g[0].cum))
            continue
        lo = min(g, key=lambda t: _scaled(t, g[0].unit))
        hi = max(g, key=lambda t: _scaled(t, g[0].unit))
        out.append(Tag(f"{units.label(lo.value, lo.unit)}..{units.label(hi.value, hi.unit)}",
                       sum(t.flat for t in g), sum(t.cum for t in g)))
    return _sort_tags(out, flat)


def _scaled(t: Tag, unit: str) -> float:
    return units.scale(t.value, t.unit, unit)[0]


def _edge(e: GraphEdge, r: GraphResult, fmt, has_nodelets: bool) -> str:  # noqa: ANN001
    src, dst = r.nodes[e.caller], r.nodes[e.callee]
    w = fmt(e.weight)
    attr = f'label=" {w}' + ("\\n (inline)" if e.inline else "") + '"'
    if r.total:
        weight = 1 + min(_go_div(abs(e.weight * 100), abs(r.total)), 100)
        if weight > 1:
            attr += f" weight={weight}"
        width = 1 + min(_go_div(abs(e.weight * 5), abs(r.total)), 5)
        if width > 1:
            attr += f" penwidth={width}"
        attr += f' color="{_color(e.weight / abs(r.total), False)}"'
    arrow = "..." if e.residual else "->"
    tooltip = f'"{_escape(src.name)} {arrow} {_escape(dst.name)} ({w})"'
    attr += f" tooltip={tooltip} labeltooltip={tooltip}"
    if e.residual:
        attr += ' style="dotted"'
    if has_nodelets:
        attr += " minlen=2"
    return f"N{e.caller + 1} -> N{e.callee + 1} [{attr}]"


def _go_div(a: int, b: int) -> int:
    return a // b if b else 0


def _color(score: float, background: bool) -> str:
    """pprof's dotColor: red for heavy, grey for light (green for negative)."""
    saturation, value = (0.1, 0.93) if background else (1.0, 0.7)
    score = max(-1.0, min(1.0, score))
    if abs(score) < 0.2:
        saturation *= abs(score) / 0.2
    if score > 0.0:
        score = score ** 0.3
    elif score < 0.0:
        score = -((-score) ** 0.3)
    if score < 0.0:
        g, r = value, value * (1 + saturation * score)
    else:
        r, g = value, value * (1 - saturation * score)
    b = value * (1 - saturation)
    return "#%02x%02x%02x" % (int(r * 255.0) & 0xFF, int(g * 255.0) & 0xFF, int(b * 255.0) & 0xFF)


def render_image(dot: str, kind: str) -> bytes:
    """``dot`` text drawn by Graphviz as ``kind`` (svg, png, pdf)."""
    if kind not in IMAGE_FORMATS:
        raise OptionsError(f"cannot draw {kind!r}; choose dot, {', '.join(IMAGE_FORMATS)}")
    exe = shutil.which("dot")
    if exe is None:
        raise OptionsError(f"drawing {kind} needs Graphviz's 'dot' (Debian: apt-get install graphviz); "
                           "write .dot instead and draw it elsewhere")
    done = subprocess.run([exe, f"-T{kind}"], input=dot.encode(), capture_output=True, timeout=600)
    if done.returncode:
        raise OutputError(f"dot -T{kind} failed: {done.stderr.decode(errors='replace').strip()[:300]}")
    return done.stdout
