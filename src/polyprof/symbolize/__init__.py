"""Symbolization: turn address frames into functions, files and lines.

Its own layer, above the model and beside the format readers: any profile
whose mappings carry build ids and file names can be symbolized, whatever
format it came from. Symbols come from Breakpad ``.sym`` files in the usual
``<debug file>/<debug id>/<name>.sym`` layout (:class:`SymbolStore`);
build ids are converted to debug ids as :mod:`.debugid` describes.

    profile, stats = symbolize(profile, "symbols/")
"""

from __future__ import annotations

from polyprof.symbolize.apply import SymbolizeStats, symbolize
from polyprof.symbolize.store import SymbolStore

__all__ = ["SymbolStore", "SymbolizeStats", "symbolize", "symbolize_all"]


def symbolize_all(profiles: list, symbols: str) -> list:
    """Symbolize several profiles with one store (symbol files are parsed once)."""
    store = SymbolStore(symbols)
    return [symbolize(p, store)[0] for p in profiles]
