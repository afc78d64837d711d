"""``tree`` and ``peek``: every node with its callers and callees, as ``go tool pprof -tree/-peek``.

Nodes are ranked as in ``top`` (flat, then name, then cum); ``nodecount``
keeps the first N and the call graph is then rebuilt over those nodes only:
an edge may jump over dropped nodes (pprof's "residual" edges). An edge's
weight is the weight of the samples whose stack makes that call at least
once; an edge is "inline" when every such call is an inlined one. Samples
with zero value add no edges, as in pprof. ``nodefraction``/``edgefraction``
are 0: nothing is dropped except by ``nodecount``.

``peek`` is the tree without ``nodecount`` whose printed entries are the
nodes matching a regular expression; totals still cover every node.
Percentages are relative to the total before filtering (pprof's default).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import NodeMap, Weights, calls, callsite_weights, node_map, node_weights, ranked
from polyprof.analysis.options import Options
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile, ValueType
from polyprof.model.tree import outermost

__all__ = ["TreeEdge", "TreeNode", "TreeResult", "call_edges", "peek", "tree"]


@dataclass
class TreeEdge:
    name: str      # the caller (in ``callers``) or the callee (in ``callees``)
    weight: int
    inline: bool = False


@dataclass
class TreeNode:
    name: str
    flat: int
    cum: int
    callers: list[TreeEdge] = field(default_factory=list)
    callees: list[TreeEdge] = field(default_factory=list)
    selected: bool = True  # peek: the name matched its regular expression


@dataclass
class TreeResult:
    sample_type: ValueType
    total: int                 # before filtering: the 100% of every percentage
    nodes: list[TreeNode]      # every kept node, in report order
    node_count: int            # nodes with any weight, before nodecount
    profile: Profile = field(repr=False)
    active_filters: list[str] = field(default_factory=list)

    @property
    def shown_flat(self) -> int:
        return sum(n.flat for n in self.nodes)

    @property
    def selected(self) -> list[TreeNode]:
        return [n for n in self.nodes if n.selected]


def tree(src: Profile | FilterResult, options: Options | None = None,
         symbol: re.Pattern[str] | None = None) -> TreeResult:
    """The call tree report of ``src`` (filters of ``options`` applied unless already)."""
    o = options or Options()
    fr = filters.prepare(src, o)
    p = fr.profile
    _, values, vt, total = fr.column(o.sample_index)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    w = callsite_weights(p, values)
    flat, cum = node_weights(p, nodes, w)
    order = ranked(nodes, flat, cum)
    shown = order if o.nodecount <= 0 else order[:o.nodecount]
    kept = np.zeros(len(nodes), dtype=bool)
    kept[shown] = True
    caller, callee, inline, weight = call_edges(p, nodes, w, kept)
    names = nodes.names
    out = {n: TreeNode(names[n], int(flat[n]), int(cum[n]),
                       selected=symbol is None or bool(symbol.search(names[n]))) for n in shown}
    for a, b, inl, wt in zip(caller.tolist(), callee.tolist(), inline.tolist(), weight.tolist()):
        out[b].callers.append(TreeEdge(names[a], wt, inl))
        out[a].callees.append(TreeEdge(names[b], wt, inl))
    for node in out.values():
        node.callers.sort(key=lambda e: (-abs(e.weight), e.name))
        node.callees.sort(key=lambda e: (-abs(e.weight), e.name))
    return TreeResult(vt, total, [out[n] for n in shown], len(order), p, fr.active)


def peek(src: Profile | FilterResult, regex: str, options: Options | None = None) -> TreeResult:
    """Callers and callees of the nodes whose name matches ``regex`` (every node is ranked)."""
    try:
        symbol = re.compile(regex)
    except re.error as exc:
        raise OptionsError(f"peek: bad regular expression {regex!r}: {exc}") from None
    return tree(src, dataclasses.replace(options or Options(), nodecount=0), symbol)


# ---------------------------------------------------------------- edges

def call_edges(p: Profile, nodes: NodeMap, w: Weights,
               kept: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(caller, callee, inline, weight) of every edge between ``kept`` nodes.

    The calls are :func:`polyprof.analysis.graph.calls`; an edge's weight is
    the weight of the samples making that call, each counted once.
    """
    pc, caller, callee, inline = calls(p, nodes, w, kept)
    empty = np.zeros(0, dtype=np.int64)
    if not pc.size:
        return empty, empty, empty.astype(bool), empty
    key = caller * np.int64(len(nodes) + 1) + callee
    uniq, pair = np.unique(key, return_inverse=True)
    pair = pair.reshape(-1)
    plain = np.bincount(pair, weights=~inline, minlength=uniq.size) > 0
    weight = _once_per_stack(p, pair, pc, w.subtree, uniq.size)
    return uniq // (len(nodes) + 1), uniq % (len(nodes) + 1), ~plain, weight


def _once_per_stack(p: Profile, group: np.ndarray, pc: np.ndarray, subtree: np.ndarray, size: int) -> np.ndarray:
    """Per group: sum of ``subtree`` over occurrences with no occurrence of the group above them."""
    out = np.zeros(size, dtype=np.int64)
    tin, tout = p.callsites.euler()
    order = np.argsort(group * np.int64(len(p.callsites) + 1) + tin[pc], kind="stable")
    sites, grp = pc[order], group[order]
    top = outermost(grp, tin[sites], tout[sites])
    np.add.at(out, grp[top], subtree[sites[top]])
    return out
