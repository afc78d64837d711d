"""``diff``: how two profiles differ, by function and by stack, absolute or normalised.

Both profiles are first given one set of sample types
(:func:`polyprof.model.merge.align_sample_types`: units converted, kinds
checked). Functions (report nodes at ``options.granularity``) are matched
by name, stacks by their list of names, so the two profiles need not share
tables. Weights follow ``top``: flat and cum (recursion counted once) per
function, leaf weight per stack.

Normalisation (``normalize``):

``none``
    raw values in the sample type's unit;
``total``
    each profile's values divided by its own total (before filtering), so
    rows are shares and deltas are share points;
``rate``
    values per second of profile duration; counted samples of a profile
    sampled on a time period are first multiplied by that period, so
    profiles recorded at different sampling rates compare
    (``samples/count`` at 100 Hz and at 250 Hz both become CPU time/second).

Shares (value / total) are always computed too: ``growth`` reports the
functions whose share grew by more than a threshold, for CI gates.
Lost: functions and stacks with zero weight on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import callsite_weights, node_map, node_weights
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import NodeFields, Result, node_fields
from polyprof.errors import OptionsError
from polyprof.model import units
from polyprof.model.merge import align_sample_types
from polyprof.model.profile import Profile, ValueType

__all__ = ["NORMALIZE", "DiffResult", "FunctionDiff", "StackDiff", "diff", "pair_sides"]

NORMALIZE = ("none", "total", "rate")


@dataclass(frozen=True, kw_only=True)
class FunctionDiff(NodeFields):
    """Raw weights of one report node on both sides (identity fields from the new
    side, else the base)."""

    base_flat: int
    new_flat: int
    base_cum: int
    new_cum: int


@dataclass
class StackDiff:
    frames: tuple[str, ...]  # root first
    base: int
    new: int


@dataclass(repr=False)
class DiffResult(Result):
    """Raw weights per function and stack, with what normalises them.

    ``norm(side, value)`` gives a value in the chosen normalisation and
    ``share(side, value)`` its fraction of that side's total. Tables:
    ``functions`` and ``stacks`` (see :meth:`function_record`,
    :meth:`stack_record`).
    """

    TABLES: ClassVar[tuple[str, ...]] = ("functions", "stacks")

    sample_type: ValueType
    normalize: str
    unit: str                      # unit of normalised values ("" for shares)
    base_total: int                # before filtering
    new_total: int
    factors: tuple[float, float]   # base, new multipliers for normalisation
    functions: list[FunctionDiff]
    stacks: list[StackDiff] = field(default_factory=list)
    active_filters: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. how sample types of different names were paired

    def norm(self, side: int, value: int) -> float:
        return value if self.normalize == "none" else value * self.factors[side]

    def share(self, side: int, value: int) -> float:
        total = (self.base_total, self.new_total)[side]
        return value / total if total else 0.0

    def delta(self, base: int, new: int) -> float:
        return self.norm(1, new) - self.norm(0, base)

    def share_delta(self, base: int, new: int) -> float:
        """Change of share in percentage points."""
        return 100.0 * (self.share(1, new) - self.share(0, base))

    def growth(self, threshold: float, metric: str = "flat") -> list[FunctionDiff]:
        """Functions whose ``metric`` share grew by more than ``threshold`` points."""
        pick = (lambda f: (f.base_flat, f.new_flat)) if metric == "flat" else (lambda f: (f.base_cum, f.new_cum))
        return [f for f in self.functions if self.share_delta(*pick(f)) > threshold]

    def function_record(self, f: FunctionDiff) -> dict[str, Any]:
        """Every number of one function: ``base``/``new``/``delta`` normalised,
        ``*_raw`` in the sample type's unit, ``*_share_delta`` in percentage points;
        then its identity fields."""
        ident = {k: getattr(f, k) for k in NodeFields.__dataclass_fields__ if k != "name"}
        return {"name": f.name,
                "base_flat": self.norm(0, f.base_flat), "new_flat": self.norm(1, f.new_flat),
                "delta_flat": self.delta(f.base_flat, f.new_flat),
                "base_cum": self.norm(0, f.base_cum), "new_cum": self.norm(1, f.new_cum),
                "delta_cum": self.delta(f.base_cum, f.new_cum),
                "base_flat_raw": f.base_flat, "new_flat_raw": f.new_flat,
                "base_cum_raw": f.base_cum, "new_cum_raw": f.new_cum,
                "flat_share_delta": self.share_delta(f.base_flat, f.new_flat),
                "cum_share_delta": self.share_delta(f.base_cum, f.new_cum), **ident}

    def stack_record(self, s: StackDiff) -> dict[str, Any]:
        """Every number of one stack (``frames`` root first), as :meth:`function_record`."""
        return {"frames": list(s.frames), "base": self.norm(0, s.base), "new": self.norm(1, s.new),
                "delta": self.delta(s.base, s.new), "base_raw": s.base, "new_raw": s.new,
                "share_delta": self.share_delta(s.base, s.new)}

    def _columns(self, table: str) -> dict[str, Any]:
        if table == "functions":
            records = [self.function_record(f) for f in self.functions]
            keys = list(self.function_record(FunctionDiff(name="", base_flat=0, new_flat=0, base_cum=0, new_cum=0)))
        else:
            records = [self.stack_record(s) for s in self.stacks]
            keys = list(self.stack_record(StackDiff((), 0, 0)))
        return {k: [r[k] for r in records] for k in keys}

    def _summary(self) -> str:
        return (f"{self.sample_type}, normalize={self.normalize}, base_total={self.base_total}, "
                f"new_total={self.new_total}, {len(self.functions)} functions, {len(self.stacks)} stacks")


def diff(base: Profile | FilterResult, new: Profile | FilterResult, options: Options | None = None, *,
         normalize: str = "none", stacks: bool = True, names: tuple[str, str] = ("base", "new"),
         **overrides: Any) -> DiffResult:
    """Compare ``new`` against ``base`` (filters of ``options`` applied unless already;
    keywords override its fields).

    ``names`` (file names) name the two sides in errors and notes. The
    compared type is ``options.sample_index`` of ``new`` and, in ``base``,
    ``options.base_sample_index`` or else the type paired with it (same
    kind, or the only type of the same unit on each side).
    """
    if normalize not in NORMALIZE:
        raise OptionsError(f"unknown normalisation {normalize!r} for {{normalize}}; choose from "
                           f"{', '.join(NORMALIZE)}", options=("normalize",))
    o = resolve(options, **overrides)
    sides = [filters.prepare(x, o) for x in (base, new)]
    notes: list[str] = []
    originals, profiles, index = pair_sides(sides, o, names, notes)
    vt = profiles[1].sample_types[index] if profiles[1].sample_types else ValueType("", "")
    totals = [int(np.abs(p.samples.values[:, index], dtype=np.int64).sum()) if p.sample_types else 0 for p in originals]
    factors, unit = _factors(normalize, originals, vt, totals)
    weights = [_function_weights(p, o, index) for p in profiles]
    rows = []
    for n in sorted(set(weights[0]) | set(weights[1])):
        base_flat, base_cum, base_id = weights[0].get(n, (0, 0, {}))
        new_flat, new_cum, new_id = weights[1].get(n, (0, 0, {}))
        rows.append(FunctionDiff(**(new_id or base_id), base_flat=base_flat, new_flat=new_flat,
                                 base_cum=base_cum, new_cum=new_cum))
    result = DiffResult(vt, normalize, unit, totals[0], totals[1], factors, rows,
                        active_filters=sides[1].active, notes=list(dict.fromkeys(notes)))
    rows.sort(key=lambda f: (-abs(result.delta(f.base_flat, f.new_flat)),
                             -abs(result.delta(f.base_cum, f.new_cum)), f.name))
    if stacks:
        per_stack = [_stack_weights(p, o, index) for p in profiles]
        keys = set(per_stack[0]) | set(per_stack[1])
        result.stacks = [StackDiff(k, per_stack[0].get(k, 0), per_stack[1].get(k, 0)) for k in keys]
        result.stacks.sort(key=lambda s: (-abs(result.delta(s.base, s.new)), s.frames))
    return result


def pair_sides(sides: list[FilterResult], o: Options, names: tuple[str, str],
               notes: list[str]) -> tuple[list[Profile], list[Profile], int]:
    """(originals, filtered profiles) of base and new with one set of sample types, and the compared column.

    All types are aligned when they pair up; otherwise (or with
    ``base_sample_index``) each side is reduced to its compared type.
    """
    four = [s.original for s in sides] + [s.profile for s in sides]
    if o.base_sample_index is None:
        try:  # aligned to the new profile's types, so --sample-index means what it means there
            back = align_sample_types(four[::-1], [names[1], names[0]] * 2, notes)[::-1]
            return back[:2], back[2:], back[3].sample_index(o.sample_index)
        except OptionsError:
            if len(sides[1].profile.sample_types) <= 1 and len(sides[0].profile.sample_types) <= 1:
                raise
    new = sides[1].profile
    j = new.sample_index(o.sample_index)
    i = _base_column(sides[0].profile, new.sample_types[j], o.base_sample_index, names)
    single = [_only(p, c) for p, c in zip(four, (i, j, i, j))]
    aligned = align_sample_types([single[1], single[0], single[3], single[2]], [names[1], names[0]] * 2, notes)
    return [aligned[1], aligned[0]], [aligned[3], aligned[2]], 0


def _base_column(base: Profile, vt: ValueType, chosen: str | int | None, names: tuple[str, str]) -> int:
    """The base's column compared with ``vt``: ``chosen``, the same kind, or the only one of its unit."""
    if chosen is not None:
        return base.sample_index(chosen)
    types = base.sample_types
    same = [i for i, b in enumerate(types) if b.type.removesuffix("s") == vt.type.removesuffix("s")]
    unit = [i for i, b in enumerate(types) if units.finest(b.unit, vt.unit) is not None]
    if same or len(unit) == 1:
        return (same or unit)[0]
    raise OptionsError(f"{names[0]} has no sample type to compare with {vt} of {names[1]} "
                       f"({', '.join(map(str, types)) or 'none'}); choose one with {{base_sample_index}}=TYPE",
                       options=("base_sample_index",))


