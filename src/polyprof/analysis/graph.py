"""Report weights as ``go tool pprof`` computes them, over the callsite tree.

Nodes (what a row stands for) come from :mod:`polyprof.analysis.nodes`.
Weights are computed once per *callsite*, not per sample: the samples are
summed onto their leaf callsites, pushed up the tree, and a node's cum weight
is the weight of the callsites where it occurs with no occurrence above
(recursion counted once, as pprof does), found with Euler-tour intervals.
"""

from __future__ import annotations

import numpy as np

from polyprof.analysis.nodes import GRANULARITIES, NodeInfo, NodeMap, display_name, node_map
from polyprof.model.bulk_stacks import stack_kernels
from polyprof.model.profile import Profile
from polyprof.model.tree import outermost, segment_positions

__all__ = ["GRANULARITIES", "NodeInfo", "NodeMap", "Weights", "callsite_weights",
           "calls", "display_name", "edges", "node_map", "node_weights", "ranked", "sum_by", "sum_by_stack"]

# ---------------------------------------------------------------- weights

_EXACT_FLOAT = 2 ** 53


def sum_by(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by ``keys`` in [0, size).

    bincount (fast, float64) is used when every partial sum is exactly
    representable; otherwise an exact, slower scatter-add.
    """
    if not keys.size:
        return np.zeros(size, dtype=np.int64)
    if keys.size < size:  # a sparse scatter (samples into callsites): no float64 array of ``size``
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, keys, values.astype(np.int64, copy=False))
        return out
    step = max(_CHUNK, 8 * size)
    if keys.size > 2 * step:  # many more samples than groups: a chunk at a time (exact as the whole)
        out = np.zeros(size, dtype=np.int64)
        for lo in range(0, keys.size, step):
            out += sum_by(keys[lo:lo + step], values[lo:lo + step], size)
        return out
    if values.dtype == np.bool_ or int(np.abs(values, dtype=np.int64).sum(dtype=np.float64)) < _EXACT_FLOAT:
        return np.bincount(keys, weights=values, minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, values.astype(np.int64, copy=False))
    return out


#: Keys summed per bincount by :func:`sum_by` when they are many more than the groups (at
#: least this many, and 8 per group): its int and float copies of the keys and values stay
#: small (a top table of millions of samples: ~200 MB of them for 6.5M samples at once).
_CHUNK = 1 << 17


#: Samples per step of :func:`sum_by_stack`.
_STACK_CHUNK = 1 << 20


def sum_by_stack(stack: np.ndarray, values: np.ndarray, size: int,
                 at: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Exact int64 sums of ``values`` by ``stack`` (``at[stack]`` when given: a node per
    callsite, those < 0 left out), and the sum of the rows without a stack (< 0), a chunk of
    samples at a time: no masked copy of the sample columns (four of them, 26-52 MB each for
    6.5M samples, were the peak of a filtered flame graph)."""
    out = np.zeros(size, dtype=np.int64)
    empty = 0
    step = max(_STACK_CHUNK, 8 * size)
    for lo in range(0, stack.size, step):
        keys, weight = stack[lo:lo + step], values[lo:lo + step]
        has = keys >= 0
        if not has.all():
            empty += int(weight[~has].astype(np.int64).sum())
            keys, weight = keys[has], weight[has]
        if at is not None:
            keys = at[keys]
            kept = keys >= 0
            if not kept.all():
                keys, weight = keys[kept], weight[kept]
        out += sum_by(keys, weight, size)
    return out, empty


class Weights:
    """Per-callsite weights for one value column.

    ``leaf``: sum of samples whose stack ends here; ``subtree``: sum of samples whose stack
    passes through here; ``nonzero``: > 0 where a non-zero sample passes (a count; 0/1 for
    non-negative values); ``total``: sum over all samples (including empty stacks).
    ``samples``: (leaf callsite, value) of the samples with a stack, when kept; then ``leaf``
    may be left to be summed on first use (``top`` never needs it: its flat column comes from
    the samples), which spares an int64 per callsite at the analysis' peak.
    """

    def __init__(self, leaf: np.ndarray | None, subtree: np.ndarray, nonzero: np.ndarray, total: int,
                 samples: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        if leaf is None and samples is None:
            raise ValueError("Weights needs leaf sums or the samples to sum them from")
        self._leaf = leaf
        self.subtree = subtree
        self.nonzero = nonzero
        self.total = total
        self.samples = samples

    @property
    def leaf(self) -> np.ndarray:
        if self._leaf is None:
            assert self.samples is not None
            self._leaf = sum_by(*self.samples, self.subtree.shape[0])
        return self._leaf


def callsite_weights(p: Profile, values: np.ndarray, mask: np.ndarray | None = None) -> Weights:
    """Weights of ``values`` (one per sample) over the callsite tree."""
    n = len(p.callsites)
    stack = p.samples.stack
    if mask is not None:
        stack, values = stack[mask], values[mask]
    has = stack >= 0
    samples = (stack, values) if has.all() else (stack[has], values[has])  # no copy when all have one
    leaf = sum_by(*samples, n)
    total = int(values.astype(np.int64).sum())
    if not values.size or values.min() >= 0:
        # Without negative values a subtree holds a non-zero sample iff its sum is non-zero.
        subtree = _subtree_sums(p, leaf) if n else leaf.copy()
        return Weights(None, subtree, (subtree != 0).view(np.uint8), total, samples)  # 0/1: a byte each
    nz = sum_by(stack[has], values[has] != 0, n)
    both = p.callsites.subtree_sums(np.stack([leaf, nz], axis=1)) if n else np.zeros((0, 2), np.int64)
    return Weights(leaf, both[:, 0], both[:, 1], total, samples)


def _subtree_sums(p: Profile, leaf: np.ndarray) -> np.ndarray:
    """Subtree sums of ``leaf`` (which this may overwrite: it is then the result)."""
    fast = stack_kernels(len(p.callsites)) if p.callsites.preorder_size() is not None else None
    if fast is not None:
        return fast.subtree_sums_in_place(leaf, p.callsites.parent)
    return p.callsites.subtree_sums(leaf)


def _small_ids(ids: np.ndarray, count: int) -> np.ndarray:
    """``ids`` in the narrowest unsigned type (numpy radix-sorts 8/16-bit keys)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if count <= np.iinfo(dtype).max:
            return ids.astype(dtype)
    return ids


def _small_signed(count: int) -> np.dtype:
    """The narrowest signed type holding -1 and ids below ``count``."""
    return np.dtype(np.int16 if count < np.iinfo(np.int16).max else np.int32 if count < np.iinfo(np.int32).max
                    else np.int64)


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
    loc_of = cs.location
    if w.samples is not None:  # from the samples: no per-callsite leaf sums needed
        leafy, weight = w.samples
    else:
        leafy = np.flatnonzero(w.leaf)
        weight = w.leaf[leafy]
    # per location its innermost line's node (-1: no line), then one gather per sample
    lines = np.diff(nodes.loc_start) > 0
    first_of_loc = np.full(lines.size, -1, np.int64)
    first_of_loc[lines] = nodes.loc_nodes[nodes.loc_start[:-1][lines]]
    first_node = first_of_loc.astype(_small_signed(nn))[loc_of[leafy]]
    if bool(lines.all()):  # every location has a line: every sample counts (no copies)
        flat = sum_by(first_node, weight, nn)
    else:
        has_line = first_node >= 0
        flat = sum_by(first_node[has_line], weight[has_line], nn)
    del first_node
    size = cs.preorder_size()
    fast = stack_kernels(len(cs))
    if fast is not None:  # one walk in pre-order, no (callsite, node) pairs to sort
        start, uniq = nodes.distinct_lines()
        if size is not None:
            return flat, fast.outermost_sums(loc_of, size, w.nonzero > 0, start, uniq, w.subtree, nn)
        # other ids (a filter's rebuilt tree): the same walk over the callsites put in pre-order
        tin, tout = cs.euler()
        at = np.empty(len(cs), dtype=np.int64)
        at[tin] = np.arange(len(cs), dtype=np.int64)
        return flat, fast.outermost_sums(loc_of[at], (tout - tin + 1)[at], (w.nonzero > 0)[at], start, uniq,
                                         w.subtree[at], nn)
    tin, tout = cs.euler()
    # Callsites in pre-order, skipping those no non-zero sample passes (nothing to count there).
    if cs.preorder_size() is not None:
        live = np.flatnonzero(w.nonzero > 0)
    else:
        preorder = np.empty(len(cs), dtype=np.int64)
        preorder[tin] = np.arange(len(cs), dtype=np.int64)
        live = preorder[w.nonzero[preorder] > 0]
    pc, pn = pairs(nodes, live, loc_of)
    order = np.argsort(_small_ids(pn, nn), kind="stable")  # by node, pre-order within
    pn, pc = pn[order], pc[order]
    del order
    top = outermost(pn, pc, tin, tout)
    cum = sum_by(pn[top], w.subtree[pc[top]], nn)
    return flat, cum


def pairs(nodes: NodeMap, callsites: np.ndarray, loc_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(callsite, node) for every line of ``callsites``, in that order; a node
    repeated inside one location (inlined recursion) is listed once."""
    start, uniq = nodes.distinct_lines()
    more = (np.diff(start) - 1)[loc_of[callsites]]  # every callsite's further (outer, inlined-into) lines
    if more.size and int(more.min()) < 0:  # callsites whose location lists no node: none
        callsites, more = callsites[more >= 0], more[more >= 0]
    locs = loc_of[callsites]
    first = start[locs]
    pn = uniq[first]  # every callsite's innermost line
    if not more.any():
        return callsites, pn
    multi = np.flatnonzero(more)
    reps = more[multi].astype(np.int64)
    total = int(reps.sum())
    within = segment_positions(reps)
    # A callsite's innermost line goes after every line of the callsites before
    # it; its outer lines follow it directly.
    at_first = np.arange(callsites.size, dtype=np.int64)
    at_first[1:] += np.cumsum(more[:-1], dtype=np.int64)
    at_outer = np.repeat(at_first[multi] + 1, reps) + within
    pc = np.empty(callsites.size + total, dtype=callsites.dtype)
    out = np.empty(callsites.size + total, dtype=uniq.dtype)
    pc[at_first], out[at_first] = callsites, pn
    pc[at_outer] = np.repeat(callsites[multi], reps)
    out[at_outer] = uniq[np.repeat(first[multi].astype(np.int64) + 1, reps) + within]
    return pc, out


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
    _, caller, callee, inline, _ = calls(p, nodes, w, kept, callees)
    return _distinct_edges(caller, callee, inline, len(nodes))


def calls(p: Profile, nodes: NodeMap, w: Weights, kept: np.ndarray | None = None,
          callees: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Every occurrence of an edge (see :func:`edges`): (callsite, caller, callee, inline, residual).

    One row per (callsite, inline line) where a kept node is called, so edge
    weights can count a call once per stack (``tree``). ``residual`` marks a
    call that jumps over nodes that are not kept (pprof draws those dotted).
    """
    cs = p.callsites
    nn = len(nodes)
    empty = np.zeros(0, dtype=np.int64)
    kept = np.ones(nn, dtype=bool) if kept is None else kept
    wanted = kept if callees is None else kept & callees
    if not len(cs) or not wanted.any():
        return empty, empty, empty, empty.astype(bool), empty.astype(bool)
    # occurrences of wanted nodes on live callsites
    ok_before = np.zeros(nodes.loc_nodes.size + 1, dtype=np.int64)  # (locations may list no entry)
    np.cumsum(wanted[nodes.loc_nodes], out=ok_before[1:])
    loc_has = ok_before[nodes.loc_start[1:]] > ok_before[nodes.loc_start[:-1]]
    sites = np.flatnonzero(loc_has[cs.location] & (w.nonzero > 0))
    loc_of = cs.location  # gathered, then widened: never a whole int64 copy (11M callsites: 88 MB)
    locs = loc_of[sites].astype(np.int64)
    first, count = nodes.loc_start[locs], nodes.loc_start[locs + 1] - nodes.loc_start[locs]
    pc = np.repeat(sites, count)
    k = segment_positions(count)
    entry = np.repeat(first, count) + k
    sel = wanted[nodes.loc_nodes[entry]]
    pc, k, entry = pc[sel], k[sel], entry[sel]
    callee = nodes.loc_nodes[entry]
    end = nodes.loc_start[loc_of[pc].astype(np.int64) + 1]
    caller, at = _caller_in_location(nodes, kept, entry + 1, end)
    residual = (caller >= 0) & (at != entry + 1)
    missing = caller < 0
    caller[missing], skipped = _kept_above(cs, nodes, kept, loc_of, cs.parent[pc[missing]].astype(np.int64))
    residual[missing] = skipped | (entry + 1 < end)[missing]
    inline = entry + 1 < end
    keep = (caller >= 0) & (caller != callee)
    return pc[keep], caller[keep], callee[keep], inline[keep], residual[keep]


def _caller_in_location(nodes: NodeMap, kept: np.ndarray, start: np.ndarray,
                        end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First kept node among entries start..end-1 of a location (-1 if none), and its entry."""
    out = np.full(start.size, -1, dtype=np.int64)
    at = np.full(start.size, -1, dtype=np.int64)
    cur, todo = start.copy(), np.arange(start.size)
    while todo.size:
        inside = cur < end[todo]
        todo, cur = todo[inside], cur[inside]
        node = nodes.loc_nodes[cur]
        hit = kept[node]
        out[todo[hit]] = node[hit]
        at[todo[hit]] = cur[hit]
        todo, cur = todo[~hit], cur[~hit] + 1
    return out, at


def _kept_above(cs, nodes: NodeMap, kept: np.ndarray, loc_of: np.ndarray,  # noqa: ANN001
                start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest kept node at or above callsite ``start`` (its lines innermost first), and
    whether lines were skipped to reach it."""
    out = np.full(start.size, -1, dtype=np.int64)
    skipped = np.zeros(start.size, dtype=bool)
    cur, todo = start.copy(), np.arange(start.size)
    while todo.size:
        alive = cur >= 0
        todo, cur = todo[alive], cur[alive]
        if not todo.size:
            break
        loc = loc_of[cur].astype(np.int64)
        a = nodes.loc_start[loc]
        found, at = _caller_in_location(nodes, kept, a, nodes.loc_start[loc + 1])
        hit = found >= 0
        out[todo[hit]] = found[hit]
        skipped[todo[hit]] |= at[hit] != a[hit]
        skipped[todo[~hit]] = True
        todo, cur = todo[~hit], cs.parent[cur[~hit]].astype(np.int64)  # (the parent column gathered, not widened)
    return out, skipped


def _distinct_edges(caller: np.ndarray, callee: np.ndarray, inline: np.ndarray,
                    nn: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not caller.size:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z.astype(bool)
    key = caller * np.int64(nn + 1) + callee
    uk, inverse = np.unique(key, return_inverse=True)
    plain = np.bincount(inverse.reshape(-1), weights=~inline, minlength=uk.size) > 0
    return uk // (nn + 1), uk % (nn + 1), ~plain


def ranked(nodes: NodeMap, flat: np.ndarray, cum: np.ndarray, mask: np.ndarray | None = None,
           by_cum: bool = False) -> list[int]:
    """Nodes with weight (and in ``mask``) in pprof's report order: |flat| desc, name,
    |cum| desc, identity; or with ``by_cum`` (pprof's -cum): |cum| desc, name, |flat| desc."""
    live = (flat != 0) | (cum != 0)
    if mask is not None:
        live &= mask
    names, infos = nodes.names, nodes.infos
    first, second = (cum, flat) if by_cum else (flat, cum)
    first_l, second_l = np.abs(first).tolist(), np.abs(second).tolist()
    return sorted(np.flatnonzero(live).tolist(), key=lambda n: (-first_l[n], names[n], -second_l[n], infos[n]))
