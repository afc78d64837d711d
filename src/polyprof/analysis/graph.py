"""Report nodes as ``go tool pprof`` defines them, computed over the callsite tree.

A *node* is what a report row stands for at a granularity: a function, a
file, a source line, an address or a module. Every location expands to one
node per inline line (innermost first), after pprof's aggregation rules
(``Profile.Aggregate`` + ``nodeInfo``): e.g. at ``functions`` granularity,
file names, line numbers and addresses are dropped, and frames without a
function name fall back to their binary (``[libc.so]``) or ``<unknown>``.

Weights are computed once per *callsite*, not per sample: the samples are
summed onto their leaf callsites, pushed up the tree, and a node's cum weight
is the weight of the callsites where it occurs with no occurrence above
(recursion counted once, as pprof does), found with Euler-tour intervals.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model.profile import Profile

__all__ = ["GRANULARITIES", "NodeInfo", "NodeMap", "Weights", "callsite_weights", "euler",
           "display_name", "edges", "node_map", "node_weights", "sum_by"]

GRANULARITIES = ("functions", "filefunctions", "files", "lines", "addresses", "modules")


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

    def __len__(self) -> int:
        return len(self.infos)


def _aggregate_flags(granularity: str, inlines: bool) -> tuple[bool, bool, bool, bool]:
    """(function, filename, linenumber, address) kept at ``granularity`` (pprof driver rules)."""
    if granularity not in GRANULARITIES:
        raise OptionsError(f"unknown granularity {granularity!r}; choose from {', '.join(GRANULARITIES)}")
    if granularity == "addresses":
        return True, True, True, True
    return (granularity in ("functions", "filefunctions", "lines"),
            granularity in ("filefunctions", "files", "lines"),
            granularity == "lines", False)


def node_map(p: Profile, granularity: str = "functions", *, inlines: bool = True) -> NodeMap:
    """Expand every location of ``p`` into report nodes."""
    function, filename, linenumber, address = _aggregate_flags(granularity, inlines)
    strs = p.strings
    f = p.functions
    fn_name = [display_name(strs[n], strs[s]) for n, s in zip(f.name.tolist(), f.system_name.tolist())] \
        if function else [""] * len(f)
    fn_file = [os.path.normpath(strs[i]) if strs[i] else "" for i in f.filename.tolist()] \
        if filename else [""] * len(f)
    fn_start = f.start_line.tolist()
    objfiles = [strs[i] for i in p.mappings.filename.tolist()]
    loc = p.locations
    lf, ll, lc = p.lines.function.tolist(), p.lines.line.tolist(), p.lines.column.tolist()
    starts = loc.line_start.tolist()
    index: dict[NodeInfo, int] = {}
    infos: list[NodeInfo] = []
    out_nodes: list[int] = []
    out_inl: list[bool] = []
    out_start = [0]
    modules = granularity == "modules"
    for i, (m, addr) in enumerate(zip(loc.mapping.tolist(), loc.address.tolist())):
        obj = objfiles[m] if m >= 0 else ""
        addr = addr if address else 0
        rows = range(starts[i], starts[i + 1])
        if not inlines and len(rows) > 1:
            rows = range(rows[-1], rows[-1] + 1)
        if modules:
            keys = [NodeInfo(objfile=obj)]
        elif not len(rows):
            keys = [NodeInfo(address=addr, objfile=obj)]
        else:
            keys = [_line_node(lf[r], ll[r] if linenumber else 0, lc[r] if linenumber and granularity == "addresses"
                               else 0, addr, obj, fn_name, fn_file, fn_start) for r in rows]
        last = len(keys) - 1
        for k, key in enumerate(keys):
            node = index.get(key)
            if node is None:
                node = index[key] = len(infos)
                infos.append(key)
            out_nodes.append(node)
            out_inl.append(k != last)
        out_start.append(len(out_nodes))
    return NodeMap(infos, [n.printable() for n in infos], np.array(out_start, dtype=np.int64),
                   np.array(out_nodes, dtype=np.int64), np.array(out_inl, dtype=bool))


def display_name(name: str, system_name: str) -> str:
    """The name pprof reports: its symbolizer's clean-up of names it did not demangle.

    A name that equals its system name (or is empty) and looks like demangled
    C++/Rust loses its parameter lists and template arguments, as
    ``go tool pprof`` shows it. Real demangling of mangled symbols is not done.
    """
    if name and system_name != name:
        return name
    name = system_name
    if ".<" in name or "])." in name:
        return name
    if any(c in name for c in "<>[]") or "::" in name:
        name = _remove_matching(_remove_matching(name, "(", ")"), "<", ">")
    return name


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


def _line_node(fn: int, line: int, column: int, addr: int, obj: str, names: list[str],
               files: list[str], starts: list[int]) -> NodeInfo:
    if fn < 0:
        return NodeInfo(address=addr, objfile=obj)
    name, file = names[fn], files[fn]
    if not name:
        return NodeInfo(address=addr, file=file, lineno=line, column=column,
                        start_line=starts[fn], objfile=obj)
    return NodeInfo(name=name, address=addr, file=file, lineno=line, column=column)


# ---------------------------------------------------------------- weights

def sum_by(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by ``keys`` in [0, size)."""
    out = np.zeros(size, dtype=np.int64)
    if keys.size:
        np.add.at(out, keys, values.astype(np.int64, copy=False))
    return out


