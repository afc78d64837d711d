"""Symbolize a profile of any format: find symbols per mapping, resolve, fill in place.

For each location that belongs to a mapping and has no lines yet, the
mapping's files are found (:mod:`.locate`, in the order :mod:`.sources`
documents), its address is turned into an ELF virtual address (:mod:`.bias`)
and resolved (:mod:`.resolve`: llvm-symbolizer or pure-Python DWARF, symbol
tables, MiniDebugInfo), or looked up in a Breakpad symbol file. The
location gets one line per function level, innermost inlined function
first, with file, line and column. Java frames are deobfuscated with R8
mappings (:mod:`.r8`), and names are demangled (:mod:`.demangle`).
Chromium async backtraces (``async_backtrace`` labels) are symbolized the
same way: each frame gains its innermost function name and, as a fifth
element, the whole chain ``[[function, file, line], ...]``.

Nothing is renumbered (:mod:`.fill`): stacks, values, labels and every row
id stay. What could not be symbolized keeps its address frames, and the
:class:`SymbolizeReport` (also in ``extras["symbolization"]``) says per
mapping how many frames had names before and after, where the symbols came
from, or which files were looked for.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from polyprof.formats.chromium.names import module_name_hash, placeholder_hash
from polyprof.model.profile import Label, Profile
from polyprof.symbolize.answers import Answers
from polyprof.symbolize.bias import ADDRESS_KINDS, to_vaddr
from polyprof.symbolize.cache import ResultCache, cache_dir
from polyprof.symbolize.demangle import Demangling, demangle_profile
from polyprof.symbolize.elf import BadElfError
from polyprof.symbolize.fill import Interner, NewLine, fill_lines, replace_lines
from polyprof.symbolize.frames import Frame
from polyprof.symbolize.locate import Found, Locator, elf_build_id
from polyprof.symbolize.resolve import BadDebugInfoError, Resolver
from polyprof.symbolize.sources import Sources

__all__ = ["MappingReport", "SymbolizeReport", "Symbolizer", "coverage", "mapping_coverage", "symbolize"]

#: A mapping with this many new names has them demangled (c++filt) while the rest goes on.
AHEAD = 2000


def coverage(p: Profile) -> tuple[int, int]:
    """(locations with a module, how many of them have function lines) of ``p``."""
    counts = p.locations.line_start[1:] - p.locations.line_start[:-1]
    in_module = p.locations.mapping >= 0
    return int(in_module.sum()), int((in_module & (counts > 0)).sum())


def mapping_coverage(p: Profile) -> dict[int, tuple[int, int]]:
    """Per mapping row: (locations, locations with function lines)."""
    counts = np.diff(p.locations.line_start)
    m = p.locations.mapping
    inside = m >= 0
    total = np.bincount(m[inside], minlength=len(p.mappings))
    named = np.bincount(m[inside & (counts > 0)], minlength=len(p.mappings))
    return {i: (int(total[i]), int(named[i])) for i in range(len(p.mappings)) if total[i]}


@dataclass
class MappingReport:
    """One mapping's symbolization: frames with names before and after, and where from."""

    file: str
    build_id: str
    frames: int
    before: int
    after: int = 0
    source: str = ""
    looked_for: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"file": self.file, "build_id": self.build_id, "frames": self.frames,
                "symbolized_before": self.before, "symbolized_after": self.after,
                "found": self.source, "looked_for": self.looked_for}


@dataclass
class SymbolizeReport:
    """What a symbolization did (per mapping), with the engines used and problems met."""

    mappings: list[MappingReport] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cache_hits: int = 0
    deobfuscated: int = 0

    @property
    def frames(self) -> int:
        return sum(m.frames for m in self.mappings)

    @property
    def before(self) -> int:
        return sum(m.before for m in self.mappings)

    @property
    def symbolized(self) -> int:
        return sum(m.after for m in self.mappings)

    @property
    def missing(self) -> list[MappingReport]:
        return [m for m in self.mappings if not m.source and m.after < m.frames]

    def to_json(self) -> dict:
        share = f"{100 * self.symbolized / self.frames:.1f}%" if self.frames else "0.0%"
        return {"frames": self.frames, "symbolized_before": self.before, "symbolized": self.symbolized,
                "share": share, "mappings": [m.to_json() for m in self.mappings], "engines": self.engines,
                "cache_hits": self.cache_hits, "deobfuscated_functions": self.deobfuscated, "notes": self.notes}


