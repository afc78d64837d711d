"""A directory of Breakpad symbol files in the usual layout.

``<debug file>/<DEBUG ID>/<debug file without .pdb>.sym``, e.g.
``libmonochrome.so/C215077FF8866CB110E4AD349CDA3B9B0/libmonochrome.so.sym``
or ``chrome.dll.pdb/16B2A4281DED442E9A36FCE8CBD29726A/chrome.dll.sym``.

A module is found by its debug id (every candidate of its build id, see
:mod:`.debugid`) and, when its name is known, its name. Chromium profiles
carry only a hash of the name; the store's directory names are hashed the
same way to find it. Parsed files are cached per store.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from polyprof.errors import OptionsError
from polyprof.formats.chromium.names import module_name_hash, placeholder_hash
from polyprof.symbolize import debugid
from polyprof.symbolize.breakpad import SymbolFile, parse

__all__ = ["Found", "SymbolStore"]

Found = tuple[str, str, str]  # (symbol file path, debug file name, debug id)


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


class SymbolStore:
    """Finds and parses the symbol files under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        if not os.path.isdir(self.root):
            raise OptionsError(f"symbol directory not found (or not a directory): {self.root}")
        self._index: dict[str, list[str]] | None = None
        self._cache: dict[str, tuple[SymbolFile, frozenset[int]]] = {}

    def _scan(self) -> dict[str, list[str]]:
        """Debug id (upper case) -> debug file names that have it."""
        if self._index is None:
            index: dict[str, list[str]] = {}
            for name in sorted(os.listdir(self.root)):
                top = os.path.join(self.root, name)
                if not os.path.isdir(top):
                    continue
                for ident in sorted(os.listdir(top)):
                    if os.path.isdir(os.path.join(top, ident)):
                        index.setdefault(ident.upper(), []).append(name)
            self._index = index
        return self._index

    def names(self) -> list[str]:
        """Every debug file name in the store."""
        return sorted({n for names in self._scan().values() for n in names})

    def _sym_file(self, name: str, ident: str) -> str | None:
        folder = os.path.join(self.root, name, ident)
        if not os.path.isdir(folder):
            return None
        stem = name[:-4] if name.lower().endswith(".pdb") else name
        preferred = os.path.join(folder, stem + ".sym")
        if os.path.isfile(preferred):
            return preferred
        syms = sorted(f for f in os.listdir(folder) if f.endswith(".sym"))
        return os.path.join(folder, syms[0]) if syms else None

    def find(self, filename: str, build_id: str) -> Found | None:
        """The symbol file of a module, by file name (or name hash placeholder) and build id."""
        idents = debugid.candidates(build_id)
        name = _basename(filename)
        wanted_hash = placeholder_hash(name)
        if name and wanted_hash is None:
            for ident in idents:
                path = self._sym_file(name, ident)
                if path:
                    return path, name, ident
        for ident in idents:
            names = self._scan().get(ident.upper(), [])
            if wanted_hash is not None:
                names = [n for n in names if module_name_hash(n) == wanted_hash] or names
            for candidate in names:
                path = self._sym_file(candidate, ident) or self._sym_file(candidate, ident.upper())
                if path:
                    return path, candidate, ident
        return None

    def load(self, path: str, addresses: Iterable[int]) -> SymbolFile:
        """The parsed file at ``path``, holding at least the FUNCs covering ``addresses``."""
        wanted = frozenset(addresses)
        cached = self._cache.get(path)
        if cached is not None and wanted <= cached[1]:
            return cached[0]
        if cached is not None:
            wanted |= cached[1]
        sym = parse(path, wanted)
        self._cache[path] = (sym, wanted)
        return sym
