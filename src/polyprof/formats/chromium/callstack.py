"""Encoding a profile as a ``CallStackProfile`` message (the body of the writer).

The inverse of :mod:`.reader`: mappings become ModuleIdentifiers (name hash
from the file name, or the hash kept in an ``md5:`` placeholder), locations
become Locations (module offset = address - start + offset), stacks are
de-duplicated, samples become StackSamples in order with their labels turned
back into delta-encoded metadata, ``continued_work`` and async backtraces.
A profile whose samples carry ``process_phases`` is written in the
deprecated ``Sample`` encoding, the only one that holds phases.

A CPU profile keeps its sample count as ``count`` and one time column (the
default type if it is a time, else the first): as count x sampling period
when that is what it holds, else in the samples' ``weight`` (nanoseconds).
CPU time (``cpu``, ``cpu-clock``, ``task-clock``...) is read back as
``cpu/nanoseconds``, other times as ``wall/nanoseconds``; the profile
metadata item ``polyprof.time`` tells the reader which (see
``reader.TIME_MODES``). Inlined frames become separate Locations (each with
its function name), so per-function totals survive.

What a CallStackProfile cannot hold is counted in the loss report: other
sample types, file names and line numbers of symbolized locations, string
labels, pid, tid and cpu columns, sub-millisecond times, the start time.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import numpy as np

from polyprof.formats.chromium import names as N
from polyprof.formats.chromium import schema as S
from polyprof.formats.chromium.reader import CPU_TYPES, HEAP_TYPES
from polyprof.formats.loss import LossReport
from polyprof.model.profile import Label, Profile, ValueType
from polyprof.wire.encode import Encoder

__all__ = ["CallStackEncoder", "Facts", "columns", "metadata_key_hash"]

MS = 1_000_000
_NS = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": MS, "seconds": 1_000_000_000}
#: Sample type names of CPU time (read back as cpu/nanoseconds); any other time is wall time.
_CPU_TIME = {"cpu", "cpu-clock", "task-clock", "cpu-time", "cpu_time", "cputime"}
_KEYED = re.compile(r"(.*)\[(-?\d+)\]")
_INT32 = 1 << 31
#: sample labels the writer turns back into fields (all others are metadata or lost).
_SPECIAL = ("continued_work", "async_backtrace", "process_phases", "process", "thread")


def metadata_key_hash(key: str) -> tuple[int, int | None]:
    """(metadata name hash, user key or None) of a metadata label key (``name`` or ``name[key]``)."""
    m = _KEYED.fullmatch(key)
    name, user_key = (m.group(1), int(m.group(2))) if m else (key, None)
    h = N.parse_hash_text(name)
    return (h if h is not None else N.hash_metric_name(name.encode("utf-8", "surrogatepass")), user_key)


def columns(p: Profile) -> tuple[bool, int | None, int | None]:
    """(heap?, count column, weight column) of ``p``'s sample types.

    A heap profile has a bytes column (and a default type that is not a
    time); Chrome's heap profiles are in-use samples, so in-use columns are
    preferred over allocation columns.
    """
    names = [vt.type for vt in p.sample_types]
    units = [vt.unit for vt in p.sample_types]
    if units and units[p.default_index()] in _NS:
        units = [u if u != "bytes" else "" for u in units]  # a time profile with a size column

    def first(preferred: tuple[str, ...], unit: str) -> int | None:
        for name in preferred:
            if name in names and units[names.index(name)] == unit:
                return names.index(name)
        return units.index(unit) if unit in units else None

    weight = first(("inuse_space",), "bytes")
    if weight is not None:
        return True, first(("inuse_objects",), "count"), weight
    return False, first(("samples", "count"), "count"), None


@functools.cache
def _builtin_module_names() -> dict[int, str]:
    return N.module_names()


class Facts:
    """Typed access to ``extras``: a value of the wrong type counts as lost, never raises."""

    def __init__(self, extras: dict, report: LossReport) -> None:
        self.x = extras
        self.report = report

    def __contains__(self, key: str) -> bool:
        return key in self.x

    def get(self, key: str, kind: type) -> Any:
        value = self.x.get(key)
        if value is None:
            return None
        try:
            if kind is int and isinstance(value, str):
                return int(value, 0)
            if kind is list:
                return [int(v) for v in value]
            if kind is dict:
                return {int(k): str(v) for k, v in value.items()}
            return kind(value)
        except (TypeError, ValueError, AttributeError):
            self.report.add(f"format-specific fact not kept: {key} (unexpected value)")
            return None

    def enum(self, key: str, table: tuple[str, ...]) -> int | None:
        """The number of the enum name held by ``key``, or None (counted as lost if unknown)."""
        if key not in self.x:
            return None
        value = S.enum_value(table, str(self.x[key]))
        if value is None:
            self.report.add(f"{key} {self.x[key]!r} (not a known value)")
        return value


class _Labels:
    """What one label set says, split into the fields that hold it."""

    def __init__(self, labels: tuple[Label, ...], report: LossReport) -> None:
        self.metadata: dict[tuple[int, int | None], int] = {}
        self.special: dict[str, str] = {}
        self.lost: list[str] = []
        for label in labels:
            if label.key in _SPECIAL and label.str is not None:
                self.special[label.key] = label.str
            elif label.num is not None and label.str is None:
                ident = metadata_key_hash(label.key)
                self.metadata[ident] = label.num
                if label.unit:
                    self.lost.append(f"unit of numeric label '{label.key}'")
                if N.parse_hash_text(_KEYED.sub(r"\1", label.key)) is None:
                    self.lost.append(f"name of numeric label '{label.key}' (read back as its hash "
                                     f"{N.hash_text(ident[0])} unless given with --metadata-names)")
            else:
                self.lost.append(f"string label '{label.key}'")
        if self.special.get("continued_work", "true") != "true":
            self.lost.append("label 'continued_work' with a value other than \"true\"")


class CallStackEncoder:
    """The tables of one profile on their way to the wire (modules, locations, labels).

    :func:`polyprof.formats.chromium.samples.encode_body` drives it.
    """

    def __init__(self, p: Profile, report: LossReport) -> None:
        self.p = p
        self.report = report
        self.heap, self.count_col, self.weight_col = columns(p)
        kept = (HEAP_TYPES if self.heap else CPU_TYPES)[0], (HEAP_TYPES[1] if self.heap else None)
        for col, as_type in zip((self.count_col, self.weight_col), kept):
            if col is not None and as_type is not None:
                report.rename(p.sample_types[col], ValueType(*as_type))
        self.modules: dict[tuple[str, str], int] = {}
        self.module_msgs: list[bytes] = []
        self.loc_cache: dict[int, list[tuple[tuple[int, int], bytes, str]]] = {}
        self._shared: dict[tuple[int, int], str] = {}  # (module, address) -> its one name, written once
        self._explicit: set[tuple[int, int]] = set()  # addresses also named elsewhere: "" written out
        self._named: set[tuple[int, int]] = set()
        self.shared_names = False
        self.hashes: dict[int, int] = {}
        self.label_cache: dict[int, _Labels] = {}
        self.backtraces: dict[str, int] = {}
        self.backtrace_msgs: list[bytes] = []
        self.facts = Facts(p.extras, report)
        self.period_ms = self._period_ms()
        self.time_col, self.time_mode = self._time_plan()
        ms = p.mappings
        for m in range(len(ms)):  # every module, in table order (unused ones too)
            self.module_index(p.strings[ms.filename[m]], p.strings[ms.build_id[m]])

    # ---- modules and locations -------------------------------------------

    def module_index(self, filename: str, build_id: str) -> int:
        key = (filename, build_id)
        index = self.modules.get(key)
        if index is None:
            index = self.modules[key] = len(self.module_msgs)
            m = Encoder()
            if build_id:
                m.string_field(1, build_id)
            if filename:
                h = N.placeholder_hash(filename)
                if h is None and N.module_name_hash(filename) not in _builtin_module_names():
                    self.report.add("module file names kept as name hashes only (read back as md5:<hash> "
                                    "unless listed with --module-names)")
                m.fixed64_field(2, N.module_name_hash(filename) if h is None else h, always=True)
            self.module_msgs.append(m.getvalue())
        return index

    def location(self, row: int) -> list[bytes]:
        """The Locations of model location ``row``: one per inlined function, innermost first."""
        return [head + (Encoder().string_field(3, name).getvalue() if name else b"")
                for _, head, name in self._parts(row)]

    def _parts(self, row: int) -> list[tuple[tuple[int, int], bytes, str]]:
        """(module and address, Location without its name, function name) of each frame of ``row``."""
        data = self.loc_cache.get(row)
        if data is None:
            data = self.loc_cache[row] = self._location(row)
        return data

    def _location(self, row: int) -> list[tuple[tuple[int, int], bytes, str]]:
        p, e = self.p, Encoder()
        loc, ms = p.locations, p.mappings
        m = int(loc.mapping[row])
        address = int(loc.address[row])
        module = -1
        if m >= 0:
            start, offset = int(ms.start[m]), int(ms.offset[m])
            if start and address >= start:
                address = address - start + offset
                self.report.add("location addresses rebased to module offsets")
            module = self.module_index(p.strings[ms.filename[m]], p.strings[ms.build_id[m]])
            e.varint_field(1, address, always=True)
            e.varint_field(2, module, always=True)
        else:
            e.varint_field(1, address)
        if loc.folded[row]:
            self.report.add("'folded' flag of locations")
        head = e.getvalue()
        return [((module, address), head, name) for name in self._function_names(row) or [""]]

    def share_names(self, rows: np.ndarray) -> None:
        """Plan the stack table's names: a (module, address) whose frames all have one name
        carries it on its first frame only (the reader's ``polyprof.names`` rule gives it to the
        others): a CallStackProfile has no function table, and names repeated in every stack
        were most of its size."""
        names: dict[tuple[int, int], set[str]] = {}
        for row in rows.tolist():
            for key, _, name in self._parts(row):
                names.setdefault(key, set()).add(name)
        self._shared = {key: next(iter(got)) for key, got in names.items() if len(got) == 1 and "" not in got}
        self._explicit = {key for key, got in names.items() if "" in got and len(got) > 1}

    def stack_frames(self, node: int) -> list[bytes]:
        """The Locations of a stack in the stack table, names shared as planned by ``share_names``."""
        out = []
        for loc in self.p.callsites.path(node):
            for key, head, name in self._parts(loc):
                if key in self._shared and key in self._named:
                    self.shared_names = True
                    out.append(head)
                    continue
                self._named.add(key)
                out.append(head + Encoder().string_field(3, name, always=key in self._explicit).getvalue()
                           if name or key in self._explicit else head)
        return out

    def _function_names(self, row: int) -> list[str]:
        """Function name of each line of a location, innermost first ("" when it has none)."""
        p = self.p
        lines = p.locations.lines_of(row)
        if len(lines) > 1:
            self.report.add("inlined frames written as separate frames", len(lines) - 1)
        f = p.functions
        names = []
        for r in lines:
            fn = int(p.lines.function[r])
            if p.lines.line[r] or p.lines.column[r] or (fn >= 0 and f.filename[fn]):
                self.report.add("source file and line of symbolized frames")
            if fn >= 0 and (f.start_line[fn] or f.system_name[fn] not in (0, f.name[fn])):
                self.report.add("system name and start line of functions")
            names.append(p.strings[f.name[fn]] if fn >= 0 else "")
        return names

    def frames(self, node: int) -> list[bytes]:
        return [frame for loc in self.p.callsites.path(node) for frame in self.location(loc)]

    # ---- labels -----------------------------------------------------------

    def labels(self, ls: int) -> _Labels:
        got = self.label_cache.get(ls)
        if got is None:
            got = self.label_cache[ls] = _Labels(self.p.labelsets[ls], self.report)
        return got

    def hash_index(self, h: int) -> int:
        index = self.hashes.get(h)
        if index is None:
            index = self.hashes[h] = len(self.hashes)
        return index

    def metadata_item(self, ident: tuple[int, int | None], value: int | None) -> Encoder:
        m = Encoder().varint_field(1, self.hash_index(ident[0]), always=True)
        if value is not None:
            m.sint_field(2, value, always=True)
        if ident[1] is not None:
            m.sint_field(3, ident[1], always=True)
        return m

    def backtrace_index(self, text: str) -> int | None:
        index = self.backtraces.get(text)
        if index is not None:
            return index
        try:
            frames = json.loads(text)
            body = Encoder()
            for frame in frames:
                body.message(1, self._backtrace_frame(frame))
        except (ValueError, TypeError, IndexError):
            self.report.add("label 'async_backtrace' that is not a backtrace")
            return None
        index = self.backtraces[text] = len(self.backtrace_msgs)
        self.backtrace_msgs.append(body.getvalue())
        return index

    def _backtrace_frame(self, frame: list) -> Encoder:
        name, build_id, address = str(frame[0]), str(frame[1]), int(frame[2])
        e = Encoder()
        if name or build_id:
            e.varint_field(1, address, always=True)
            e.varint_field(2, self.module_index(name, build_id), always=True)
        else:
            e.varint_field(1, address)
        if len(frame) > 3 and frame[3]:
            e.string_field(3, str(frame[3]))
        return e

    # ---- samples ------------------------------------------------------------

    def _period_ms(self) -> int:
        p = self.p
        if self.heap:
            return self.facts.get("sampling_period_ms", int) or 0
        if p.period_type is not None and p.period_type.unit == "nanoseconds":
            if p.period % MS:
                self.report.add("sampling period rounded down to milliseconds")
            return p.period // MS
        if p.period:
            self.report.add(f"sampling period in {p.period_type.unit if p.period_type else 'unknown units'}")
        return 0

    def _time_plan(self) -> tuple[int | None, int]:
        """The time column of a CPU profile and its ``polyprof.time`` mode (0: Chrome's own wall time)."""
        p = self.p
        times = [i for i, vt in enumerate(p.sample_types) if vt.unit in _NS]
        if self.heap or not times:
            return None, 0
        col = p.default_index() if p.default_index() in times else times[0]
        vt = p.sample_types[col]
        cpu = vt.type.lower() in _CPU_TIME
        values = p.samples.values
        # scaled in int64 whatever the values' type (int32 columns: a product in int32 would wrap)
        counts = values[:, self.count_col].astype(np.int64, copy=False) if self.count_col is not None else 1
        by_period = bool((values[:, col].astype(np.int64, copy=False) * _NS[vt.unit]
                          == counts * (self.period_ms * MS)).all())
        how = ("count x sampling period" if by_period else "in the samples' weights") + (
            ", values converted to nanoseconds" if vt.unit != "nanoseconds" else "")
        self.report.rename(vt, ValueType("cpu" if cpu else "wall", "nanoseconds"), how)
        return col, (1 if cpu else 0) if by_period else (2 if cpu else 3)

    @property
    def time_in_weights(self) -> bool:
        return self.time_mode in (2, 3)

    def counts_weights(self) -> tuple[list[int], list[int]]:
        """Count and weight of every sample; reports columns that are not kept."""
        p = self.p
        values = p.samples.values
        n = len(p.samples)
        counts = values[:, self.count_col].tolist() if self.count_col is not None else [1] * n
        weights = values[:, self.weight_col].tolist() if self.weight_col is not None else [1] * n
        if self.time_in_weights and self.time_col is not None:
            weights = (values[:, self.time_col].astype(np.int64, copy=False)
                       * _NS[p.sample_types[self.time_col].unit]).tolist()
        for i, vt in enumerate(p.sample_types):
            if i in (self.count_col, self.weight_col, self.time_col):
                continue
            differ = int((values[:, i] != 0).sum())
            self.report.add(f"sample type {vt} not written (a CallStackProfile holds a count and one "
                            "time or size per sample)", max(differ, 1))
        if not self.heap and self.time_col is None:
            self.report.add("sample types: reading adds wall/nanoseconds (count x sampling period)")
        default = p.default_index() if p.sample_types else None
        if default is not None and default not in (self.time_col, self.weight_col):
            self.report.add(f"default sample type {p.sample_types[default]} not kept: Chromium profiles "
                            "default to their time or size column")
        return counts, weights

    def times_ms(self) -> list[int] | None:
        time = self.p.samples.time
        if time is None or not len(time):
            return None
        base = 0
        if int(time.min()) // MS < -_INT32 or int(time.max()) // MS >= _INT32:
            base = int(time.min())  # absolute times (e.g. from a trace): make them offsets
            self.report.add("sample times rebased to the first sample")
        rounded = int(((time - base) % MS != 0).sum())
        if rounded:
            self.report.add("sample times rounded down to milliseconds", rounded)
        return ((time - base) // MS).tolist()
