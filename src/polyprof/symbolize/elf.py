"""A small, bounds-checked ELF reader: what symbolization needs and no more.

Reads the file header, program headers (``PT_LOAD`` segments, for load
bias), section headers and names, the GNU build-id note, ``.gnu_debuglink``,
the symbol tables (``.symtab``, else ``.dynsym``) and MiniDebugInfo
(``.gnu_debugdata``: an xz-compressed ELF holding a ``.symtab``, as Android
and Fedora ship). The file is memory-mapped, so a 100 MB debug file costs
no copy; DWARF is read elsewhere (:mod:`.dwarf`, :mod:`.llvm`).

Every offset and size is checked against the file before use: a truncated
file, a section table past the end or a section claiming gigabytes raises
:class:`BadElfError` (a :class:`MalformedInputError`) naming the file and the
problem, never an IndexError or a huge allocation.
"""

from __future__ import annotations

import lzma
import mmap
import os
import struct
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from polyprof.errors import MalformedInputError

__all__ = ["BadElfError", "ElfFile", "Segment", "Section", "Symbols", "build_id_of", "is_elf"]

ELF_MAGIC = b"\x7fELF"
ET_EXEC, ET_DYN, ET_REL = 2, 3, 1
PT_LOAD, PF_X = 1, 1
SHT_SYMTAB, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 7, 8, 11
SHF_EXECINSTR = 0x4
NT_GNU_BUILD_ID = 3
STT_NOTYPE, STT_FUNC, STT_FILE, STT_GNU_IFUNC = 0, 2, 4, 10
STB_LOCAL = 0
SHN_UNDEF, SHN_LORESERVE = 0, 0xFF00
#: sections of PLT stubs (lazy binding, IBT's second PLT, GOT-only stubs), each named ``@plt``
_PLT_SECTIONS = frozenset({".plt", ".plt.sec", ".plt.got", ".iplt"})
#: the name of a PLT stub's frame, as simpleperf names it (no file, no line: stubs have no DWARF)
PLT_NAME = "@plt"
#: Sections we decompress or copy are refused past this (MiniDebugInfo is a few MB).
MAX_SECTION_COPY = 256 << 20
_ADDRESS_END = (1 << 64) - 1  # the last address of a 64-bit space


class BadElfError(MalformedInputError):
    """An ELF file is truncated or inconsistent."""


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


@dataclass(frozen=True)
class Segment:
    """A ``PT_LOAD`` program header."""

    offset: int
    vaddr: int
    filesz: int
    memsz: int
    flags: int

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int
    flags: int = 0

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)


