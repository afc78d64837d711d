"""Compiled kernel of the sandwich's full-resolution callers *view* (numba, no compiler needed).

At full resolution the callers tree of a function can be far larger than the
flame graph it comes from: each node of the function carries its samples up
its own reversed path, and once two paths differ they never merge again (on
the 900k-sample benchmark pprof, the hottest function's callers are 16.5M
nodes against the graph's 3M). A page draws only the widest few tens of
thousands of them, so :func:`caller_view` makes only the nodes at least
``threshold`` wide, plus each one's narrower children ("cut" nodes: the roots
of what the view leaves out, with their numbers), and *counts* the nodes under
each cut node without making them — which is what keeps node ids and counts
those of the complete tree. Counting needs no node: a path alone in its node
stays alone up to the graph's root, so it adds its remaining depth at once;
only paths still shared with others walk on. Imported only for work the tree
kernels would run compiled (``sandwich._view_kernel``); without it the complete
tree is made (``sandwich._callers``), and differential tests compare the two:
the cut tree against the complete one cut (``tests/test_sandwich_view.py``).

Its grouping of a level's paths is the tree kernels' own
(:func:`~polyprof.model._tree_compiled._group_level`, which ``_reversed_paths``
uses too); the node ids, parents and cut nodes the paths carry are int32 while
they fit (the walk is memory-bound: 0.26 -> 0.16 s of CPU on the benchmark's
hottest function, 9.7M path steps).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from polyprof.model._tree_compiled import _group_level, _merged_root, _radix, table_room

__all__ = ["caller_view"]


@njit(cache=True, nogil=True)
def _view(parent, name_of, depth, cur, w, tail, threshold, width, m_parent, m_name, m_total, m_self, m_count,
          bounds, up, root, slot, alone):
    """Merge the reversed paths from ``cur`` level by level as ``_reversed_paths`` does (its
    grouping, :func:`~polyprof.model._tree_compiled._group_level`), making the children of
    the made nodes at least ``threshold`` wide (those narrower are made too, as cut nodes) and
    counting in ``m_count`` every node of the complete tree under a cut node. ``up`` (zeros)
    and ``root`` (-1): the items' columns, of the dtype of the node and group ids (``cur``'s
    or wider), whose least value ``alone`` marks paths counted at once. ``tail`` (empty: none):
    each path's last node, where it goes on from node 0 (``reversed_paths``'s; ``depth`` then
    counts it). Returns (nodes made, levels), or (-1, 0) when the output arrays are full."""
    n = cur.size
    tails = tail.size > 0
    # up >= 0: a made parent; < 0: -(the last level's group + 1). root: the cut node above a counted path
    nxt = np.empty_like(cur)
    key, kt = np.empty(n, np.int64), np.empty(n, np.int64)
    items, prov = np.empty(n, np.int32), np.empty(n, np.int32)
    top, final, act = np.empty_like(up), np.empty_like(up), np.empty(2 * n, up.dtype)
    cap = m_parent.size
    _merged_root(w, m_parent, m_name, m_total, bounds)
    m_count[0] = 1
    made, levels, found = 1, 1, 1
    while n:
        found = _group_level(parent, name_of, cur, up, w, n, width, found, nxt, key, kt, prov, slot)
        items[:found] = 0
        for i in range(n):  # each group's items, and the cut node above it (one per group)
            g = prov[i]
            items[g] += 1
            top[g] = root[i]
        # the groups under made parents (key >= 0) become nodes, in (parent, name) order; the
        # others are nodes of the complete tree under a cut node: counted
        mk = 0
        for g in range(found):
            final[g] = -1
            if key[g] >= 0:
                mk += 1
            else:
                m_count[top[g]] += 1
        if made + mk > cap:
            return -1, 0
        groups = np.empty(mk, np.int64)
        mk = 0
        for g in range(found):
            if key[g] >= 0:
                groups[mk] = g
                mk += 1
        order = groups.copy()
        if mk > 1:
            _radix(key, order, 0, mk)
        for r in range(mk):
            g = order[r]
            final[g] = made
            m_parent[made], m_name[made], m_total[made], m_count[made] = key[g] // width, key[g] % width, kt[g], 1
            if abs(kt[g]) < threshold:
                top[g] = made  # a cut node: the root of what is counted below it
            made += 1
        if made > bounds[levels]:
            levels += 1
            bounds[levels] = made
        # where each group's items go (their next parent, their cut node), side by side: the
        # walk below reads one cache line per item, not three arrays
        for g in range(found):
            if final[g] >= 0 and abs(kt[g]) >= threshold:  # a kept node: its paths go on under it
                act[2 * g], act[2 * g + 1] = final[g], -1
            elif items[g] == 1:  # alone from here: one node of the complete tree per frame above
                act[2 * g], act[2 * g + 1] = alone, top[g]
            else:  # counted under the cut node top[g], as one group of this level
                act[2 * g], act[2 * g + 1] = -(g + 1), top[g]
        k = 0
        for i in range(n):
            g = prov[i]
            nx = nxt[i]
            if nx <= 0 and tails and tail[i] > 0:  # on to its last node
                nx = tail[i]
                tail[i] = 0
            if nx <= 0:  # the graph's root (node 0) is no caller
                if final[g] >= 0:
                    m_self[final[g]] += w[i]
                continue
            u, r = act[2 * g], act[2 * g + 1]
            if u == alone:
                m_count[r] += depth[cur[i]] - 1
            else:
                cur[k], w[k], up[k], root[k] = nx, w[i], u, r
                if tails:
                    tail[k] = tail[i]
                k += 1
        n = k
    return made, levels


def caller_view(parent: np.ndarray, name_of: np.ndarray, depth: np.ndarray, nodes: np.ndarray,
                weight: np.ndarray, threshold: int, tail: np.ndarray | None = None) -> tuple[np.ndarray, ...] | None:
    """The callers tree of ``nodes`` (each carrying its ``weight``, > 0) cut at ``threshold``:
    (parent, name, self, total, count, level bounds) of the made nodes, level by level as
    ``_reversed_paths`` gives them; ``count``: 1 for kept nodes, for cut ones (narrower than
    ``threshold``) the nodes of the complete tree in their subtree; ``tail``: as
    ``reversed_paths``'s (``depth`` counting it). None: ids too large."""
    w = np.ascontiguousarray(weight, dtype=np.int64)
    name_of, parent, depth = (x if x.dtype in (np.int32, np.int64) and x.flags.c_contiguous else
                              np.ascontiguousarray(x, dtype=np.int64) for x in (name_of, parent, depth))
    if (name_of.size and int(name_of.min()) < 0) or nodes.size >= np.iinfo(np.int32).max:
        return None
    width = int(name_of.max(initial=0)) + 1
    cap = 4 * (nodes.size + int(np.ceil(int(w.sum()) / max(threshold, 1)))) + 64
    # never more nodes than the paths have frames (a threshold of 1 on nanoseconds asked for 85 GB)
    cap = min(cap, int(depth[nodes].sum(dtype=np.int64)) + 64)
    slot = np.empty(table_room(nodes.size), np.int32)
    while True:
        # the items' node ids, made parents and cut nodes: int32 while they fit (the walk's traffic)
        ids = np.int32 if max(cap, parent.size) < np.iinfo(np.int32).max else np.int64
        m_parent, m_name, m_total = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
        m_self, m_count, bounds = np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap + 2, np.int64)
        last = np.zeros(0, ids) if tail is None else np.array(tail, dtype=ids)
        made, levels = _view(parent, name_of, depth, np.array(nodes, dtype=ids), w.copy(), last, max(threshold, 1),
                             width, m_parent, m_name, m_total, m_self, m_count, bounds, np.zeros(nodes.size, ids),
                             np.full(nodes.size, -1, ids), slot, np.iinfo(ids).min)
        if made >= 0:
            return (m_parent[:made].copy(), m_name[:made].copy(), m_self[:made].copy(), m_total[:made].copy(),
                    m_count[:made].copy(), bounds[:levels + 1].copy())
        cap *= 4
