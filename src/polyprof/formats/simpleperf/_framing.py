"""The report-sample file framing: magic, version, LE32 record sizes, zero terminator."""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np

from polyprof.errors import MalformedInputError, UnsupportedFeatureError
from polyprof.formats.simpleperf._schema import MAGIC, VERSION
from polyprof.wire import vector as V

__all__ = ["HEADER_SIZE", "check_header", "frame", "records", "trailing"]

HEADER_SIZE = len(MAGIC) + 2
_U32 = struct.Struct("<I")
#: The tags a Record body starts with (its payload fields 1 to 6, each a message).
RECORD_TAGS = bytes((k << 3) | 2 for k in range(1, 7))


def records(data: bytes, warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(body start, body end) of every record; check the header and the end marker.

    A file that ends before its zero terminator, or whose record size runs past
    the end, is truncated: that is an error, not a warning. Bytes after the
    terminator are reported in ``warnings``. Runs of records are framed all at
    once (:func:`polyprof.wire.vector.le32_records`), the rest one by one.
    """
    check_header(data)
    buf = np.frombuffer(data, dtype=np.uint8)
    pos = HEADER_SIZE
    end = len(data)
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    index = 0
    while True:
        run_starts, run_ends, stop = V.le32_records(buf, pos, end, RECORD_TAGS)
        if run_starts.size:
            starts.append(run_starts)
            ends.append(run_ends)
            index += run_starts.size
            pos = stop
        if pos + 4 > end:
            raise MalformedInputError(
                f"truncated file: it ends after {index} record(s) without the zero end marker", offset=pos)
        (size,) = _U32.unpack_from(data, pos)
        if size == 0:
            break
        if size > end - pos - 4:
            raise MalformedInputError(
                f"truncated file: record {index + 1} claims {size} bytes but only {end - pos - 4} remain",
                offset=pos)
        starts.append(np.array([pos + 4], dtype=np.int64))
        ends.append(np.array([pos + 4 + size], dtype=np.int64))
        pos += 4 + size
        index += 1
    trailing(end - pos - 4, warnings)
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)  # noqa: E731
    return cat(starts), cat(ends)


def check_header(data: bytes) -> None:
    """Raise unless ``data`` starts with the magic and the version this reader knows."""
    if data[:len(MAGIC)] != MAGIC:  # bytes or a mapped file
        raise MalformedInputError("not a simpleperf report-sample file (no SIMPLEPERF magic)", offset=0)
    if len(data) < HEADER_SIZE:
        raise MalformedInputError("truncated file: it ends inside the version number", offset=len(MAGIC))
    version = int.from_bytes(data[len(MAGIC):HEADER_SIZE], "little")
    if version != VERSION:
        raise UnsupportedFeatureError(f"report-sample format version {version} (only version {VERSION} is known)")


def trailing(rest: int, warnings: list[str]) -> None:
    """Report the ``rest`` bytes after the zero end marker."""
    if rest:
        warnings.append(f"{rest} byte(s) after the zero end marker were ignored")


def frame(bodies: Iterable[bytes]) -> bytes:
    """A whole file from serialized records."""
    parts = [MAGIC, VERSION.to_bytes(2, "little")]
    for body in bodies:
        parts.append(_U32.pack(len(body)))
        parts.append(body)
    parts.append(_U32.pack(0))
    return b"".join(parts)
