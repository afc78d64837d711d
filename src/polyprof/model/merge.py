"""Merge: the primitive the other profile algebra is built on.

``merge([a, b, ...])`` returns one profile holding every sample of every
input, in input order, with tables re-interned through the builder's identity
keys (so equal functions, mappings, locations and stacks become one row).
Values are kept per sample, never summed: merging a profile with itself gives
each sample twice, and the totals double.

Kept: every sample column, labels, comments (de-duplicated, in order), the
extras all inputs agree on (the others per input, under ``merged_extras``;
see :func:`merge_extras`). Combined: time_nanos is the earliest
non-zero start, duration_nanos spans all inputs, period is the largest.
Inputs must have the same sample types (type and unit, in order); use
``align_sample_types`` first otherwise.

``align_sample_types`` converts units the way ``go tool pprof`` does before
it merges (to the finest unit; e.g. microseconds -> nanoseconds) and refuses
different kinds. ``compact`` is what pprof does to every input: equal
samples summed into one, all-zero samples dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from collections.abc import Sequence

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model import units
from polyprof.model.builder import ProfileBuilder
from polyprof.model.extras import Extras
from polyprof.model.profile import Label, Profile, SampleTable, ValueType

__all__ = ["BASE_LABEL", "align_sample_types", "compact", "copy_into", "merge", "merge_as_pprof", "merge_extras",
           "negated", "sample_groups", "subtract", "union_sample_types"]

#: The label ``go tool pprof -diff_base`` puts on the samples of the base profile.
BASE_LABEL = "pprof::base"


def copy_into(b: ProfileBuilder, p: Profile, extra_labels: Sequence[Label] = ()) -> np.ndarray:
    """Re-intern every table of ``p`` into ``b`` and append its samples; returns the
    builder's location id of every location row of ``p``."""
    strs = p.strings
    f = p.functions
    fmap = np.array([b.function(strs[f.name[i]], strs[f.system_name[i]], strs[f.filename[i]],
                                int(f.start_line[i])) for i in range(len(f))] + [-1], dtype=np.int64)
    m = p.mappings
    mmap = np.array([b.mapping(int(m.start[i]), int(m.limit[i]), int(m.offset[i]),
                               strs[m.filename[i]], strs[m.build_id[i]], int(m.flags[i]))
                     for i in range(len(m))] + [-1], dtype=np.int64)
    loc = p.locations
    lf = fmap[p.lines.function].tolist()
    ll = p.lines.line.tolist()
    lc = p.lines.column.tolist()
    starts = loc.line_start.tolist()
    lmap = np.array([b.location(int(mmap[loc.mapping[i]]), int(loc.address[i]),
                                [(lf[r], ll[r], lc[r]) for r in range(starts[i], starts[i + 1])],
                                bool(loc.folded[i])) for i in range(len(loc))], dtype=np.int64)
    cs = p.callsites
    cmap = np.empty(len(cs) + 1, dtype=np.int64)
    cmap[-1] = -1  # index -1 (no stack) maps to -1
    parents = cs.parent.tolist()
    locs = lmap[cs.location].tolist() if len(cs) else []
    for i in range(len(cs)):
        cmap[i] = b.callsite(int(cmap[parents[i]]), locs[i])
    extra = tuple(extra_labels)
    lsmap = np.array([b.labelset(ls + extra) if (ls or extra) else 0 for ls in p.labelsets], dtype=np.int64)
    sm = p.samples
    optional = {name: getattr(sm, name) for name in sm.OPTIONAL_COLUMNS}
    b.add_samples_bulk(cmap[sm.stack], sm.values, lsmap[sm.labelset], **optional)
    return lmap


def merge_extras(profiles: Sequence[Profile]) -> dict:
    """Extras every input agrees on; the others, per input, under ``merged_extras``.

    A fact of one input (its process, its lost samples) is not a fact of the
    merged profile, but it is not dropped either.
    """
    keys = list(dict.fromkeys(k for p in profiles for k in p.extras))
    agreed, differing = {}, {}
    for key in keys:
        values = [p.extras.get(key) for p in profiles]
        if all(v == values[0] for v in values):
            agreed[key] = values[0]
        else:
            differing[key] = values
    if differing:
        agreed["merged_extras"] = differing
    return agreed


