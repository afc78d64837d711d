"""The top-level framing of a trace: a run of ``0A len TracePacket`` records.

A trace is read in chunks of a few MB, so a multi-GB file never sits in
memory: each chunk is split into packet spans (payload start/end offsets into
the chunk's buffer) and handed on; an incomplete record at the end of a chunk
is carried into the next one. Other top-level records are skipped, as trace
processor does (their count is returned). ``compressed_packets`` bundles are
inflated here too, with a cap on the total inflated size.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from polyprof.errors import DecompressionLimitError, MalformedInputError
from polyprof.formats.limits import LIMITS, Limits

__all__ = ["CHUNK_SIZE", "Chunk", "MAX_PACKET", "chunks", "frame_all", "inflate_bundle"]

CHUNK_SIZE = 1 << 20
#: A packet larger than this is taken for corruption (real packets stay far below).
MAX_PACKET = 256 << 20


@dataclass
class Chunk:
    """Packets ``buf[starts[i]:ends[i]]``; ``base`` is the stream offset of ``buf[0]``."""

    buf: bytes
    starts: np.ndarray
    ends: np.ndarray
    base: int
    skipped_records: int = 0


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a varint at ``pos``; (-1, pos) if it runs past ``end``."""
    value = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise MalformedInputError("over-long varint in the packet framing", offset=pos)
    return -1, pos


def _frame(buf: bytes, pos: int, end: int, starts: list[int], ends: list[int],
           base: int) -> tuple[int, int, int]:
    """Frame the complete records in ``buf[pos:end]``.

    Returns (where framing stopped, bytes the incomplete record needs in total
    or 0 if unknown, count of skipped non-packet records).
    """
    skipped = 0
    add_start, add_end = starts.append, ends.append
    while pos < end:
        tag = buf[pos]
        if tag == 0x0A:
            p = pos + 1
            if p < end and buf[p] < 0x80:
                length = buf[p]
                p += 1
            else:
                length, p = _varint(buf, p, end)
                if length < 0:
                    return pos, 0, skipped
            if length > MAX_PACKET:
                raise MalformedInputError(f"packet length {length} is implausibly large (corrupt trace?)",
                                          offset=base + pos)
            if p + length > end:
                return pos, p + length - pos, skipped
            add_start(p)
            pos = p + length
            add_end(pos)
            continue
        new_pos, need = _skip_record(buf, pos, end, base)
        if new_pos < 0:
            return pos, need, skipped
        pos = new_pos
        skipped += 1
    return pos, 0, skipped


def _skip_record(buf: bytes, pos: int, end: int, base: int) -> tuple[int, int]:
    """Skip one non-packet top-level record; (-1, need) when incomplete."""
    key, p = _varint(buf, pos, end)
    if key < 0:
        return -1, 0
    wire, field = key & 7, key >> 3
    if field == 0 or wire in (3, 4, 6, 7):
        raise MalformedInputError(f"invalid top-level record (field {field}, wire type {wire}); "
                                  "not a Perfetto trace or corrupt", offset=base + pos)
    if wire == 0:
        value, q = _varint(buf, p, end)
        return (q, 0) if value >= 0 else (-1, 0)
    if wire == 1 or wire == 5:
        q = p + (8 if wire == 1 else 4)
        return (q, 0) if q <= end else (-1, q - pos)
    length, q = _varint(buf, p, end)
    if length < 0:
        return -1, 0
    if length > MAX_PACKET:
        raise MalformedInputError(f"record length {length} is implausibly large (corrupt trace?)",
                                  offset=base + pos)
    return (q + length, 0) if q + length <= end else (-1, q + length - pos)


def frame_all(buf: bytes, base: int = 0) -> Chunk:
    """Frame a whole in-memory buffer (a decompressed bundle); it must end on a record boundary."""
    starts: list[int] = []
    ends: list[int] = []
    stop, _, skipped = _frame(buf, 0, len(buf), starts, ends, base)
    if stop != len(buf):
        raise MalformedInputError("truncated packet (the data ends inside a record)", offset=base + stop)
    return Chunk(buf, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), base, skipped)


def chunks(fh: BinaryIO, chunk_size: int = CHUNK_SIZE) -> Iterator[Chunk]:
    """Stream ``fh`` as chunks of whole packets."""
    pending = b""
    base = 0
    want = chunk_size
    while True:
        data = fh.read(want)
        eof = not data
        buf = pending + data if pending else data
        starts: list[int] = []
        ends: list[int] = []
        stop, need, skipped = _frame(buf, 0, len(buf), starts, ends, base)
        if starts or skipped:
            yield Chunk(buf, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), base, skipped)
        if eof:
            if stop != len(buf):
                raise MalformedInputError("truncated packet (the trace ends inside a record)",
                                          offset=base + stop)
            return
        pending = buf[stop:]
        base += stop
        want = max(chunk_size, need - len(pending))


def inflate_bundle(data: bytes, budget: int, limits: Limits = LIMITS) -> bytes:
    """Inflate a ``compressed_packets`` bundle (zlib or gzip header), at most ``budget``
    bytes and within the inflation ratio limit, checked after every MiB of output."""
    d = zlib.decompressobj(wbits=47)  # 32 + 15: detect a zlib or gzip header
    out = []
    produced = 0
    pending = data
    while True:
        try:
            part = d.decompress(pending, 1 << 20)
        except zlib.error as exc:
            raise MalformedInputError(f"corrupt compressed_packets bundle ({exc})") from None
        pending = d.unconsumed_tail
        produced += len(part)
        out.append(part)
        try:
            limits.check_inflation(produced, len(data) - len(pending), budget)
        except DecompressionLimitError as exc:
            raise DecompressionLimitError(f"compressed_packets bundle: {exc.message}") from None
        if d.eof or not part:
            break
    if not d.eof:
        raise MalformedInputError("truncated compressed_packets bundle")
    return b"".join(out)
