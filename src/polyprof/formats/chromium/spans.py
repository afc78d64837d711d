"""Where each CallStackProfile's stacks and samples lie in the input, for reading them as columns.

upb parses the profile with the stack table and samples kept as bytes
(``schema.messages(lazy=True)``); handing those to the field walker meant a
Python bytes object per stack and per sample and a joined copy of them all
(0.45 s of a 137 MB profile's 1.8 s read). Instead the field walker finds the
same entries in the input itself: the top-level fields of the container,
of each SampledProfile and of each CallStackProfile, whose ``stack`` (8) and
``stack_sample`` (9) fields are the entries upb would list, in the same
order. A profile whose entries cannot be found this way (a CallStackProfile
that occurs twice in its SampledProfile and so merges, or bytes the walker
does not take) is read from upb's list, as before.

Then upb need not see the entries at all: :func:`without_entries` gives the input with every
found profile's stack and sample entries left out (the lengths of the messages around them
rewritten), and upb parses the few kB left instead of copying hundreds of MB of entries into
its arena (a 215 MB profile: 0.2 s and 260 MB of memory touched).
"""

from __future__ import annotations

import mmap

import numpy as np

from polyprof.errors import MalformedInputError
from polyprof.formats.chromium.shape import CALLSTACK, UMA
from polyprof.wire import vector as V
from polyprof.wire.encode import varint

__all__ = ["Entries", "call_stack_spans", "entries_in", "joined", "without_entries"]

#: (buffer, start of each entry, end of each entry)
Entries = tuple[np.ndarray, np.ndarray, np.ndarray]
Span = tuple[int, int]
_SAMPLED_IN_LOG, _CSP_IN_SAMPLED, _STACK, _STACK_SAMPLE = 11, 9, 8, 9


def joined(entries: list[bytes]) -> Entries:
    """Entries given as bytes objects, end to end in one buffer."""
    lengths = np.fromiter(map(len, entries), dtype=np.int64, count=len(entries))
    ends = np.cumsum(lengths)
    return V.as_buffer(b"".join(entries)), ends - lengths, ends


def _fields(buf: np.ndarray, span: Span) -> V.Fields | None:
    """The top-level fields of the message at ``span``; None when the walker does not take its
    bytes (upb did: the caller falls back to upb's lists)."""
    try:
        return V.walk_fields(buf, np.array([span[0]], dtype=np.int64), np.array([span[1]], dtype=np.int64))
    except MalformedInputError:
        return None