def _only(p: Profile, column: int) -> Profile:
    """``p`` with sample type ``column`` only (the period kept when it is of that type's unit)."""
    import dataclasses

    vt = p.sample_types[column]
    keep_period = p.period_type is not None and units.finest(p.period_type.unit, vt.unit) is not None
    return p.copy_with(sample_types=[vt], default_sample_type=vt.type,
                       samples=dataclasses.replace(p.samples, values=p.samples.values[:, [column]]),
                       period_type=p.period_type if keep_period else None,
                       period=p.period if keep_period else 0)


def _values(p: Profile, index: int) -> np.ndarray:
    return p.samples.values[:, index] if p.sample_types else np.zeros(len(p.samples), np.int64)


def _function_weights(p: Profile, o: Options, index: int) -> dict[str, tuple[int, int, dict]]:
    """(flat, cum, identity fields) by report name; rows that print alike are added
    together (the fields are the first such node's)."""
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    flat, cum = node_weights(p, nodes, callsite_weights(p, _values(p, index)))
    live = np.nonzero((flat != 0) | (cum != 0))[0].tolist()
    ident = node_fields(p, nodes, live)
    out: dict[str, tuple[int, int, dict]] = {}
    for n in live:
        f, c, fields = out.get(nodes.names[n], (0, 0, ident[n]))
        out[nodes.names[n]] = (f + int(flat[n]), c + int(cum[n]), fields)
    return out


