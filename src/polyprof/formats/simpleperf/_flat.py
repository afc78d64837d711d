"""The flat records (File, Thread, MetaInfo, LostSituation) decoded by the field walker.

They hold only scalars and strings, so a plain walk of their fields
decodes them without protobuf (whose import and schema build cost 30 to
60 ms of a small file's read); beyond :data:`WALK_MAX` bytes of them upb
parses them (a Python step per field would cost more). The result reads like upb's message:
attributes and ``HasField``, with protobuf's rules: the last occurrence of
a scalar or string wins, repeated strings keep wire order, uint32 keeps the
low 32 bits, a field of another wire type than declared is skipped (upb
keeps it as an unknown field). Bytes this walk refuses (damage, groups,
varints past 64 bits) are left to upb by the caller, which then reads (or
names the problem) as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from polyprof.wire.scan import read_varint

__all__ = ["FILE", "LOST", "META", "THREAD", "Flat", "decode"]

#: field name -> (number, type) of each record kind (spec/wire-formats.md 3.2, as _schema builds them)
FILE = {"id": (1, "uint32"), "path": (2, "bytes"), "symbol": (3, "repeated"), "mangled_symbol": (4, "repeated")}
THREAD = {"thread_id": (1, "uint32"), "process_id": (2, "uint32"), "thread_name": (3, "bytes")}
META = {"event_type": (1, "repeated"), "app_package_name": (2, "bytes"), "app_type": (3, "bytes"),
        "android_sdk_version": (4, "bytes"), "android_build_type": (5, "bytes"), "trace_offcpu": (6, "bool")}
LOST = {"sample_count": (1, "uint64"), "lost_count": (2, "uint64")}
_DEFAULTS = {"uint32": 0, "uint64": 0, "bool": False, "bytes": b""}


class Flat:
    """One decoded record: its fields as attributes (absent: the type's default), and
    ``HasField`` for the singular ones."""

    def __init__(self, values: dict[str, Any], present: set[str]) -> None:
        self.__dict__.update(values)
        self._present = present

    def HasField(self, name: str) -> bool:  # noqa: N802 - upb's spelling: the reader reads both
        return name in self._present


#: Flat payload bytes up to which they are walked here; beyond, upb's parse (its import and schema
#: build paid once) is quicker than a Python step per field (a File of 20k symbols).
WALK_MAX = 256 << 10


class _Refused(Exception):
    """Bytes this walk does not take (the caller lets upb parse them)."""


def _varint(data: bytes, i: int, end: int) -> tuple[int, int]:
    try:
        value, after = read_varint(data, i)
    except IndexError:
        raise _Refused from None
    if after > end or value >> 64:
        raise _Refused
    return value, after


def _fields(data: bytes, i: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(number, wire type, value or start, end) of every field in ``data[i:end]``."""
    while i < end:
        tag, i = _varint(data, i, end)
        number, wire = tag >> 3, tag & 7
        if not 0 < number < 1 << 29:
            raise _Refused
        if wire == 0:
            value, i = _varint(data, i, end)
            yield number, wire, value, i
            continue
        if wire == 2:
            length, i = _varint(data, i, end)
            start, i = i, i + length
        elif wire in (1, 5):
            start, i = i, i + (8 if wire == 1 else 4)
        else:
            raise _Refused
        if i > end:
            raise _Refused
        yield number, wire, start, i


def decode(data: bytes, spans: list[list[tuple[int, int]]], spec: dict[str, tuple[int, str]]) -> list[Flat] | None:
    """Every record, given as its payload spans (merged in wire order), as a :class:`Flat`; None
    when some bytes are refused (the caller lets upb parse them and name the problem)."""
    by_number = {number: (name, kind) for name, (number, kind) in spec.items()}
    out = []
    try:
        for record in spans:
            values: dict[str, Any] = {name: [] if kind == "repeated" else _DEFAULTS[kind]
                                      for name, (_, kind) in spec.items()}
            present: set[str] = set()
            for a, b in record:
                for number, wire, x, y in _fields(data, a, b):
                    name, kind = by_number.get(number, ("", ""))
                    if not name or (wire == 2) != (kind in ("bytes", "repeated")) or wire not in (0, 2):
                        continue  # unknown, or another wire type than declared: upb skips it
                    if kind == "repeated":
                        values[name].append(data[x:y])
                        continue
                    values[name] = data[x:y] if kind == "bytes" else (
                        x != 0 if kind == "bool" else x & 0xFFFFFFFF if kind == "uint32" else x)
                    present.add(name)
            out.append(Flat(values, present))
    except _Refused:
        return None
    return out
