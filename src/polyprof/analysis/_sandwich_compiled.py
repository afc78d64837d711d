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
kernels would run compiled (``sandwich._view_kernel``); the numpy twin is the
complete tree cut afterwards (``sandwich._cut_view``), and a differential test
compares both.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from polyprof.model._tree_compiled import _radix

__all__ = ["caller_view"]


@njit(cache=True, nogil=True)
def _view(parent, name_of, depth, cur, w, threshold, width, m_parent, m_name, m_total, m_self, m_count,
          bounds):
    """Merge the reversed paths from ``cur`` level by level as ``_reversed_paths`` does, making
    the children of the made nodes at least ``threshold`` wide (those narrower are made too,
    as cut nodes) and counting in ``m_count`` every node of the complete tree under a cut
    node. Returns (nodes made, levels), or (-1, 0) when the output arrays are full."""
    n = cur.size
    up = np.zeros(n, np.int64)       # >= 0: a made parent; < 0: -(the last level's group + 1)
    root = np.full(n, -1, np.int64)  # the cut node above a counted path
    cap = m_parent.size
    m_parent[0], m_name[0], m_total[0], m_count[0] = -1, -1, 0, 1
    for i in range(n):
        m_total[0] += w[i]
    made, levels = 1, 1
    bounds[0], bounds[1] = 0, 1
    while n:
        size = 16
        while size < 2 * n:
            size *= 2
        slot = np.full(size, -1, np.int32)
        ku, kn, kt = np.empty(n, np.int64), np.empty(n, np.int64), np.zeros(n, np.int64)
        items, top = np.zeros(n, np.int32), np.empty(n, np.int64)
        prov = np.empty(n, np.int32)
        found = 0
        for i in range(n):  # provisional ids by (parent, name): a hash table
            nm = name_of[cur[i]]
            h = (up[i] * np.int64(1000003) + nm * np.int64(7919)) & (size - 1)
            while slot[h] >= 0 and (ku[slot[h]] != up[i] or kn[slot[h]] != nm):
                h = (h + 1) & (size - 1)
            if slot[h] < 0:
                slot[h] = found
                ku[found], kn[found], top[found] = up[i], nm, root[i]
                found += 1
            prov[i] = slot[h]
            kt[slot[h]] += w[i]
            items[slot[h]] += 1
        # the groups under made parents become nodes, in (parent, name) order; the others
        # are nodes of the complete tree under a cut node: counted
        mk = 0
        for g in range(found):
            if ku[g] >= 0:
                mk += 1
            else:
                m_count[top[g]] += 1
        if made + mk > cap:
            return -1, 0
        groups, key = np.empty(mk, np.int64), np.empty(mk, np.int64)
        mk = 0
        for g in range(found):
            if ku[g] >= 0:
                groups[mk], key[mk] = g, ku[g] * width + kn[g]
                mk += 1
        order = np.arange(mk)
        if mk > 1:
            _radix(key, order, 0, mk)
        final = np.full(found, -1, np.int64)
        for r in range(mk):
            g = groups[order[r]]
            final[g] = made
            m_parent[made], m_name[made], m_total[made], m_count[made] = ku[g], kn[g], kt[g], 1
            if abs(kt[g]) < threshold:
                top[g] = made  # a cut node: the root of what is counted below it
            made += 1
        if made > bounds[levels]:
            levels += 1
            bounds[levels] = made
        k = 0
        for i in range(n):
            g = prov[i]
            mid = final[g]
            nxt = parent[cur[i]]
            if nxt <= 0:  # the graph's root (node 0) is no caller
                if mid >= 0:
                    m_self[mid] += w[i]
                continue
            if mid >= 0 and abs(kt[g]) >= threshold:  # a kept node: its paths go on under it
                cur[k], w[k], up[k], root[k] = nxt, w[i], mid, -1
                k += 1
            elif items[g] == 1:  # alone from here: one node of the complete tree per frame above
                m_count[top[g]] += depth[cur[i]] - 1
            else:
                cur[k], w[k], up[k], root[k] = nxt, w[i], -(g + 1), top[g]
                k += 1
        n = k
    return made, levels


def caller_view(parent: np.ndarray, name_of: np.ndarray, depth: np.ndarray, nodes: np.ndarray,
                weight: np.ndarray, threshold: int) -> tuple[np.ndarray, ...] | None:
    """The callers tree of ``nodes`` (each carrying its ``weight``, > 0) cut at ``threshold``:
    (parent, name, self, total, count, level bounds) of the made nodes, level by level as
    ``_reversed_paths`` gives them; ``count``: 1 for kept nodes, for cut ones (narrower than
    ``threshold``) the nodes of the complete tree in their subtree. None: ids too large."""
    cur = np.ascontiguousarray(nodes, dtype=np.int64)
    w = np.ascontiguousarray(weight, dtype=np.int64)
    name_of, parent, depth = (x if x.dtype in (np.int32, np.int64) and x.flags.c_contiguous else
                              np.ascontiguousarray(x, dtype=np.int64) for x in (name_of, parent, depth))
    if (name_of.size and int(name_of.min()) < 0) or cur.size >= np.iinfo(np.int32).max:
        return None
    width = int(name_of.max(initial=0)) + 1
    cap = 4 * (cur.size + int(np.ceil(int(w.sum()) / max(threshold, 1)))) + 64
    while True:
        m_parent, m_name, m_total = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
        m_self, m_count, bounds = np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap + 2, np.int64)
        made, levels = _view(parent, name_of, depth, cur.copy(), w.copy(), max(threshold, 1), width,
                             m_parent, m_name, m_total, m_self, m_count, bounds)
        if made >= 0:
            return (m_parent[:made].copy(), m_name[:made].copy(), m_self[:made].copy(), m_total[:made].copy(),
                    m_count[:made].copy(), bounds[:levels + 1].copy())
        cap *= 4
