"""Symbolization: one layer after reading, for profiles of every format and the store.

It turns address frames into functions, files, lines and inline chains,
demangles C++/Rust/Swift names and deobfuscates Java frames, and never
renumbers stacks or changes values (:mod:`.fill`). Sources, searched in the
order :mod:`.sources` documents: ELF binaries and debug files (by build id,
``.build-id`` trees, by path, ``$POLYPROF_BINARY_PATH``/``$PPROF_BINARY_PATH``,
``/usr/lib/debug``), debuginfod servers, Breakpad ``.sym`` stores and
R8/ProGuard mappings. Debug info is read by llvm-symbolizer when it is
installed, else in pure Python, with the same answers.

    profile, report = symbolize(profile, Sources(paths=("symbols/",)))
    profiles = symbolize_all(profiles, "symbols/")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polyprof.symbolize.demangle import MODES as DEMANGLE_MODES
from polyprof.symbolize.sources import Sources

if TYPE_CHECKING:
    from polyprof.symbolize.apply import MappingReport, SymbolizeReport, Symbolizer, coverage, symbolize
    from polyprof.symbolize.store import SymbolStore

#: Imported on first use: every read passes through :func:`after_read`, and the symbolizer's
#: modules (ELF, DWARF, Breakpad, debuginfod, the Chromium names) cost ~0.1 s of start-up.
_LAZY = {"MappingReport": "apply", "SymbolizeReport": "apply", "Symbolizer": "apply", "coverage": "apply",
         "symbolize": "apply", "SymbolStore": "store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"polyprof.symbolize.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["DEMANGLE_MODES", "MappingReport", "Sources", "SymbolStore", "SymbolizeReport", "Symbolizer",
           "after_read", "coverage", "symbolize", "symbolize_all"]


def symbolize_all(profiles: list, sources: object = None, **kw: object) -> list:
    """Symbolize several profiles with one :class:`Symbolizer` (files are found and parsed once).

    ``sources`` is a :class:`Sources`, a path or a list of paths. Names are
    filled in; no location, callsite or sample is renumbered.
    """
    from polyprof.symbolize.apply import Symbolizer

    with Symbolizer(Sources.of(sources), **kw) as s:  # type: ignore[arg-type]
        return [s.run(p)[0] for p in profiles]


def after_read(profiles: list, options) -> list:  # noqa: ANN001
    """What ``api.read_all`` applies to every profile it reads (see ``ReadOptions``).

    Symbolization when asked for (``options.symbolize``, or any source
    given); otherwise only the cheap steps every read gets: Java maps a
    Perfetto trace carries, and demangling in ``options.demangle`` mode
    (pprof's simplified names by default).
    """
    if options.symbolize is False:
        return profiles
    sources = sources_of(options)
    mode = options.demangle or "simple"
    force = options.demangle is not None
    if options.symbolize or sources.wanted:
        from polyprof.symbolize.apply import Symbolizer

        with Symbolizer(sources, demangle=mode, force_demangle=force) as s:
            out = []
            for p in profiles:
                q, report = s.run(p)
                if options.on_symbolized is not None:
                    options.on_symbolized(report)
                out.append(q)
            return out
    from polyprof.symbolize.demangle import demangle_profile

    out = []
    for p in profiles:
        if "java_deobfuscation" in p.extras:
            from polyprof.symbolize.r8 import deobfuscate_profile

            notes: list[str] = []
            p, _ = deobfuscate_profile(p, [], notes)
            p.warnings.extend(notes)
        out.append(demangle_profile(p, mode, force=force))
    return out


def sources_of(options) -> Sources:  # noqa: ANN001
    """The :class:`Sources` a ``ReadOptions`` describes."""
    symbols = options.symbols
    paths = (symbols,) if isinstance(symbols, str) else tuple(symbols or ())
    return Sources(paths=paths, debuginfod=tuple(options.debuginfod), mappings=tuple(options.java_mappings),
                   offline=options.offline, engine=options.symbolizer)
