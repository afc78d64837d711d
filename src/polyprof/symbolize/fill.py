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
from polyprof.symbolize.answers import Answers, ranges

__all__ = ["Interner", "NewLine", "fill_lines", "replace_lines", "shallow_copy"]

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

    def code(self, s: str) -> int:
        """The row of string ``s``; -1 when it is not in the table."""
        return self._sid.get(s, -1)

    def function(self, name: str, system_name: str = "", filename: str = "", start_line: int = 0) -> int:
        text = (name, system_name, filename, start_line)
        fid = self._by_text.get(text)
        if fid is None:
            fid = self._by_text[text] = self._function(*text)
        return fid

    def _function(self, name: str, system_name: str, filename: str, start_line: int) -> int:
        return self._key((self.string(name), self.string(system_name), self.string(filename), start_line))

    def _key(self, key: tuple[int, int, int, int]) -> int:
        """The function row of (name, system name, file name) string rows and start line."""
        return self._keys([key])[0]

    def _keys(self, keys: list[tuple[int, int, int, int]]) -> list[int]:
        """:meth:`_key` of each of ``keys``, the new rows added in bulk (no Python call per key)."""
        if self._fid is None:
            self._fid = {}
            for i, old in enumerate(zip(*self.cols)):
                self._fid.setdefault(old, i)
        fid = self._fid
        fresh = [k for k in dict.fromkeys(keys) if k not in fid]
        if fresh:
            fid.update(zip(fresh, range(len(self.cols[0]), len(self.cols[0]) + len(fresh))))
            for col, values in zip(self.cols, zip(*fresh)):
                col.extend(values)
        return list(map(fid.__getitem__, keys))

    def strings_of(self, texts: list[str]) -> np.ndarray:
        """The row of each of ``texts``, the new strings added in bulk."""
        sid = self._sid
        fresh = [t for t in dict.fromkeys(texts) if t not in sid]
        sid.update(zip(fresh, range(len(self.strings), len(self.strings) + len(fresh))))
        self.strings.extend(fresh)
        return np.fromiter(map(sid.__getitem__, texts), dtype=np.int64, count=len(texts))

    def apply(self, p: Profile) -> None:
        """Store the strings and functions into ``p`` (a copy)."""
        p.strings = self.strings
        p.functions = FunctionTable(*(np.asarray(c, dtype=dt) for c, dt in
                                      zip(self.cols, (p.functions.name.dtype, p.functions.system_name.dtype,
                                                      p.functions.filename.dtype, p.functions.start_line.dtype))))


    def functions_of(self, answers: Answers, *, system_names: bool = True) -> np.ndarray:
        """The function row of every frame of ``answers`` (named by its function and file; with
        ``system_names`` the name is the system name too), interning each distinct pair once."""
        if not len(answers.function):
            return np.zeros(0, dtype=np.int64)
        width = np.int64(len(answers.strings) + 1)
        pairs, inverse = np.unique(answers.function.astype(np.int64) * width + answers.file, return_inverse=True)
        sid = self.strings_of(answers.strings)
        names, files = sid[pairs // width].tolist(), sid[pairs % width].tolist()
        systems = names if system_names else [self.string("")] * len(names)
        fids = np.asarray(self._keys(list(zip(names, systems, files, [0] * len(names)))), dtype=np.int64)
        return fids[inverse.reshape(-1)]


def replace_lines(p: Profile, interner: Interner, new: Mapping[int, list[NewLine]], *,
                  set_flags: bool = True) -> Profile:
    """A copy of ``p`` whose locations in ``new`` have those lines (innermost first).

    With ``set_flags``, mapping flags of the locations' mappings gain what the
    new lines carry (functions, file names, line numbers, inline frames).
    """
    rows = sorted(new)
    fn: list[int] = []
    for r in rows:
        fn.extend(name if isinstance(name, int) else interner.function(name, system, file)
                  for name, system, file, _, _ in new[r])
    flat = [x for r in rows for x in new[r]]
    return fill_lines(p, interner, np.asarray(rows, dtype=np.int64),
                      np.asarray([len(new[r]) for r in rows], dtype=np.int64), np.asarray(fn, dtype=np.int64),
                      np.asarray([x[3] for x in flat], dtype=np.int64),
                      np.asarray([x[4] for x in flat], dtype=np.int64), set_flags=set_flags)


def fill_lines(p: Profile, interner: Interner, rows: np.ndarray, counts: np.ndarray, function: np.ndarray,
               line: np.ndarray, column: np.ndarray, *, set_flags: bool = True) -> Profile:
    """A copy of ``p`` whose location ``rows[i]`` has ``counts[i]`` new lines (innermost first),
    taken in order from the ``function`` (row), ``line`` and ``column`` columns; vectorized.

    ``rows`` must be distinct. With ``set_flags``, mapping flags of the
    locations' mappings gain what the new lines carry (functions, file names,
    line numbers, inline frames).
    """
    out = shallow_copy(p)
    loc, ln = p.locations, p.lines
    old_counts = np.diff(loc.line_start)
    new_counts = old_counts.copy()
    new_counts[rows] = counts
    starts = np.zeros(len(loc) + 1, dtype=loc.line_start.dtype)
    np.cumsum(new_counts, out=starts[1:])
    total = int(starts[-1])
    fn = np.empty(total, dtype=ln.function.dtype)
    number = np.empty(total, dtype=ln.line.dtype)
    col = np.empty(total, dtype=ln.column.dtype)
    keep = np.ones(len(loc), dtype=bool)
    keep[rows] = False
    # Old lines of untouched locations move as blocks: gather source and target indexes once.
    src = ranges(loc.line_start[:-1][keep], old_counts[keep])
    dst = ranges(starts[:-1][keep], old_counts[keep])
    fn[dst], number[dst], col[dst] = ln.function[src], ln.line[src], ln.column[src]
    at = ranges(starts[:-1][rows], counts)
    fn[at], number[at], col[at] = function, line, column
    interner.apply(out)
    flags = _new_flags(p, interner, rows, counts, function, line) if set_flags else p.mappings.flags
    out.lines = LineTable(fn, number, col)
    out.locations = LocationTable(loc.mapping, loc.address, loc.folded, starts)
    out.mappings = MappingTable(p.mappings.start, p.mappings.limit, p.mappings.offset, p.mappings.filename,
                                p.mappings.build_id, flags)
    return out


def _new_flags(p: Profile, interner: Interner, rows: np.ndarray, counts: np.ndarray, function: np.ndarray,
               line: np.ndarray) -> np.ndarray:
    """Mapping flags gaining what the new lines carry, per mapping of their locations."""
    flags = p.mappings.flags.copy()
    mapping = p.locations.mapping[rows]
    owner = np.repeat(mapping, counts)
    has_file = np.asarray(interner.cols[2], dtype=np.int64)[function] != interner.code("")
    for bit, where in ((MAPPING_HAS_FUNCTIONS, mapping[counts > 0]), (MAPPING_HAS_FILENAMES, owner[has_file]),
                       (MAPPING_HAS_LINE_NUMBERS, owner[line != 0]), (MAPPING_HAS_INLINE_FRAMES, mapping[counts > 1])):
        hit = np.unique(where[where >= 0])
        flags[hit] |= bit
    return flags
