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

import numpy as np

from polyprof.analysis import filters, tags
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import node_map
from polyprof.analysis.options import Options
from polyprof.model.merge import compact, sample_groups
from polyprof.model.profile import Profile, ValueType

__all__ = ["Frame", "LabelGroup", "TracesResult", "traces"]


@dataclass(frozen=True)
class Frame:
    name: str
    inline: bool = False


@dataclass(frozen=True)
class LabelGroup:
    key: str
    values: tuple[str, ...] | tuple[int, ...]
    unit: str = ""          # numeric labels: the unit pprof would print them in
    numeric: bool = False


@dataclass
class TracesResult:
    sample_type: ValueType
    total: int                               # before filtering
    stacks: list[tuple[Frame, ...]]          # distinct stacks, leaf first
    labels: list[tuple[LabelGroup, ...]]     # distinct label groupings
    sample_stack: np.ndarray                 # per printed sample: index into ``stacks``
    sample_labels: np.ndarray                # per printed sample: index into ``labels``
    sample_value: np.ndarray                 # per printed sample: its value
    profile: Profile = field(repr=False)
    active_filters: list[str] = field(default_factory=list)
    unit: str = "minimum"                    # how values print (Options.unit)

    def __len__(self) -> int:
        return len(self.sample_stack)


def traces(src: Profile | FilterResult, options: Options | None = None) -> TracesResult:
    """Every non-empty sample of ``src`` (filters of ``options`` applied unless already)."""
    o = options or Options()
    fr = filters.prepare(src, o)
    # pprof merges equal samples when it reads a profile, before any filter:
    # samples that only became equal through hide/show/... stay apart.
    p = compact(fr.profile, sample_groups(fr.original)[fr.rows])
    index, _, vt, total = fr.column(o.sample_index)
    s = p.samples
    printed = np.nonzero(s.stack >= 0)[0]
    used, stack_ids = np.unique(s.stack[printed], return_inverse=True)
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    names = nodes.names
    frames_of_loc = [tuple(Frame(names[int(nodes.loc_nodes[e])], bool(nodes.loc_inlined[e]))
                           for e in range(int(nodes.loc_start[i]), int(nodes.loc_start[i + 1])))
                     for i in range(len(p.locations))]
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
                        p, fr.active, o.unit)


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

