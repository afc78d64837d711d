"""A large pprof file's samples, found in place, and the rest of the message without them.

upb copies every ``sample`` record of a parsed Profile into its arena (about
twice the file's size in memory for a file of mostly samples), and the
reader would then join those copies again for the vectorized decoders. With
the compiled field walker loaded (a large input), one walk over the
top-level message finds every sample as a span of the file's own bytes;
upb then parses only what is left (tables, strings: a small part), and the
samples are decoded straight from the file.

Whenever this cannot be done exactly (a walk that stops on malformed bytes,
a sample record not in its shortest form), it declines and the reader
parses the whole file with upb as before, so errors keep their wording and
byte offsets.
"""

from __future__ import annotations

import numpy as np

from polyprof.wire import vector as V

__all__ = ["split_samples"]

_SAMPLE_TAG = 0x12  # field 2, LEN


def split_samples(data: bytes | memoryview) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """(the message without its sample records, payload starts, payload ends of the samples in
    ``data``), or None when the compiled walker is not loaded or declines."""
    fast = V.compiled_kernels()
    if fast is None:
        return None
    buf = V.as_buffer(data)
    walked = fast.walk_fields(buf, np.zeros(1, np.int64), np.full(1, buf.size, np.int64))
    if walked is None:
        return None
    _, field, wire, _, start, length = walked
    is_sample = (field == 2) & (wire == V.LEN)
    starts, lengths = start[is_sample], length[is_sample]
    del walked, field, wire, start, length, is_sample
    ends = starts + lengths
    # A record is its tag byte, the payload's length as a varint, the payload: shortest
    # varints only (checked: the tag must then sit right there), so it starts here.
    heads = starts - 1 - _varint_size(lengths)
    if heads.size and (int(heads[0]) < 0 or (buf[heads] != _SAMPLE_TAG).any()):
        return None
    gap_starts = np.concatenate([[0], ends])
    gap_lengths = np.concatenate([heads, [buf.size]]) - gap_starts
    rest = V.gather_spans(buf, gap_starts, gap_lengths).tobytes()
    return rest, starts, ends


def _varint_size(values: np.ndarray) -> np.ndarray:
    size = np.ones(values.size, dtype=np.int64)
    for k in range(1, 10):
        size += values >= (1 << (7 * k))
    return size
