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
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model.profile import Profile

__all__ = ["GRANULARITIES", "NodeInfo", "NodeMap", "Weights", "callsite_weights", "euler",
           "calls", "display_name", "edges", "node_map", "node_weights", "ranked", "sum_by"]

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
    """Expand every location of ``p`` into report nodes.

    Each entry (a location's line, or the location itself when it has no
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
    entry_loc = np.repeat(np.arange(len(loc), dtype=np.int64), per_loc)
    first = np.cumsum(per_loc) - per_loc
    k = np.arange(n_entries, dtype=np.int64) - first[entry_loc]
    has_line = (counts[entry_loc] > 0) & (not modules)
    row = loc.line_start[entry_loc + 1] - 1 if not inlines else loc.line_start[entry_loc] + k
    row = np.where(has_line, row, 0)
    fn = np.where(has_line, p.lines.function[row] if len(p.lines) else -1, -1).astype(np.int64)
    name_id, file_id, start_line, texts = _function_keys(p, function, filename)
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
        np.where(has_fn & ~named, start_line[safe], 0) if len(start_line) else zero,
        np.where(named, 0, obj),
    ]
    node, rep = _factorize_rows(cols)
    strs = p.strings
    infos = [NodeInfo(texts[c0], int(c1), texts[c2], int(c3), int(c4), int(c5), strs[c6])
             for c0, c1, c2, c3, c4, c5, c6 in zip(*(c[rep].tolist() for c in cols))]
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
    return NodeMap(infos, [n.printable() for n in infos], loc_start, node, inlined, dup)


def _function_keys(p: Profile, function: bool, filename: bool):  # noqa: ANN202
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
        name_id = np.array([intern(display_name(strs[a], strs[b]))
                            for a, b in zip(f.name.tolist(), f.system_name.tolist())], dtype=np.int64)
    else:
        name_id = np.zeros(n, dtype=np.int64)
    if filename:
        uniq, inverse = np.unique(f.filename, return_inverse=True)
        ids = np.array([intern(os.path.normpath(strs[s])) if strs[s] else 0 for s in uniq.tolist()], dtype=np.int64)
        file_id = ids[inverse.reshape(-1)] if n else np.zeros(0, dtype=np.int64)
    else:
        file_id = np.zeros(n, dtype=np.int64)
    return name_id, file_id, f.start_line.astype(np.int64), texts


def _factorize_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Id of each row's tuple across ``cols`` (dense, 0..k-1) and one representative row per id."""
    n = cols[0].size
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    combined = np.zeros(n, dtype=np.int64)
    for col in cols:
        uniq, code = np.unique(col, return_inverse=True)
        if uniq.size > 1:
            if int(combined.max()) >= (2**62) // uniq.size:
                _, combined = np.unique(combined, return_inverse=True)
                combined = combined.reshape(-1).astype(np.int64)
            combined = combined * uniq.size + code.reshape(-1)
    _, rep, ids = np.unique(combined, return_index=True, return_inverse=True)
    return ids.reshape(-1).astype(np.int64), rep


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


# ---------------------------------------------------------------- weights

_EXACT_FLOAT = 2 ** 53


