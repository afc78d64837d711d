"""The canonical, stable text dump of a profile (``polyprof dump``).

It prints what a profile *means*, never the model's row numbers: mappings are
numbered by their sorted content, frames are printed with their function
names, files and lines, and samples appear in their stored order with their
full stack (leaf first). Two profiles with equal dumps hold the same data,
however their tables are laid out. Golden tests compare these dumps.

Per-format ``extras`` are printed sorted by key as JSON. Reader warnings are
not part of the dump (they are diagnostics, shown by ``info``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from polyprof.model.profile import (
    MAPPING_HAS_FILENAMES,
    MAPPING_HAS_FUNCTIONS,
    MAPPING_HAS_INLINE_FRAMES,
    MAPPING_HAS_LINE_NUMBERS,
    Label,
    Profile,
)

__all__ = ["dump", "dump_lines", "escape", "format_label"]

_FLAG_NAMES = ((MAPPING_HAS_FUNCTIONS, "functions"), (MAPPING_HAS_FILENAMES, "filenames"),
               (MAPPING_HAS_LINE_NUMBERS, "lines"), (MAPPING_HAS_INLINE_FRAMES, "inlines"))


def escape(text: str) -> str:
    """Make ``text`` printable on one line (untrusted names can hold anything)."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


def format_label(label: Label) -> str:
    if label.str is not None:
        return f"{escape(label.key)}={json.dumps(label.str, ensure_ascii=False)}"
    unit = f"[{escape(label.unit)}]" if label.unit else ""
    return f"{escape(label.key)}={label.num}{unit}"


def _mapping_text(p: Profile, m: int) -> str:
    mp = p.mappings
    flags = int(mp.flags[m])
    names = ",".join(n for bit, n in _FLAG_NAMES if flags & bit) or "-"
    build = p.strings[mp.build_id[m]]
    return (f"0x{int(mp.start[m]):x}-0x{int(mp.limit[m]):x} offset=0x{int(mp.offset[m]):x} "
            f"file={escape(p.strings[mp.filename[m]])!s} build_id={escape(build) or '-'} flags={names}")


def _line_text(p: Profile, row: int) -> str:
    fn = int(p.lines.function[row])
    line = int(p.lines.line[row])
    col = int(p.lines.column[row])
    if fn < 0:
        name, file, extra = "?", "", ""
    else:
        f = p.functions
        name = escape(p.strings[f.name[fn]]) or "?"
        system = p.strings[f.system_name[fn]]
        file = escape(p.strings[f.filename[fn]])
        extra = ""
        if system and system != p.strings[f.name[fn]]:
            extra += f" sys={escape(system)}"
        if f.start_line[fn]:
            extra += f" start={int(f.start_line[fn])}"
    where = f"{file}:{line}" if line else file
    if col:
        where += f":{col}"
    return f"{name}{' ' + where if where else ''}{extra}"


def _frame_texts(p: Profile, mapping_names: dict[int, str]) -> list[str]:
    loc = p.locations
    out = []
    for i in range(len(loc)):
        addr = int(loc.address[i])
        m = int(loc.mapping[i])
        parts = [f"0x{addr:x}" if addr else "-", mapping_names.get(m, "-")]
        rows = loc.lines_of(i)
        parts.append(" <= ".join(_line_text(p, r) for r in rows) if len(rows) else "?")
        if loc.folded[i]:
            parts.append("(folded)")
        out.append(" ".join(parts))
    return out


def dump_lines(p: Profile) -> Iterator[str]:
    """Yield the dump one line at a time (no trailing newlines)."""
    p.labelsets  # noqa: B018 - decode deferred labels (and meet their errors) before any line is out
    yield "polyprof-dump 1"
    yield f"format: {p.source_format or '-'}"
    yield "sample_types: " + (", ".join(str(vt) for vt in p.sample_types) or "-")
    if p.default_sample_type:
        yield f"default_sample_type: {escape(p.default_sample_type)}"
    if p.period_type is not None or p.period:
        pt = str(p.period_type) if p.period_type is not None else "-"
        yield f"period: {escape(pt)} {p.period}"
    if p.time_nanos:
        yield f"time_nanos: {p.time_nanos}"
    if p.duration_nanos:
        yield f"duration_nanos: {p.duration_nanos}"
    for c in p.comments:
        yield f"comment: {escape(c)}"
    for key in ("drop_frames", "keep_frames", "doc_url"):
        if getattr(p, key):
            yield f"{key}: {escape(getattr(p, key))}"
    for key in sorted(p.extras):
        yield f"extra {key}: {json.dumps(p.extras[key], sort_keys=True, ensure_ascii=False)}"
    texts = {m: _mapping_text(p, m) for m in range(len(p.mappings))}
    order = sorted(texts, key=lambda m: (int(p.mappings.start[m]), texts[m]))
    names = {m: f"M{k + 1}" for k, m in enumerate(order)}
    yield f"mappings: {len(order)}"
    for m in order:
        yield f"  {names[m]} {texts[m]}"
    frames = _frame_texts(p, names)
    s = p.samples
    yield f"samples: {len(s)}"
    optional = [(name, getattr(s, name)) for name in s.OPTIONAL_COLUMNS if getattr(s, name) is not None]
    values = s.values.tolist()
    stacks = s.stack.tolist()
    labelsets = s.labelset.tolist()
    path_cache: dict[int, list[int]] = {}
    for i in range(len(s)):
        head = "  [" + " ".join(str(v) for v in values[i]) + "]"
        for name, col in optional:
            head += f" {name}={int(col[i])}"
        labels = p.labelsets[labelsets[i]]
        if labels:
            head += " {" + ", ".join(format_label(lb) for lb in labels) + "}"
        yield head
        node = stacks[i]
        path = path_cache.get(node)
        if path is None:
            path = path_cache[node] = p.callsites.path(node)
        for loc in path:
            yield "    " + frames[loc]


def dump(p: Profile) -> str:
    """The whole dump as one string ending in a newline."""
    return "\n".join(dump_lines(p)) + "\n"

