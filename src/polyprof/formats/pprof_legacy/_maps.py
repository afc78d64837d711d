"""Memory maps in legacy profiles, and pprof's heuristics for them.

A legacy profile ends with the process's ``/proc/self/maps`` (or a shorter
``start-end: file (@offset) buildid`` form), after a ``--- Memory map: ---``
or ``MAPPED_LIBRARIES:`` line in text profiles and right after the samples in
binary CPU profiles. As pprof does: only executable entries become mappings;
glog prefixes are cut; ``name=value`` lines define ``$name`` for later lines;
other lines are ignored. Then adjacent pieces of one file are joined, the
main binary (the first that is not a ``.so`` nor ``[vdso]``-like) goes first,
and every address is given the mapping that holds it, or a catch-all
mapping ``0x0/0xffffffffffffffff`` when none does (Go's legacy profiles have
no maps at all).
"""

from __future__ import annotations

import re
from bisect import bisect_right

import numpy as np

from polyprof.formats.pprof_legacy._parsed import MASK64, Mapping, NotMine, Parsed, Scanner, go_uint
from polyprof.formats.pprof_legacy._stacks import number_locations

__all__ = ["apply_maps", "is_map_sentinel", "parse_maps"]

_X = "[0-9A-Fa-f]"
_S = r"[\t\n\f\r ]"  # Go's \s
_HEX = f"(?:0x)?({_X}+)"
_RANGE = f"{_S}*{_HEX}[\t\n\f\r -]?{_S}*{_HEX}:?"
_PERM = f"(?:{_S}+([-rwxp]+))?"
_SPACE_HEX = f"(?:{_S}+({_X}+))?"
_STRING = rf"(?:{_S}+([^\t\n\f\r ]+))?"
# /proc/self/maps: start-end perms offset dev inode file
_PROC = re.compile(f"{_RANGE}{_PERM}{_SPACE_HEX}{_S}+{_X}+:{_X}+{_S}+[0-9]+{_STRING}")
# the brief form: start-end perms file (@offset) buildid
_BRIEF = re.compile(rf"{_RANGE}{_PERM}{_STRING}(?:{_S}+\(@({_X}+)\))?{_SPACE_HEX}")
_LOG_PREFIX = re.compile(r"[^\[\]]+:[0-9]+]" + _S)  # glog's "... file.cc:123] "
_LIB = re.compile(r"[.]so$|[.]so[._][0-9]+")
_SENTINELS = ("--- Memory map: ---", "MAPPED_LIBRARIES:")
_MAIN_START = 0x400000  # where non-PIE x86-64 binaries are loaded


def is_map_sentinel(line: str) -> bool:
    return any(s in line for s in _SENTINELS)


def parse_maps(s: Scanner) -> list[Mapping]:
    """The executable mappings in the lines ``s`` has left."""
    maps: list[Mapping] = []
    defs: dict[str, str] = {}
    replace = None
    while s.scan():
        line = s.line
        cut = _LOG_PREFIX.match(line)
        if cut:
            line = line[cut.end():]
        if replace is not None:
            line = replace.sub(lambda m: defs[m.group()], line)
        try:
            m = _entry(line)
        except NotMine:
            if "=" in line:  # name=value: later lines may say $name
                name, value = line.split("=", 1)
                defs.setdefault("$" + name.strip(" \t\n\v\f\r"), value.strip(" \t\n\v\f\r"))
                # the first definition of a name wins, as in Go's strings.Replacer
                replace = re.compile("|".join(map(re.escape, defs)))
            continue
        if m is not None:
            maps.append(m)
    return maps


def _entry(line: str) -> Mapping | None:
    m = _PROC.match(line)
    if m:
        start, end, perm, offset, file = m.groups("")
        build_id = ""
    else:
        m = _BRIEF.match(line)
        if not m:
            raise NotMine("not a mapping")
        start, end, perm, file, offset, build_id = m.groups("")
    if perm and "x" not in perm:
        return None  # only code can hold a sampled address
    try:
        return Mapping(go_uint(start, 16), go_uint(end, 16), go_uint(offset, 16) if offset else 0, file, build_id)
    except ValueError:
        raise NotMine("mapping address out of range") from None