class Symbolizer:
    """Symbolizes profiles with one set of sources; files, indexes and the
    llvm-symbolizer process are shared by every profile it is given."""

    def __init__(self, sources: Sources | None = None, *, demangle: str = "simple",
                 force_demangle: bool = False) -> None:
        self.sources = sources or Sources()
        root = cache_dir() if self.sources.cache else None
        self.locator = Locator(self.sources, root)
        self.resolver = Resolver(self.sources.engine, ResultCache(root))
        self.demangle = demangle
        self.force_demangle = force_demangle
        self._java: list | None = None  # R8 maps, parsed on first use

    def close(self) -> None:
        self.resolver.close()

    def __enter__(self) -> Symbolizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ one profile

    def run(self, profile: Profile) -> tuple[Profile, SymbolizeReport]:
        """``profile`` symbolized (a copy sharing untouched tables) and the report."""
        # A big batch makes about a million short-lived strings, tuples and list slots and no
        # reference cycles: the cycle collector, triggered by the allocations, would walk the
        # young ones again and again (a quarter of the parsing time). It is paused meanwhile.
        was_on = gc.isenabled()
        gc.disable()
        try:
            return self._run(profile)
        finally:
            if was_on:
                gc.enable()

    def _run(self, profile: Profile) -> tuple[Profile, SymbolizeReport]:
        report = SymbolizeReport()
        before = mapping_coverage(profile)
        todo = _unsymbolized(profile)
        parts: list[tuple[np.ndarray, Answers, bool]] = []
        renamed: dict[int, str] = {}
        ahead: list[Demangling] = []
        for m in sorted(before):
            if m in todo:
                part = self._mapping(profile, m, todo[m], report, renamed)
                if part is not None:
                    parts.append(part)
                    if len(part[1].strings) >= AHEAD:  # c++filt starts on them at once, beside the rest
                        ahead.append(Demangling(part[1].strings, self.demangle, self._memo()))
            else:  # nothing left to do: reported, not searched
                report.mappings.append(MappingReport(profile.mapping_file(m) or "?",
                                                     profile.strings[profile.mappings.build_id[m]], 0, 0))
        out = profile
        if any(len(a.function) for _, a, _ in parts) or renamed:
            interner = Interner(profile)
            out = _fill(profile, interner, parts)
            if renamed:
                _rename(out, interner, renamed)
        out = self._deobfuscate(out, report)
        out = self._async_backtraces(out)
        out = demangle_profile(out, self.demangle, force=self.force_demangle, memo=self._memo(), ahead=ahead)
        return self._finish(profile, out, before, todo, report), report

    def _memo(self) -> ResultCache | None:
        """Where demangled names are kept: beside symbols resolved this run (no disk otherwise)."""
        cache = self.resolver.cache
        return cache if cache.opened else None

    def _mapping(self, p: Profile, m: int, rows: np.ndarray, report: SymbolizeReport,
                 renamed: dict[int, str]) -> tuple[np.ndarray, Answers, bool] | None:
        """(location rows, their answers, whether names are system names too) of mapping ``m``."""
        ms = p.mappings
        filename, build_id = p.strings[ms.filename[m]], p.strings[ms.build_id[m]]
        found = self.locator.find(filename, build_id)
        entry = MappingReport(filename or "?", build_id, 0, 0)
        report.mappings.append(entry)
        entry.source = "; ".join(found.where)
        entry.looked_for = [] if found.ok else _looked_for(filename, build_id, found)
        addresses = p.locations.address[rows].astype(np.uint64)
        try:
            answers, system_names = self._frames(p, m, found, addresses, renamed)
        except (BadElfError, BadDebugInfoError) as exc:
            report.notes.append(f"{filename or build_id}: {exc}; its frames stay unsymbolized")
            return None
        return rows, answers, system_names

    def _frames(self, p: Profile, m: int, found: Found, addresses: np.ndarray,
                renamed: dict[int, str]) -> tuple[Answers, bool]:
        ms = p.mappings
        start, limit, offset = int(ms.start[m]), int(ms.limit[m]), int(ms.offset[m])
        if found.breakpad is not None:
            store, path, debug_name = found.breakpad
            wanted = placeholder_hash(p.strings[ms.filename[m]])
            if wanted is not None and module_name_hash(debug_name) == wanted:
                renamed[m] = debug_name
            rel = [a - start + offset for a in addresses.tolist()]
            sym = store.load(path, rel)
            return Answers.from_frames(addresses.tolist(), [[Frame(f[0], f[1], f[2]) for f in (sym.lookup(a) or [])]
                                             for a in rel]), False
        if found.module is None:
            return Answers.empty(addresses), True
        module = found.module
        kind = ADDRESS_KINDS.get(p.source_format, "runtime")
        filename = p.strings[ms.filename[m]]
        vaddrs = to_vaddr(kind, module.elf, start, limit, offset, addresses, apk_offset=found.apk_offset,
                          in_apk=".apk" in filename and "!" not in filename,
                          load_bias=_perfetto_load_bias(p, filename, start))
        return self.resolver.resolve_columns(module, vaddrs), True

    # ------------------------------------------------------------ other steps

    def _deobfuscate(self, p: Profile, report: SymbolizeReport) -> Profile:
        from polyprof.symbolize.r8 import deobfuscate_profile, load_mappings

        maps = self._java
        if maps is None and self.sources.mappings:
            maps = self._java = load_mappings(self.sources.mappings, report.notes)
        out, count = deobfuscate_profile(p, maps or [], report.notes)
        report.deobfuscated += count
        return out

    def _async_backtraces(self, p: Profile) -> Profile:
        if p.is_deferred("labelsets") or not any(lab.key == "async_backtrace" for ls in p.labelsets for lab in ls):
            return p
        from polyprof.symbolize.demangle import demangle_name
        from polyprof.symbolize.fill import shallow_copy

        out = shallow_copy(p)
        out.labelsets = [tuple(Label(lab.key, self._backtrace(lab.str, demangle_name), lab.num, lab.unit)
                               if lab.key == "async_backtrace" and lab.str else lab for lab in ls)
                         for ls in p.labelsets]
        return out

    def _backtrace(self, text: str, demangle_name) -> str:  # noqa: ANN001
        try:
            frames = json.loads(text)
        except ValueError:
            return text
        changed = False
        for frame in frames if isinstance(frames, list) else []:
            if not isinstance(frame, list) or len(frame) < 3 or (len(frame) > 3 and frame[3]) or not frame[0]:
                continue
            found = self.locator.find(str(frame[0]), str(frame[1]))
            chain = self._async_frame(found, int(frame[2]))
            if chain:
                names = [demangle_name(f[0], self.demangle) if self.demangle != "none" else f[0] for f in chain]
                frame[3:] = [names[0], [[n, f[2], f[3]] for n, f in zip(names, chain)]]
                changed = True
        return json.dumps(frames, separators=(",", ":"), ensure_ascii=False) if changed else text

    def _async_frame(self, found: Found, address: int) -> list[NewLine]:
        try:
            if found.breakpad is not None:
                store, path, _ = found.breakpad
                return [(f[0], "", f[1], f[2], 0) for f in (store.load(path, [address]).lookup(address) or [])]
            if found.module is not None:
                vaddr = int(to_vaddr("module", found.module.elf, 0, 0, 0, [address])[0])
                return [_line(f) for f in self.resolver.resolve(found.module, [vaddr]).get(vaddr, [])]
        except (BadElfError, BadDebugInfoError):
            return []
        return []

    def _finish(self, old: Profile, out: Profile, before: dict[int, tuple[int, int]], todo: dict[int, np.ndarray],
                report: SymbolizeReport) -> Profile:
        after = mapping_coverage(out)
        earlier = {(e.get("file"), e.get("build_id")): e
                   for e in old.extras.get("symbolization", {}).get("mappings", [])}
        for entry, m in zip(report.mappings, sorted(before)):
            entry.frames, entry.before = before.get(m, (0, 0))
            entry.after = after.get(m, (0, 0))[1]
            first = earlier.get((entry.file, entry.build_id))
            if first is not None:  # symbolized before: "before" means before the first time
                entry.before = int(first.get("symbolized_before", entry.before))
                entry.source = entry.source or str(first.get("found", ""))
        report.engines = sorted(self.resolver.used)
        report.cache_hits = self.resolver.cache.hits
        report.notes.extend(n for n in self.resolver.notes + self.locator.problems if n not in report.notes)
        if self.locator.debuginfod is not None:
            report.notes.extend(p for p in self.locator.debuginfod.problems if p not in report.notes)
        if out is old:
            from polyprof.symbolize.fill import shallow_copy

            out = shallow_copy(old)
        out.extras["symbolization"] = report.to_json()
        missing = [f"{m.file} ({m.build_id})" if m.build_id else m.file for m in report.missing]
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            out.warnings.append(f"no symbols for {len(missing)} module(s): {shown}")
        out.warnings.extend(report.notes)
        out.warnings = list(dict.fromkeys(out.warnings))
        return out


