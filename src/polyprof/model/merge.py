"""Merge: the primitive the other profile algebra is built on.

``merge([a, b, ...])`` returns one profile holding every sample of every
input, in input order, with tables re-interned through the builder's identity
keys (so equal functions, mappings, locations and stacks become one row).
Values are kept per sample, never summed: merging a profile with itself gives
each sample twice, and the totals double.

Kept: every sample column, labels, comments (de-duplicated, in order), extras
(of the first profile that has each key). Combined: time_nanos is the earliest
non-zero start, duration_nanos spans all inputs, period is the largest.
Inputs must have the same sample types (type and unit, in order); use
``align_sample_types`` first otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile

__all__ = ["merge", "copy_into"]


def copy_into(b: ProfileBuilder, p: Profile, extra_labels: Sequence[Label] = ()) -> None:
    """Re-intern every table of ``p`` into ``b`` and append its samples."""
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
    meta.period_type = first.period_type
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
        for k, v in p.extras.items():
            meta.extras.setdefault(k, v)
        meta.warnings.extend(w for w in p.warnings if w not in meta.warnings)
        for key in ("drop_frames", "keep_frames", "doc_url"):
            if not getattr(meta, key):
                setattr(meta, key, getattr(p, key))
    for i, p in enumerate(profiles):
        copy_into(b, p, extra_labels[i] if extra_labels else ())
    return b.finish()
