"""``raw``: the profile as ``go tool pprof -raw`` lists it (``Profile.String()``).

pprof prints the profile after its own input pipeline, so this reproduces
that pipeline's numbering rather than polyprof's rows:

- a fake all-zero mapping when there is none (as its binary lookup adds);
- ``Merge`` of the one input: equal samples summed, all-zero samples and
  samples without a stack gone,
  locations numbered in order of first use (leaf first, sample by sample),
  mappings likewise after the main one, equal mappings and locations (by
  pprof's keys: size rounded to 4 KiB, offset, build id or file; address
  relative to the mapping, lines, folding) counted once;
- function names cleaned as its symbolizer does (``-symbolize=none``: as
  stored), mapping files that are URLs cleared when there is no build id.

Lost: nothing pprof prints; polyprof's own columns (time, pid, tid, cpu) and
line columns are not part of pprof's text.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.nodes import display_name
from polyprof.analysis.options import Options
from polyprof.analysis.result import Result, dataclass_columns
from polyprof.model.merge import compact
from polyprof.model.profile import Profile, ValueType

__all__ = ["RawLine", "RawLocation", "RawMapping", "RawResult", "RawSample", "raw"]



@dataclass(frozen=True)
class RawMapping:
    id: int
    start: int
    limit: int
    offset: int
    file: str
    build_id: str
    flags: int  # MAPPING_HAS_* bits


@dataclass(frozen=True)
class RawLine:
    name: str
    system_name: str
    file: str
    line: int
    start_line: int
    column: int = 0


@dataclass(frozen=True)
class RawLocation:
    id: int
    address: int
    mapping: int  # RawMapping id, 0 for none
    folded: bool
    lines: tuple[RawLine, ...]


@dataclass(frozen=True)
class RawSample:
    values: tuple[int, ...]
    locations: tuple[int, ...]  # RawLocation ids, leaf first
    labels: tuple[tuple[str, tuple[str, ...]], ...]                  # string labels by key
    num_labels: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...]  # key, values, units ("" none)


@dataclass(repr=False)
class RawResult(Result):
    """pprof's ``-raw`` view: ``to_pandas()`` gives the samples (values, location ids
    leaf first, labels); ``"locations"`` and ``"mappings"`` the tables they refer to."""

    TABLES: ClassVar[tuple[str, ...]] = ("samples", "locations", "mappings")
    comments: list[str]
    period_type: ValueType | None
    period: int
    time_nanos: int
    duration_nanos: int
    sample_types: list[ValueType]
    default_sample_type: str
    samples: list[RawSample] = field(default_factory=list)
    locations: list[RawLocation] = field(default_factory=list)
    mappings: list[RawMapping] = field(default_factory=list)

    def _columns(self, table: str) -> dict[str, Any]:
        row_type = {"samples": RawSample, "locations": RawLocation, "mappings": RawMapping}[table]
        cols = dataclass_columns(getattr(self, table), row_type)
        if table == "samples":  # labels as lists of {key, values(, units)}: one type per column for Arrow
            cols["labels"] = [[{"key": k, "values": list(v)} for k, v in ls] for ls in cols["labels"]]
            cols["num_labels"] = [[{"key": k, "values": list(v), "units": list(u)} for k, v, u in ls]
                                  for ls in cols["num_labels"]]
        return cols

    def _summary(self) -> str:
        return f"{len(self.samples)} samples, {len(self.locations)} locations, {len(self.mappings)} mappings"


def raw(src: Profile | FilterResult, options: Options | None = None, *, as_parsed: bool = False) -> RawResult:
    """``src`` (filters of ``options`` applied unless already) numbered as pprof prints it.

    pprof numbers locations when it reads (before filtering) and prints every
    location it read, so the numbering comes from the unfiltered profile and the
    samples from the filtered one.

    ``as_parsed``: the profile as a pprof parser returns it, before ``go tool
    pprof`` merges it (pprof's ``Profile.String()`` after ``Parse``): every
    sample in order, equal ones not summed, every mapping and location in
    table order, names as stored, no fake mapping."""
    o = options or Options()
    fr = filters.prepare(src, o)
    if as_parsed:
        return _as_parsed(fr.profile)
    before = compact(fr.original)
    numbering = _Numbering(before, clean=o.symbolize != "none")
    _samples(before, numbering)  # numbers every location in pprof's order
    p = compact(fr.profile) if fr.profile is not fr.original else before
    if p is not before:
        numbering.switch(p)
    out = RawResult(list(p.comments), p.period_type, p.period, p.time_nanos, p.duration_nanos,
                    list(p.sample_types), p.default_sample_type)
    out.samples = _samples(p, numbering)
    out.locations, out.mappings = numbering.locations, numbering.mappings
    return out


def _as_parsed(p: Profile) -> RawResult:
    numbering = _Numbering(p, clean=False, as_parsed=True)
    out = RawResult(list(p.comments), p.period_type, p.period, p.time_nanos, p.duration_nanos,
                    list(p.sample_types), p.default_sample_type)
    out.samples = _samples(p, numbering, keep_empty=True)
    out.locations, out.mappings = numbering.locations, numbering.mappings
    return out


def _samples(p: Profile, numbering: _Numbering, *, keep_empty: bool = False) -> list[RawSample]:
    s = p.samples
    paths: dict[int, tuple[int, ...]] = {}
    out = []
    for i in range(len(s)):
        stack = int(s.stack[i])
        if stack < 0 and not keep_empty:
            continue  # pprof's name filter (run even without filters) drops samples without locations
        if stack not in paths:
            paths[stack] = tuple(numbering.location(loc) for loc in p.callsites.path(stack)) if stack >= 0 else ()
        out.append(RawSample(tuple(s.values[i].tolist()), paths[stack], *_labels(p.labelsets[int(s.labelset[i])])))
    return out


class _Numbering:
    """pprof's ``Merge`` numbering of locations and mappings, in order of first use."""

    def __init__(self, p: Profile, *, clean: bool, as_parsed: bool = False) -> None:
        self.p, self.clean = p, clean
        self.locations: list[RawLocation] = []
        self.mappings: list[RawMapping] = []
        self._by_row: dict[int, int] = {}
        self._by_key: dict[tuple, int] = {}
        self._map_by_row: dict[int, tuple[int, int]] = {}  # row -> (id, address shift)
        self._map_by_key: dict[tuple, tuple[int, int]] = {}
        if as_parsed:
            self._number_rows()
        elif len(p.mappings):
            self.mapping(0)  # pprof's Merge takes the main binary (the first mapping) first
        elif len(p.locations):
            self.mappings.append(RawMapping(1, 0, 0, 0, "", "", 0))  # pprof's fake mapping

    def _number_rows(self) -> None:
        """Table order, nothing merged: every mapping and location row is its own id."""
        p = self.p
        self.mappings = [self._mapping_row(row, row + 1) for row in range(len(p.mappings))]
        self._map_by_row = {row: (row + 1, 0) for row in range(len(p.mappings))}
        for loc in range(len(p.locations)):
            self._by_row[loc] = loc + 1
            self.locations.append(RawLocation(loc + 1, int(p.locations.address[loc]), int(p.locations.mapping[loc]) + 1,
                                              bool(p.locations.folded[loc]),
                                              tuple(self._line(r) for r in p.locations.lines_of(loc))))

    def switch(self, p: Profile) -> None:
        """Number ``p``'s rows from now on (locations already seen keep their ids)."""
        self.p = p
        self._by_row, self._map_by_row = {}, {}

    def mapping(self, row: int) -> tuple[int, int]:
        """(id, address shift) of mapping row ``row``."""
        if row in self._map_by_row:
            return self._map_by_row[row]
        m, strs = self.p.mappings, self.p.strings
        start, limit, offset = int(m.start[row]), int(m.limit[row]), int(m.offset[row])
        file, build = strs[m.filename[row]], strs[m.build_id[row]]
        size = (limit - start + 0xFFF) // 0x1000 * 0x1000
        key = (size, offset, build or file)
        if key in self._map_by_key:
            mid, mstart = self._map_by_key[key][0], self.mappings[self._map_by_key[key][0] - 1].start
            found = (mid, mstart - start)
        else:
            mapping = self._mapping_row(row, len(self.mappings) + 1)
            if not build and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", file):
                mapping = dataclasses.replace(mapping, file="")  # pprof's unsourceMappings: a URL is not a file
            self.mappings.append(mapping)
            found = self._map_by_key[key] = (len(self.mappings), 0)
        self._map_by_row[row] = found
        return found

    def _mapping_row(self, row: int, mid: int) -> RawMapping:
        m, strs = self.p.mappings, self.p.strings
        return RawMapping(mid, int(m.start[row]), int(m.limit[row]), int(m.offset[row]), strs[m.filename[row]],
                          strs[m.build_id[row]], int(m.flags[row]))

    def location(self, loc: int) -> int:
        if loc in self._by_row:
            return self._by_row[loc]
        p = self.p
        row = int(p.locations.mapping[loc])
        mid, shift = self.mapping(row) if row >= 0 else ((1, 0) if self.mappings and not len(p.mappings) else (0, 0))
        address = int(p.locations.address[loc]) + shift
        lines = tuple(self._line(r) for r in p.locations.lines_of(loc))
        rel = address - (self.mappings[mid - 1].start if mid else 0)
        key = (rel, mid, tuple((ln.name, ln.system_name, ln.file, ln.start_line, ln.line) for ln in lines),
               bool(p.locations.folded[loc]))
        lid = self._by_key.get(key)
        if lid is None:
            lid = self._by_key[key] = len(self.locations) + 1
            self.locations.append(RawLocation(lid, address, mid, bool(p.locations.folded[loc]), lines))
        self._by_row[loc] = lid
        return lid

    def _line(self, r: int) -> RawLine:
        p, strs = self.p, self.p.strings
        fn = int(p.lines.function[r])
        if fn < 0:
            return RawLine("", "", "", int(p.lines.line[r]), -1)
        f = p.functions
        name, system = strs[f.name[fn]], strs[f.system_name[fn]]
        if self.clean:
            name = display_name(name, system)
        return RawLine(name, system, strs[f.filename[fn]], int(p.lines.line[r]), int(f.start_line[fn]),
                       int(p.lines.column[r]))


def _labels(labels: tuple) -> tuple[tuple, tuple]:
    """A label set as pprof's Sample holds it: string labels by key, numeric ones with units."""
    strs: dict[str, list[str]] = {}
    nums: dict[str, list[int]] = {}
    units: dict[str, list[str]] = {}
    for lab in labels:
        if lab.str is not None and lab.str != "":
            strs.setdefault(lab.key, []).append(lab.str)
        elif lab.num or lab.unit:
            nums.setdefault(lab.key, []).append(lab.num or 0)
            units.setdefault(lab.key, []).append(lab.unit or "")
    return (tuple((k, tuple(v)) for k, v in strs.items()),
            tuple((k, tuple(v), tuple(units[k]) if any(units[k]) else ()) for k, v in nums.items()))