@dataclass
class Weights:
    """Per-callsite weights for one value column."""

    leaf: np.ndarray      # sum of samples whose stack ends here
    subtree: np.ndarray   # sum of samples whose stack passes through here
    nonzero: np.ndarray   # number of non-zero samples passing through here
    total: int            # sum over all samples (including empty stacks)


def callsite_weights(p: Profile, values: np.ndarray, mask: np.ndarray | None = None) -> Weights:
    """Weights of ``values`` (one per sample) over the callsite tree."""
    n = len(p.callsites)
    stack = p.samples.stack
    if mask is not None:
        stack, values = stack[mask], values[mask]
    has = stack >= 0
    leaf = sum_by(stack[has], values[has], n)
    nz = sum_by(stack[has], (values[has] != 0).astype(np.int64), n)
    subtree, nonzero = leaf.copy(), nz.copy()
    depth = p.callsites.depth()
    parent = p.callsites.parent
    if n:
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
        for d in range(int(depth.max()), 0, -1):  # children before parents
            nodes = order[bounds[d]:bounds[d + 1]]
            np.add.at(subtree, parent[nodes], subtree[nodes])
            np.add.at(nonzero, parent[nodes], nonzero[nodes])
    return Weights(leaf, subtree, nonzero, int(values.astype(np.int64).sum()))


def euler(p: Profile) -> tuple[np.ndarray, np.ndarray]:
    """Pre-order entry index and last descendant's entry index of every callsite."""
    cs = p.callsites
    n = len(cs)
    size = np.ones(n, dtype=np.int64)
    depth = cs.depth()
    tin = np.zeros(n, dtype=np.int64)
    if not n:
        return tin, tin
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    for d in range(int(depth.max()), 0, -1):
        nodes = order[bounds[d]:bounds[d + 1]]
        np.add.at(size, cs.parent[nodes], size[nodes])
    roots = order[bounds[0]:bounds[1]]
    tin[roots] = np.cumsum(size[roots]) - size[roots]
    for d in range(1, int(depth.max()) + 1):
        nodes = order[bounds[d]:bounds[d + 1]]
        par = cs.parent[nodes]
        by_parent = np.argsort(par, kind="stable")
        nodes, par = nodes[by_parent], par[by_parent]
        sizes = size[nodes]
        before = np.cumsum(sizes) - sizes  # running sum across all groups
        group_first = np.searchsorted(par, par, side="left")
        offset_in_group = before - before[group_first]
        tin[nodes] = tin[par] + 1 + offset_in_group
    return tin, tin + size - 1


def node_weights(p: Profile, nodes: NodeMap, w: Weights) -> tuple[np.ndarray, np.ndarray]:
    """(flat, cum) of every node, with pprof's rules (recursion counted once)."""
    cs = p.callsites
    nn = len(nodes)
    flat = np.zeros(nn, dtype=np.int64)
    cum = np.zeros(nn, dtype=np.int64)
    if not len(cs):
        return flat, cum
    loc_of = cs.location.astype(np.int64)
    first_entry = nodes.loc_start[loc_of]
    count = nodes.loc_start[loc_of + 1] - first_entry
    leafy = (w.leaf != 0) & (count > 0)
    np.add.at(flat, nodes.loc_nodes[first_entry[leafy]], w.leaf[leafy])
    pc, pn = pairs(nodes, loc_of, first_entry, count)
    if not pc.size:
        return flat, cum
    tin, tout = euler(p)
    big = np.int64(len(cs) + 1)
    key = pn * big + tin[pc]
    order = np.argsort(key, kind="stable")
    key, pc_sorted = key[order], pc[order]
    reach = pn[order] * big + tout[pc_sorted]
    prev = np.maximum.accumulate(reach)
    prev = np.concatenate(([-1], prev[:-1]))
    top = key > prev  # no occurrence of this node on an ancestor callsite
    np.add.at(cum, pn[order][top], w.subtree[pc_sorted[top]])
    return flat, cum