def sum_by(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by ``keys`` in [0, size).

    bincount (fast, float64) is used when every partial sum is exactly
    representable; otherwise an exact, slower scatter-add.
    """
    if not keys.size:
        return np.zeros(size, dtype=np.int64)
    if values.dtype == np.bool_ or int(np.abs(values).sum(dtype=np.float64)) < _EXACT_FLOAT:
        return np.bincount(keys, weights=values, minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, values.astype(np.int64, copy=False))
    return out


def _push_up(cs, values: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """Subtree sums of each column of ``values`` (n or n x k) over the callsite tree.

    Level by level from the deepest, children are grouped by parent and
    summed with one ``reduceat`` per level (exact int64 arithmetic).
    """
    out = np.array(values, dtype=np.int64, copy=True)
    order, bounds = cs.levels()
    parent = cs.parent
    for d in range(len(bounds) - 2, 0, -1):  # children before parents
        nodes = order[bounds[d]:bounds[d + 1]]
        if not nodes.size:
            continue
        par = parent[nodes]
        if par.size > 1 and (par[1:] < par[:-1]).any():
            by_parent = np.argsort(par, kind="stable")
            nodes, par = nodes[by_parent], par[by_parent]
        starts = np.flatnonzero(np.concatenate(([True], par[1:] != par[:-1])))
        out[par[starts]] += np.add.reduceat(out[nodes], starts, axis=0)
    return out


@dataclass
class Weights:
    """Per-callsite weights for one value column."""

    leaf: np.ndarray      # sum of samples whose stack ends here
    subtree: np.ndarray   # sum of samples whose stack passes through here
    nonzero: np.ndarray   # > 0 where a non-zero sample passes (a count; 0/1 for non-negative values)
    total: int            # sum over all samples (including empty stacks)


def callsite_weights(p: Profile, values: np.ndarray, mask: np.ndarray | None = None) -> Weights:
    """Weights of ``values`` (one per sample) over the callsite tree."""
    n = len(p.callsites)
    stack = p.samples.stack
    if mask is not None:
        stack, values = stack[mask], values[mask]
    has = stack >= 0
    leaf = sum_by(stack[has], values[has], n)
    total = int(values.astype(np.int64).sum())
    if not values.size or values.min() >= 0:
        # Without negative values a subtree holds a non-zero sample iff its sum is non-zero.
        subtree = _push_up(p.callsites, leaf) if n else leaf
        return Weights(leaf, subtree, (subtree != 0).astype(np.int64), total)
    nz = sum_by(stack[has], values[has] != 0, n)
    both = _push_up(p.callsites, np.stack([leaf, nz], axis=1)) if n else np.zeros((0, 2), np.int64)
    return Weights(leaf, both[:, 0], both[:, 1], total)


def euler(p: Profile) -> tuple[np.ndarray, np.ndarray]:
    """Pre-order entry index and last descendant's entry index of every callsite.

    Cached on the callsite table (tables are immutable once built)."""
    cs = p.callsites
    cached = getattr(cs, "_euler", None)
    if cached is not None and len(cached[0]) == len(cs):
        return cached
    cs._euler = _euler(cs)  # type: ignore[attr-defined]
    return cs._euler


def _euler(cs) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    n = len(cs)
    tin = np.zeros(n, dtype=np.int64)
    if not n:
        return tin, tin
    size = _push_up(cs, np.ones(n, dtype=np.int64))
    order, bounds = cs.levels()
    roots = order[bounds[0]:bounds[1]]
    tin[roots] = np.cumsum(size[roots]) - size[roots]
    for d in range(1, len(bounds) - 1):
        nodes = order[bounds[d]:bounds[d + 1]]
        par = cs.parent[nodes]
        if par.size > 1 and (par[1:] < par[:-1]).any():
            by_parent = np.argsort(par, kind="stable")
            nodes, par = nodes[by_parent], par[by_parent]
        before = np.cumsum(size[nodes]) - size[nodes]  # running sum across all groups
        new_group = np.flatnonzero(np.concatenate(([True], par[1:] != par[:-1])))
        group_first = np.repeat(new_group, np.diff(np.append(new_group, par.size)))
        tin[nodes] = tin[par] + 1 + before - before[group_first]
    return tin, tin + size - 1


def _small_ids(ids: np.ndarray, count: int) -> np.ndarray:
    """``ids`` in the narrowest unsigned type (numpy radix-sorts 8/16-bit keys)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if count <= np.iinfo(dtype).max:
            return ids.astype(dtype)
    return ids


def node_weights(p: Profile, nodes: NodeMap, w: Weights) -> tuple[np.ndarray, np.ndarray]:
    """(flat, cum) of every node, with pprof's rules (recursion counted once).

    cum: a node's occurrences on callsites are visited in pre-order per node;
    an occurrence counts when it lies outside the subtree of the previous
    counted one, i.e. no ancestor holds the same node.
    """
    cs = p.callsites
    nn = len(nodes)
    if not len(cs):
        return np.zeros(nn, dtype=np.int64), np.zeros(nn, dtype=np.int64)
    loc_of = cs.location.astype(np.int64)
    first_entry = nodes.loc_start[loc_of]
    count = nodes.loc_start[loc_of + 1] - first_entry
    leafy = (w.leaf != 0) & (count > 0)
    flat = sum_by(nodes.loc_nodes[first_entry[leafy]], w.leaf[leafy], nn)
    tin, tout = euler(p)
    preorder = np.empty(len(cs), dtype=np.int64)
    preorder[tin] = np.arange(len(cs), dtype=np.int64)
    live = preorder[w.nonzero[preorder] > 0]  # where no non-zero sample passes there is nothing to count
    pc, pn = pairs(nodes, live, loc_of)
    order = np.argsort(_small_ids(pn, nn), kind="stable")  # by node, pre-order within
    pn, pc = pn[order], pc[order]
    big = np.int64(len(cs) + 1)
    reach = np.maximum.accumulate(pn * big + tout[pc])
    top = np.ones(pn.size, dtype=bool)
    top[1:] = pn[1:] * big + tin[pc[1:]] > reach[:-1]
    cum = sum_by(pn[top], w.subtree[pc[top]], nn)
    return flat, cum


def pairs(nodes: NodeMap, callsites: np.ndarray, loc_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(callsite, node) for every line of ``callsites``, in that order; a node
    repeated inside one location (inlined recursion) is listed once."""
    locs = loc_of[callsites]
    first = nodes.loc_start[locs]
    count = nodes.loc_start[locs + 1] - first
    if count.size and count.min() == 1 and count.max() == 1:  # no inline expansion: one node each
        return callsites, nodes.loc_nodes[first]
    # Most callsites have one line: place those directly; expand only the others.
    offsets = np.cumsum(count) - count
    total = int(count.sum())
    pc = np.empty(total, dtype=np.int64)
    pn = np.empty(total, dtype=np.int64)
    one = count == 1
    pc[offsets[one]] = callsites[one]
    pn[offsets[one]] = nodes.loc_nodes[first[one]]
    many = np.flatnonzero(count > 1)
    reps = count[many]
    within = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    at = np.repeat(offsets[many], reps) + within
    entry = np.repeat(first[many], reps) + within
    pc[at] = np.repeat(callsites[many], reps)
    pn[at] = nodes.loc_nodes[entry]
    dup = nodes.entry_dup[entry]
    if dup.any():
        keep = np.ones(total, dtype=bool)
        keep[at[dup]] = False
        return pc[keep], pn[keep]
    return pc, pn


def edges(p: Profile, nodes: NodeMap, w: Weights, kept: np.ndarray | None = None,
          callees: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Caller -> callee edges with pprof's inline flag (AND over occurrences).

    ``kept`` (a bool per node) restricts the graph to those nodes, as pprof
    does after ``nodecount``: an occurrence's caller is then the nearest kept
    line above it. A line's caller is the next outer line of the same
    location, or a line of an ancestor callsite. Self-edges are skipped and
    only callsites with non-zero samples count, as in pprof. ``callees``
    (bool per node) limits the work to edges into those nodes.
    Returns (caller, callee, inline) with one row per distinct edge.
    """
    _, caller, callee, inline = calls(p, nodes, w, kept, callees)
    return _distinct_edges(caller, callee, inline, len(nodes))


def calls(p: Profile, nodes: NodeMap, w: Weights, kept: np.ndarray | None = None,
          callees: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every occurrence of an edge (see :func:`edges`): (callsite, caller, callee, inline).

    One row per (callsite, inline line) where a kept node is called, so edge
    weights can count a call once per stack (``tree``).
    """
    cs = p.callsites
    nn = len(nodes)
    empty = np.zeros(0, dtype=np.int64)
    kept = np.ones(nn, dtype=bool) if kept is None else kept
    wanted = kept if callees is None else kept & callees
    if not len(cs) or not wanted.any():
        return empty, empty, empty, empty.astype(bool)
    # occurrences of wanted nodes on live callsites
    entry_ok = wanted[nodes.loc_nodes]
    loc_has = np.add.reduceat(entry_ok, nodes.loc_start[:-1]) if entry_ok.size else entry_ok
    loc_has = loc_has.astype(bool) & (np.diff(nodes.loc_start) > 0)
    sites = np.flatnonzero(loc_has[cs.location] & (w.nonzero > 0))
    loc_of = cs.location.astype(np.int64)
    locs = loc_of[sites]
    first, count = nodes.loc_start[locs], nodes.loc_start[locs + 1] - nodes.loc_start[locs]
    pc = np.repeat(sites, count)
    k = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    entry = np.repeat(first, count) + k
    sel = wanted[nodes.loc_nodes[entry]]
    pc, k, entry = pc[sel], k[sel], entry[sel]
    callee = nodes.loc_nodes[entry]
    end = nodes.loc_start[loc_of[pc] + 1]
    caller = _caller_in_location(nodes, kept, entry + 1, end)
    missing = caller < 0
    caller[missing] = _kept_above(cs, nodes, kept, loc_of, cs.parent.astype(np.int64)[pc[missing]])
    inline = entry + 1 < end
    keep = (caller >= 0) & (caller != callee)
    return pc[keep], caller[keep], callee[keep], inline[keep]


def _caller_in_location(nodes: NodeMap, kept: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """First kept node among entries start..end-1 of a location (-1 if none)."""
    out = np.full(start.size, -1, dtype=np.int64)
    cur, todo = start.copy(), np.arange(start.size)
    while todo.size:
        inside = cur < end[todo]
        todo, cur = todo[inside], cur[inside]
        node = nodes.loc_nodes[cur]
        hit = kept[node]
        out[todo[hit]] = node[hit]
        todo, cur = todo[~hit], cur[~hit] + 1
    return out


def _kept_above(cs, nodes: NodeMap, kept: np.ndarray, loc_of: np.ndarray,  # noqa: ANN001
                start: np.ndarray) -> np.ndarray:
    """Nearest kept node at or above callsite ``start`` (its lines innermost first)."""
    out = np.full(start.size, -1, dtype=np.int64)
    cur, todo = start.copy(), np.arange(start.size)
    while todo.size:
        alive = cur >= 0
        todo, cur = todo[alive], cur[alive]
        if not todo.size:
            break
        a = nodes.loc_start[loc_of[cur]]
        found = _caller_in_location(nodes, kept, a, nodes.loc_start[loc_of[cur] + 1])
        hit = found >= 0
        out[todo[hit]] = found[hit]
        todo, cur = todo[~hit], cs.parent.astype(np.int64)[cur[~hit]]
    return out


def _distinct_edges(caller: np.ndarray, callee: np.ndarray, inline: np.ndarray,
                    nn: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not caller.size:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z.astype(bool)
    key = caller * np.int64(nn + 1) + callee
    uk, inverse = np.unique(key, return_inverse=True)
    plain = np.bincount(inverse.reshape(-1), weights=~inline, minlength=uk.size) > 0
    return uk // (nn + 1), uk % (nn + 1), ~plain


def ranked(nodes: NodeMap, flat: np.ndarray, cum: np.ndarray) -> list[int]:
    """Nodes with weight in pprof's report order: |flat| desc, name, |cum| desc, identity."""
    live = np.nonzero((flat != 0) | (cum != 0))[0]
    names, infos = nodes.names, nodes.infos
    flat_l, cum_l = np.abs(flat).tolist(), np.abs(cum).tolist()
    return sorted(live.tolist(), key=lambda n: (-flat_l[n], names[n], -cum_l[n], infos[n]))
