"""Find the files that symbolize one mapping, in the order :mod:`.sources` documents.

:meth:`Locator.find` returns a :class:`Found`: the ELF binary and/or debug
file (a :class:`.resolve.Module`), or a Breakpad symbol file, with where
each came from, or — when nothing matched — every place looked at, so the
report can tell the user which file names to provide. Results are cached
per (file name, build id) for the run; directory indexes are built once.
"""

from __future__ import annotations

import glob
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from polyprof.symbolize import debugid
from polyprof.symbolize.debuginfod import Debuginfod
from polyprof.symbolize.elf import ELF_MAGIC, BadElfError, ElfFile, build_id_of
from polyprof.symbolize.resolve import Module
from polyprof.symbolize.sources import Sources
from polyprof.symbolize.store import SymbolStore

__all__ = ["Found", "Locator", "elf_build_id"]

_MAX_INDEXED_FILES = 200_000


def elf_build_id(text: str) -> str:
    """The ELF build id (lowercase hex) a profile's build id stands for; "" when it cannot tell.

    Raw hex (pprof, perf, Perfetto) is itself; Chromium's form is the hex
    followed by ``0``. A Breakpad debug id keeps only 16 bytes: "".
    """
    t = text.strip().lower()
    if not t or any(c not in "0123456789abcdef" for c in t):
        return ""
    if len(t) % 2 == 1:
        return t[:-1] if t.endswith("0") and len(t) != 33 else ""
    return t


def same_build(file_id: str, wanted: str) -> bool:
    """Whether an ELF file's build id is the one a profile names (in any of its forms)."""
    if not file_id or not wanted:
        return False
    if elf_build_id(wanted) == file_id:
        return True
    return debugid.elf_debug_id(file_id) in {c.upper() for c in debugid.candidates(wanted)}


@dataclass
class Found:
    """What was found for one mapping, and how."""

    module: Module | None = None
    breakpad: tuple[SymbolStore, str, str] | None = None  # (store, symbol file, debug file name)
    where: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    apk_offset: int | None = None  # where the ELF starts inside the APK the mapping names

    @property
    def ok(self) -> bool:
        return self.module is not None or self.breakpad is not None

    @property
    def complete(self) -> bool:
        """A file with DWARF (or Breakpad symbols) was found: nothing better to look for."""
        return self.breakpad is not None or (self.module is not None and self.module.dwarf_path is not None)


