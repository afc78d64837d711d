"""Java deobfuscation: R8/ProGuard ``mapping.txt`` files and Perfetto's in-trace maps.

Read from a ``mapping.txt`` (``--mapping``): class lines
``com.example.Main -> a:``, method lines
``[a:b:]type name(args)[:c[:d]] -> x`` (``name`` may be qualified by another
class when R8 inlined or merged it), field lines, and the ``# {"id":
"sourceFile", ...}`` metadata; a line that fits none is counted and named
once in a warning, never fatal. Perfetto traces carry the same maps as
``DeobfuscationMapping`` packets; both become :class:`JavaMap`.

Retracing one frame ``class.method`` at line ``L`` (as R8's retrace does):
the method lines of that obfuscated name whose obfuscated range holds ``L``
form the inline chain, innermost first, each with its original line
(``c + L - a`` when the ranges have the same length, else ``c``); without
a line (or no range holding it) the original names of every candidate,
sorted and joined by ``" | "`` when they differ (an ambiguous frame, as
trace processor shows it). A class that was only renamed keeps its method
name. The frame's function keeps the obfuscated name as its system name.

R8 *outlines* (a method line followed by ``# {"id":
"com.android.tools.r8.outline"}``) fold into their caller when the caller's
line is an outline call site (``# {"id":
"com.android.tools.r8.outlineCallsite", "positions": {...}}``): the outline
frame goes and the caller is retraced at the position given for the
outline's line, as R8's retrace does. The stack keeps its id; the callsite
gets a new location (appended) and hangs from the caller's parent.

Which map applies to a frame: a map whose package is named by the
mapping's path (``/data/app/[~~…/]<package>-…/base.apk``), else by the
profile's process name, else a map without a package, else every map
(the first that knows the class wins); ``--mapping`` files
given as ``PACKAGE=FILE`` apply to that package, plain files to every
frame.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from polyprof.model.profile import Profile

__all__ = ["JavaClass", "JavaMap", "Member", "deobfuscate_profile", "load_mappings", "parse_mapping"]

_CLASS = re.compile(r"^(\S+)\s+->\s+(\S+):\s*$")
_METHOD = re.compile(r"^\s+(?:(\d+):(\d+):)?([^\s:]+)\s+([^\s(]+)\(([^)]*)\)(?::(\d+)(?::(\d+))?)?\s+->\s+(\S+)\s*$")
_FIELD = re.compile(r"^\s+(\S+)\s+([^\s(]+)\s+->\s+(\S+)\s*$")
_PACKAGE_IN_PATH = re.compile(r"(?:^|/)data/app/(?:~~[^/]+/)?([A-Za-z][\w.]*?)(?:-[^/]*)?/")


@dataclass
class Member:
    """One method line: original name (maybe class-qualified), obfuscated and source line ranges."""

    original: str
    obf_start: int = 0
    obf_end: int = 0
    src_start: int = 0
    src_end: int = 0
    #: R8 outlining: this method is an outline (its frame folds into its caller's) ...
    outline: bool = False
    #: ... or a call site of one: outline line -> this method's obfuscated line to retrace instead.
    positions: dict[int, int] = field(default_factory=dict)

    def line(self, obf_line: int) -> int:
        if not self.src_start:
            return obf_line
        if self.src_end and self.src_end - self.src_start == self.obf_end - self.obf_start:
            return self.src_start + obf_line - self.obf_start
        return self.src_start


@dataclass
class JavaClass:
    original: str
    methods: dict[str, list[Member]] = field(default_factory=dict)
    source_file: str = ""

    def qualified(self, m: Member) -> str:
        return m.original if "." in m.original else f"{self.original}.{m.original}"


@dataclass
class JavaMap:
    """Obfuscated class name -> class, for one package ("" = any)."""

    package: str = ""
    classes: dict[str, JavaClass] = field(default_factory=dict)
    origin: str = ""

    def retrace(self, cls: str, method: str, line: int) -> list[tuple[str, str, int]] | None:
        """[(original name, source file, line)] innermost first, or None when the class is unknown."""
        c = self.classes.get(cls)
        if c is None:
            return None
        entries = c.methods.get(method, [])
        if not entries:
            return [(f"{c.original}.{method}", c.source_file, line)]
        if line > 0:
            group = _group_for(entries, line)
            if group:
                return [(c.qualified(m), c.source_file, m.line(line)) for m in group]
        names = sorted({c.qualified(m) for m in entries})
        only = entries[0] if len(names) == 1 and len(entries) == 1 else None
        return [(" | ".join(names), c.source_file, only.line(line) if only and line else line if len(names) == 1
                 else 0)]


    def group(self, cls: str, method: str, line: int) -> list[Member]:
        """The method lines of ``cls.method`` whose obfuscated range holds ``line`` ([] if none)."""
        c = self.classes.get(cls)
        return _group_for(c.methods.get(method, []), line) if c is not None and line > 0 else []


def _group_for(entries: list[Member], line: int) -> list[Member]:
    """The first run of consecutive entries with one obfuscated range holding ``line``."""
    i = 0
    while i < len(entries):
        j = i + 1
        key = (entries[i].obf_start, entries[i].obf_end)
        while j < len(entries) and (entries[j].obf_start, entries[j].obf_end) == key:
            j += 1
        if key[0] and key[0] <= line <= key[1]:
            return entries[i:j]
        i = j
    return []


def parse_mapping(text: str, origin: str, notes: list[str], package: str = "") -> JavaMap:
    """A ``mapping.txt`` as a :class:`JavaMap`; malformed lines are counted in ``notes``."""
    jm = JavaMap(package, origin=origin)
    current: JavaClass | None = None
    last: Member | None = None  # method metadata (outlines) follows its method line
    bad: list[int] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            _metadata(stripped, current, last)
            continue
        m = _CLASS.match(line)
        if m and not line[0].isspace():
            current = jm.classes[m.group(2)] = JavaClass(m.group(1))
            last = None
            continue
        m = _METHOD.match(line)
        if m and current is not None:
            a, b, _, name, _, c, d, obf = m.groups()
            last = Member(name, int(a or 0), int(b or 0), int(c or 0), int(d or 0))
            current.methods.setdefault(obf, []).append(last)
            continue
        if _FIELD.match(line) and current is not None:
            continue
        bad.append(number)
    if bad:
        notes.append(f"{origin}: {len(bad)} malformed line(s) skipped (first: line {bad[0]})")
    return jm


def _metadata(comment: str, current: JavaClass | None, last: Member | None) -> None:
    body = comment.lstrip("#").strip()
    if current is None or not body.startswith("{"):
        return
    try:
        info = json.loads(body)
    except ValueError:
        try:  # R8's own examples also write the JSON with single quotes
            info = json.loads(body.replace("'", '"'))
        except ValueError:
            return
    if not isinstance(info, dict):
        return
    kind = info.get("id")
    if kind == "sourceFile":
        current.source_file = str(info.get("fileName", ""))
    elif kind == "com.android.tools.r8.outline" and last is not None:
        last.outline = True
    elif kind == "com.android.tools.r8.outlineCallsite" and last is not None:
        positions = info.get("positions")
        try:
            last.positions = {int(k): int(v) for k, v in positions.items()} if isinstance(positions, dict) else {}
        except (TypeError, ValueError):
            last.positions = {}


def from_trace(packet: dict) -> JavaMap:
    """A Perfetto ``DeobfuscationMapping`` (as the reader keeps it) as a :class:`JavaMap`."""
    jm = JavaMap(str(packet.get("package", "")), origin="trace")
    for obf, original, methods, _fields in packet.get("classes", []):
        c = jm.classes.setdefault(obf, JavaClass(original))
        for mobf, morig, a, b, src_a, src_b in methods:
            c.methods.setdefault(mobf, []).append(Member(morig, a, b, src_a, src_b))
    return jm


def load_mappings(specs: Iterable[str], notes: list[str]) -> list[JavaMap]:
    """``--mapping`` values (``FILE`` or ``PACKAGE=FILE``) read and parsed."""
    from polyprof.errors import OptionsError

    out = []
    for spec in specs:
        package, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            raise OptionsError(f"cannot read mapping file {path}: {exc.strerror or exc}") from None
        out.append(parse_mapping(text, path, notes, package))
    return out


# ---------------------------------------------------------------- profiles


def _package_of(path: str) -> str:
    m = _PACKAGE_IN_PATH.search(path)
    return m.group(1) if m else ""


def _maps_for(maps: list[JavaMap], path: str, process: str) -> list[JavaMap]:
    """The maps that apply to frames of a mapping at ``path`` in process ``process``."""
    package = _package_of(path)
    for wanted in (package, process):
        if wanted:
            hit = [m for m in maps if m.package == wanted]
            if hit:
                return hit
    return [m for m in maps if not m.package] or maps  # nothing tells: try every map, as trace processor does


def _split(name: str) -> tuple[str, str] | None:
    name = name.split("(", 1)[0].replace("/", ".")
    cls, dot, method = name.rpartition(".")
    return (cls, method) if dot and cls and method else None


def deobfuscate_profile(p: Profile, maps: list[JavaMap], notes: list[str]) -> tuple[Profile, int]:
    """``p`` with its Java frames deobfuscated by ``maps`` and any map ``p`` carries (see the
    module docstring); also the number of functions renamed. No row is renumbered; an R8
    outline frame folds into its caller (see :func:`_fold_outlines`)."""
    carried = [from_trace(x) for x in p.extras.get("java_deobfuscation", [])]
    every = carried + maps
    if not every:
        return p, 0
    process = str(p.extras.profile_labels.get("process_name", ""))
    new, count, outlines = _retrace_locations(p, every, process)
    from polyprof.symbolize.fill import Interner, replace_lines, shallow_copy

    if outlines.callers:
        p, folded = _fold_outlines(p, outlines)
        new.update(folded)
    # renamed, not newly symbolized: mapping flags stay
    out = replace_lines(p, Interner(p), new, set_flags=False) if new else shallow_copy(p)
    out.extras.pop("java_deobfuscation", None)  # applied: the names say it now
    return out, count


@dataclass
class _Outlines:
    """Locations that are R8 outline frames (row -> obfuscated line) and outline call sites
    (row -> the retrace of the caller at a given obfuscated line, and its system name and file)."""

    frames: dict[int, int] = field(default_factory=dict)
    callers: dict[int, tuple[dict[int, int], JavaMap, str, str]] = field(default_factory=dict)


def _retrace_locations(p: Profile, maps: list[JavaMap], process: str) -> tuple[dict, int, _Outlines]:
    s, f, ln, loc = p.strings, p.functions, p.lines, p.locations
    new: dict[int, list] = {}
    renamed: set[int] = set()
    choice: dict[int, list[JavaMap]] = {}
    outlines = _Outlines()
    for row in range(len(loc)):
        m = int(loc.mapping[row])
        if m not in choice:
            choice[m] = _maps_for(maps, p.mapping_file(m), process)
        if not choice[m]:
            continue
        lines, changed = [], False
        for r in loc.lines_of(row):
            fn = int(ln.function[r])
            got = _retrace_line(s, f, fn, int(ln.line[r]), choice[m]) if fn >= 0 else None
            if got is None:
                lines.append((fn, "", "", int(ln.line[r]), int(ln.column[r])))
                continue
            changed = True
            renamed.add(fn)
            system = s[f.name[fn]]  # the obfuscated name belongs to the physical (last) level only
            lines.extend(_lines(got, system, s[f.filename[fn]]))
            _note_outline(outlines, row, system, int(ln.line[r]), s[f.filename[fn]], choice[m])
        if changed:
            new[row] = lines
    return new, len(renamed), outlines


def _lines(got: list[tuple[str, str, int]], system: str, file: str) -> list:
    return [(name, system if i == len(got) - 1 else "", where or file, number, 0)
            for i, (name, where, number) in enumerate(got)]


def _note_outline(outlines: _Outlines, row: int, system: str, line: int, file: str, maps: list[JavaMap]) -> None:
    """Remember ``row`` when its frame is an R8 outline or an outline's call site."""
    parts = _split(system)
    if parts is None or line <= 0:
        return
    for jm in maps:
        group = jm.group(parts[0], parts[1], line)
        if any(m.outline for m in group):
            outlines.frames[row] = line
        positions = next((m.positions for m in group if m.positions), None)
        if positions:
            outlines.callers[row] = (positions, jm, system, file)
        if group:
            return


