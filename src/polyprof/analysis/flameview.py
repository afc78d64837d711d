"""Views of a whole flame graph for interactive front ends: zoomed slices, search shares, children.

A flame graph of a large profile has millions of nodes (the 900k-sample
benchmark profile has 3M name paths) while a page can draw only the nodes
wider than a pixel. :class:`FlameIndex` keeps a complete, unpruned
:class:`~polyprof.analysis.flame.FlameTree` (build it with ``max_nodes=0,
min_fraction=0``) and cuts views of it, so nothing is ever dropped from the
data: zooming into a node shows its narrow descendants at full resolution.

- :meth:`FlameIndex.slice` — the subtree of one node, without the nodes
  narrower than a fraction of it; each kept node's ``hidden`` width is the
  weight of its left-out children, which a renderer draws as one merged
  block (merged visually, never dropped: the weight is still there);
- :meth:`FlameIndex.search` — nodes whose name matches a regular expression
  and the matched share: the weight of samples with a matching frame on
  their stack (the total of every matching node without a matching
  ancestor), of the whole graph and of the zoomed subtree;
- :meth:`FlameIndex.children` — one node's children, widest first (an
  expandable call tree);
- :meth:`FlameIndex.details` — one node's numbers, path and identity.

Numbers are the tree's own (``self``, ``total``, ``width``, ``base_*``);
this module adds only the matched share and the hidden widths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis.flame import FlameTree, prune
from polyprof.analysis.result import Result, percent
from polyprof.errors import OptionsError
from polyprof.model import tree

__all__ = ["FlameIndex", "FlameSlice", "SearchResult", "missing_node"]


@dataclass(frozen=True)
class SearchResult:
    """Nodes matching ``regex`` and the weight of samples with a matching frame."""

    regex: str
    matched: int          # weight of samples with a match on their stack (whole graph)
    total: int            # the graph's total
    zoom_matched: int     # the same, within the zoomed subtree (its whole weight if it or an ancestor matches)
    zoom_total: int
    names: int            # distinct matching names

    @property
    def share(self) -> float:
        return percent(self.matched, self.total)

    @property
    def zoom_share(self) -> float:
        return percent(self.zoom_matched, self.zoom_total)


@dataclass(repr=False)
class FlameSlice(Result):
    """The part of a flame graph a view draws: the subtree of ``root`` (a node id of the
    whole graph), its nodes in pre-order. Columns per node: ``id`` (in the whole graph),
    ``parent`` (row in this slice, -1 for the root), ``depth`` and ``start`` (relative to
    the root), ``width``, ``self``, ``total``, ``hidden`` (width of the children left
    out, drawn merged), ``name`` (index into ``names``), ``match`` (search) and, for a
    diff, ``base_self``/``base_total``."""

    TABLES: ClassVar[tuple[str, ...]] = ("nodes",)

    root: int
    names: list[str]
    columns: dict[str, np.ndarray]
    path: list[int]                 # ids of the root's ancestors, outermost first
    graph_total: int                # total of the whole graph (its root)
    merged: int                     # nodes of the subtree left out (their weight is in ``hidden``)
    min_width: int                  # narrowest width kept
    search: SearchResult | None = None
    base_graph_total: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.columns["id"])

    def _columns(self, table: str) -> dict[str, Any]:
        cols: dict[str, Any] = dict(self.columns)
        cols["name"] = [self.names[i] for i in self.columns["name"].tolist()]
        return cols

    def _summary(self) -> str:
        return f"root {self.root}, {len(self)} nodes, {self.merged} merged"


class FlameIndex:
    """A complete flame graph with the indexes its views need (built once, read by many)."""

    def __init__(self, tree: FlameTree, complete: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """``complete``: ``tree`` is the top of a larger tree (closed under ancestors, in its
        pre-order, as ``sandwich(max_nodes=)`` cuts the callers): every node's id and subtree
        size in that tree. Ids taken and given, ``len``, ``merged`` and ``leaf`` are then the
        complete tree's; a node that was not made is refused as a missing one."""
        self.tree = tree
        self.complete = complete
        n = len(tree)
        if tree.subtree_size is not None:  # flame_tree computed them (and the name ids) on the way
            self.size = tree.subtree_size
        else:
            self.size = _subtree_sizes(tree.parent, tree.depth) if n else np.zeros(0, np.int64)
        if tree.name_ids is not None and tree.name_table is not None:
            # only the names the graph holds, in the table's (sorted) order
            present = _present(tree.name_ids, len(tree.name_table))
            if present.all():  # the usual case: the graph's own ids, not a second column
                self.name_id = tree.name_ids
            else:
                self.name_id = (np.cumsum(present, dtype=np.int64) - 1).astype(tree.name_ids.dtype)[tree.name_ids]
            self.distinct = [tree.name_table[i] for i in np.flatnonzero(present).tolist()]
        else:
            codes: dict[str, int] = {}
            self.name_id = np.fromiter((codes.setdefault(x, len(codes)) for x in tree.names), dtype=np.int64,
                                       count=n)
            self.distinct = list(codes)

    def __len__(self) -> int:
        return len(self.tree) if self.complete is None else int(self.complete[1][0])

    def check(self, node: int) -> int:
        """The position of node id ``node`` in :attr:`tree` (its id, unless the tree is cut),
        else OptionsError."""
        at = node
        if self.complete is not None and 0 <= node < len(self):
            at = int(np.searchsorted(self.complete[0], node))
            at = at if at < len(self.tree) and int(self.complete[0][at]) == node else -1
        if not 0 <= at < len(self.tree):
            raise missing_node(node, len(self), None if self.complete is None else len(self.tree))
        return at

    def node_id(self, at: int | np.ndarray) -> Any:
        """The node id of position(s) ``at`` of :attr:`tree` (the inverse of :meth:`check`)."""
        if self.complete is None:
            return at
        return self.complete[0][at] if isinstance(at, np.ndarray) else int(self.complete[0][at])

    def ancestors(self, node: int) -> list[int]:
        """Positions in :attr:`tree` (ids, unless it is cut) from the graph's root down to
        position ``node``'s parent."""
        out = []
        parent = self.tree.parent
        at = int(parent[node])
        while at >= 0:
            out.append(at)
            at = int(parent[at])
        return out[::-1]

    # ---------------------------------------------------------------- slices

    def slice(self, root: int = 0, *, min_fraction: float = 1 / 4000, max_nodes: int = 40_000,
              search: str | None = None) -> FlameSlice:
        """The subtree of ``root`` without nodes narrower than ``min_fraction`` of it (nor of
        width 0), at most ``max_nodes`` nodes (the widest; ties in pre-order): the rule of
        :func:`~polyprof.analysis.flame.prune`. Left-out nodes add their width to their kept
        ancestor's ``hidden``."""
        t = self.tree
        r = self.check(root)
        lo, hi = r, r + int(self.size[r])
        keep, threshold = prune(t.width[lo:hi], min_fraction, max_nodes)  # flame_tree's own rule
        ids = lo + np.flatnonzero(keep)  # ids[0] is r; kept nodes are closed under ancestors
        parent = np.full(ids.size, -1, dtype=np.int64)  # a position in ids, found by search:
        parent[1:] = np.searchsorted(ids, t.parent[ids[1:]])  # no array as long as the subtree
        hidden = t.width[ids] - np.maximum(t.self[ids], 0)
        np.subtract.at(hidden, parent[1:], t.width[ids[1:]])
        names, name_col = np.unique(self.name_id[ids], return_inverse=True)
        cols = {"id": self.node_id(ids), "parent": parent, "depth": t.depth[ids] - t.depth[r],
                "start": t.start[ids] - t.start[r], "width": t.width[ids], "self": t.self[ids],
                "total": t.total[ids], "hidden": hidden, "name": name_col.reshape(-1)}
        if t.base_self is not None and t.base_total is not None:
            cols.update(base_self=t.base_self[ids], base_total=t.base_total[ids])
        found = None
        if search:
            mask, found = self._search(search, r)
            cols["match"] = mask[ids]
        inside = hi - lo if self.complete is None else int(self.complete[1][r])
        return FlameSlice(self.node_id(r), [self.distinct[i] for i in names.tolist()], cols,
                          [self.node_id(a) for a in self.ancestors(r)], t.root_total,
                          int(inside - ids.size), threshold, found,
                          t.base_root_total if t.is_diff else None)

    # ---------------------------------------------------------------- search

    def search(self, regex: str, root: int = 0) -> SearchResult:
        """The matched share of ``regex`` (see the module doc), overall and under ``root``."""
        return self._search(regex, self.check(root))[1]

    def _search(self, regex: str, root: int) -> tuple[np.ndarray, SearchResult]:
        try:
            rx = re.compile(regex)
        except re.error as exc:
            raise OptionsError(f"bad regular expression {{search}}={regex!r}: {exc}", options=("search",)) from None
        hits = np.array([bool(rx.search(x)) for x in self.distinct] + [False], dtype=bool)
        mask = hits[self.name_id]
        outer = _outermost(np.flatnonzero(mask), self.size)
        total = self.tree.total
        lo, hi = root, root + int(self.size[root])
        if mask[root] or any(mask[a] for a in self.ancestors(root)):
            zoom = int(total[root])
        else:
            inside = outer[(outer >= lo) & (outer < hi)]
            zoom = int(total[inside].sum())
        found = SearchResult(regex, int(total[outer].sum()), self.tree.root_total, zoom, int(total[root]),
                             int(hits.sum()))
        return mask, found

    # ---------------------------------------------------------------- nodes

    def children(self, node: int) -> list[int]:
        """Ids of ``node``'s children, by total (largest first), then name."""
        at = self.check(node)
        lo, hi = at + 1, at + int(self.size[at])
        kids = lo + np.flatnonzero(self.tree.parent[lo:hi] == at)
        order = np.lexsort((self.name_id[kids], -np.abs(self.tree.total[kids])))
        return self.node_id(kids[order]).tolist()

    def details(self, node: int, *, path: bool = True) -> dict[str, Any]:
        """One node's numbers (raw), whether it is a leaf, its identity fields and (``path``)
        the names from the root down to it."""
        t = self.tree
        i = self.check(node)
        size = self.size if self.complete is None else self.complete[1]
        out: dict[str, Any] = {"id": node, "name": t.names[i], "self": int(t.self[i]), "total": int(t.total[i]),
                               "depth": int(t.depth[i]), "leaf": bool(size[i] == 1),
                               "identity": t.identity.get(t.names[i], {})}
        if path:
            out["path"] = [t.names[a] for a in self.ancestors(i)]
        if t.base_self is not None and t.base_total is not None:
            out.update(base_self=int(t.base_self[i]), base_total=int(t.base_total[i]))
        return out


