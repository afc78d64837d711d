"""Report nodes as ``go tool pprof`` defines them.

A *node* is what a report row stands for at a granularity: a function, a
file, a source line, an address or a module. Every location expands to one
node per inline line (innermost first), after pprof's aggregation rules
(``Profile.Aggregate`` + ``nodeInfo``): e.g. at ``functions`` granularity,
file names, line numbers and addresses are dropped, and frames without a
function name fall back to their binary (``[libc.so]``) or ``<unknown>``.
Names get the clean-up pprof's symbolizer applies (``display_name``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model.columns import factorize_rows
from polyprof.model.profile import Profile
from polyprof.model.tree import segment_owner, segment_positions

__all__ = ["GRANULARITIES", "NodeInfo", "NodeMap", "display_name", "node_map"]

GRANULARITIES = ("functions", "filefunctions", "files", "lines", "addresses", "modules")
_CPP_LOOKING = re.compile(r"[<>\[\]]|::")


class NodeInfo(NamedTuple):
    """The identity of a report node; fields mirror pprof's NodeInfo."""

    name: str = ""
    address: int = 0
    file: str = ""
    lineno: int = 0
    column: int = 0
    start_line: int = 0
    objfile: str = ""

    def printable(self) -> str:
        """The row name pprof prints (``NameComponents`` joined by spaces)."""
        if self.name and not (self.address or self.lineno or self.file):
            return self.name  # the usual row at functions granularity
        parts = []
        if self.address:
            parts.append(f"{self.address:016x}")
        if self.name:
            parts.append(self.name)
        if self.lineno:
            parts.append(f"{self.file}:{self.lineno}" + (f":{self.column}" if self.column else ""))
        elif self.file:
            parts.append(self.file)
        elif self.name:
            pass
        elif self.objfile:
            parts.append("[" + os.path.basename(self.objfile) + "]")
        else:
            parts.append("<unknown>")
        return " ".join(parts)


@dataclass
class NodeMap:
    """Nodes of a profile at one granularity and how locations expand to them."""

    infos: list[NodeInfo]
    names: list[str]
    loc_start: np.ndarray   # CSR offsets per location into loc_nodes
    loc_nodes: np.ndarray   # node ids, innermost line first
    loc_inlined: np.ndarray  # True where that line is inlined (not the last)
    entry_dup: np.ndarray    # True where the node already occurs earlier in its location
    #: Per node: the function (-1 none) and mapping (-1 none) of its first entry,
    #: for result fields a granularity does not key on (system name, module).
    functions: np.ndarray | None = None
    mappings: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.infos)

    def distinct_lines(self) -> tuple[np.ndarray, np.ndarray]:
        """Like (loc_start, loc_nodes) without the entries of ``entry_dup``
        (each node once per location), as compact int32 arrays; cached."""
        cached = self.__dict__.get("_distinct")
        if cached is None:
            keep = ~self.entry_dup
            kept_before = np.zeros(keep.size + 1, dtype=np.int64)  # (locations may list no entry)
            np.cumsum(keep, out=kept_before[1:])
            cached = self._distinct = (kept_before[self.loc_start], self.loc_nodes[keep].astype(np.int32))
        return cached


def _aggregate_flags(granularity: str, inlines: bool) -> tuple[bool, bool, bool, bool]:
    """(function, filename, linenumber, address) kept at ``granularity`` (pprof driver rules)."""
    if granularity not in GRANULARITIES:
        raise OptionsError(f"unknown {{granularity}}={granularity!r}; choose from {', '.join(GRANULARITIES)}",
                           options=("granularity",))
    if granularity == "addresses":
        return True, True, True, True
    return (granularity in ("functions", "filefunctions", "lines"),
            granularity in ("filefunctions", "files", "lines"),
            granularity == "lines", False)


