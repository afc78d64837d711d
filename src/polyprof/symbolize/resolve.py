"""Addresses of one ELF module -> frames, through llvm-symbolizer or pure Python.

Both engines read the inline chain from DWARF (:mod:`.llvm`, :mod:`.dwarf`);
then, for both alike, the outermost (physical) frame takes its name from
the symbol table when a symbol covers the address — ``.symtab`` of the debug
file, else of the binary, else ``.dynsym``, else MiniDebugInfo's — the rule
llvm-symbolizer follows for ELF (it names clones such as
``foo.constprop.0``, and frames without DWARF at all). Answers are cached
on disk per debug file (:class:`.cache.ResultCache`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from polyprof.errors import PolyprofError
from polyprof.symbolize.answers import Answers
from polyprof.symbolize.cache import ResultCache
from polyprof.symbolize.elf import PLT_NAME, ElfFile, Symbols
from polyprof.symbolize.frames import Frame
from polyprof.symbolize.llvm import LlvmPool, LlvmSymbolizerError, find_llvm_symbolizer

__all__ = ["ENGINES", "BadDebugInfoError", "Module", "Resolver"]

ENGINES = ("auto", "llvm", "python")
_MASK = (1 << 64) - 1
#: bumped when the same debug file would be answered differently (2: ``@plt`` stubs; 3: a stub's
#: file is "" for both engines, and addresses outside code get no frames)
_RULES = "rules3"


class BadDebugInfoError(PolyprofError):
    """A debug file's DWARF cannot be read at all."""


@dataclass
class Module:
    """The files found for one mapping: the binary and/or its separate debug file."""

    build_id: str
    binary: ElfFile | None = None
    debug: ElfFile | None = None

    @property
    def elf(self) -> ElfFile:
        """The file whose program headers place the code (a debug file keeps them too)."""
        if self.binary is not None and (self.binary.segments or self.debug is None):
            return self.binary
        assert self.debug is not None
        return self.debug

    @property
    def dwarf_path(self) -> str | None:
        for f in (self.debug, self.binary):
            if f is not None and f.has_dwarf:
                return f.path
        return None

    def symbols(self) -> Symbols:
        for f in (self.debug, self.binary):
            if f is not None:
                syms = f.symbols
                if len(syms):
                    return syms
        return (self.debug or self.binary).symbols  # type: ignore[union-attr]

    def is_code(self, addresses: np.ndarray) -> np.ndarray:
        """Which of ``addresses`` lie in the module's code (executable sections, else segments)."""
        for f in (self.debug, self.binary):
            found = f.code_ranges if f is not None else None
            if found is not None:
                inside = np.zeros(len(addresses), dtype=bool)
                for start, end in zip(*found):  # a handful of sections
                    inside |= (addresses >= start) & (addresses < end)
                return inside
        return np.ones(len(addresses), dtype=bool)

    def cache_key(self) -> str:
        # the rules' version first: answers cached under older naming rules are not reused
        parts = [_RULES, self.build_id]
        for f in (self.binary, self.debug):
            if f is not None and os.path.exists(f.path):
                st = os.stat(f.path)
                parts.append(f"{os.path.abspath(f.path)}:{st.st_size}:{st.st_mtime_ns}")
        return "|".join(parts)


