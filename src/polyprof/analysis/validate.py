"""``validate``: a quality report for a profile of any format.

The model's invariants are checked when a profile is read
(:mod:`polyprof.model.validate`); this report covers what a valid profile
can still get wrong, so users know how far to trust it:

- **lost samples** the recorder reported (the declared extras of
  :mod:`polyprof.model.extras`: ``lost_situation`` (simpleperf),
  ``kernel_records_lost`` per CPU (Perfetto traced_perf), or ``lost_samples``);
- **unwinding failures**: samples labelled ``unwinding_error`` (simpleperf)
  or ``unwind_error`` (Perfetto), by error, else ``extras.unwind_errors``;
- **skipped samples**: samples the profiler kept without unwinding them,
  labelled ``sample_skipped`` (Perfetto), else ``extras.samples_skipped``;
- **truncated stacks**: samples whose stack is exactly as deep as the
  deepest one when that depth is a usual unwinder limit (32, 64, 128, ...;
  Go cuts stacks at 64 frames), or ``extras.truncated_stacks``;
- **empty stacks**: samples without any frame;
- **unsymbolized frames per mapping**: frames with no function name, their
  share of the mapping's frames and of the weight whose leaf they are;
- **invalid references**: frames whose address lies outside their mapping,
  inline lines without a function, negative sample values;
- the reader's warnings.

Every count of weight uses the default (or chosen) sample type. Absent
extras mean "not reported", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import Result
from polyprof.model.profile import Profile, ValueType
from polyprof.model.tree import segment_owner

__all__ = ["STACK_LIMITS", "MappingQuality", "QualityReport", "validate"]

#: Depths at which unwinders commonly cut stacks.
STACK_LIMITS = (32, 64, 100, 127, 128, 255, 256, 512, 1024)
_UNWIND_LABELS = ("unwinding_error", "unwind_error")
_SKIP_LABELS = ("sample_skipped",)


@dataclass
class MappingQuality:
    mapping: str           # file (or build id, or "(no mapping)")
    frames: int            # locations of this mapping used by samples
    unsymbolized: int      # of which without a function name
    leaf_weight: int       # weight of samples whose leaf frame is in this mapping
    unsymbolized_leaf_weight: int
    build_id: str = ""
    symbolized_before: int | None = None  # frames with names before polyprof symbolized (None: it did not)


@dataclass(repr=False)
class QualityReport(Result):
    """The checks' findings; its table (``to_pandas()``) is the per-mapping rows."""

    ROW: ClassVar[type] = MappingQuality
    TABLES: ClassVar[tuple[str, ...]] = ("mappings",)
    source_format: str
    sample_type: ValueType
    samples: int
    total: int
    lost: dict[str, int] | None           # {"lost": n, "kept": m} when reported
    unwind_errors: dict[str, int]         # error -> samples
    unwind_weight: int                    # weight of samples with an unwinding error label
    skipped: dict[str, int]               # reason -> samples kept without a stack walk
    skipped_weight: int
    truncated: int                        # samples with a (probably) truncated stack
    truncated_weight: int
    stack_limit: int | None               # the depth they stop at
    empty_stacks: int
    empty_weight: int
    mappings: list[MappingQuality] = field(default_factory=list)
    invalid: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """One line per quality problem found (empty when the profile looks sound)."""
        out = []
        if self.lost and self.lost.get("lost"):
            out.append(f"{self.lost['lost']} samples lost by the recorder")
        if self.unwind_errors:
            out.append(f"{sum(self.unwind_errors.values())} samples with unwinding errors")
        if self.skipped:
            out.append(f"{sum(self.skipped.values())} samples not unwound (skipped)")
        if self.truncated:
            at = f" at {self.stack_limit} frames" if self.stack_limit else ""
            out.append(f"{self.truncated} stacks probably truncated{at}")
        if self.empty_stacks:
            out.append(f"{self.empty_stacks} samples without a stack")
        unsymbolized = [m for m in self.mappings if m.unsymbolized]
        if unsymbolized:
            out.append(f"{sum(m.unsymbolized for m in unsymbolized)} unsymbolized frames "
                       f"in {len(unsymbolized)} mapping(s)")
        out.extend(f"{n} {what}" for what, n in self.invalid.items() if n)
        return out

    def _row_objects(self) -> list[MappingQuality]:
        return self.mappings

    def _summary(self) -> str:
        problems = self.problems()
        verdict = f"{len(problems)} problem(s)" if problems else "no problems"
        return f"{self.source_format or '?'}, {self.samples} samples, {len(self.mappings)} mappings, {verdict}"


def validate(src: Profile | FilterResult, options: Options | None = None, **overrides: Any) -> QualityReport:
    """The quality report of ``src`` (filters of ``options`` applied unless already;
    keywords override its fields)."""
    o = resolve(options, **overrides)
    fr = filters.prepare(src, o)
    p = fr.profile
    _, values, vt, _ = fr.column(o.sample_index)
    stack = p.samples.stack
    depth = np.where(stack >= 0, np.append(p.callsites.depth(), -1)[stack] + 1, 0)
    truncated, limit = _truncated(p, depth)
    n_truncated = int(truncated.sum()) or (p.extras.truncated_stacks or 0)
    errors, unwind_weight = _labelled(p, values, _UNWIND_LABELS, p.extras.unwind_errors)
    skipped, skipped_weight = _labelled(p, values, _SKIP_LABELS, p.extras.samples_skipped)
    empty = stack < 0
    return QualityReport(
        p.source_format, vt, len(p.samples), int(values.sum()), _lost(p), errors, unwind_weight,
        skipped, skipped_weight, n_truncated, int(values[truncated].sum()), limit, int(empty.sum()), int(values[empty].sum()),
        _mappings(p, values), _invalid(p), list(p.warnings))


