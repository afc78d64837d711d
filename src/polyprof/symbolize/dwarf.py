"""Pure-Python DWARF lookups (pyelftools): address -> inline chain with file and line.

The rules are llvm-symbolizer's (``DWARFContext::getInliningInfoForAddress``),
so this path and the llvm-symbolizer path give the same answers:

- the compile unit comes from ``.debug_aranges``, else from the unit's own
  ranges (``DW_AT_low_pc``/``high_pc``/``ranges``, v4 ``.debug_ranges`` and v5
  ``.debug_rnglists``);
- in that unit, the subprogram or inlined-subroutine DIE covering the address
  that comes last in DIE order is the innermost frame; its ancestors up to
  the subprogram are the callers it was inlined into;
- a frame's name is its linkage name, else its name, found through
  ``DW_AT_abstract_origin``/``DW_AT_specification`` (each DIE visited once, so
  a reference cycle ends the search instead of looping);
- the innermost frame's file, line and column come from the line table
  (the last row at or below the address in its sequence); each outer frame's
  from the ``DW_AT_call_file/line/column`` of the frame inlined into it; file
  names are made absolute with the include directory and compilation
  directory as LLVM joins them.

It is slow on big binaries (pyelftools decodes whole units): llvm-symbolizer
is preferred when present (:mod:`.llvm`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyprof.symbolize.frames import Frame

__all__ = ["DwarfReader", "join_path"]

_ROUTINES = ("DW_TAG_subprogram", "DW_TAG_inlined_subroutine")
#: DIEs whose children never carry code addresses: a class's member functions are declarations
#: (GCC and Clang put each definition, with its addresses, beside the class and point back with
#: DW_AT_specification), so the walk skips them, jumping by DW_AT_sibling. In template-heavy C++
#: most DIEs are such members; skipping them is most of the pure-Python reader's speed.
_NO_CODE_INSIDE = frozenset(("DW_TAG_structure_type", "DW_TAG_class_type", "DW_TAG_union_type",
                             "DW_TAG_enumeration_type", "DW_TAG_subroutine_type", "DW_TAG_array_type"))


def join_path(*parts: str) -> str:
    """LLVM's ``sys::path::append`` for POSIX paths: empty parts skipped, one '/' between."""
    out = ""
    for part in parts:
        if not part:
            continue
        if out.endswith("/"):
            out += part.lstrip("/")
        elif part.startswith("/") or not out:
            out += part
        else:
            out += "/" + part
    return out


@dataclass
class _Unit:
    """One compile unit, indexed for lookups."""

    cu: Any
    lo: np.ndarray  # routine DIE ranges
    hi: np.ndarray
    die: np.ndarray  # DIE offset of each range
    parents: dict[int, tuple[int, str]]  # DIE offset -> (parent offset, tag)
    comp_dir: str
    rows: list[tuple[int, int, int, int, bool]] | None = None  # line table rows
    row_addrs: list[int] = field(default_factory=list)
    program: Any = None


