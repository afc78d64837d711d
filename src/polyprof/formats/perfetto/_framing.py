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
from polyprof.wire import vector as V

__all__ = ["CHUNK_SIZE", "Chunk", "MAX_PACKET", "chunks", "frame_all", "inflate_bundle"]

#: Bytes of trace decoded at a time. A chunk's decode temporaries are about 15x its size (per-packet
#: field tables, per-sample columns) and sit beside the sample batches kept: 4 MB chunks put ~60 MB
#: of them on the peak of a 230 MB traced_perf read, 2 MB ~30 (no slower: CPU 1.1-1.3 s either way).
CHUNK_SIZE = 2 << 20
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


def _frame(buf: bytes, pos: int, end: int, base: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """Frame the complete records in ``buf[pos:end]``.

    Returns (packet starts, packet ends, where framing stopped, bytes the
    incomplete record needs in total or 0 if unknown, count of skipped
    non-packet records). Runs of packets are framed all at once
    (:func:`polyprof.wire.vector.tagged_records`); anything else -- another
    record, a packet cut by the end, a corrupt length -- is handled one
    record at a time.
    """
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    skipped = 0
    while pos < end:
        run_starts, run_ends, stop = V.tagged_records(arr, pos, end, MAX_PACKET)
        if run_starts.size:
            starts.append(run_starts)
            ends.append(run_ends)
            pos = stop
            continue
        if buf[pos] == 0x0A:
            new_pos, need = _one_packet(buf, pos, end, base, starts, ends)
        else:
            new_pos, need = _skip_record(buf, pos, end, base)
            skipped += new_pos >= 0
        if new_pos < 0:
            return _cat(starts), _cat(ends), pos, need, skipped
        pos = new_pos
    return _cat(starts), _cat(ends), pos, 0, skipped


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _one_packet(buf: bytes, pos: int, end: int, base: int, starts: list[np.ndarray],
                ends: list[np.ndarray]) -> tuple[int, int]:
    """Frame the packet at ``pos`` (added to starts/ends); (-1, need) when incomplete."""
    length, p = _varint(buf, pos + 1, end)
    if length < 0:
        return -1, 0
    if length > MAX_PACKET:
        raise MalformedInputError(f"packet length {length} is implausibly large (corrupt trace?)",
                                  offset=base + pos)
    if p + length > end:
        return -1, p + length - pos
    starts.append(np.array([p], dtype=np.int64))
    ends.append(np.array([p + length], dtype=np.int64))
    return p + length, 0


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
    starts, ends, stop, _, skipped = _frame(buf, 0, len(buf), base)
    if stop != len(buf):
        raise MalformedInputError("truncated packet (the data ends inside a record)", offset=base + stop)
    return Chunk(buf, starts, ends, base, skipped)


def chunks(fh: BinaryIO, chunk_size: int = CHUNK_SIZE) -> Iterator[Chunk]:
    """Stream ``fh`` as chunks of whole packets."""
    pending = b""
    base = 0
    want = chunk_size
    while True:
        data = fh.read(want)
        eof = not data
        buf = pending + data if pending else data
        starts, ends, stop, need, skipped = _frame(buf, 0, len(buf), base)
        if starts.size or skipped:
            yield Chunk(buf, starts, ends, base, skipped)
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