class Locator:
    """Finds symbol files for mappings; see :mod:`.sources` for the search order."""

    def __init__(self, sources: Sources, cache_root: Path | None = None) -> None:
        self.sources = sources
        self._found: dict[tuple[str, str], Found] = {}
        self._indexes: dict[str, dict[str, list[str]]] = {}
        self._stores: dict[str, SymbolStore | None] = {}
        self._elves: dict[str, ElfFile | None] = {}
        self.problems: list[str] = []
        urls = sources.debuginfod_urls()
        timeout, limit = sources.download_limits()
        self.debuginfod = Debuginfod(urls, cache_root, timeout=timeout, max_bytes=limit, offline=sources.offline) \
            if cache_root is not None else None  # its cache answers even without servers

    # ------------------------------------------------------------ public

    def find(self, filename: str, build_id: str) -> Found:
        key = (filename, build_id)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = self._search(filename, build_id)
        return found

    # ------------------------------------------------------------ search order

    def _search(self, filename: str, build_id: str) -> Found:
        found = self._search_order(filename, build_id)
        binary = found.module.binary if found.module is not None else None
        if not build_id and binary is not None and binary.build_id and not found.complete:
            # Found by path only: its build id now leads to the debug file (trees, debuginfod, ...).
            more = self._search_order("", binary.build_id)
            if more.module is not None and more.module.debug is not None:
                found.module.debug = more.module.debug  # type: ignore[union-attr]
                found.where.extend(more.where)
            found.tried.extend(more.tried)
        return found

    def _search_order(self, filename: str, build_id: str) -> Found:
        found = Found()
        for root in self.sources.paths:
            self._in_symbols_path(root, filename, build_id, found)
            if found.complete:
                return found
        for root in self.sources.binary_path():
            self._in_binary_path(root, filename, build_id, found)
            if found.complete:
                return found
        if self.sources.local_paths:
            self._local(filename, build_id, found)
            if found.complete:
                return found
        for root in self.sources.system_dirs:
            self._in_system_dir(root, filename, build_id, found)
            if found.complete:
                return found
        self._debuginfod(build_id, found)
        return found

    def _in_symbols_path(self, root: str, filename: str, build_id: str, found: Found) -> None:
        if os.path.isfile(root):
            self._try(root, filename, build_id, found, f"--symbols file {root}")
            return
        if not os.path.isdir(root):
            return
        store = self._store(root)
        if store is not None and build_id:
            hit = store.find(filename, build_id)
            if hit is not None:
                found.breakpad = (store, hit[0], hit[1])
                found.where.append(f"Breakpad symbols {hit[0]}")
                return
        label = f"--symbols {root}"
        self._by_build_id_tree(root, build_id, found, label)
        for candidate in _path_candidates(root, filename):
            self._try(candidate, filename, build_id, found, label)
        elf_id = elf_build_id(build_id)
        if elf_id and not found.complete:
            for path in self._index(root).get(elf_id, []):
                self._try(path, filename, build_id, found, f"{label} (build id match)")

    def _in_binary_path(self, root: str, filename: str, build_id: str, found: Found) -> None:
        base = _basename(filename)
        label = f"binary path {root}"
        names: list[str] = []
        if build_id:
            names += [os.path.join(root, build_id, base), *sorted(glob.glob(os.path.join(glob.escape(root),
                                                                                          glob.escape(build_id), "*")))]
            if filename:
                names.append(os.path.join(root, filename.lstrip("/"), build_id))
            elf_id = elf_build_id(build_id)
            if len(elf_id) > 2:
                names.append(os.path.join(root, elf_id[:2], elf_id[2:] + ".debug"))
        if filename:
            names += [os.path.join(root, base), os.path.join(root, filename.lstrip("/"))]
        for name in dict.fromkeys(names):
            self._try(name, filename, build_id, found, label)

    def _local(self, filename: str, build_id: str, found: Found) -> None:
        if not filename.startswith("/"):
            return
        self._try(filename, filename, build_id, found, "the mapping's own path")
        binary = found.module.binary if found.module else None
        if binary is not None and binary.debuglink:
            folder = os.path.dirname(filename)
            for name in (os.path.join(folder, binary.debuglink), os.path.join(folder, ".debug", binary.debuglink)):
                self._try(name, filename, build_id, found, "debuglink")

    def _in_system_dir(self, root: str, filename: str, build_id: str, found: Found) -> None:
        if not os.path.isdir(root):
            return
        label = f"system debug directory {root}"
        self._by_build_id_tree(root, build_id, found, label)
        if filename.startswith("/"):
            self._try(os.path.join(root, filename.lstrip("/")) + ".debug", filename, build_id, found, label)
            binary = found.module.binary if found.module else None
            if binary is not None and binary.debuglink:
                self._try(os.path.join(root, os.path.dirname(filename).lstrip("/"), binary.debuglink),
                          filename, build_id, found, label)

    def _by_build_id_tree(self, root: str, build_id: str, found: Found, label: str) -> None:
        elf_id = elf_build_id(build_id)
        if len(elf_id) > 2:
            tree = os.path.join(root, ".build-id", elf_id[:2], elf_id[2:])
            self._try(tree + ".debug", "", build_id, found, label)
            self._try(tree, "", build_id, found, label)

    def _debuginfod(self, build_id: str, found: Found) -> None:
        elf_id = elf_build_id(build_id)
        if self.debuginfod is None or not elf_id:
            return
        found.tried.extend(f"{u}/buildid/{elf_id}/debuginfo" for u in self.debuginfod.urls)
        got = self.debuginfod.fetch(elf_id)
        if got is not None:
            self._try(got[0], "", build_id, found, got[1])

    # ------------------------------------------------------------ one candidate

    def _try(self, path: str, filename: str, build_id: str, found: Found, label: str) -> None:
        """Use the file at ``path`` if it is the module's and adds something."""
        if found.complete:
            return
        found.tried.append(path)
        elf = self._elf(path, filename, build_id, found)
        if elf is None:
            return
        if build_id and not same_build(elf.build_id, build_id):
            return
        if not build_id and filename and _basename(path) != _basename(filename) and not path.endswith(".apk"):
            return
        module = found.module or Module(elf_build_id(build_id) or elf.build_id)
        role = "debug" if elf.has_dwarf else "binary"
        if role == "debug" and module.debug is None:
            module.debug = elf
        elif role == "binary" and module.binary is None:
            module.binary = elf
        else:
            return
        found.module = module
        found.where.append(f"{'debug file' if role == 'debug' else 'binary'} {elf.path} ({label})")

    def _elf(self, path: str, filename: str, build_id: str, found: Found) -> ElfFile | None:
        if path in self._elves:
            return self._elves[path]
        elf: ElfFile | None = None
        try:
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    head = fh.read(4)
                if head == ELF_MAGIC:
                    elf = ElfFile(path)
                    elf.validate()  # bad headers and sections fail here, once, with the file's name
                elif head[:2] == b"PK" and build_id:
                    elf = self._from_apk(path, build_id, found)
        except (OSError, BadElfError) as exc:
            self.problems.append(str(exc))
            elf = None
        self._elves[path] = elf
        return elf

    def _from_apk(self, path: str, build_id: str, found: Found) -> ElfFile | None:
        """The stored (uncompressed) ELF inside an APK with the wanted build id."""
        try:
            with zipfile.ZipFile(path) as apk:
                for info in apk.infolist():
                    if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".so"):
                        continue
                    data = apk.read(info)
                    if data[:4] != ELF_MAGIC:
                        continue
                    elf = ElfFile(f"{path}!/{info.filename}", data)
                    if same_build(elf.build_id, build_id):
                        found.apk_offset = _data_offset(path, info)
                        return elf
        except (OSError, zipfile.BadZipFile, BadElfError) as exc:
            self.problems.append(f"{path}: {exc}")
        return None

    # ------------------------------------------------------------ indexes

    def _store(self, root: str) -> SymbolStore | None:
        if root not in self._stores:
            self._stores[root] = SymbolStore(root)
        return self._stores[root]

    def _index(self, root: str) -> dict[str, list[str]]:
        """Build id -> ELF files under ``root`` (walked once)."""
        index = self._indexes.get(root)
        if index is None:
            index = {}
            seen = 0
            for folder, dirs, files in os.walk(root):
                dirs.sort()
                for name in sorted(files):
                    seen += 1
                    if seen > _MAX_INDEXED_FILES:
                        self.problems.append(f"{root}: more than {_MAX_INDEXED_FILES} files; the rest were not "
                                             f"searched by build id")
                        self._indexes[root] = index
                        return index
                    path = os.path.join(folder, name)
                    bid = build_id_of(path)
                    if bid:
                        index.setdefault(bid, []).append(path)
            self._indexes[root] = index
        return index


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1].rsplit("!", 1)[-1]


def _path_candidates(root: str, filename: str) -> list[str]:
    """DIR/<path>, DIR/<path without base.apk!>, DIR/<name>, DIR/<name without base.apk!>."""
    if not filename:
        return []
    rel = filename.replace("\\", "/").lstrip("/")
    out = [os.path.join(root, rel)]
    if "!" in rel:
        folder, _, inner = rel.rpartition("!")
        out.append(os.path.join(root, os.path.dirname(folder), inner.lstrip("/")))
        out.append(os.path.join(root, inner.lstrip("/")))
    out.append(os.path.join(root, rel.rsplit("/", 1)[-1]))
    out.append(os.path.join(root, _basename(rel)))
    return list(dict.fromkeys(out))


def _data_offset(path: str, info: zipfile.ZipInfo) -> int:
    """File offset of a stored member's bytes (after its local header)."""
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        header = fh.read(30)
    name_len = int.from_bytes(header[26:28], "little")
    extra_len = int.from_bytes(header[28:30], "little")
    return info.header_offset + 30 + name_len + extra_len
