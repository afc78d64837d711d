"""Varint-only entry messages (interned frames and callstacks, heap samples) decoded in a few
numpy passes, without the compiled kernels.

``wire.vector.varint_fields`` decodes such messages by building a shift for every
byte and summing them per varint (``reduceat``); here each varint is read from
its first byte and only the varints still running take another byte (frame ids
and counts are one to three bytes), and the message of each field comes from a
binary search of the message starts among the varint starts, not from a
running count over every byte. Same answer, same refusals: a message that is
not an even run of (one-byte tag of a VARINT field, value) varints, or with a
varint over ten bytes, makes the whole batch go to the field walker, which
also names any damage.
"""

from __future__ import annotations

import numpy as np

from polyprof.wire import vector as V

__all__ = ["varint_entries", "walk_varint_entries"]

_SHIFTS = [np.uint64(7 * k) for k in range(10)]


def walk_varint_entries(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> V.Fields:
    """``V.walk_varint_fields(buf, starts, ends)`` (the same :class:`~polyprof.wire.vector.Fields`),
    by :func:`varint_entries` when the compiled kernels are not in use (the compiled walker
    is quicker), else by the field walker."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if not V.compiled() and starts.size:
        fast = varint_entries(buf, starts, ends - starts)
        if fast is not None:
            return fast
    return V.walk_fields(buf, starts, ends)  # what walk_varint_fields falls back to


def varint_entries(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> V.Fields | None:
    """The fields of the messages ``buf[starts[i]:starts[i]+lengths[i]]`` (in order, not
    overlapping) when every one is varint fields only with one-byte tags: what
    ``V.varint_fields`` gives for their bytes end to end, or None where it declines."""
    lengths = np.asarray(lengths, dtype=np.int64)
    b = V.gather_spans(buf, starts, lengths)
    if not b.size:
        return None
    last = np.flatnonzero(b < 0x80)  # the final byte of every varint
    if not last.size or int(last[-1]) != b.size - 1:
        return None
    first = np.empty_like(last)
    first[0], first[1:] = 0, last[:-1] + 1
    values = _values(b, first, last)
    if values is None:
        return None
    pairs = _pairs(first, np.cumsum(lengths), lengths)
    if pairs is None:
        return None
    tag, value = values[0::2], values[1::2]
    if (last[0::2] != first[0::2]).any() or (tag & np.uint64(7)).any() or (tag < 8).any():
        return None  # a tag of two bytes or more, a non-VARINT field, or field 0
    zeros = np.zeros(tag.size, dtype=np.int64)
    return V.Fields(pairs, (tag >> np.uint64(3)).astype(np.int64), zeros.astype(np.int8), value, zeros, zeros)


def _values(b: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray | None:
    """The value of each varint ``b[first[i]:last[i]+1]`` (None if one is over ten bytes);
    bits past the 64th are dropped, as the summing decoder drops them."""
    values = (b[first] & 0x7F).astype(np.uint64)
    live = np.flatnonzero(last > first)
    for k in range(1, 10):
        if not live.size:
            return values
        values[live] |= (b[first[live] + k] & 0x7F).astype(np.uint64) << _SHIFTS[k]
        live = live[last[live] > first[live] + k]
    return None if live.size else values


def _pairs(first: np.ndarray, ends: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """The message of each (tag, value) pair of varints starting at ``first`` in messages
    ending at ``ends``; None when a message starts inside a varint or holds an odd count."""
    full = np.flatnonzero(lengths > 0)  # empty messages hold no field
    msg_start = (ends - lengths)[full]
    at = np.searchsorted(first, msg_start)  # every message start must be a varint start
    if (at >= first.size).any() or (first[np.minimum(at, first.size - 1)] != msg_start).any():
        return None
    count = np.diff(np.append(at, first.size))
    if (count % 2).any():
        return None  # an odd number of varints: not (tag, value) pairs
    return np.repeat(full, count // 2)