def merge(profiles: Sequence[Profile], extra_labels: Sequence[Sequence[Label]] | None = None) -> Profile:
    """Merge profiles with identical sample types (see the module docstring).

    ``extra_labels[i]`` is appended to every sample of ``profiles[i]`` (for
    example its process), so merged inputs stay distinguishable.
    """
    if not profiles:
        raise OptionsError("nothing to merge")
    first = profiles[0]
    for p in profiles[1:]:
        if p.sample_types != first.sample_types:
            raise OptionsError(
                "cannot merge profiles with different sample types: "
                f"{', '.join(map(str, first.sample_types))} vs {', '.join(map(str, p.sample_types))}")
    b = ProfileBuilder(first.source_format)
    b.set_sample_types(first.sample_types)
    meta = b.meta
    meta.default_sample_type = first.default_sample_type
    meta.period_type = next((p.period_type for p in profiles if p.period_type is not None), None)
    meta.period = max(p.period for p in profiles)
    starts = [p.time_nanos for p in profiles if p.time_nanos]
    meta.time_nanos = min(starts) if starts else 0
    ends = [p.time_nanos + p.duration_nanos for p in profiles if p.time_nanos]
    if starts and ends:
        meta.duration_nanos = max(ends) - meta.time_nanos
    else:
        meta.duration_nanos = max(p.duration_nanos for p in profiles)
    for p in profiles:
        for c in p.comments:
            if c not in meta.comments:
                meta.comments.append(c)
        meta.warnings.extend(w for w in p.warnings if w not in meta.warnings)
        for key in ("drop_frames", "keep_frames", "doc_url"):
            if not getattr(meta, key):
                setattr(meta, key, getattr(p, key))
    meta.extras = Extras(merge_extras(profiles))
    for i, p in enumerate(profiles):
        copy_into(b, p, extra_labels[i] if extra_labels else ())
    return b.finish()


def compact(p: Profile, groups: np.ndarray | None = None) -> Profile:
    """Samples equal in all but their values summed into one; all-zero samples dropped.

    What ``go tool pprof`` does to every input (its merge of one profile).
    Samples are equal when their stack, labels and time/pid/tid/cpu columns
    are; ``groups`` (one integer per sample) overrides that grouping, e.g. to
    group filtered samples by their stacks before filtering. Kept: tables,
    metadata, the order of first occurrence, the columns (of the first
    sample of each group). Lost: sample multiplicity.
    """
    s = p.samples
    if groups is None:
        groups = sample_groups(p)
    live = np.nonzero(s.values.any(axis=1))[0] if s.values.size else np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(groups[live], return_index=True, return_inverse=True)
    sums = np.zeros((first.size, s.values.shape[1]), dtype=np.int64)
    np.add.at(sums, inverse.reshape(-1), s.values[live])
    order = np.argsort(first, kind="stable")
    order = order[sums[order].any(axis=1)]
    rows = live[first[order]]
    optional = {n: (None if getattr(s, n) is None else getattr(s, n)[rows]) for n in s.OPTIONAL_COLUMNS}
    table = SampleTable(stack=s.stack[rows], values=sums[order], labelset=s.labelset[rows], **optional)
    return p.copy_with(samples=table)


def sample_groups(p: Profile) -> np.ndarray:
    """Per sample: an id equal for samples with the same stack, labels and columns."""
    s = p.samples
    groups = (s.stack.astype(np.int64) + 1) * (len(p.labelsets) + 1) + s.labelset
    for col in (getattr(s, n) for n in s.OPTIONAL_COLUMNS):
        if col is not None:  # combine dense codes: (group, value) pairs -> one id
            _, g = np.unique(groups, return_inverse=True)
            values, v = np.unique(col, return_inverse=True)
            groups = g.reshape(-1).astype(np.int64) * values.size + v.reshape(-1)
    return groups


