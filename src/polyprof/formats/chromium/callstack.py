"""Encoding a profile as a ``CallStackProfile`` message (the body of the writer).

The inverse of :mod:`.reader`: mappings become ModuleIdentifiers (name hash
from the file name, or the hash kept in an ``md5:`` placeholder), locations
become Locations (module offset = address - start + offset), stacks are
de-duplicated, samples become StackSamples in order with their labels turned
back into delta-encoded metadata, ``continued_work`` and async backtraces.
A profile whose samples carry ``process_phases`` is written in the
deprecated ``Sample`` encoding, the only one that holds phases.

What a CallStackProfile cannot hold is counted in the loss report: sample
types other than count and weight (unless they equal count x period), file
names, line numbers and inlined frames of symbolized locations (the
innermost function name is kept as ``function_name``), string labels, pid,
tid and cpu columns, sub-millisecond times.
"""

from __future__ import annotations

import json
import re
from typing import Any

from polyprof.formats.chromium import names as N
from polyprof.formats.chromium import schema as S
from polyprof.formats.loss import LossReport
from polyprof.model.profile import Label, Profile
from polyprof.wire.encode import Encoder

__all__ = ["CallStackEncoder", "Facts", "metadata_key_hash"]

MS = 1_000_000
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


def _columns(p: Profile) -> tuple[bool, int | None, int | None]:
    """(heap?, count column, weight column) of ``p``'s sample types.

    A heap profile has a bytes column; Chrome's heap profiles are in-use
    samples, so in-use columns are preferred over allocation columns.
    """
    names = [vt.type for vt in p.sample_types]
    units = [vt.unit for vt in p.sample_types]

    def first(preferred: tuple[str, ...], unit: str) -> int | None:
        for name in preferred:
            if name in names and units[names.index(name)] == unit:
                return names.index(name)
        return units.index(unit) if unit in units else None

    weight = first(("inuse_space",), "bytes")
    if weight is not None:
        return True, first(("inuse_objects",), "count"), weight
    return False, first(("samples", "count"), "count"), None


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
                self.metadata[metadata_key_hash(label.key)] = label.num
                if label.unit:
                    self.lost.append(f"unit of numeric label '{label.key}'")
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
        self.heap, self.count_col, self.weight_col = _columns(p)
        self.modules: dict[tuple[str, str], int] = {}
        self.module_msgs: list[bytes] = []
        self.loc_cache: dict[int, bytes] = {}
        self.hashes: dict[int, int] = {}
        self.label_cache: dict[int, _Labels] = {}
        self.backtraces: dict[str, int] = {}
        self.backtrace_msgs: list[bytes] = []
        self.facts = Facts(p.extras, report)
        self.period_ms = self._period_ms()
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
                m.fixed64_field(2, N.module_name_hash(filename) if h is None else h, always=True)
            self.module_msgs.append(m.getvalue())
        return index

    def location(self, row: int) -> bytes:
        data = self.loc_cache.get(row)
        if data is None:
            data = self.loc_cache[row] = self._location(row)
        return data

    def _location(self, row: int) -> bytes:
        p, e = self.p, Encoder()
        loc, ms = p.locations, p.mappings
        m = int(loc.mapping[row])
        address = int(loc.address[row])
        if m >= 0:
            start, offset = int(ms.start[m]), int(ms.offset[m])
            if start and address >= start:
                address = address - start + offset
                self.report.add("location addresses rebased to module offsets")
            e.varint_field(1, address, always=True)
            e.varint_field(2, self.module_index(p.strings[ms.filename[m]], p.strings[ms.build_id[m]]),
                           always=True)
        else:
            e.varint_field(1, address)
        self._function_name(row, e)
        if loc.folded[row]:
            self.report.add("'folded' flag of locations")
        return e.getvalue()

    def _function_name(self, row: int, e: Encoder) -> None:
        p = self.p
        lines = p.locations.lines_of(row)
        if not len(lines):
            return
        if len(lines) > 1:
            self.report.add("inlined frames (only the innermost function name is kept)", len(lines) - 1)
        f = p.functions
        for r in lines:
            fn = int(p.lines.function[r])
            if p.lines.line[r] or p.lines.column[r] or (fn >= 0 and f.filename[fn]):
                self.report.add("source file and line of symbolized frames")
                break
        fn = int(p.lines.function[lines[0]])
        if fn >= 0 and (f.start_line[fn] or f.system_name[fn] not in (0, f.name[fn])):
            self.report.add("system name and start line of functions")
        if fn >= 0 and p.functions.name[fn]:
            e.string_field(3, p.strings[p.functions.name[fn]])

    def frames(self, node: int) -> list[bytes]:
        return [self.location(loc) for loc in self.p.callsites.path(node)]

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

    def counts_weights(self) -> tuple[list[int], list[int]]:
        """Count and weight of every sample; reports columns that are not kept."""
        values = self.p.samples.values
        n = len(self.p.samples)
        counts = values[:, self.count_col].tolist() if self.count_col is not None else [1] * n
        weights = values[:, self.weight_col].tolist() if self.weight_col is not None else [1] * n
        for i, vt in enumerate(self.p.sample_types):
            if i in (self.count_col, self.weight_col):
                continue
            col = values[:, i]
            if not self.heap and vt.unit == "nanoseconds" and self.count_col is not None:
                differ = int((col != values[:, self.count_col] * (self.period_ms * MS)).sum())
            else:
                differ = int((col != 0).sum())
            if differ:
                self.report.add(f"values of sample type {vt}", differ)
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