class Resolver:
    """Symbolizes addresses of modules; owns the llvm-symbolizer process and the cache."""

    def __init__(self, engine: str = "auto", cache: ResultCache | None = None) -> None:
        if engine not in ENGINES:
            raise PolyprofError(f"unknown symbolizer engine {engine!r}; choose one of {', '.join(ENGINES)}")
        self.engine = engine
        self.cache = cache or ResultCache(None)
        self._llvm: LlvmPool | None = None
        self._llvm_failed = ""
        self.notes: list[str] = []
        self.used: set[str] = set()

    def _llvm_process(self) -> LlvmPool | None:
        if self.engine == "python" or self._llvm_failed:
            return None
        if self._llvm is None:
            exe = find_llvm_symbolizer()
            if exe is None:
                if self.engine == "llvm":
                    raise PolyprofError("llvm-symbolizer not found on PATH (install LLVM, or use the pure-Python "
                                        "engine)")
                return None
            self._llvm = LlvmPool(exe)
        return self._llvm

    def _dwarf(self, path: str, addresses: np.ndarray) -> Answers:
        llvm = self._llvm_process()
        if llvm is not None:
            try:
                answers = llvm.lookup(path, addresses)
                self.used.add("llvm-symbolizer")
                return answers
            except LlvmSymbolizerError as exc:
                self._llvm_failed = str(exc)
                llvm.close()
                self._llvm = None
                self.notes.append(f"llvm-symbolizer failed ({exc}); using the pure-Python DWARF reader")
        from polyprof.symbolize.dwarf import DwarfReader

        self.used.add("python")
        # pyelftools raises many kinds of exceptions on corrupt DWARF (construct
        # stream errors, KeyError, struct.error, ...): any of them means "this
        # file's debug info is unusable", said once, never a crash.
        try:
            reader = DwarfReader(path)
        except Exception as exc:  # noqa: BLE001
            raise BadDebugInfoError(f"{path}: unreadable DWARF ({type(exc).__name__}: {exc})") from None
        out: list[list[Frame]] = []
        errors = 0
        try:
            for a in addresses.tolist():
                try:
                    out.append(reader.lookup(a))
                except Exception:  # noqa: BLE001 - see above
                    errors += 1
                    out.append([])
        finally:
            reader.close()
        if errors:
            self.notes.append(f"{path}: unreadable DWARF for {errors} address(es); they keep the symbol "
                              f"table's names only")
        return Answers.from_frames(addresses.tolist(), out)

    def resolve_columns(self, module: Module, addresses: Sequence[int] | np.ndarray) -> Answers:
        """Frames (innermost first) of each of ``addresses`` (ELF virtual addresses), aligned with them."""
        # hostile load biases can push an address outside 64 bits: wrap it, as the ELF address space does
        wanted = addresses.astype(np.uint64) if isinstance(addresses, np.ndarray) else \
            np.fromiter((a & _MASK for a in addresses), dtype=np.uint64, count=len(addresses))
        key = module.cache_key()
        distinct = np.unique(wanted)
        cached = self.cache.get(key, distinct)
        todo = distinct[~np.isin(distinct, cached.addresses)] if len(cached) else distinct
        if len(todo):
            # a frame's pc is code: an unwinder's stray return address elsewhere (.eh_frame, data)
            # stays unnamed by both engines, as simpleperf leaves it (llvm-symbolizer alone would
            # name it after a data symbol such as __FRAME_END__)
            code = module.is_code(todo)
            asked = todo[code]
            path = module.dwarf_path
            fresh = self._dwarf(path, asked) if path and len(asked) else Answers.empty(asked)
            fresh = _name_from_symbols(fresh, module.symbols())
            if not code.all():
                fresh = Answers.concat([fresh, Answers.empty(todo[~code])])
            self.cache.put(key, fresh)
            cached = Answers.concat([cached, fresh])
        return cached.lookup(wanted)[0]

    def resolve(self, module: Module, addresses: list[int]) -> dict[int, list[Frame]]:
        """Frames (innermost first) of every ELF virtual address that resolves."""
        return self.resolve_columns(module, addresses).to_dict()

    def close(self) -> None:
        if self._llvm is not None:
            self._llvm.close()
            self._llvm = None
        self.cache.close()


def _name_from_symbols(answers: Answers, syms: Symbols) -> Answers:
    """The symbol table's name on the outermost frame of every address a symbol covers."""
    rows, hit = syms.find(answers.addresses)
    if not hit.any():
        return answers
    picked = rows[hit].tolist()
    names = [syms.names[j] for j in picked]
    # a PLT stub has no DWARF: its file is the @plt symbol's (""), not the one llvm-symbolizer takes
    # from the symbol it stretches over the stubs (crtstuff.c of a Rust binary's _fini)
    plt = np.fromiter((n == PLT_NAME for n in names), dtype=bool, count=len(names))
    return answers.name_outermost(hit, names, [syms.files[j] for j in picked], own_file=plt)