def pairs(nodes: NodeMap, loc_of: np.ndarray, first_entry: np.ndarray,
          count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(callsite, node) for every line of every callsite, duplicates within a callsite removed."""
    total = int(count.sum())
    pc = np.repeat(np.arange(loc_of.size, dtype=np.int64), count)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    pn = nodes.loc_nodes[np.repeat(first_entry, count) + within]
    multi = count > 1
    if multi.any():  # the same node twice inside one location (inlined recursion)
        key = np.unique(pc * np.int64(len(nodes) + 1) + pn)
        pc, pn = key // (len(nodes) + 1), key % (len(nodes) + 1)
    return pc, pn


def edges(p: Profile, nodes: NodeMap, w: Weights,
          kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Caller -> callee edges with pprof's inline flag (AND over occurrences).

    ``kept`` (a bool per node) restricts the graph to those nodes, as pprof
    does after ``nodecount``: an occurrence's caller is then the nearest kept
    line above it. A line's caller is the next outer line of the same
    location, or a line of an ancestor callsite. Self-edges are skipped and
    only callsites with non-zero samples count, as in pprof.
    Returns (caller, callee, inline) with one row per distinct edge.
    """
    cs = p.callsites
    empty = np.zeros(0, dtype=np.int64)
    if not len(cs):
        return empty, empty, empty.astype(bool)
    if kept is None:
        kept = np.ones(len(nodes), dtype=bool)
    loc_of = cs.location.astype(np.int64)
    first = nodes.loc_start[loc_of]
    count = nodes.loc_start[loc_of + 1] - first
    total = int(count.sum())
    pc = np.repeat(np.arange(len(cs), dtype=np.int64), count)
    k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    node = nodes.loc_nodes[np.repeat(first, count) + k]
    is_kept = kept[node]
    # next kept entry after each entry, within the same callsite
    ahead = np.where(is_kept, np.arange(total), total)
    nxt = np.concatenate((np.minimum.accumulate(ahead[::-1])[::-1][1:], [total]))
    same = nxt < total
    same[same] = pc[nxt[same]] == pc[same]
    # nearest kept line at or above each callsite's innermost line
    first_kept = np.full(len(cs), -1, dtype=np.int64)
    kp = pc[is_kept]
    uniq, at = np.unique(kp, return_index=True)
    first_kept[uniq] = node[is_kept][at]
    above = _propagate_down(cs.parent, first_kept, cs.depth())
    caller = np.full(total, -1, dtype=np.int64)
    caller[same] = node[nxt[same]]
    parent = cs.parent.astype(np.int64)[pc]
    up = ~same & (parent >= 0)
    caller[up] = above[parent[up]]
    keep = is_kept & (caller >= 0) & (caller != node) & (w.nonzero[pc] > 0)
    inline = k != np.repeat(count, count) - 1
    caller, callee, inline = caller[keep], node[keep], inline[keep]
    if not caller.size:
        return empty, empty, empty.astype(bool)
    key = caller * np.int64(len(nodes) + 1) + callee
    order = np.argsort(key, kind="stable")
    key, inline = key[order], inline[order]
    starts = np.concatenate(([0], np.nonzero(np.diff(key))[0] + 1))
    all_inline = np.minimum.reduceat(inline.astype(np.int8), starts).astype(bool)
    uk = key[starts]
    return uk // (len(nodes) + 1), uk % (len(nodes) + 1), all_inline


def _propagate_down(parent: np.ndarray, own: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """value[c] = own[c] if own[c] >= 0 else value[parent[c]] (roots keep own)."""
    value = own.copy()
    if not value.size:
        return value
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    for d in range(1, int(depth.max()) + 1):
        c = order[bounds[d]:bounds[d + 1]]
        missing = c[value[c] < 0]
        value[missing] = value[parent[missing]]
    return value