def _lost(p: Profile) -> dict[str, int] | None:
    x = p.extras
    situation = x.lost_situation
    if situation is not None:
        return {"lost": situation.lost_count, "kept": situation.sample_count}
    if x.kernel_records_lost:
        return {"lost": sum(x.kernel_records_lost.values())}
    if x.lost_samples is not None:
        return {"lost": x.lost_samples}
    return None


def _labelled(p: Profile, values: np.ndarray, keys: tuple[str, ...],
              reported: dict[str, int]) -> tuple[dict[str, int], int]:
    """Samples per value of the first label in ``keys``, and their weight; else the
    counts the reader ``reported`` (weight unknown: 0)."""
    code = [next((str(lab.str if lab.str is not None else lab.num) for lab in labels
                  if lab.key in keys), None) for labels in p.labelsets]
    has = np.array([c is not None for c in code], dtype=bool)
    if has.any():
        per_sample = has[p.samples.labelset]
        counts = np.bincount(p.samples.labelset[per_sample], minlength=len(code))
        out: dict[str, int] = {}
        for i in np.nonzero(counts)[0].tolist():
            name = code[i]
            if name is not None:  # always: only label sets with a code are counted
                out[name] = out.get(name, 0) + int(counts[i])
        return dict(sorted(out.items())), int(values[per_sample].sum())
    return reported, 0


def _truncated(p: Profile, depth: np.ndarray) -> tuple[np.ndarray, int | None]:
    deepest = int(depth.max()) if depth.size else 0
    if deepest in STACK_LIMITS:
        return depth == deepest, deepest
    return np.zeros(depth.size, dtype=bool), None


def _mappings(p: Profile, values: np.ndarray) -> list[MappingQuality]:
    """Frames and leaf weight per mapping, and how much of each has no function name."""
    loc = p.locations
    named_fn = np.array([bool(p.strings[n] or p.strings[s]) for n, s in
                         zip(p.functions.name.tolist(), p.functions.system_name.tolist())] + [False], dtype=bool)
    line_loc = segment_owner(np.diff(loc.line_start))
    symbolized = np.bincount(line_loc[named_fn[p.lines.function]], minlength=len(loc)) > 0
    used = np.zeros(len(loc), dtype=bool)
    used[p.callsites.location[_live_callsites(p)]] = True
    stack = p.samples.stack
    has = stack >= 0
    leaf_loc = p.callsites.location[stack[has]]
    key = np.where(loc.mapping >= 0, loc.mapping, len(p.mappings))  # last row: no mapping
    n = len(p.mappings) + 1
    frames = np.bincount(key[used], minlength=n)
    unsym = np.bincount(key[used & ~symbolized], minlength=n)
    leaf_w = np.bincount(key[leaf_loc], weights=values[has], minlength=n)
    leaf_unsym = np.bincount(key[leaf_loc], weights=values[has] * ~symbolized[leaf_loc], minlength=n)
    earlier = {(e.get("file"), e.get("build_id")): e.get("symbolized_before")
               for e in p.extras.get("symbolization", {}).get("mappings", [])}
    out = []
    for m in np.nonzero(frames)[0].tolist():
        build = p.strings[p.mappings.build_id[m]] if m < len(p.mappings) else ""
        ident = (p.strings[p.mappings.filename[m]] or "?", build) if m < len(p.mappings) else None
        out.append(MappingQuality(_mapping_name(p, m), int(frames[m]), int(unsym[m]),
                                  int(leaf_w[m]), int(leaf_unsym[m]), build, earlier.get(ident) if ident else None))
    out.sort(key=lambda q: (-q.unsymbolized, -q.frames, q.mapping))
    return out


def _live_callsites(p: Profile) -> np.ndarray:
    """Every callsite on the stack of some sample."""
    stack = p.samples.stack
    ends = np.bincount(stack[stack >= 0], minlength=len(p.callsites))
    return np.flatnonzero(p.callsites.subtree_sums(ends))


def _mapping_name(p: Profile, m: int) -> str:
    if m >= len(p.mappings):
        return "(no mapping)"
    name = p.strings[p.mappings.filename[m]]
    build = p.strings[p.mappings.build_id[m]]
    return name or (f"build id {build}" if build else f"mapping at 0x{int(p.mappings.start[m]):x}")


def _invalid(p: Profile) -> dict[str, int]:
    loc, m = p.locations, p.mappings
    mapped = loc.mapping >= 0
    start, limit = m.start[loc.mapping[mapped]], m.limit[loc.mapping[mapped]]
    addr = loc.address[mapped]
    ranged = (limit > start) & (addr != 0)
    outside = ranged & ((addr < start) | (addr >= limit))
    return {
        "frames with an address outside their mapping": int(outside.sum()),
        "inline lines without a function": int((p.lines.function < 0).sum()),
        "samples with negative values": int((p.samples.values < 0).any(axis=1).sum()) if p.samples.values.size else 0,
    }