def missing_node(node: int, nodes: int, made: int | None = None) -> OptionsError:
    """The error for node id ``node`` of a graph of ``nodes`` nodes (``made`` of them made)."""
    return OptionsError(f"no flame graph node {{root}}={node} (the graph has {nodes} nodes"
                        f"{'' if made is None else f', {made} of them made'})", options=("root",))


def _present(name_ids: np.ndarray, n: int, chunk: int = 1 << 20) -> np.ndarray:
    """Which of ``n`` names the ids use, marked a chunk at a time: no copy of the id column
    (``np.bincount`` makes an int64 one, 88 MB for an 11M-node graph)."""
    present = np.zeros(n, dtype=bool)
    for at in range(0, name_ids.size, chunk):
        present[name_ids[at:at + chunk]] = True
    return present


def _subtree_sizes(parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Nodes in each subtree (itself included): the tree kernels' subtree sums of ones."""
    return tree.subtree_sums(np.ones(parent.size, dtype=np.int64), tree.tree_levels(parent, depth))


def _outermost(ids: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The ids (pre-order, sorted) not inside the subtree of an earlier one."""
    if not ids.size:
        return ids
    reach = np.maximum.accumulate(ids + size[ids])
    return ids[np.concatenate(([True], ids[1:] >= reach[:-1]))]
