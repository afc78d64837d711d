"""Vectorized transforms of the callsite tree, shared by the filters.

Every function works one tree level at a time over all callsites with the
kernels of :mod:`polyprof.model.tree`, never per sample and never per
callsite in Python, so a profile with a million callsites and hundreds of
thousands of samples stays fast.

- :func:`take_samples` keeps a subset of samples (tables are shared);
- :func:`path_any` says, per callsite, whether a flag is set on it or on any
  ancestor;
- :func:`nearest` finds, per callsite, the nearest ancestor-or-self with a
  property;
- :func:`rebuild` drops callsites, re-roots subtrees and renames locations,
  re-interning identical (parent, location) pairs so the result is again a
  tree with shared prefixes;
- :func:`rewrite_lines` keeps a subset of every location's inline lines and
  merges locations that become identical.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

import numpy as np

from polyprof.model import tree
from polyprof.model.compact import take_rows
from polyprof.model.profile import CallsiteTable, LineTable, LocationTable, Profile, SampleTable, _Once
from polyprof.wire.vector import import_compiled

__all__ = ["nearest", "nearest_compiled", "path_any", "rebuild", "rewrite_lines", "selected_from", "take_samples",
           "with_samples", "within"]


def with_samples(p: Profile, samples: SampleTable, **changes: Any) -> Profile:
    """A copy of ``p`` sharing its tables, with ``samples`` (and other fields) replaced."""
    return p.copy_with(samples=samples, **changes)


def take_samples(p: Profile, keep: np.ndarray, stack: np.ndarray | None = None) -> Profile:
    """``p`` with only the samples where ``keep`` (a mask) is true (optionally with new stacks).

    The columns every analysis reads (stack, values, labelset) are copied by the mask; the
    optional ones (time, pid, tid, cpu: what only the timeline and the pid/tid/time filters
    read) are taken on first use, from the columns they were selected from and a mask over
    them (a chain of selections keeps one mask over the first table's columns, not the
    steps' copies): a filtered copy of the 6.5M-sample Perfetto trace holds 130 MB, not 215.
    """
    s = p.samples
    new_stack = s.stack if stack is None else stack
    columns, over = selected_from(s)
    if keep.all():  # (a hide's remade stacks often keep every sample) the columns are shared, not copied
        table = SampleTable(stack=new_stack.astype(np.int32, copy=False), values=s.values, labelset=s.labelset)
    else:
        keep = np.asarray(keep, dtype=bool)  # a boolean mask indexes without a row-number array
        table = SampleTable(stack=new_stack[keep].astype(np.int32, copy=False), values=_rows_of(s.values, keep),
                            labelset=s.labelset[keep])
        over = keep if over is None else within(over, keep)  # the mask over the first table's rows
    if over is None:
        for name, column in columns.items():
            setattr(table, name, column)
    else:
        once = _Once(lambda: None)
        for name, column in columns.items():
            table._defer(name, once, _Take(column, over))
    return with_samples(p, table)


def within(mask: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The rows of ``mask`` that a later selection over its true rows ``kept`` keeps (a new mask)."""
    out = mask.copy()
    out[mask] = kept
    return out


def _rows_of(a: np.ndarray, mask: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
    """``a[mask]`` for a table of several columns, a chunk of rows at a time (numpy turns a
    mask over a 2-D array into int64 row numbers first: 41 MB for 5.4M Perfetto samples)."""
    if a.ndim == 1:
        return a[mask]
    out: np.ndarray = np.empty((int(np.count_nonzero(mask)), *a.shape[1:]), dtype=a.dtype)
    at = 0
    for start in range(0, len(a), chunk):
        got = a[start:start + chunk][mask[start:start + chunk]]
        out[at:at + len(got)] = got
        at += len(got)
    return out


class _Take:
    """A deferred optional column: ``column[mask]``, made on first use."""

    __slots__ = ("column", "mask")

    def __init__(self, column: np.ndarray, mask: np.ndarray) -> None:
        self.column, self.mask = column, mask

    def __call__(self, _: object) -> np.ndarray:
        return take_rows(self.column, self.mask)  # (a constant pid stays one value: model/compact.py)


def selected_from(s: SampleTable) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The optional columns ``s`` takes its own from, and the mask over their rows (None: they
    are its own); columns ``s`` lacks are left out. Reads no deferred column."""
    pending = s.__dict__.get("_deferred", {})  # (a deferred column stays listed once it is made)
    taken = {name: pending[name][1] for name in s.OPTIONAL_COLUMNS
             if name in pending and isinstance(pending[name][1], _Take)}
    if taken:  # all taken together, by one mask
        return {name: take.column for name, take in taken.items()}, next(iter(taken.values())).mask
    return {name: getattr(s, name) for name in s.OPTIONAL_COLUMNS if getattr(s, name) is not None}, None


def path_any(cs: CallsiteTable, flag: np.ndarray, *, strict: bool = False) -> np.ndarray:
    """Per callsite: ``flag`` holds on it or an ancestor (only ancestors if ``strict``)."""
    if tree.compiled(len(cs)) is not None:  # one compiled walk, no levels needed (a first filter's cost)
        out = tree.path_sums(cs.parent, flag.astype(np.int64)) > 0
    else:
        out = tree.any_above(flag, cs.parent, cs.levels())
    if not strict:
        return out
    res = np.zeros(len(cs), dtype=bool)
    has_parent = cs.parent >= 0
    res[has_parent] = out[cs.parent[has_parent]]
    return res


def nearest(cs: CallsiteTable, flag: np.ndarray) -> np.ndarray:
    """Per callsite: the nearest ancestor-or-self where ``flag`` holds, or -1."""
    got = nearest_compiled(cs.parent, flag)
    if got is not None:
        return got
    return tree.fill_down(np.where(flag, np.arange(len(cs)), -1), cs.parent, cs.levels())


def nearest_compiled(parent: np.ndarray, flag: np.ndarray) -> np.ndarray | None:
    """:func:`nearest` for any tree whose parents precede their children, by the compiled walk;
    None when the compiled kernels do not run at this size (or the order is not so)."""
    fast = _kernels(parent.size)
    return fast.nearest(parent, flag) if fast is not None else None


def rebuild(cs: CallsiteTable, keep: np.ndarray, location: np.ndarray,
            cut: np.ndarray | None = None) -> tuple[CallsiteTable, np.ndarray]:
    """A new callsite tree, and where every old callsite went.

    ``keep``: the callsite stays (with ``location[c]`` as its location);
    dropped callsites vanish from every stack through them. ``cut``: the
    callsite loses its ancestors and becomes a root. Returns the new table
    and ``new_of``: the new id of each old callsite's nearest kept
    ancestor-or-self (-1 when none remains, i.e. the stack became empty).
    New ids go depth by depth, by (parent, location) within one; the table
    comes with its depths and levels cached (what ``top`` asks for next).
    Large trees take one compiled walk (:mod:`polyprof.analysis._rebuild_compiled`,
    the same answer).
    """
    n = len(cs)
    cut = np.zeros(n, dtype=bool) if cut is None else cut
    width = int(location.max()) + 2 if n else 1
    fast = _kernels(n)
    made = fast.rebuild(cs.parent, keep, location, cut, width) if fast is not None else None
    parent, loc, starts, new_of = made if made is not None else _rebuild(cs, keep, location, cut, width)
    table = CallsiteTable(parent.astype(np.int32), loc.astype(np.int32))
    sizes = np.diff(np.asarray(starts, dtype=np.int64))
    table._depth = tree.segment_owner(sizes).astype(np.int32)
    table._levels = (len(table), [tree.Level.of(slice(a, b), table.parent[a:b]) for a, b in zip(starts, starts[1:])])
    return table, new_of


def _rebuild(cs: CallsiteTable, keep: np.ndarray, location: np.ndarray, cut: np.ndarray,
             width: int) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """:func:`rebuild` in whole-array passes: (new parents, new locations, depth starts, new_of)."""
    n = len(cs)
    sentinel = n  # "explicitly nothing above": stops the downward propagation
    own = tree.fill_down(np.where(keep, np.arange(n), np.where(cut, sentinel, -1)), cs.parent, cs.levels())
    self_or_above = np.where(own == sentinel, -1, own)  # nearest kept ancestor-or-self
    above = np.full(n, -1, dtype=np.int64)
    has_parent = (cs.parent >= 0) & ~cut
    above[has_parent] = self_or_above[cs.parent[has_parent]]
    # Depth in the new tree: the kept callsites on the way up, through ``above``.
    kept_nodes = np.flatnonzero(keep)
    new_depth = tree.path_sums(above, np.ones(n, dtype=np.int64))[kept_nodes] - 1
    by_depth, bounds = tree.group_by_depth(new_depth)
    new_id, parent, loc, starts = tree.intern_paths(above, location, kept_nodes[by_depth], bounds, width)
    new_of = np.where(self_or_above >= 0, new_id[np.maximum(self_or_above, 0)], -1)
    return parent, loc, starts, new_of


class CompiledTwin:
    """A compiled twin module (numba) of an analysis step, imported on first use and only for
    work the tree kernels would run compiled (``tree.compiled``: size, ``POLYPROF_KERNELS``,
    numba installed). ``twin(n)``: the module for ``n`` items of work, or None (numpy)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._compiled: ModuleType | None | bool = None  # False: numba missing (tests set it to force numpy)

    def __call__(self, n: int) -> ModuleType | None:
        if tree.compiled(n) is None:
            return None
        if self._compiled is None:
            self._compiled = import_compiled(self.name)
        return self._compiled if isinstance(self._compiled, ModuleType) else None


_kernels = CompiledTwin("polyprof.analysis._rebuild_compiled")


def rewrite_lines(p: Profile, line_keep: np.ndarray) -> tuple[Profile, np.ndarray]:
    """Keep only the inline lines where ``line_keep`` is true; merge equal locations.

    Returns the profile with the new location and line tables (callsites
    unchanged) and ``loc_map``: the location each old location now stands
    for (equal locations share one row; every row keeps its position).
    """
    loc = p.locations
    counts = np.diff(loc.line_start)
    line_loc = tree.segment_owner(counts)
    new_counts = np.bincount(line_loc[line_keep], minlength=len(loc)).astype(np.int64)
    line_start = np.zeros(len(loc) + 1, dtype=np.int64)
    np.cumsum(new_counts, out=line_start[1:])
    lines = LineTable(p.lines.function[line_keep], p.lines.line[line_keep], p.lines.column[line_keep])
    locations = LocationTable(loc.mapping, loc.address, loc.folded, line_start)
    out = dataclasses.replace(p, locations=locations, lines=lines)
    return out, _dedupe_locations(out)


def _dedupe_locations(p: Profile) -> np.ndarray:
    """First location with the same (mapping, address, folded, lines) as each location."""
    loc = p.locations
    starts = loc.line_start.tolist()
    rows = list(zip(p.lines.function.tolist(), p.lines.line.tolist(), p.lines.column.tolist()))
    first: dict[tuple, int] = {}
    out = np.empty(len(loc), dtype=np.int64)
    for i, key in enumerate(zip(loc.mapping.tolist(), loc.address.tolist(), loc.folded.tolist())):
        out[i] = first.setdefault((key, tuple(rows[starts[i]:starts[i + 1]])), i)
    return out
