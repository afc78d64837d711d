"""Symbolize a profile's address frames with a Breakpad symbol store.

Works on any profile whose mappings carry a build id and a file name (or a
Chromium ``md5:`` name-hash placeholder): Chromium UMA profiles, and pprof or
Perfetto inputs alike. For each location that has a mapping and no lines
yet, the module-relative address (``address - start + offset``) is looked up
and the location gets one line per function level, innermost inlined
function first, with file and line when the symbol file has them.

Kept unchanged: everything else, including locations already symbolized and
frames of modules without symbols (they stay address frames named by their
module). A placeholder module name is replaced by the symbol file's debug
file name when that name hashes to the same value. The result's
``extras["symbolization"]`` says how many frames were symbolized and which
modules had no symbols; a warning lists the latter too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from polyprof.formats.chromium.names import module_name_hash, placeholder_hash
from polyprof.model.builder import ProfileBuilder
from polyprof.model.extras import Extras
from polyprof.model.profile import (
    MAPPING_HAS_FILENAMES,
    MAPPING_HAS_FUNCTIONS,
    MAPPING_HAS_INLINE_FRAMES,
    MAPPING_HAS_LINE_NUMBERS,
    Profile,
)
from polyprof.symbolize.breakpad import Frame
from polyprof.symbolize.store import SymbolStore

__all__ = ["SymbolizeStats", "coverage", "symbolize"]

_META_FIELDS = ("sample_types", "default_sample_type", "period_type", "period", "time_nanos",
                "duration_nanos", "drop_frames", "keep_frames", "doc_url", "source_format")


@dataclass
class SymbolizeStats:
    """What one symbolization did.

    ``frames`` counts the locations that belong to a module, ``symbolized``
    those of them that have function information afterwards (see
    :func:`coverage`); ``modules`` counts modules that needed symbols.
    """

    frames: int = 0
    symbolized: int = 0
    modules: int = 0
    modules_with_symbols: int = 0
    missing: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.symbolized / self.frames if self.frames else 0.0

    def to_json(self) -> dict:
        return {"frames": self.frames, "symbolized": self.symbolized,
                "share": f"{100 * self.share:.1f}%", "modules": self.modules,
                "modules_with_symbols": self.modules_with_symbols,
                "modules_without_symbols": self.missing}


def coverage(p: Profile) -> tuple[int, int]:
    """(locations with a module, how many of them have function lines) of ``p``."""
    counts = p.locations.line_start[1:] - p.locations.line_start[:-1]
    in_module = p.locations.mapping >= 0
    return int(in_module.sum()), int((in_module & (counts > 0)).sum())


def _module_label(p: Profile, m: int) -> str:
    name = p.strings[p.mappings.filename[m]] or "?"
    build_id = p.strings[p.mappings.build_id[m]]
    return f"{name} ({build_id})" if build_id else name


def _resolve(p: Profile, store: SymbolStore, stats: SymbolizeStats) -> tuple[dict[int, list[Frame]], dict[int, str]]:
    """Lines for every location that gets symbolized; new names for placeholder mappings."""
    loc = p.locations
    todo: dict[int, list[int]] = {}
    counts = loc.line_start[1:] - loc.line_start[:-1]
    for row in range(len(loc)):
        m = int(loc.mapping[row])
        if m >= 0 and counts[row] == 0:
            todo.setdefault(m, []).append(row)
    resolved: dict[int, list[Frame]] = {}
    renamed: dict[int, str] = {}
    ms = p.mappings
    for m, rows in todo.items():
        stats.modules += 1
        filename, build_id = p.strings[ms.filename[m]], p.strings[ms.build_id[m]]
        found = store.find(filename, build_id) if build_id else None
        if found is None:
            stats.missing.append(_module_label(p, m))
            continue
        stats.modules_with_symbols += 1
        path, debug_name, _ = found
        rel = {row: int(loc.address[row]) - int(ms.start[m]) + int(ms.offset[m]) for row in rows}
        sym = store.load(path, rel.values())
        for row, address in rel.items():
            frames = sym.lookup(address)
            if frames:
                resolved[row] = frames
        wanted = placeholder_hash(filename)
        if wanted is not None and module_name_hash(debug_name) == wanted:
            renamed[m] = debug_name
    return resolved, renamed


def _flags(p: Profile, resolved: dict[int, list[Frame]]) -> dict[int, int]:
    flags: dict[int, int] = {}
    for row, frames in resolved.items():
        m = int(p.locations.mapping[row])
        bits = MAPPING_HAS_FUNCTIONS
        if any(f[2] for f in frames):
            bits |= MAPPING_HAS_FILENAMES | MAPPING_HAS_LINE_NUMBERS
        if len(frames) > 1:
            bits |= MAPPING_HAS_INLINE_FRAMES
        flags[m] = flags.get(m, 0) | bits
    return flags


def _rebuild(p: Profile, resolved: dict[int, list[Frame]], renamed: dict[int, str]) -> Profile:
    """A copy of ``p`` with new lines for the resolved locations (tables re-interned)."""
    b = ProfileBuilder(p.source_format)
    for name in _META_FIELDS:
        setattr(b.meta, name, getattr(p, name))
    b.meta.comments, b.meta.extras, b.meta.warnings = list(p.comments), Extras(p.extras), list(p.warnings)
    s, f, ms = p.strings, p.functions, p.mappings
    fmap = [b.function(s[f.name[i]], s[f.system_name[i]], s[f.filename[i]], int(f.start_line[i]))
            for i in range(len(f))]
    flags = _flags(p, resolved)
    mmap = [b.mapping(int(ms.start[i]), int(ms.limit[i]), int(ms.offset[i]),
                      renamed.get(i, s[ms.filename[i]]), s[ms.build_id[i]],
                      int(ms.flags[i]) | flags.get(i, 0)) for i in range(len(ms))]
    loc, ln = p.locations, p.lines
    lmap = []
    for row in range(len(loc)):
        m = int(loc.mapping[row])
        if row in resolved:
            lines = [(b.function(name, "", file), line, 0) for name, file, line in resolved[row]]
        else:
            lines = [(fmap[int(ln.function[r])] if ln.function[r] >= 0 else -1, int(ln.line[r]),
                      int(ln.column[r])) for r in loc.lines_of(row)]
        lmap.append(b.location(mmap[m] if m >= 0 else -1, int(loc.address[row]), lines, bool(loc.folded[row])))
    cmap: list[int] = []
    for parent, location in zip(p.callsites.parent.tolist(), p.callsites.location.tolist()):
        cmap.append(b.callsite(cmap[parent] if parent >= 0 else -1, lmap[location]))
    sets = [b.labelset(ls) if ls else 0 for ls in p.labelsets]
    sm = p.samples
    stacks = [cmap[n] if n >= 0 else -1 for n in sm.stack.tolist()]
    b.add_samples_bulk(stacks, sm.values, [sets[i] for i in sm.labelset.tolist()],
                       **{name: getattr(sm, name) for name in sm.OPTIONAL_COLUMNS})
    return b.finish()


def symbolize(profile: Profile, symbols: str | os.PathLike[str] | SymbolStore) -> tuple[Profile, SymbolizeStats]:
    """``profile`` with its address frames symbolized from ``symbols`` (a directory or store).

    Returns the new profile and what was done (see the module docstring).
    """
    store = symbols if isinstance(symbols, SymbolStore) else SymbolStore(symbols)
    stats = SymbolizeStats()
    resolved, renamed = _resolve(profile, store, stats)
    out = _rebuild(profile, resolved, renamed)
    stats.frames, stats.symbolized = coverage(out)
    out.extras["symbolization"] = stats.to_json()
    if stats.missing:
        shown = ", ".join(stats.missing[:5]) + (", ..." if len(stats.missing) > 5 else "")
        out.warnings.append(f"no symbols for {len(stats.missing)} module(s): {shown}")
    return out, stats
