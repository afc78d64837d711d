"""``top``: flat and cumulative weight per node, as ``go tool pprof -top`` computes it.

Rows are sorted as pprof sorts them (flat, then name, then cum), nodes with
zero flat and cum are left out, and ``nodefraction`` is 0: nothing is dropped
except by ``nodecount``. Recursion counts once in cum; inlined functions are
rows of their own, marked "(inline)" when every call into them is inlined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polyprof.analysis.graph import callsite_weights, edges, node_map, node_weights
from polyprof.analysis.options import Options
from polyprof.model.profile import Profile, ValueType

__all__ = ["TopResult", "TopRow", "top"]


@dataclass
class TopRow:
    name: str
    flat: int
    cum: int
    inline: str = ""  # "", "(inline)" or "(partial-inline)"


@dataclass
class TopResult:
    sample_type: ValueType
    total: int
    rows: list[TopRow]
    node_count: int  # nodes with any weight, before nodecount
    profile: Profile = field(repr=False)
    active_filters: list[str] = field(default_factory=list)

    @property
    def shown_flat(self) -> int:
        return sum(r.flat for r in self.rows)


def top(p: Profile, options: Options | None = None) -> TopResult:
    """The top table of ``p`` for ``options.sample_index`` (pprof's default type if unset)."""
    o = options or Options()
    index = p.sample_index(o.sample_index)
    values = p.samples.values[:, index] if len(p.sample_types) else np.zeros(0, np.int64)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    w = callsite_weights(p, values)
    flat, cum = node_weights(p, nodes, w)
    live = np.nonzero((flat != 0) | (cum != 0))[0]
    names = nodes.names
    infos = nodes.infos
    order = sorted(live.tolist(), key=lambda n: (-abs(int(flat[n])), names[n], -abs(int(cum[n])), infos[n]))
    shown = order if o.nodecount <= 0 else order[:o.nodecount]
    kept = np.zeros(len(nodes), dtype=bool)
    kept[shown] = True
    marks = _inline_marks(p, nodes, w, kept)
    rows = [TopRow(names[n], int(flat[n]), int(cum[n]), marks.get(n, "")) for n in shown]
    vt = p.sample_types[index] if p.sample_types else ValueType("", "")
    return TopResult(vt, w.total, rows, len(order), p)


def _inline_marks(p: Profile, nodes, w, kept) -> dict[int, str]:  # noqa: ANN001
    caller, callee, inline = edges(p, nodes, w, kept)
    has_inline: set[int] = set(callee[inline].tolist())
    has_plain: set[int] = set(callee[~inline].tolist())
    return {n: "(partial-inline)" if n in has_plain else "(inline)" for n in has_inline}