def union_sample_types(profiles: Sequence[Profile]) -> list[Profile]:
    """The profiles with the union of their sample types (in order of first
    appearance); a column a profile lacks is zero for its samples. For
    combining profiles of different kinds (CPU and heap) into one; nothing is
    converted or lost."""
    import dataclasses

    union = list(dict.fromkeys(vt for p in profiles for vt in p.sample_types))
    out = []
    for p in profiles:
        if p.sample_types == union:
            out.append(p)
            continue
        values = np.zeros((len(p.samples), len(union)), dtype=np.int64)
        for j, vt in enumerate(p.sample_types):
            values[:, union.index(vt)] = p.samples.values[:, j]
        samples = dataclasses.replace(p.samples, values=values)
        out.append(dataclasses.replace(p, sample_types=list(union), samples=samples))
    return out


def align_sample_types(profiles: Sequence[Profile], names: Sequence[str] | None = None,
                       notes: list[str] | None = None) -> list[Profile]:
    """The profiles with one set of sample types, converting units where they differ.

    As ``go tool pprof`` does before merging: the i-th types must be of one
    kind (names equal up to a trailing "s") with units of one family (memory
    or time); every column is scaled to the finest unit seen (values
    rounded to integers), and so is the period. Types listed in another
    order are reordered to the first profile's order. A type whose kind the
    other profile lacks is paired by unit when each profile has exactly one
    type of that unit family (``cpu/nanoseconds`` with ``cpu-clock/
    nanoseconds``); it takes the first profile's name, and ``notes`` gets a
    line saying so. Raises OptionsError naming both inputs and their type
    lists when the types cannot be paired. Profiles that need no change are
    returned as they are. ``names`` (e.g. file names) name the inputs.
    """
    if not profiles:
        return []
    names = list(names) if names else [f"profile {i + 1}" for i in range(len(profiles))]
    first = profiles[0].sample_types
    orders = []
    for name, p in zip(names, profiles):
        try:
            orders.append(_column_order(first, p.sample_types))
        except OptionsError as exc:
            raise OptionsError(f"{names[0]} and {name}: {exc}") from None
        for a, j in zip(first, orders[-1]):
            b = p.sample_types[j]
            if _kind(a) != _kind(b) and notes is not None:
                notes.append(f"note: paired {b} of {name} with {a} of {names[0]} (the only type of that "
                             "unit in each); pick others with --sample-index/--base-sample-index")
    target = [vt for vt in first]
    for p, order in zip(profiles, orders):
        for i, j in enumerate(order):
            unit = units.finest(target[i].unit, p.sample_types[j].unit) or target[i].unit  # compatible: never None
            target[i] = ValueType(target[i].type, unit)
    try:
        period = _common_period_type(profiles)
    except OptionsError as exc:
        raise OptionsError(f"{names[0]} and {names[1] if len(names) > 1 else names[0]}: {exc}") from None
    return [_rescaled(p, order, target, period) for p, order in zip(profiles, orders)]


def _kind(vt: ValueType) -> str:
    return vt.type.removesuffix("s")


def _compatible(a: ValueType, b: ValueType) -> bool:
    return _kind(a) == _kind(b) and units.finest(a.unit, b.unit) is not None


def _same_unit(a: ValueType, b: ValueType) -> bool:
    return units.finest(a.unit, b.unit) is not None


def _column_order(first: list[ValueType], types: list[ValueType]) -> list[int]:
    """For each type of ``first``: its column in ``types`` (by position, kind, or unique unit)."""
    if len(first) == len(types) and all(_compatible(a, b) for a, b in zip(first, types)):
        return list(range(len(first)))
    by_kind = {_kind(vt): j for j, vt in enumerate(types)}
    order = [by_kind.get(_kind(vt), -1) for vt in first]
    for i, a in enumerate(first):  # a kind the other side lacks: the only type of its unit on each side
        if order[i] < 0 and sum(_same_unit(a, x) for x in first) == 1:
            unpaired = [j for j, b in enumerate(types) if _same_unit(a, b)]
            if len(unpaired) == 1 and unpaired[0] not in order:
                order[i] = unpaired[0]
    if len(first) == len(types) and len(set(order)) == len(types) \
            and all(j >= 0 and _same_unit(vt, types[j]) for vt, j in zip(first, order)):
        return order
    raise OptionsError("cannot combine profiles with different sample types: "
                       f"{', '.join(map(str, first)) or 'none'} vs {', '.join(map(str, types)) or 'none'}")