def _fold_outlines(p: Profile, outlines: _Outlines) -> tuple[Profile, dict[int, list]]:
    """R8's rule for outlines: a frame of an outline method called from an outline call site is
    dropped, and the caller is retraced at the line the call site's ``positions`` give for the
    outline's line (one frame, or an inline chain, instead of two).

    Each such callsite keeps its id (stacks and samples are untouched) but now hangs from its
    caller's parent with a new location, appended after every existing one, with the caller's
    mapping and address and the repositioned lines. Returns the profile and the new
    locations' lines."""
    import numpy as np

    from polyprof.model.profile import CallsiteTable, LocationTable
    from polyprof.symbolize.fill import shallow_copy

    loc, cs = p.locations, p.callsites
    parent, location = cs.parent.copy(), cs.location.copy()
    made: dict[tuple[int, int], int] = {}
    added: list[int] = []  # caller location of each new location
    lines: dict[int, list] = {}
    for c in np.flatnonzero(np.isin(location, list(outlines.frames))).tolist():
        up = int(parent[c])
        caller = int(location[up]) if up >= 0 else -1
        info = outlines.callers.get(caller)
        at = info[0].get(outlines.frames[int(location[c])]) if info else None
        if info is None or at is None:
            continue
        _, jm, system, file = info
        key = (caller, at)
        if key not in made:
            cls, _, method = system.split("(", 1)[0].replace("/", ".").rpartition(".")  # as _split did
            got = jm.retrace(cls, method, at)
            if not got:
                continue
            made[key] = len(loc) + len(added)
            added.append(caller)
            lines[made[key]] = _lines(got, system, file)
        parent[c], location[c] = parent[up], made[key]
    if not added:
        return p, {}
    out = shallow_copy(p)
    rows = np.asarray(added, dtype=np.int64)
    out.locations = LocationTable(np.concatenate([loc.mapping, loc.mapping[rows]]),
                                  np.concatenate([loc.address, loc.address[rows]]),
                                  np.concatenate([loc.folded, loc.folded[rows]]),
                                  np.concatenate([loc.line_start, np.full(len(rows), loc.line_start[-1],
                                                                          dtype=loc.line_start.dtype)]))
    out.callsites = CallsiteTable(parent, location)
    return out, lines


def _retrace_line(s: list[str], f, fn: int, line: int, maps: list[JavaMap]):  # noqa: ANN001, ANN202
    parts = _split(s[f.name[fn]])
    if parts is None:
        return None
    for jm in maps:
        got = jm.retrace(parts[0], parts[1], line)
        if got is not None:
            return got
    return None