def _line(f: Frame) -> NewLine:
    return (f.function, f.function, f.file, f.line, f.column)


def _unsymbolized(p: Profile) -> dict[int, np.ndarray]:
    """Mapping row -> location rows that belong to it and have no lines."""
    counts = np.diff(p.locations.line_start)
    rows = np.flatnonzero((p.locations.mapping >= 0) & (counts == 0))
    mapping = p.locations.mapping[rows]
    order = np.argsort(mapping, kind="stable")
    rows, mapping = rows[order], mapping[order]
    bounds = np.flatnonzero(np.diff(mapping)) + 1
    return {int(group_m[0]): group for group, group_m in zip(np.split(rows, bounds), np.split(mapping, bounds))
            if len(group)}


def _fill(p: Profile, interner: Interner, parts: list[tuple[np.ndarray, Answers, bool]]) -> Profile:
    """``p`` with every part's answers as the lines of its location rows (one vectorized fill)."""
    if not parts:
        return replace_lines(p, interner, {})
    fids = [interner.functions_of(a, system_names=system) for _, a, system in parts]
    return fill_lines(p, interner, np.concatenate([r for r, _, _ in parts]),
                      np.concatenate([a.counts for _, a, _ in parts]), np.concatenate(fids),
                      np.concatenate([a.line for _, a, _ in parts]), np.concatenate([a.column for _, a, _ in parts]))