def node_map(p: Profile, granularity: str = "functions", *, inlines: bool = True,
             names: bool = True, objnames: bool = False) -> NodeMap:
    """Expand every location of ``p`` into report nodes.

    ``names=False`` shows function names exactly as stored, without the
    symbolizer's clean-up (pprof's ``-symbolize=none``). ``objnames`` keeps
    every node's binary and function start line, as pprof's source and
    assembly reports do. Each entry (a location's line, or the location itself when it has no
    line) gets integer key columns that mirror pprof's NodeInfo fields after
    aggregation; equal keys are one node. NodeInfos are built only for the
    distinct nodes.
    """
    function, filename, linenumber, address = _aggregate_flags(granularity, inlines)
    loc = p.locations
    counts = np.diff(loc.line_start)
    modules = granularity == "modules"
    per_loc = np.ones(len(loc), dtype=np.int64) if modules or not inlines else np.maximum(counts, 1)
    n_entries = int(per_loc.sum())
    entry_loc = segment_owner(per_loc)
    k = segment_positions(per_loc)
    has_line = (counts[entry_loc] > 0) & (not modules)
    row = loc.line_start[entry_loc + 1] - 1 if not inlines else loc.line_start[entry_loc] + k
    row = np.where(has_line, row, 0)
    fn = np.where(has_line, p.lines.function[row] if len(p.lines) else -1, -1).astype(np.int64)
    name_id, file_id, start_line, texts = _function_keys(p, function, filename, names)
    mapping = loc.mapping.astype(np.int64)[entry_loc]
    obj = np.where(mapping >= 0, p.mappings.filename.astype(np.int64)[np.maximum(mapping, 0)]
                   if len(p.mappings) else 0, 0)
    addr = loc.address[entry_loc].astype(np.int64) if address and not modules else np.zeros(n_entries, np.int64)
    has_fn = fn >= 0
    safe = np.maximum(fn, 0)
    named = has_fn & (name_id[safe] != 0) if len(name_id) else np.zeros(n_entries, bool)
    zero = np.zeros(n_entries, dtype=np.int64)
    cols = [
        np.where(has_fn, name_id[safe], 0) if len(name_id) else zero,
        addr,
        np.where(has_fn, file_id[safe], 0) if len(file_id) else zero,
        np.where(has_fn & linenumber, p.lines.line[row], 0) if len(p.lines) else zero,
        np.where(has_fn & (granularity == "addresses"), p.lines.column[row], 0) if len(p.lines) else zero,
        np.where(has_fn & (~named | objnames), start_line[safe], 0) if len(start_line) else zero,
        obj if objnames else np.where(named, 0, obj),
    ]
    node, rep = factorize_rows(cols)
    strs = p.strings
    name, addr_, file, line, column, start, objfile = (c[rep].tolist() for c in cols)
    infos = list(map(NodeInfo._make, zip([texts[i] for i in name], addr_, [texts[i] for i in file], line,
                                         column, start, [strs[i] for i in objfile])))
    inlined = k != per_loc[entry_loc] - 1
    dup = np.zeros(n_entries, dtype=bool)
    multi = per_loc[entry_loc] > 1
    if multi.any():  # the same node twice inside one location (inlined recursion)
        idx = np.flatnonzero(multi)
        key = entry_loc[idx] * np.int64(len(infos) + 1) + node[idx]
        _, first_at = np.unique(key, return_index=True)
        dup[idx] = True
        dup[idx[first_at]] = False
    loc_start = np.zeros(len(loc) + 1, dtype=np.int64)
    np.cumsum(per_loc, out=loc_start[1:])
    return NodeMap(infos, [n.printable() for n in infos], loc_start, node, inlined, dup, fn[rep], mapping[rep])


def _function_keys(p: Profile, function: bool, filename: bool, clean: bool = True):  # noqa: ANN202
    """Per function: interned display-name id, file id, start line; and the id -> text list."""
    strs = p.strings
    f = p.functions
    texts = [""]
    index = {"": 0}

    def intern(text: str) -> int:
        i = index.get(text)
        if i is None:
            i = index[text] = len(texts)
            texts.append(text)
        return i

    n = len(f)
    if function:
        # Clean each distinct (name, system name) pair once.
        pairs, inverse = np.unique(f.name.astype(np.int64) << 32 | f.system_name.astype(np.int64),
                                   return_inverse=True)
        shown = display_name if clean else (lambda name, _system: name)
        ids = np.array([intern(shown(strs[k >> 32], strs[k & 0xFFFFFFFF])) for k in pairs.tolist()],
                       dtype=np.int64)
        name_id = ids[inverse.reshape(-1)] if n else np.zeros(0, dtype=np.int64)
    else:
        name_id = np.zeros(n, dtype=np.int64)
    if filename:
        uniq, inverse = np.unique(f.filename, return_inverse=True)
        ids = np.array([intern(os.path.normpath(strs[s])) if strs[s] else 0 for s in uniq.tolist()], dtype=np.int64)
        file_id = ids[inverse.reshape(-1)] if n else np.zeros(0, dtype=np.int64)
    else:
        file_id = np.zeros(n, dtype=np.int64)
    return name_id, file_id, f.start_line.astype(np.int64), texts


def display_name(name: str, system_name: str) -> str:
    """The name pprof reports: its symbolizer's clean-up of names it did not demangle.

    A name that equals its system name (or is empty) and looks like demangled
    C++/Rust loses its parameter lists and template arguments, as
    ``go tool pprof`` shows it. Real demangling of mangled symbols is not done.
    """
    if name and system_name != name:
        return name
    name = system_name
    if not _CPP_LOOKING.search(name) or ".<" in name or "])." in name:
        return name  # Java "class.<init>", Go "pkg.(*T[...]).M" and plain names stay as they are
    return _remove_matching(_remove_matching(name, "(", ")"), "<", ">")


def _remove_matching(name: str, start: str, end: str) -> str:
    """Drop balanced ``start..end`` groups; stop (keeping the rest) at an unmatched ``end``."""
    out: list[str] = []
    group: list[str] = []
    nesting = 0
    for i, ch in enumerate(name):
        if ch == start:
            nesting += 1
        elif ch == end:
            nesting -= 1
            if nesting < 0:
                return "".join(out) + name[i:]
            if nesting == 0:
                group = []
                continue
        (group if nesting else out).append(ch)
    return "".join(out + group)
