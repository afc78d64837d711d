"""``traces``: every sample with its labels, value and stack, as ``go tool pprof -traces``.

As ``go tool pprof`` merges every input, samples with the same stack and
labels are shown once with their values summed (in order of first
occurrence), and samples whose values are all zero or whose stack is empty
are left out; a sample zero in the reported type but not in another is kept. A stack lists report nodes at the
chosen granularity, leaf first, one per inline line; "inline" marks a line
that is not its frame's outermost. Labels are grouped by key: string labels
in one list, numeric labels (with their unit, chosen as pprof does) in
another. Stacks and label sets are resolved once each, not per sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyprof.analysis import filters, tags
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import NodeMap, node_map
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import NodeFields, ProfileSummary, Result, node_fields
from polyprof.model.table import label_column
from polyprof.model.merge import compact, sample_groups
from polyprof.model.profile import Profile, ValueType

__all__ = ["Frame", "LabelGroup", "TracesResult", "traces"]


@dataclass(frozen=True, kw_only=True)
class Frame(NodeFields):
    """One report node of a stack; ``inline`` when its line is not its frame's outermost."""

    inline: bool = False


@dataclass(frozen=True)
class LabelGroup:
    key: str
    values: tuple[str, ...] | tuple[int, ...]
    unit: str = ""          # numeric labels: the unit pprof would print them in
    numeric: bool = False


@dataclass(repr=False)
class TracesResult(Result):
    """The printed samples as columns over their distinct stacks and label groupings.

    ``to_pandas()`` gives one row per printed sample: ``value``, ``stack``
    (index into ``stacks``), ``frames`` (report names, leaf first), then one
    column per label key (its values as text, comma-separated; None where
    the sample has none), named by the key (``label:key`` when the key is one
    of the other column names).
    """

    sample_type: ValueType
    total: int                               # before filtering
    stacks: list[tuple[Frame, ...]]          # distinct stacks, leaf first
    labels: list[tuple[LabelGroup, ...]]     # distinct label groupings
    sample_stack: np.ndarray                 # per printed sample: index into ``stacks``
    sample_labels: np.ndarray                # per printed sample: index into ``labels``
    sample_value: np.ndarray                 # per printed sample: its value
    summary: ProfileSummary = field(default_factory=ProfileSummary)
    active_filters: list[str] = field(default_factory=list)
    unit: str = "minimum"                    # how values print (Options.unit)

    def __len__(self) -> int:
        return len(self.sample_stack)

    def _columns(self, table: str) -> dict[str, Any]:
        names = [[f.name for f in frames] for frames in self.stacks]
        cols: dict[str, Any] = {"value": self.sample_value, "stack": self.sample_stack,
                                "frames": [names[s] for s in self.sample_stack.tolist()]}
        keys = list(dict.fromkeys(g.key for groups in self.labels for g in groups))
        sets = self.sample_labels.tolist()
        for key in keys:
            text = [next((",".join(map(str, g.values)) for g in groups if g.key == key), None)
                    for groups in self.labels]
            cols[label_column(key, cols)] = [text[ls] for ls in sets]
        return cols

    def _summary(self) -> str:
        return f"{self.sample_type}, total={self.total}, {len(self)} samples, {len(self.stacks)} stacks"


def traces(src: Profile | FilterResult, options: Options | None = None, **overrides: Any) -> TracesResult:
    """Every non-empty sample of ``src`` (filters of ``options`` applied unless already;
    keywords override its fields)."""
    o = resolve(options, **overrides)
    fr = filters.prepare(src, o)
    # pprof merges equal samples when it reads a profile, before any filter:
    # samples that only became equal through hide/show/... stay apart.
    p = compact(fr.profile, sample_groups(fr.original)[fr.rows])
    index, _, vt, total = fr.column(o.sample_index)
    s = p.samples
    printed = np.nonzero(s.stack >= 0)[0]
    used, stack_ids = np.unique(s.stack[printed], return_inverse=True)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    frames_of_loc = _location_frames(p, nodes)
    stacks_out = [tuple(f for loc in p.callsites.path(int(c)) for f in frames_of_loc[loc]) for c in used.tolist()]
    used_sets, set_ids = np.unique(s.labelset[printed], return_inverse=True)
    units = tags.num_label_units(p)
    labels = [_groups(p.labelsets[int(i)], units) for i in used_sets.tolist()]
    values = s.values[printed, index] if len(p.sample_types) else np.zeros(printed.size, np.int64)
    if o.mean and len(p.sample_types):  # pprof's -mean: each sample's value over its count
        count = s.values[printed, 0]
        safe = np.where(count == 0, 1, count)
        values = np.where(count == 0, values, np.sign(values) * np.sign(safe) * (np.abs(values) // np.abs(safe)))
        vt = ValueType("mean_" + vt.type, vt.unit)
    return TracesResult(vt, total, stacks_out, labels, stack_ids.reshape(-1), set_ids.reshape(-1), values,
                        ProfileSummary.of(p), fr.active, o.unit)


def _location_frames(p: Profile, nodes: NodeMap) -> list[tuple[Frame, ...]]:
    """The frames of every location (one per node entry, innermost first), each
    distinct (node, inline) frame built once."""
    ident = node_fields(p, nodes, np.unique(nodes.loc_nodes).tolist())
    made: dict[tuple[int, bool], Frame] = {}

    def frame(n: int, inline: bool) -> Frame:
        f = made.get((n, inline))
        if f is None:
            f = made[(n, inline)] = Frame(**ident[n], inline=inline)
        return f

    node_ids, inlined, start = nodes.loc_nodes.tolist(), nodes.loc_inlined.tolist(), nodes.loc_start.tolist()
    return [tuple(frame(node_ids[e], inlined[e]) for e in range(start[i], start[i + 1]))
            for i in range(len(p.locations))]


def _groups(labelset: tuple, units: dict[str, str]) -> tuple[LabelGroup, ...]:  # noqa: ANN001
    strs: dict[str, list[str]] = {}
    nums: dict[str, list[int]] = {}
    for lab in labelset:
        if lab.str is not None:
            strs.setdefault(lab.key, []).append(lab.str)
        else:
            nums.setdefault(lab.key, []).append(lab.num or 0)
    return (tuple(LabelGroup(k, tuple(v)) for k, v in strs.items())
            + tuple(LabelGroup(k, tuple(v), units.get(k, k), True) for k, v in nums.items()))