class DwarfReader:
    """Answers address lookups from the DWARF of one ELF file."""

    def __init__(self, path: str) -> None:
        from elftools.elf.elffile import ELFFile

        self.path = path
        self._fh = open(path, "rb")
        self.elf = ELFFile(self._fh)
        # pyelftools' own annotations are loose (Optional everywhere): Any keeps this module readable
        self.dwarf: Any = self.elf.get_dwarf_info(relocate_dwarf_sections=False) if self.elf.has_dwarf_info() else None
        self._units: dict[int, _Unit] = {}
        self._cu_starts: list[int] = []
        self._cu_ranges: list[tuple[int, int, int]] = []
        if self.dwarf is not None:
            self._index_units()

    def close(self) -> None:
        self._fh.close()

    # ---------------------------------------------------------------- units

    def _index_units(self) -> None:
        ranges: list[tuple[int, int, int]] = []
        covered: set[int] = set()
        aranges = self.dwarf.get_aranges()
        if aranges is not None:
            for e in aranges.entries:
                if e.length:
                    ranges.append((e.begin_addr, e.begin_addr + e.length, e.info_offset))
                    covered.add(e.info_offset)
        for cu in self.dwarf.iter_CUs():
            if cu.cu_offset in covered:
                continue
            top = cu.get_top_DIE()
            for lo, hi in self._die_ranges(top, cu):
                ranges.append((lo, hi, cu.cu_offset))
        ranges.sort()
        self._cu_ranges = ranges
        self._cu_starts = [r[0] for r in ranges]

    def _unit_for(self, address: int) -> _Unit | None:
        i = bisect.bisect_right(self._cu_starts, address) - 1
        while i >= 0:
            lo, hi, off = self._cu_ranges[i]
            if lo <= address < hi:
                return self._unit(off)
            if i and self._cu_ranges[i - 1][1] <= lo:
                break  # ranges below cannot reach further than this one's start
            i -= 1
        return None

    def _unit(self, offset: int) -> _Unit:
        unit = self._units.get(offset)
        if unit is None:
            cu = self.dwarf.get_CU_at(offset)
            lo: list[int] = []
            hi: list[int] = []
            dies: list[int] = []
            parents: dict[int, tuple[int, str]] = {}
            top = cu.get_top_DIE()
            self._walk(cu, top, -1, lo, hi, dies, parents)
            comp_dir = _text(top.attributes.get("DW_AT_comp_dir"))
            _forget_dies(cu)
            unit = _Unit(cu, np.array(lo, dtype=np.uint64), np.array(hi, dtype=np.uint64),
                         np.array(dies, dtype=np.int64), parents, comp_dir)
            self._units[offset] = unit
        return unit

    def _walk(self, cu: Any, top: Any, parent: int, lo: list, hi: list, dies: list,
              parents: dict) -> None:
        """Record every routine DIE's ranges and parent (iteratively: DIE trees can be deep)."""
        stack = [(top, parent)]
        while stack:
            die, up = stack.pop()
            parents[die.offset] = (up, die.tag)
            if die.tag in _ROUTINES:
                for a, b in self._die_ranges(die, cu):
                    if a < b:
                        lo.append(a)
                        hi.append(min(b, (1 << 64) - 1))  # a damaged length may run past the addresses
                        dies.append(die.offset)
            if die.has_children and die.tag not in _NO_CODE_INSIDE:
                stack.extend((child, die.offset) for child in reversed(list(die.iter_children())))

    def _die_ranges(self, die: Any, cu: Any) -> list[tuple[int, int]]:
        attrs = die.attributes
        low = attrs.get("DW_AT_low_pc")
        high = attrs.get("DW_AT_high_pc")
        if low is not None and high is not None:
            lo = self._address(low, cu)
            hv = high.value if high.form == "DW_FORM_addr" else lo + high.value
            if high.form in ("DW_FORM_addrx", "DW_FORM_addrx1", "DW_FORM_addrx2", "DW_FORM_addrx3",
                             "DW_FORM_addrx4", "DW_FORM_GNU_addr_index"):
                hv = self.dwarf.get_addr(cu, high.value)
            return [(lo, hv)]
        ranges = attrs.get("DW_AT_ranges")
        if ranges is None or self.dwarf.range_lists() is None:
            return []
        offset = ranges.value
        if ranges.form == "DW_FORM_rnglistx":
            offset = self._rnglistx(cu, offset)
        base = self._cu_base(cu)
        out = []
        for entry in self.dwarf.range_lists().get_range_list_at_offset(offset, cu=cu):
            if hasattr(entry, "base_address"):
                base = entry.base_address
            elif getattr(entry, "is_absolute", False):
                out.append((entry.begin_offset, entry.end_offset))
            else:
                out.append((base + entry.begin_offset, base + entry.end_offset))
        return out

    def _rnglistx(self, cu: Any, index: int) -> int:
        top = cu.get_top_DIE()
        base = top.attributes.get("DW_AT_rnglists_base")
        start = base.value if base is not None else 0
        size = 8 if cu.structs.dwarf_format == 64 else 4
        section = self.dwarf.debug_rnglists_sec
        raw = section.stream.getvalue() if hasattr(section.stream, "getvalue") else None
        if raw is None:
            section.stream.seek(start + index * size)
            raw_offset = section.stream.read(size)
        else:
            raw_offset = raw[start + index * size:start + (index + 1) * size]
        return start + int.from_bytes(raw_offset, "little" if self.elf.little_endian else "big")

    def _cu_base(self, cu: Any) -> int:
        low = cu.get_top_DIE().attributes.get("DW_AT_low_pc")
        return self._address(low, cu) if low is not None else 0

    def _address(self, attr: Any, cu: Any) -> int:
        if attr.form in ("DW_FORM_addrx", "DW_FORM_addrx1", "DW_FORM_addrx2", "DW_FORM_addrx3",
                         "DW_FORM_addrx4", "DW_FORM_GNU_addr_index"):
            return int(self.dwarf.get_addr(cu, attr.value))
        return int(attr.value)

    # ---------------------------------------------------------------- names

    def _die(self, offset: int) -> Any:
        return self.dwarf.get_DIE_from_refaddr(offset)

    def name_of(self, offset: int) -> str:
        """Linkage name, else name, through abstract origins and specifications."""
        for wanted in (("DW_AT_MIPS_linkage_name", "DW_AT_linkage_name"), ("DW_AT_name",)):
            work, seen = [offset], {offset}
            while work:
                die = self._die(work.pop())
                for name, attr in die.attributes.items():
                    if name in wanted:
                        return _text(attr)
                for ref in ("DW_AT_abstract_origin", "DW_AT_specification"):
                    if ref in die.attributes:
                        target = die.get_DIE_from_attribute(ref).offset
                        if target not in seen:
                            seen.add(target)
                            work.append(target)
        return ""

    # ---------------------------------------------------------------- lines

    def _lines(self, unit: _Unit) -> None:
        if unit.rows is not None:
            return
        rows: list[tuple[int, int, int, int, bool]] = []
        program = self.dwarf.line_program_for_CU(unit.cu)
        if program is not None:
            for entry in program.get_entries():
                st = entry.state
                if st is not None:
                    rows.append((st.address, st.file, st.line, st.column, bool(st.end_sequence)))
        # Sequences sorted by start address, rows kept in order inside each (LLVM sorts them too).
        sequences, current = [], []
        for row in rows:
            current.append(row)
            if row[4]:
                sequences.append(current)
                current = []
        sequences.sort(key=lambda seq: seq[0][0])
        unit.rows = [row for seq in sequences for row in seq]
        unit.row_addrs = [row[0] for row in unit.rows]
        unit.program = program

    def _line_at(self, unit: _Unit, address: int) -> tuple[int, int, int] | None:
        """(file index, line, column) of the row covering ``address``."""
        self._lines(unit)
        rows = unit.rows or []
        i = bisect.bisect_right(unit.row_addrs, address) - 1
        if i < 0 or rows[i][4] or i + 1 >= len(rows):
            return None
        return rows[i][1], rows[i][2], rows[i][3]

    def file_name(self, unit: _Unit, index: int) -> str:
        self._lines(unit)
        program = unit.program
        if program is None:
            return ""
        header = program.header
        version = header["version"]
        files = header["file_entry"]
        dirs = header["include_directory"]
        entry = files[index] if version >= 5 and 0 <= index < len(files) else \
            files[index - 1] if version < 5 and 0 < index <= len(files) else None
        if entry is None:
            return ""
        name = _text(entry.name)
        if name.startswith("/"):
            return name
        include = ""
        if version >= 5 and entry.dir_index < len(dirs):
            include = _text(dirs[entry.dir_index])
        elif version < 5 and 0 < entry.dir_index <= len(dirs):
            include = _text(dirs[entry.dir_index - 1])
        prefix = unit.comp_dir if (version < 5 or entry.dir_index != 0) and not include.startswith("/") else ""
        return join_path(prefix, include, name)

    # ---------------------------------------------------------------- lookup

    def lookup(self, address: int) -> list[Frame]:
        """Frames for ``address``, innermost first; [] when DWARF does not cover it."""
        if self.dwarf is None:
            return []
        unit = self._unit_for(address)
        if unit is None:
            return []
        chain = self._chain(unit, address)
        line = self._line_at(unit, address)
        if not chain:
            if line is None:
                return []
            return [Frame("", self.file_name(unit, line[0]), line[1], line[2])]
        frames: list[Frame] = []
        call: tuple[int, int, int] | None = None
        for i, offset in enumerate(chain):
            name = self.name_of(offset)
            if i == 0:
                file, ln, col = (self.file_name(unit, line[0]), line[1], line[2]) if line else ("", 0, 0)
            else:
                cf, cl, cc = call or (0, 0, 0)
                file, ln, col = self.file_name(unit, cf) if call else "", cl, cc
            frames.append(Frame(name, file, ln, col))
            if i + 1 < len(chain):
                attrs = self._die(offset).attributes
                call = tuple(int(attrs[k].value) if k in attrs else 0  # type: ignore[assignment]
                             for k in ("DW_AT_call_file", "DW_AT_call_line", "DW_AT_call_column"))
        return frames

    def _chain(self, unit: _Unit, address: int) -> list[int]:
        hit = (unit.lo <= address) & (address < unit.hi)
        if not hit.any():
            return []
        offset = int(unit.die[hit].max())  # last in DIE order wins, as LLVM's address map
        chain = []
        seen = set()
        while offset >= 0 and offset not in seen:
            seen.add(offset)
            parent, tag = unit.parents.get(offset, (-1, ""))
            if tag == "DW_TAG_subprogram":
                chain.append(offset)
                break
            if tag == "DW_TAG_inlined_subroutine":
                chain.append(offset)
            offset = parent
        return chain


def _forget_dies(cu: Any) -> None:
    """Drop pyelftools' cache of a walked unit's DIEs (hundreds of MB per big unit); the few
    DIEs a lookup needs later are parsed again on demand. Skipped if pyelftools changes."""
    dies, offsets = getattr(cu, "_dielist", None), getattr(cu, "_diemap", None)
    if isinstance(dies, list) and isinstance(offsets, list) and dies and len(dies) == len(offsets):
        del dies[1:]  # the first is the unit's top DIE, which pyelftools expects to stay
        del offsets[1:]


def _text(attr: Any) -> str:
    if attr is None:
        return ""
    value = attr.value if hasattr(attr, "value") else attr
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value) if value is not None else ""