@dataclass
class Symbols:
    """A symbol table as sorted columns: start, size, name, and for a local
    symbol the name of the ``STT_FILE`` symbol before it ("" otherwise).

    One row per start address: where several symbols share it, the largest
    size wins (then the greatest name), as llvm-symbolizer chooses.
    """

    start: np.ndarray
    size: np.ndarray
    names: list[str]
    files: list[str]
    #: where a size-0 symbol's cover stops at the latest: its section's end (so a marker such
    #: as ``__FRAME_END__`` never names an unnamed PLT stub or gap in another section)
    limit: np.ndarray

    def lookup(self, address: int) -> tuple[str, str] | None:
        """(name, file) of the symbol covering ``address``; None if none does.

        A symbol of size 0 covers everything up to the next symbol, within its section.
        """
        at, hit = self.find([address])
        return (self.names[int(at[0])], self.files[int(at[0])]) if bool(hit[0]) else None

    def lookup_many(self, addresses: list[int]) -> list[tuple[str, str] | None]:
        """:meth:`lookup` for many addresses at once (one vectorized search)."""
        at, hit = self.find(addresses)
        return [(self.names[j], self.files[j]) if ok else None for j, ok in zip(at.tolist(), hit.tolist())]

    def find(self, addresses: list[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of the covering symbol, whether one covers it) for each address, vectorized."""
        wanted = np.asarray(addresses, dtype=np.uint64)
        if not len(self.names) or not len(wanted):
            return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
        i = np.searchsorted(self.start, wanted, side="right") - 1
        at = np.maximum(i, 0)
        size = self.size[at]
        unsized = (size == 0) & (wanted < self.limit[at])
        hit = (i >= 0) & (unsized | (self.start[at] + size > wanted))
        return at, hit

    def __len__(self) -> int:
        return len(self.names)


class ElfFile:
    """One ELF file, memory-mapped (or in memory), read lazily and checked."""

    def __init__(self, path: str, data: bytes | mmap.mmap | None = None) -> None:
        self.path = path
        if data is None:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size < 64:
                    raise BadElfError(f"truncated ELF file ({size} bytes)", path=path, fmt="elf")
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.data = data
        self._header()

    def _fail(self, message: str) -> BadElfError:
        return BadElfError(message, path=self.path, fmt="elf")

    def _span(self, offset: int, size: int, what: str) -> memoryview:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise self._fail(f"{what} (offset {offset:#x}, size {size:#x}) extends past the end of the "
                             f"file ({len(self.data):#x} bytes)")
        return memoryview(self.data)[offset:offset + size]

    def _header(self) -> None:
        d = self.data
        if len(d) < 16 or d[:4] != ELF_MAGIC:
            raise self._fail("not an ELF file")
        cls, order = d[4], d[5]
        if cls not in (1, 2) or order not in (1, 2):
            raise self._fail(f"unknown ELF class {cls} or byte order {order}")
        self.is64 = cls == 2
        self.end = "<" if order == 1 else ">"
        fmt = self.end + ("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH")
        fields = struct.unpack_from(fmt, self._span(16, struct.calcsize(fmt), "ELF header"))
        (self.type, self.machine, _, self.entry, self.phoff, self.shoff, _, _, self.phentsize, self.phnum,
         self.shentsize, self.shnum, self.shstrndx) = fields

    # ------------------------------------------------------------ headers

    @cached_property
    def segments(self) -> list[Segment]:
        """The ``PT_LOAD`` segments in file order."""
        if not self.phnum:
            return []
        fmt = self.end + ("IIQQQQQQ" if self.is64 else "IIIIIIII")
        if self.phentsize < struct.calcsize(fmt):
            raise self._fail(f"program header entries of {self.phentsize} bytes are too small")
        table = self._span(self.phoff, self.phnum * self.phentsize, "program header table")
        out = []
        for i in range(self.phnum):
            f = struct.unpack_from(fmt, table, i * self.phentsize)
            if self.is64:
                ptype, flags, off, vaddr, _, filesz, memsz, _ = f
            else:
                ptype, off, vaddr, _, filesz, memsz, flags, _ = f
            if ptype == PT_LOAD:
                out.append(Segment(off, vaddr, filesz, memsz, flags))
        return out

    @cached_property
    def sections(self) -> list[Section]:
        if not self.shnum or not self.shoff:
            return []
        fmt = self.end + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII")
        if self.shentsize < struct.calcsize(fmt):
            raise self._fail(f"section header entries of {self.shentsize} bytes are too small")
        table = self._span(self.shoff, self.shnum * self.shentsize, "section header table")
        raw = [struct.unpack_from(fmt, table, i * self.shentsize) for i in range(self.shnum)]
        names = b""
        if 0 < self.shstrndx < len(raw):
            s = raw[self.shstrndx]
            names = bytes(self._span(s[4], s[5], "section name table"))
        out = []
        for name_off, stype, flags, addr, off, size, link, _, _, entsize in raw:
            end = names.find(b"\0", name_off)
            name = names[name_off:end if end >= 0 else None].decode("utf-8", "replace") if name_off < len(names) else ""
            out.append(Section(name, stype, addr, off, size, link, entsize, flags))
        return out

    def validate(self) -> None:
        """Raise :class:`BadElfError` unless every section with contents lies inside the file
        (a debug reader handed a section claiming gigabytes would read garbage or run out of memory)."""
        for sec in self.sections:
            if sec.type != SHT_NOBITS and sec.size:
                self._span(sec.offset, sec.size, f"section {sec.name or '?'}")

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def contents(self, s: Section) -> memoryview:
        """The bytes of section ``s`` (empty for ``SHT_NOBITS``), bounds-checked."""
        if s.type == SHT_NOBITS:
            return memoryview(b"")
        return self._span(s.offset, s.size, f"section {s.name or '?'}")

    # ------------------------------------------------------------ facts

    @cached_property
    def build_id(self) -> str:
        """The GNU build id as lowercase hex ("" when the file has none)."""
        for s in self.sections:
            if s.type == SHT_NOTE:
                found = self._build_id_in(self.contents(s))
                if found:
                    return found
        return ""

    def _build_id_in(self, notes: memoryview) -> str:
        pos = 0
        while pos + 12 <= len(notes):
            namesz, descsz, ntype = struct.unpack_from(self.end + "III", notes, pos)
            name_at = pos + 12
            desc_at = name_at + ((namesz + 3) & ~3)
            if desc_at + descsz > len(notes):
                return ""
            if ntype == NT_GNU_BUILD_ID and bytes(notes[name_at:name_at + namesz]).rstrip(b"\0") == b"GNU":
                return bytes(notes[desc_at:desc_at + descsz]).hex()
            pos = desc_at + ((descsz + 3) & ~3)
        return ""

    @cached_property
    def debuglink(self) -> str:
        """The file name ``.gnu_debuglink`` points at ("" when absent)."""
        s = self.section(".gnu_debuglink")
        if s is None:
            return ""
        raw = bytes(self.contents(s))
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")

    @cached_property
    def has_dwarf(self) -> bool:
        s = self.section(".debug_info")
        return s is not None and s.type != SHT_NOBITS and s.size > 0

    @cached_property
    def code_ranges(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(starts, ends) of the executable sections, else of the executable segments; None when
        the file tells neither (then any address may be code)."""
        ranges = [(s.addr, s.addr + s.size) for s in self.sections if s.executable and s.size]
        if not ranges:
            ranges = [(g.vaddr, g.vaddr + g.memsz) for g in self.segments if g.executable and g.memsz]
        if not ranges:
            return None
        return (np.array([a for a, _ in ranges], dtype=np.uint64),
                np.array([min(b, _ADDRESS_END) for _, b in ranges], dtype=np.uint64))

    def loading_address(self) -> int:
        """Breakpad's module base: the vaddr of the segment mapped from file offset 0."""
        for seg in self.segments:
            if seg.offset == 0:
                return seg.vaddr
        return 0

    def exec_load_bias(self) -> int:
        """p_vaddr - p_offset of the first executable segment (Perfetto's load bias)."""
        for seg in self.segments:
            if seg.executable:
                return seg.vaddr - seg.offset
        return 0

    @cached_property
    def minidebuginfo(self) -> ElfFile | None:
        """The ELF inside ``.gnu_debugdata`` (MiniDebugInfo), or None."""
        s = self.section(".gnu_debugdata")
        if s is None or s.type == SHT_NOBITS:
            return None
        if s.size > MAX_SECTION_COPY:
            raise self._fail(f"section .gnu_debugdata claims {s.size} bytes")
        try:
            inner = lzma.LZMADecompressor().decompress(bytes(self.contents(s)), MAX_SECTION_COPY)
        except lzma.LZMAError as exc:
            raise self._fail(f".gnu_debugdata is not valid xz data ({exc})") from None
        return ElfFile(f"{self.path}[.gnu_debugdata]", inner)

    @cached_property
    def symbols(self) -> Symbols:
        """Code symbols: ``.symtab``; without it, ``.dynsym`` and MiniDebugInfo's ``.symtab``
        together (a stripped Android or Fedora binary keeps both); and ``@plt`` over PLT stubs."""
        symtab = next((s for s in self.sections if s.type == SHT_SYMTAB), None)
        dynsym = next((s for s in self.sections if s.type == SHT_DYNSYM), None)
        plt = self._plt_symbols()
        if symtab is not None:
            found = self._read_symbols(symtab)
            if len(found):
                return _merge([found, plt])
        parts = [self._read_symbols(dynsym)] if dynsym is not None else []
        inner = self.minidebuginfo
        if inner is not None:
            parts.append(inner.symbols)
        return _merge([*parts, plt])

    def _plt_symbols(self) -> Symbols:
        """One ``@plt`` symbol over each PLT section, as simpleperf names them: no symbol
        covers the stubs (a size-0 ``_init`` before them would otherwise name them, as
        llvm-symbolizer does), and a debug file keeps the section headers to find them."""
        plts = [s for s in self.sections if s.name in _PLT_SECTIONS and s.addr and s.size]
        return Symbols(np.array([s.addr for s in plts], dtype=np.uint64), np.array([s.size for s in plts], np.uint64),
                       [PLT_NAME] * len(plts), [""] * len(plts),
                       np.array([min(s.addr + s.size, _ADDRESS_END) for s in plts], dtype=np.uint64))

    def _read_symbols(self, table: Section) -> Symbols:
        dtype = np.dtype([("name", self.end + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", self.end + "u2"),
                          ("value", self.end + "u8"), ("size", self.end + "u8")]) if self.is64 else \
            np.dtype([("name", self.end + "u4"), ("value", self.end + "u4"), ("size", self.end + "u4"),
                      ("info", "u1"), ("other", "u1"), ("shndx", self.end + "u2")])
        if table.entsize and table.entsize != dtype.itemsize:
            raise self._fail(f"symbol table {table.name} has entries of {table.entsize} bytes")
        raw = self.contents(table)
        syms = np.frombuffer(raw, dtype=dtype, count=len(raw) // dtype.itemsize)
        if not 0 <= table.link < len(self.sections):
            raise self._fail(f"symbol table {table.name} links to missing section {table.link}")
        strtab = bytes(self.contents(self.sections[table.link]))
        kind = syms["info"] & 0xF
        # code symbols only: a stack frame's pc is code, and a data marker (``__FRAME_END__`` in
        # .eh_frame, ``__dso_handle``) would name an unwinder's stray return address (simpleperf: ?)
        keep = (((kind == STT_NOTYPE) | (kind == STT_FUNC) | (kind == STT_GNU_IFUNC))
                & (syms["shndx"] != SHN_UNDEF) & (syms["shndx"] < SHN_LORESERVE))
        keep[:1] = False  # the null symbol
        # A local symbol's source file is the STT_FILE symbol before it (the ELF spec's order).
        positions = np.arange(len(syms))
        last_file = np.maximum.accumulate(np.where(kind == STT_FILE, positions, -1)) if len(syms) else positions
        local = (syms["info"] >> 4) == STB_LOCAL
        rows = syms[keep]
        file_rows = np.where(local[keep], last_file[keep], -1).tolist()

        def text(off: int) -> str:
            if off >= len(strtab):
                return ""
            end = strtab.find(b"\0", off)
            return strtab[off:end if end >= 0 else None].decode("utf-8", "replace")

        names = [text(off) for off in rows["name"].tolist()]
        files = [text(int(syms["name"][f])) if f >= 0 else "" for f in file_rows]
        # a damaged section may end past the address space: it ends where the addresses do
        ends = np.array([min(sec.addr + sec.size, _ADDRESS_END) for sec in self.sections] + [0], dtype=np.uint64)
        limit = ends[np.minimum(rows["shndx"].astype(np.int64), len(self.sections))]
        return _dedup(rows["value"].astype(np.uint64), rows["size"].astype(np.uint64), names, files, limit)


def _merge(parts: list[Symbols]) -> Symbols:
    """The symbols of several tables as one (deduplicated by start, as :func:`_dedup` does)."""
    parts = [p for p in parts if len(p)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return Symbols(np.zeros(0, np.uint64), np.zeros(0, np.uint64), [], [], np.zeros(0, np.uint64))
    return _dedup(np.concatenate([p.start for p in parts]), np.concatenate([p.size for p in parts]),
                  [n for p in parts for n in p.names], [f for p in parts for f in p.files],
                  np.concatenate([p.limit for p in parts]))


def _dedup(start: np.ndarray, size: np.ndarray, names: list[str], files: list[str],
           limit: np.ndarray) -> Symbols:
    """Sort by (start, size, name); keep the last row of each start (llvm-symbolizer's choice)."""
    mapping_symbol = np.array([n.startswith("$") and len(n) <= 3 for n in names], dtype=bool)  # ARM $a/$d/$x
    order = sorted((i for i in range(len(names)) if not mapping_symbol[i]),
                   key=lambda i: (int(start[i]), int(size[i]), names[i]))
    idx = np.array(order, dtype=np.int64)
    s = start[idx] if len(idx) else start[:0]
    last = np.ones(len(idx), dtype=bool)
    if len(idx) > 1:
        last[:-1] = s[1:] != s[:-1]
    keep = idx[last]
    rows = keep.tolist()
    return Symbols(start[keep], size[keep], [names[i] for i in rows], [files[i] for i in rows], limit[keep])


def build_id_of(path: str) -> str:
    """The build id of the ELF file at ``path`` ("" when it is no ELF or has none).

    Cheap on big files: only the headers and notes are read. Never raises for
    a bad file; it simply has no build id.
    """
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != ELF_MAGIC:
                return ""
        return ElfFile(path).build_id
    except (OSError, ValueError, BadElfError):
        return ""
