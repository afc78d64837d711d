"""``list REGEX``: source lines of the matching functions with their weights, as
``go tool pprof -list`` prints them.

Functions are matched by name; each (function, source file) pair is one
routine: the file is looked up as pprof looks it up (an absolute path as is;
otherwise under every directory of ``source_path`` and their parents, the
current directory by default; ``trim_path`` prefixes, and a profile path's
part up to the name of a ``source_path`` directory, removed first), and the
lines from the function's start (or 5 before its first sampled line) to 5
after its last sampled line are shown with flat and cum. A routine whose
file cannot be found says so instead of lines.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import callsite_weights, node_map, node_weights
from polyprof.analysis.options import Options
from polyprof.analysis.result import Result, dataclass_columns
from polyprof.analysis.trim import report_column
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile, ValueType

__all__ = ["ListResult", "Routine", "SourceLine", "find_source", "source_listing"]

_MARGIN = 5  # lines shown before the first and after the last sampled line


@dataclass(frozen=True)
class SourceLine:
    line: int
    text: str
    flat: int
    cum: int


@dataclass
class Routine:
    """One function in one source file."""

    function: str
    file: str           # as the profile names it (after trim_path)
    flat: int
    cum: int
    lines: list[SourceLine] = field(default_factory=list)
    error: str = ""     # why there are no lines (file not found)


@dataclass(repr=False)
class ListResult(Result):
    """Annotated source: ``to_pandas()`` gives one row per shown line (``"lines"``),
    ``to_pandas("routines")`` one per routine."""

    TABLES: ClassVar[tuple[str, ...]] = ("lines", "routines")

    sample_type: ValueType
    total: int
    routines: list[Routine]
    unsourced: list[str] = field(default_factory=list)  # matching functions without file names

    def _columns(self, table: str) -> dict[str, Any]:
        if table == "routines":
            cols: dict[str, Any] = dataclass_columns(self.routines, Routine)
            del cols["lines"]
            return cols
        lines = [(r, ln) for r in self.routines for ln in r.lines]
        return {"function": [r.function for r, _ in lines], "file": [r.file for r, _ in lines],
                **dataclass_columns([ln for _, ln in lines], SourceLine)}

    def _summary(self) -> str:
        return f"{self.sample_type}, total={self.total}, {len(self.routines)} routines"


def source_listing(src: Profile | FilterResult, regex: str, options: Options | None = None, *,
                   source_path: str = "", trim_path: str = "") -> ListResult:
    """Annotated source of the functions of ``src`` whose name matches ``regex``."""
    try:
        rx = re.compile(regex)
    except re.error as exc:
        raise OptionsError(f"list: bad regular expression {regex!r}: {exc}") from None
    o = options or Options()
    fr = filters.prepare(src, o)
    p = fr.profile
    col = report_column(fr, o)
    nodes = node_map(p, "lines", inlines=not o.noinlines, names=o.symbolize != "none", objnames=True)
    flat, cum = node_weights(p, nodes, callsite_weights(p, col.values))
    live = np.flatnonzero((flat != 0) | (cum != 0)).tolist()
    search = source_path or os.getcwd()
    by_function: dict[str, dict[str, list[int]]] = {}
    for n in live:
        info = nodes.infos[n]
        if rx.search(info.name):
            files = by_function.setdefault(info.name, {})
            if info.file:
                files.setdefault(trim(info.file, trim_path, search), []).append(n)
    if not by_function:
        raise OptionsError(f"list: no function matches {regex!r}")
    result = ListResult(col.sample_type, col.total, [])
    for name in sorted(by_function):
        if not by_function[name]:
            result.unsourced.append(name)
        for file in sorted(by_function[name]):
            members = by_function[name][file]
            routine = Routine(name, file, int(flat[members].sum()), int(cum[members].sum()))
            _fill(routine, [(nodes.infos[n], int(flat[n]), int(cum[n])) for n in members], search, trim_path)
            result.routines.append(routine)
    return result


def _fill(routine: Routine, members: list, search: str, trim_path: str) -> None:  # noqa: ANN001
    first = members[0][0]
    start = first.start_line or first.lineno - _MARGIN
    end = first.lineno + _MARGIN
    per_line: dict[int, list[int]] = {}
    for info, f, c in members:
        node_start = info.start_line or info.lineno - _MARGIN
        start, end = min(start, node_start), max(end, info.lineno + _MARGIN)
        acc = per_line.setdefault(info.lineno, [0, 0])
        acc[0] += f
        acc[1] += c
    path = find_source(routine.file, search, trim_path)
    if path is None:
        routine.error = f"open {routine.file}: no such file or directory" if os.path.isabs(routine.file) \
            else f"could not find file {routine.file} on path {search}"
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read().split("\n")
    if text and text[-1] == "":
        text.pop()
    for line in range(max(start, 1), end + 1):
        if line > len(text):
            break
        f, c = per_line.get(line, (0, 0))
        routine.lines.append(SourceLine(line, text[line - 1].rstrip("\r"), f, c))


def trim(path: str, trim_path: str, search: str) -> str:
    """pprof's trimPath: drop a ``trim_path`` prefix (or, without one, everything up to the
    name of a ``search`` directory; then the usual /proc/self/cwd prefixes)."""
    if not trim_path:
        for folder in search.split(os.pathsep):
            want = "/" + os.path.basename(folder.rstrip("/")) + "/"
            at = path.find(want)
            if at != -1:
                return path[at + len(want):]
    for prefix in [*(trim_path.split(os.pathsep) if trim_path else []), "/proc/self/cwd/./", "/proc/self/cwd/"]:
        prefix = prefix if prefix.endswith("/") else prefix + "/"
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def find_source(path: str, search: str, trim_path: str = "") -> str | None:
    """Where ``path`` (already trimmed) is on this machine: itself if absolute, else under a
    ``search`` directory or one of its parents."""
    if os.path.isabs(path):
        return path if os.path.isfile(path) else None
    for folder in search.split(os.pathsep):
        while True:
            candidate = os.path.join(folder, path)
            if os.path.isfile(candidate):
                return candidate
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None