def _len_fields(buf: np.ndarray, span: Span, number: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(starts, ends) of the LEN fields ``number`` of the message at ``span`` (None: see _fields)."""
    f = _fields(buf, span)
    return None if f is None else _spans_of(f, number)


def _spans_of(f: V.Fields, number: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the LEN fields ``number`` of walked fields ``f``: only those two columns
    (:meth:`polyprof.wire.vector.Fields.select` gathers all six: 1.7M fields of a 215 MB profile,
    55 MB less memory touched)."""
    idx = np.flatnonzero(f.field == number)
    idx = idx[f.wire[idx] == V.LEN]
    start = f.start[idx]
    return start, start + f.length[idx]


def _sampled_spans(kind: str, buf: np.ndarray) -> list[Span]:
    """The span of every SampledProfile in ``buf`` (a message of ``kind``; none for a
    CallStackProfile)."""
    whole = (0, buf.size)
    if kind == CALLSTACK:
        return []
    if kind != UMA:
        return [whole]
    got = _len_fields(buf, whole, _SAMPLED_IN_LOG)
    return [] if got is None else list(zip(got[0].tolist(), got[1].tolist()))


def call_stack_spans(kind: str, buf: np.ndarray) -> list[Span | None]:
    """The span of the CallStackProfile of every SampledProfile in ``buf`` (a message of ``kind``),
    in upb's order (for a CallStackProfile: itself); None where it is absent or occurs more
    than once (protobuf merges the occurrences)."""
    if kind == CALLSTACK:
        return [(0, buf.size)]
    out: list[Span | None] = []
    for span in _sampled_spans(kind, buf):
        got = _len_fields(buf, span, _CSP_IN_SAMPLED)
        out.append((int(got[0][0]), int(got[1][0])) if got is not None and got[0].size == 1 else None)
    return out


def entries_in(buf: np.ndarray, span: Span | None, stacks: int | None,
               samples: int | None) -> tuple[Entries, Entries] | None:
    """(stack table, stack samples) of the CallStackProfile at ``span``, checked against the
    counts upb found (None: not checked); None when they cannot be found in the input."""
    f = _fields(buf, span) if span is not None else None
    if f is None:
        return None
    out = []
    for number, expected in ((_STACK, stacks), (_STACK_SAMPLE, samples)):
        start, end = _spans_of(f, number)
        if expected is not None and start.size != expected:
            return None
        out.append((buf, start, end))
    return out[0], out[1]


#: Cut-out pieces of one profile beyond which its entries are left for upb (they are in two
#: runs, stacks then samples, as every writer lays them out).
_MAX_PIECES = 64


def without_entries(kind: str, data: "bytes | mmap.mmap", buf: np.ndarray, spans: list[Span | None],
                    found: list["tuple[Entries, Entries] | None"]) -> tuple[bytes, list[bool]] | None:
    """``data`` (a message of ``kind``; ``buf`` its bytes) with the stack and sample entries
    ``found`` of each CallStackProfile at ``spans`` left out, for upb to parse the rest, and
    whether each profile's were; None when none could be (then upb parses ``data``). The
    entries are the walker's, so upb would have taken them as the same bytes fields."""
    cut: list[bool] = []
    shrunk: list[bytes | None] = []
    for span, entries in zip(spans, found):
        body = _rest_of(data, buf, span, entries) if span is not None and entries is not None else None
        cut.append(body is not None)
        shrunk.append(body)
    if not any(cut):
        return None
    if kind == CALLSTACK:
        return shrunk[0] or b"", cut
    sampled = []  # each SampledProfile with its CallStackProfile's record rewritten
    for outer, span, body in zip(_sampled_spans(kind, buf), spans, shrunk):
        edit = None if body is None or span is None else _record_edit(buf, span, _CSP_IN_SAMPLED, body)
        if body is not None and edit is None:
            return None
        sampled.append(_edited(data, outer, [edit] if edit else []))
    if kind != UMA:
        return sampled[0], cut
    edits = []
    for outer, body in zip(_sampled_spans(kind, buf), sampled):
        edit = _record_edit(buf, outer, _SAMPLED_IN_LOG, body)
        if edit is None:
            return None
        edits.append(edit)
    return _edited(data, (0, len(data)), edits), cut


def _rest_of(data: "bytes | mmap.mmap", buf: np.ndarray, span: Span, entries: "tuple[Entries, Entries]") -> bytes | None:
    """The CallStackProfile at ``span`` without its ``entries`` (None: they are in too many
    pieces, or a record is not where its payload says)."""
    starts = [entries[0][1], entries[1][1]]
    ends = [entries[0][2], entries[1][2]]
    tags = [np.full(starts[0].size, _STACK << 3 | V.LEN), np.full(starts[1].size, _STACK_SAMPLE << 3 | V.LEN)]
    start, end, tag = (np.concatenate(c) for c in (starts, ends, tags))
    if not start.size:
        return None
    order = np.argsort(start, kind="stable")
    start, end, tag = start[order], end[order], tag[order]
    head = start - 1 - _varint_size(end - start)  # where each record's one-byte tag is
    if int(head.min()) < span[0] or (buf[head] != tag).any():
        return None  # (a longer tag or length encoding: the byte there is not the tag)
    keep_lo = np.concatenate([[span[0]], end])
    keep_hi = np.concatenate([head, [span[1]]])
    piece = keep_hi > keep_lo
    if int(piece.sum()) > _MAX_PIECES:
        return None
    view = memoryview(data)
    return b"".join(view[a:b] for a, b in zip(keep_lo[piece].tolist(), keep_hi[piece].tolist()))


def _varint_size(n: np.ndarray) -> np.ndarray:
    """Bytes of the shortest varint of each non-negative ``n``."""
    size = np.ones(n.size, dtype=np.int64)
    for bits in range(7, 64, 7):
        size += n >= (1 << bits)
    return size


def _record_edit(buf: np.ndarray, payload: Span, number: int, body: bytes) -> tuple[int, int, bytes] | None:
    """The LEN record ``number`` whose payload is at ``payload`` as (start, end, the record with
    ``body`` as its payload); None when its tag and length are not a one-byte tag and a
    shortest varint just before the payload."""
    size = int(_varint_size(np.array([payload[1] - payload[0]]))[0])
    head = payload[0] - 1 - size
    if head < 0 or int(buf[head]) != (number << 3 | V.LEN):
        return None
    return head, payload[1], bytes([number << 3 | V.LEN]) + varint(len(body)) + body


def _edited(data: "bytes | mmap.mmap", span: Span, edits: list[tuple[int, int, bytes]]) -> bytes:
    """``data[span]`` with each ``(start, end, replacement)`` of ``edits`` (in order, disjoint)
    replaced."""
    view = memoryview(data)
    parts: list[bytes | memoryview] = []
    at = span[0]
    for lo, hi, new in edits:
        parts += [view[at:lo], new]
        at = hi
    parts.append(view[at:span[1]])
    return b"".join(parts)
