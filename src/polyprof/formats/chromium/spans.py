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
"""

from __future__ import annotations

import numpy as np

from polyprof.errors import MalformedInputError
from polyprof.formats.chromium.shape import CALLSTACK, UMA
from polyprof.wire import vector as V

__all__ = ["Entries", "call_stack_spans", "entries_in", "joined"]

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


def call_stack_spans(kind: str, buf: np.ndarray) -> list[Span | None]:
    """The span of the CallStackProfile of every SampledProfile in ``buf`` (a message of ``kind``),
    in upb's order (for a CallStackProfile: itself); None where it is absent or occurs more
    than once (protobuf merges the occurrences)."""
    whole = (0, buf.size)
    if kind == CALLSTACK:
        return [whole]
    sampled: list[Span] = [whole]
    if kind == UMA:
        got = _len_fields(buf, whole, _SAMPLED_IN_LOG)
        if got is None:
            return []
        sampled = list(zip(got[0].tolist(), got[1].tolist()))
    out: list[Span | None] = []
    for span in sampled:
        got = _len_fields(buf, span, _CSP_IN_SAMPLED)
        out.append((int(got[0][0]), int(got[1][0])) if got is not None and got[0].size == 1 else None)
    return out


def entries_in(buf: np.ndarray, span: Span | None, stacks: int, samples: int) -> tuple[Entries, Entries] | None:
    """(stack table, stack samples) of the CallStackProfile at ``span``, checked against the
    counts upb found; None when they cannot be found in the input."""
    f = _fields(buf, span) if span is not None else None
    if f is None:
        return None
    out = []
    for number, expected in ((_STACK, stacks), (_STACK_SAMPLE, samples)):
        start, end = _spans_of(f, number)
        if start.size != expected:
            return None
        out.append((buf, start, end))
    return out[0], out[1]
