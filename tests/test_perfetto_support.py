"""Helpers for the Perfetto tests: traces built with the real schema (PyPI ``perfetto``).

Traces made here never go through our writer, so reader tests check our
reader against Perfetto's own message definitions. The module skips its
importers cleanly when the ``perfetto`` package is missing.
"""

from __future__ import annotations

import gzip
import io
import zlib

import pytest

import polyprof
from polyprof.formats.options import ReadOptions, WriteOptions

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                         reason="the PyPI 'perfetto' package (compiled Perfetto protos) is not installed")

CLEARED, NEEDS = 1, 2


class TraceMaker:
    """Builds a ``Trace`` packet by packet."""

    def __init__(self) -> None:
        self.trace = pb.Trace()

    def packet(self, seq: int | None = None, ts: int | None = None, flags: int = 0, **fields):  # noqa: ANN003, ANN201
        p = self.trace.packet.add()
        if seq is not None:
            p.trusted_packet_sequence_id = seq
        if ts is not None:
            p.timestamp = ts
        if flags:
            p.sequence_flags = flags
        for name, value in fields.items():
            setattr(p, name, value)
        return p

    def clock_snapshot(self, **clocks: int) -> None:
        ids = {"realtime": 1, "monotonic": 3, "monotonic_coarse": 4, "monotonic_raw": 5, "boottime": 6}
        cs = self.packet(seq=1).clock_snapshot
        for name, value in clocks.items():
            c = cs.clocks.add()
            c.clock_id = ids[name]
            c.timestamp = value

    def process(self, pid: int, name: str, threads: dict[int, str] | None = None) -> None:
        tree = self.packet(seq=1).process_tree
        p = tree.processes.add()
        p.pid = pid
        p.cmdline.append(name)
        for tid, tname in (threads or {}).items():
            t = tree.threads.add()
            t.tid, t.name, t.tgid = tid, tname, pid

    def bytes(self) -> bytes:
        return self.trace.SerializeToString()


def intern_stacks(data, stacks: dict[int, list[tuple[str, int]]], *, mapping_path: str = "/system/lib64/libc.so",
                  build_id: bytes = b"\x01\x02\x03\x04", offset: int = 0) -> None:
    """Intern ``stacks``: callstack iid -> [(function name, rel_pc), ...] root first, one mapping.

    ``offset`` shifts the name and frame iids, for a second call in the same generation.
    """
    parts = mapping_path.strip("/").split("/")
    for k, part in enumerate(parts, start=1):
        s = data.mapping_paths.add()
        s.iid, s.str = k, part.encode()
    b = data.build_ids.add()
    b.iid, b.str = 1, build_id
    m = data.mappings.add()
    m.iid, m.build_id, m.start, m.end = 1, 1, 0x7000, 0x9000
    m.path_string_ids.extend(range(1, len(parts) + 1))
    names: dict[str, int] = {}
    frames: dict[tuple[str, int], int] = {}
    for iid, frames_root_first in stacks.items():
        cs = data.callstacks.add()
        cs.iid = iid
        for name, pc in frames_root_first:
            if name not in names:
                names[name] = offset + len(names) + 1
                fn = data.function_names.add()
                fn.iid, fn.str = names[name], name.encode()
            if (name, pc) not in frames:
                frames[(name, pc)] = offset + len(frames) + 1
                fr = data.frames.add()
                fr.iid, fr.function_name_id, fr.mapping_id, fr.rel_pc = frames[(name, pc)], names[name], 1, pc
            cs.frame_ids.append(frames[(name, pc)])


def read(data: bytes, **options):  # noqa: ANN003, ANN201
    """All profiles of a trace given as bytes, with ReadOptions fields as keywords."""
    return polyprof.read_all(data, format="perfetto", options=ReadOptions(**options))


def write_bytes(profile) -> tuple[bytes, object]:  # noqa: ANN001
    from polyprof.formats.perfetto import write

    out = io.BytesIO()
    report = write(profile, out, WriteOptions())
    return out.getvalue(), report


def stack_names(p, i: int) -> list[str]:  # noqa: ANN001
    """Function names of sample ``i`` of ``p``, root first (the outermost function of each frame)."""
    names = []
    for loc in reversed(p.stack_locations(i)):
        rows = p.locations.lines_of(loc)
        names.append(p.function_name(int(p.lines.function[rows[-1]])) if len(rows) else "")
    return names


def label(p, i: int, key: str):  # noqa: ANN001, ANN201
    for lb in p.labelsets[int(p.samples.labelset[i])]:
        if lb.key == key:
            return lb.str if lb.str is not None else lb.num
    return None


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def zlib_bundle(data: bytes) -> bytes:
    return zlib.compress(data)
