"""The flat records (File, Thread, MetaInfo, LostSituation) decoded by the field walker.

They hold only scalars and strings, so the fields the sample walk already
uses decode them without protobuf (whose import and schema build cost 30 to
60 ms of a small file's read). The result reads like upb's message:
attributes and ``HasField``, with protobuf's rules: the last occurrence of
a scalar or string wins, repeated strings keep wire order, uint32 keeps the
low 32 bits, a field of another wire type than declared is skipped (upb
keeps it as an unknown field). Bytes the walker refuses are left to upb by
the caller, which then reads as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polyprof.wire import vector as V

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


def decode(data: bytes, f: V.Fields, n: int, spec: dict[str, tuple[int, str]]) -> list[Flat]:
    """Every one of ``n`` records, walked into ``f`` (items of merged payload spans, numbered from
    0), as a :class:`Flat`."""
    values: list[dict[str, Any]] = [{} for _ in range(n)]
    present: list[set[str]] = [set() for _ in range(n)]
    for name, (number, kind) in spec.items():
        if kind in ("bytes", "repeated"):
            sel = f.select(number, V.LEN)
            rows = zip(sel.msg.tolist(), sel.start.tolist(), (sel.start + sel.length).tolist())
        else:
            keep = np.flatnonzero((f.field == number) & (f.wire == V.VARINT))
            column = f.value[keep]
            if kind == "uint32":
                column = column & np.uint64(0xFFFFFFFF)
            rows = zip(f.msg[keep].tolist(), column.tolist(), column.tolist())
        for k in range(n):
            values[k][name] = [] if kind == "repeated" else _DEFAULTS[kind]
        for owner, a, b in rows:  # wire order: the last occurrence is written last
            if kind == "repeated":
                values[owner][name].append(data[a:b])
                continue
            values[owner][name] = data[a:b] if kind == "bytes" else (a != 0 if kind == "bool" else a)
            present[owner].add(name)
    return [Flat(v, p) for v, p in zip(values, present)]