def _rename(p: Profile, interner: Interner, renamed: dict[int, str]) -> None:
    filename = p.mappings.filename.copy()
    for m, name in renamed.items():
        filename[m] = interner.string(name)
    p.strings = interner.strings
    p.mappings.filename = filename


def _perfetto_load_bias(p: Profile, filename: str, start: int) -> int | None:
    """The load bias a Perfetto trace recorded for this mapping (for the Android 10 fix)."""
    for row in p.extras.get("mapping_offsets", []) if p.source_format == "perfetto" else []:
        if isinstance(row, list) and len(row) >= 5 and row[0] == filename and row[2] == start:
            return int(row[4])
    return None


def _looked_for(filename: str, build_id: str, found: Found) -> list[str]:
    """The file names a user should provide, most useful first."""
    from polyprof.symbolize.debugid import candidates

    out = []
    name = filename.replace("\\", "/").rsplit("/", 1)[-1] if placeholder_hash(filename) is None else ""
    windows = name.lower().endswith((".pdb", ".dll", ".exe"))
    elf_id = "" if windows else elf_build_id(build_id)
    if elf_id:
        out.append(f".build-id/{elf_id[:2]}/{elf_id[2:]}.debug")
    if name:
        out.append(name)
    ids = candidates(build_id) if build_id else []
    if ids:
        stem = name[:-4] if name.lower().endswith(".pdb") else name
        out.append(f"{name or '<name>'}/{ids[0]}/{stem or '<name>'}.sym (Breakpad)")
    out.extend(t for t in found.tried if t.startswith(("http://", "https://")))
    return out


def symbolize(profile: Profile, sources: object = None, **kw: object) -> tuple[Profile, SymbolizeReport]:
    """``profile`` with its address frames symbolized from ``sources``.

    ``sources`` is a :class:`.sources.Sources`, a directory or a list of
    them; keywords go to :class:`Symbolizer` (``demangle``,
    ``force_demangle``). Returns the new profile and the report.
    """
    with Symbolizer(Sources.of(sources), **kw) as s:  # type: ignore[arg-type]
        return s.run(profile)


def symbolize_profiles(profiles: Iterable[Profile], sources: object = None, **kw: object) -> list[Profile]:
    """Several profiles with one :class:`Symbolizer` (files are opened and parsed once)."""
    with Symbolizer(Sources.of(sources), **kw) as s:  # type: ignore[arg-type]
        return [s.run(p)[0] for p in profiles]