def _common_period_type(profiles: Sequence[Profile]) -> ValueType | None:
    kinds = [p.period_type for p in profiles if p.period_type is not None]
    if not kinds:
        return None
    out = kinds[0]
    for vt in kinds[1:]:
        if not _same_unit(out, vt):
            raise OptionsError(f"cannot combine profiles with different period types: {out} vs {vt}")
        out = ValueType(out.type, units.finest(out.unit, vt.unit) or out.unit)  # compatible: never None
    return out


def _ratio(unit: str, target: str) -> float:
    return 1.0 if unit == target else units.scale(1, unit, target)[0]


def _rescaled(p: Profile, order: list[int], target: list[ValueType], period: ValueType | None) -> Profile:
    ratios = [_ratio(p.sample_types[j].unit, vt.unit) for j, vt in zip(order, target)]
    same_types = p.sample_types == target
    period_ratio = _ratio(p.period_type.unit, period.unit) if p.period_type and period else 1.0
    if same_types and period_ratio == 1.0:
        return p
    values = p.samples.values[:, order] if order != list(range(len(order))) else p.samples.values
    if any(r != 1.0 for r in ratios):
        values = np.rint(values * np.array(ratios)).astype(np.int64)
    samples = dataclasses.replace(p.samples, values=values)
    changes: dict[str, Any] = {"samples": samples, "sample_types": list(target)}
    if p.period_type and period:
        changes.update(period_type=ValueType(p.period_type.type, period.unit), period=round(p.period * period_ratio))
    named = [j for j, vt in enumerate(p.sample_types) if vt.type == p.default_sample_type]
    if named:  # keep pointing at the same column under the (possibly renamed) type
        changes["default_sample_type"] = target[order.index(named[0])].type
    return p.copy_with(**changes)


# ---------------------------------------------------------------- go tool pprof's algebra

def merge_as_pprof(profiles: Sequence[Profile], names: Sequence[str] | None = None) -> Profile:
    """Several sources merged as ``go tool pprof a b ...`` merges them: units aligned,
    every sample kept, durations added, the first default sample type any input names
    (pprof's ``combineHeaders``), earliest start."""
    merged = merge(align_sample_types(profiles, names))
    merged.duration_nanos = sum(p.duration_nanos for p in profiles)
    merged.default_sample_type = next((p.default_sample_type for p in profiles if p.default_sample_type), "")
    return merged


def negated(p: Profile, extra_labels: Sequence[Label] = ()) -> Profile:
    """``p`` with every value negated (pprof's ``Scale(-1)``), ``extra_labels`` added to every sample."""
    s = p.samples
    table = SampleTable(stack=s.stack, values=np.negative(s.values, dtype=np.int64), labelset=s.labelset,
                        **{n: getattr(s, n) for n in s.OPTIONAL_COLUMNS})
    out = p.copy_with(samples=table)
    if not extra_labels:
        return out
    b = ProfileBuilder(p.source_format)
    b.set_sample_types(p.sample_types)
    b.meta.default_sample_type = p.default_sample_type
    copy_into(b, out, extra_labels)
    return dataclasses.replace(b.finish(), period_type=p.period_type, period=p.period, time_nanos=p.time_nanos,
                               duration_nanos=p.duration_nanos, comments=list(p.comments))


def subtract(p: Profile, base: Profile, *, mark_base: bool = False) -> Profile:
    """``p`` minus ``base`` as ``go tool pprof -base`` (``-diff_base`` with ``mark_base``):
    the base's samples are merged in with negated values, so totals and reports show
    the difference. ``mark_base`` labels them ``pprof::base=true``; reports then take
    their percentages of the base's total, as pprof does."""
    p, base = align_sample_types([p, base], ["profile", "base"])
    labels = (Label(BASE_LABEL, str="true"),) if mark_base else ()
    return merge_as_pprof([p, negated(base, labels)])