def apply_maps(p: Parsed, maps: list[Mapping]) -> None:
    """Add ``maps`` to ``p``, number its locations and give each its mapping,
    as pprof's ``ParseMemoryMap`` does."""
    p.freeze()
    p.mappings.extend(maps)
    _massage(p)
    number_locations(p)
    _assign(p)


def _massage(p: Parsed) -> None:
    maps = p.mappings
    if len(maps) > 1:  # (locations get their mapping only in _assign: none points at a piece)
        joined = [maps[0]]
        for m in maps[1:]:
            last = joined[-1]
            if _adjacent(last, m):
                last.limit = m.limit
                last.file = m.file or last.file
                last.build_id = m.build_id or last.build_id
            else:
                joined.append(m)
        p.mappings = maps = joined
    for i, m in enumerate(maps):
        file = m.file.replace("(deleted)", "").strip(" \t\n\v\f\r")
        if file and not _LIB.search(file) and file[0] != "[":
            maps[0], maps[i] = maps[i], maps[0]  # the main binary first
            break


def _adjacent(a: Mapping, b: Mapping) -> bool:
    """Two pieces of one mapping split in two."""
    if a.file and b.file and a.file != b.file:
        return False
    if a.build_id and b.build_id and a.build_id != b.build_id:
        return False
    if a.limit != b.start:
        return False
    return not (a.offset and b.offset and (a.offset + a.limit - a.start) & MASK64 != b.offset)


def _assign(p: Parsed) -> None:
    """``loc_mapping``: the mapping (index in ``p.mappings``, -1 none) of each location."""
    maps = p.mappings
    if len(maps) > 1 and maps[0].file.startswith("/anon_hugepage") and maps[0].limit == maps[1].start:
        p.mappings = maps = maps[1:]
    if maps and (maps[0].start - maps[0].offset) & MASK64 == _MAIN_START:
        maps[0].start, maps[0].offset = _MAIN_START, 0
    address = p.loc_address
    want = address != 0  # and, in Java profiles, not named by a symbol line
    if p.symbols:
        want &= ~np.isin(address, np.fromiter(p.symbols, dtype=np.uint64, count=len(p.symbols)))
    index = {id(m): i for i, m in enumerate(maps)}
    loc_mapping = np.full(len(address), -1, dtype=np.int64)
    find = _Finder(maps)
    todo = want
    if find.disjoint and maps:
        k = np.searchsorted(np.array(find.starts, dtype=np.uint64), address, side="right") - 1
        limits = np.array([m.limit for m in find.order], dtype=np.uint64)
        hit = want & (k >= 0) & (address < limits[np.maximum(k, 0)])
        loc_mapping[hit] = np.array([index[id(m)] for m in find.order], dtype=np.int64)[k[hit]]
        todo = want & ~hit
    fake = None
    for i in np.flatnonzero(todo).tolist():  # in location order: pprof's rules mutate mappings
        a = int(address[i])
        # pprof scans the catch-all mapping too once it exists, before the split-piece rule
        m = find.containing(a) or fake or find.split_piece(a)
        if m is None:
            m = fake = Mapping(0, MASK64)
            index[id(fake)] = len(maps)
            maps.append(fake)
        loc_mapping[i] = index[id(m)]
    p.loc_mapping = loc_mapping


class _Finder:
    """The first mapping holding an address (binary search when mappings are disjoint)."""

    def __init__(self, maps: list[Mapping]) -> None:
        self.maps = list(maps)
        self._index()

    def _index(self) -> None:
        self.order = sorted(self.maps, key=lambda m: m.start)
        self.starts = [m.start for m in self.order]
        self.disjoint = all(a.limit <= b.start for a, b in zip(self.order, self.order[1:]))

    def containing(self, a: int) -> Mapping | None:
        if not self.disjoint:
            return next((m for m in self.maps if m.start <= a < m.limit), None)
        k = bisect_right(self.starts, a) - 1
        return self.order[k] if k >= 0 and a < self.order[k].limit else None

    def split_piece(self, a: int) -> Mapping | None:
        """Legacy handlers dropped the first piece of a split mapping: an address
        just below a mapping with an offset belongs to it, extended down."""
        for m in self.maps:
            if m.offset and (m.start - m.offset) & MASK64 <= a < m.start:
                m.start, m.offset = (m.start - m.offset) & MASK64, 0
                self._index()
                return m
        return None