def _stack_weights(p: Profile, o: Options, index: int) -> dict[tuple[str, ...], int]:
    """Leaf weight by stack of report names (root first, one name per inline line)."""
    nodes = node_map(p, o.granularity, inlines=not o.noinlines)
    w = callsite_weights(p, _values(p, index))
    names = nodes.names
    loc_names = [tuple(names[int(n)] for n in nodes.loc_nodes[int(a):int(b)][::-1])
                 for a, b in zip(nodes.loc_start[:-1], nodes.loc_start[1:])]
    cs = p.callsites
    parent, location = cs.parent.tolist(), cs.location.tolist()
    path: dict[int, tuple[str, ...]] = {-1: ()}

    def names_of(c: int) -> tuple[str, ...]:
        todo = []
        while c not in path:
            todo.append(c)
            c = parent[c]
        for d in reversed(todo):
            path[d] = path[parent[d]] + loc_names[location[d]]
        return path[todo[0]] if todo else path[c]

    out: dict[tuple[str, ...], int] = {}
    for c in np.nonzero(w.leaf)[0].tolist():
        key = names_of(c)
        out[key] = out.get(key, 0) + int(w.leaf[c])
    return out


def _factors(normalize: str, profiles: list[Profile], vt: ValueType,
             totals: list[int]) -> tuple[tuple[float, float], str]:
    if normalize == "none":
        return (1.0, 1.0), vt.unit
    if normalize == "total":
        base, new = (1.0 / t if t else 0.0 for t in totals)
        return (base, new), ""
    rates = [_rate(p, vt, side) for p, side in zip(profiles, ("base", "new"))]
    if rates[0][1] != rates[1][1]:
        raise OptionsError(f"{{normalize}}=rate: base is in {rates[0][1]}/s but new in {rates[1][1]}/s "
                           "(one of them has no sampling period)", options=("normalize",))
    return (rates[0][0], rates[1][0]), rates[1][1]


def _rate(p: Profile, vt: ValueType, side: str) -> tuple[float, str]:
    """Multiplier to a per-second rate, and the unit per second."""
    if p.duration_nanos <= 0:
        raise OptionsError(f"{{normalize}}=rate needs each profile's duration; the {side} profile has none",
                           options=("normalize",))
    seconds = p.duration_nanos / 1e9
    counted = units.finest(vt.unit, "nanoseconds") is None and units.finest(vt.unit, "bytes") is None
    pt = p.period_type
    if counted and pt is not None and p.period > 0 and units.finest(pt.unit, "nanoseconds") is not None:
        return units.scale(p.period, pt.unit, "nanoseconds")[0] / seconds, "nanoseconds"
    return 1.0 / seconds, vt.unit
