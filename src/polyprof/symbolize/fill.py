"""Give locations new lines without renumbering anything.

Symbolization only ever replaces the lines of some locations (and the
functions and strings they name). Every row number stays: locations,
callsites, samples and mappings keep their ids, so stacks, values and
labels are untouched and a store can symbolize rows it already holds.
The result is a shallow copy sharing every untouched table (and deferred
labels stay deferred).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from polyprof.model.extras import Extras
from polyprof.model.profile import (
    MAPPING_HAS_FILENAMES,
    MAPPING_HAS_FUNCTIONS,
    MAPPING_HAS_INLINE_FRAMES,
    MAPPING_HAS_LINE_NUMBERS,
    FunctionTable,
    LineTable,
    LocationTable,
    MappingTable,
    Profile,
)

__all__ = ["Interner", "NewLine", "replace_lines", "shallow_copy"]

#: One line of a location: (function name, system name, file, line, column); the name may
#: instead be an existing function's row (an int, -1 for none), kept as it is.
NewLine = tuple[str | int, str, str, int, int]


def shallow_copy(p: Profile) -> Profile:
    """A copy of ``p`` sharing its tables; deferred attributes stay deferred."""
    new = object.__new__(type(p))
    new.__dict__.update(p.__dict__)
    new.extras = Extras(p.extras)
    new.warnings = list(p.warnings)
    return new


class Interner:
    """Strings and functions of a profile, extended without renumbering the old ones."""

    def __init__(self, p: Profile) -> None:
        self.strings = list(p.strings)
        self._sid = {s: i for i, s in enumerate(self.strings)}
        f = p.functions
        self.cols: list[list[int]] = [f.name.tolist(), f.system_name.tolist(), f.filename.tolist(),
                                      f.start_line.tolist()]
        self._fid: dict[tuple[int, int, int, int], int] | None = None
        self._by_text: dict[tuple[str, str, str, int], int] = {}  # inlined functions repeat on many lines

    def string(self, s: str) -> int:
        sid = self._sid.get(s)
        if sid is None:
            sid = self._sid[s] = len(self.strings)
            self.strings.append(s)
        return sid

    def function(self, name: str, system_name: str = "", filename: str = "", start_line: int = 0) -> int:
        text = (name, system_name, filename, start_line)
        fid = self._by_text.get(text)
        if fid is None:
            fid = self._by_text[text] = self._function(*text)
        return fid

    def _function(self, name: str, system_name: str, filename: str, start_line: int) -> int:
        if self._fid is None:
            self._fid = {}
            for i, key in enumerate(zip(*self.cols)):
                self._fid.setdefault(key, i)
        key = (self.string(name), self.string(system_name), self.string(filename), start_line)
        fid = self._fid.get(key)
        if fid is None:
            fid = self._fid[key] = len(self.cols[0])
            for col, value in zip(self.cols, key):
                col.append(value)
        return fid

    def apply(self, p: Profile) -> None:
        """Store the strings and functions into ``p`` (a copy)."""
        p.strings = self.strings
        p.functions = FunctionTable(*(np.asarray(c, dtype=dt) for c, dt in
                                      zip(self.cols, (p.functions.name.dtype, p.functions.system_name.dtype,
                                                      p.functions.filename.dtype, p.functions.start_line.dtype))))


def replace_lines(p: Profile, interner: Interner, new: Mapping[int, list[NewLine]], *,
                  set_flags: bool = True) -> Profile:
    """A copy of ``p`` whose locations in ``new`` have those lines (innermost first).

    With ``set_flags``, mapping flags of the locations' mappings gain what the
    new lines carry (functions, file names, line numbers, inline frames).
    """
    out = shallow_copy(p)
    loc, ln = p.locations, p.lines
    counts = np.diff(loc.line_start)
    rows = np.fromiter(new.keys(), dtype=np.int64, count=len(new)) if new else np.zeros(0, np.int64)
    new_counts = counts.copy()
    new_counts[rows] = [len(new[r]) for r in rows.tolist()]
    starts = np.zeros(len(loc) + 1, dtype=loc.line_start.dtype)
    np.cumsum(new_counts, out=starts[1:])
    total = int(starts[-1])
    fn = np.empty(total, dtype=ln.function.dtype)
    line = np.empty(total, dtype=ln.line.dtype)
    col = np.empty(total, dtype=ln.column.dtype)
    keep = np.ones(len(loc), dtype=bool)
    keep[rows] = False
    # Old lines of untouched locations move as blocks: gather source and target indexes once.
    src = _ranges(loc.line_start[:-1][keep], counts[keep])
    dst = _ranges(starts[:-1][keep], counts[keep])
    fn[dst], line[dst], col[dst] = ln.function[src], ln.line[src], ln.column[src]
    flags = p.mappings.flags.copy()
    for r in rows.tolist():
        at = int(starts[r])
        for i, (name, system, file, number, column) in enumerate(new[r]):
            fn[at + i] = name if isinstance(name, int) else interner.function(name, system, file)
            line[at + i], col[at + i] = number, column
        m = int(loc.mapping[r])
        if set_flags and m >= 0 and new[r] and flags[m] & _ALL_FLAGS != _ALL_FLAGS:
            flags[m] |= _flags(new[r])
    interner.apply(out)
    out.lines = LineTable(fn, line, col)
    out.locations = LocationTable(loc.mapping, loc.address, loc.folded, starts)
    out.mappings = MappingTable(p.mappings.start, p.mappings.limit, p.mappings.offset, p.mappings.filename,
                                p.mappings.build_id, flags)
    return out


_ALL_FLAGS = MAPPING_HAS_FUNCTIONS | MAPPING_HAS_FILENAMES | MAPPING_HAS_LINE_NUMBERS | MAPPING_HAS_INLINE_FRAMES


def _flags(lines: list[NewLine]) -> int:
    bits = MAPPING_HAS_FUNCTIONS
    if any(x[2] for x in lines):
        bits |= MAPPING_HAS_FILENAMES
    if any(x[3] for x in lines):
        bits |= MAPPING_HAS_LINE_NUMBERS
    if len(lines) > 1:
        bits |= MAPPING_HAS_INLINE_FRAMES
    return bits


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(s, s + c)`` for each pair, vectorized."""
    counts = counts.astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    offsets = np.repeat(ends - counts, counts)
    return np.repeat(starts.astype(np.int64), counts) + np.arange(total, dtype=np.int64) - offsets
