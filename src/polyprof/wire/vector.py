"""Vectorized protobuf decode kernels (numpy).

Python loops over hundreds of thousands of small messages cost seconds, so the
hot paths decode *many messages at once*: :func:`walk_fields` steps through
the fields of N messages in lockstep (one numpy step per field position, not
per message), and :func:`packed_varints` decodes every packed varint of many
spans in one pass. These are the kernels a compiled decoder may later
replace; readers only see the :class:`Fields` result.

All kernels check bounds and raise :class:`polyprof.errors.MalformedInputError`
with the byte offset of the first problem; they never read past a span.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import NoReturn

import numpy as np

from polyprof.errors import MalformedInputError

__all__ = ["Fields", "as_buffer", "gather_spans", "packed_varints", "ranges", "read_varints", "repeated_varints",
           "scalar_column", "span_column", "walk_fields", "as_int64"]

_SHIFTS = (7 * np.arange(10)).astype(np.uint64)
_STEPS = np.arange(10, dtype=np.int64)

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def as_buffer(data: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _fail(message: str, offset: int) -> NoReturn:
    raise MalformedInputError(message, offset=int(offset))


def read_varints(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each ``pos`` (not reaching ``limit``); return values and next positions."""
    n = pos.size
    vals = np.zeros(n, dtype=np.uint64)
    nxt = pos + 1
    if n == 0:
        return vals, nxt
    if np.any(pos >= limit):
        _fail("truncated varint", pos[np.argmax(pos >= limit)])
    first = buf[pos]
    multi = np.nonzero(first >= 0x80)[0]
    vals[:] = first
    if multi.size == 0:
        return vals, nxt
    p = pos[multi]
    lim = limit[multi]
    idx = p[:, None] + _STEPS
    inside = idx < lim[:, None]
    b = np.where(inside, buf[np.minimum(idx, buf.size - 1)], 0x80).astype(np.uint64)
    term = b < 0x80
    has_term = term.any(axis=1)
    length = term.argmax(axis=1)
    if not has_term.all():
        bad = np.argmin(has_term)
        _fail("truncated or over-long varint", p[bad])
    keep = _STEPS[None, :] <= length[:, None]
    parts = np.where(keep, (b & np.uint64(0x7F)) << _SHIFTS, np.uint64(0))
    vals[multi] = np.bitwise_or.reduce(parts, axis=1)
    nxt[multi] = p + length + 1
    return vals, nxt


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions ``start .. start+length`` of every span, concatenated."""
    lengths = lengths.astype(np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64) - before, lengths) + np.arange(total, dtype=np.int64)


def gather_spans(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes of every span, concatenated in span order (spans must not overlap
    and must be in increasing order, as the fields of consecutive messages are)."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.uint8)
    if starts.size > 1 and (starts[1:] < starts[:-1] + lengths[:-1]).any():
        return buf[ranges(starts, lengths)]  # unordered spans: explicit positions
    # Ordered spans cut the buffer into gap, span, gap, span, ..., gap: a mask
    # of the span bytes is one repeat of an alternating pattern.
    n = starts.size
    runs = np.empty(2 * n + 1, dtype=np.int64)
    runs[0] = starts[0]
    runs[1:-1:2] = lengths
    runs[2:-1:2] = starts[1:] - (starts[:-1] + lengths[:-1])
    runs[-1] = buf.size - (starts[-1] + lengths[-1])
    pattern = np.zeros(2 * n + 1, dtype=bool)
    pattern[1::2] = True
    return buf[np.repeat(pattern, runs)]


def packed_varints(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the packed varints of every span; return (values, count per span).

    Values come back unsigned, in uint8 when every varint is one byte (saving
    memory on large inputs) and uint64 otherwise; use :func:`as_int64`.
    """
    lengths = lengths.astype(np.int64, copy=False)
    b = gather_spans(buf, starts, lengths)
    if b.size == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(starts.size, dtype=np.int64)
    term = b < 0x80
    ends = np.cumsum(lengths) - 1
    nonempty = lengths > 0
    if not term[ends[nonempty]].all():
        bad = np.flatnonzero(nonempty)[np.argmin(term[ends[nonempty]])]
        _fail("truncated packed varint", starts[bad] + lengths[bad] - 1)
    if term.all():  # every varint is one byte: the bytes are the values
        return b, lengths.copy()
    counts = np.zeros(starts.size, dtype=np.int64)
    offsets = ends[nonempty] - lengths[nonempty] + 1
    counts[nonempty] = np.add.reduceat(term.astype(np.uint8), offsets, dtype=np.int64)
    term_at = np.flatnonzero(term)
    group_start = np.empty(term_at.size, dtype=np.int64)
    group_start[0] = 0
    group_start[1:] = term_at[:-1] + 1
    lens = term_at - group_start + 1
    if lens.max() > 10:
        _fail("over-long varint", int(starts[0]))
    vals = (b[group_start] & 0x7F).astype(np.uint64)
    for k in range(1, int(lens.max())):  # one pass per byte position, over varints that long
        more = np.flatnonzero(lens > k)
        vals[more] |= (b[group_start[more] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return vals, counts


@dataclass
class Fields:
    """Every field of N messages, message-major, in wire order within a message.

    ``value`` holds VARINT/I64/I32 values (as uint64); LEN fields have
    ``start``/``length`` spans into the buffer instead.
    """

    msg: np.ndarray
    field: np.ndarray
    wire: np.ndarray
    value: np.ndarray
    start: np.ndarray
    length: np.ndarray
    _groups: tuple[np.ndarray, np.ndarray] | None = dc_field(default=None, repr=False, compare=False)

    def select(self, field: int, wire: int | None = None) -> "Fields":
        """The records of one field number (and wire type), in the same order."""
        if self._groups is None:  # group once by field number: each select is then a slice
            narrow = self.field.size and 0 <= int(self.field.min()) and int(self.field.max()) < 2**16
            order = np.argsort(self.field.astype(np.uint16) if narrow else self.field, kind="stable")  # radix
            keys = self.field[order]
            self._groups = (order, keys)
        order, keys = self._groups
        lo, hi = np.searchsorted(keys, [field, field + 1])
        idx = order[lo:hi]
        if wire is not None:
            idx = idx[self.wire[idx] == wire]
        return Fields(self.msg[idx], self.field[idx], self.wire[idx], self.value[idx],
                      self.start[idx], self.length[idx])

    def __len__(self) -> int:
        return self.msg.size


def _fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    raw = buf[pos[:, None] + np.arange(width)]
    dtype = "<u8" if width == 8 else "<u4"
    return np.ascontiguousarray(raw).view(dtype).reshape(-1).astype(np.uint64)


def walk_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Decode the top-level fields of every message ``buf[starts[i]:ends[i]]``."""
    starts = starts.astype(np.int64)
    ends = ends.astype(np.int64)
    msg = np.arange(starts.size, dtype=np.int64)
    pos = starts.copy()
    live = pos < ends
    msg, pos = msg[live], pos[live]
    out: list[tuple[np.ndarray, ...]] = []
    while msg.size:
        end = ends[msg]
        if (pos >= end).any():
            _fail("truncated field tag", pos[np.argmax(pos >= end)])
        first = buf[pos]
        if (first < 0x80).all():  # the usual case: field numbers below 16
            tag, pos = first.astype(np.uint64), pos + 1
        else:
            tag, pos = read_varints(buf, pos, end)
        wire = (tag & np.uint64(7)).astype(np.int8)
        field = (tag >> np.uint64(3)).astype(np.int64)
        value = np.zeros(msg.size, dtype=np.uint64)
        start = np.zeros(msg.size, dtype=np.int64)
        length = np.zeros(msg.size, dtype=np.int64)
        bad = ~np.isin(wire, (VARINT, I64, LEN, I32)) | (field == 0)
        if bad.any():
            _fail(f"invalid field tag (wire type {int(wire[np.argmax(bad)])})", pos[np.argmax(bad)])
        for wt, width in ((VARINT, 0), (LEN, 0), (I64, 8), (I32, 4)):
            sel = np.nonzero(wire == wt)[0]
            if not sel.size:
                continue
            p = pos[sel]
            if wt == VARINT:
                value[sel], pos[sel] = read_varints(buf, p, end[sel])
            elif wt == LEN:
                ln, p2 = read_varints(buf, p, end[sel])
                ln = ln.astype(np.int64)
                over = (ln < 0) | (p2 + ln > end[sel])
                if over.any():
                    _fail("length runs past the end of its message", p[np.argmax(over)])
                start[sel], length[sel], pos[sel] = p2, ln, p2 + ln
            else:
                over = p + width > end[sel]
                if over.any():
                    _fail("truncated fixed-width field", p[np.argmax(over)])
                value[sel] = _fixed(buf, p, width)
                pos[sel] = p + width
        out.append((msg, field, wire, value, start, length))
        live = pos < end
        msg, pos = msg[live], pos[live]
    if not out:
        z = np.zeros(0, dtype=np.int64)
        return Fields(z, z, z.astype(np.int8), z.astype(np.uint64), z, z)
    # Step k visited the k-th field of every message still going, so message m
    # took part in steps 0 .. count[m]-1: its k-th field goes to offset[m] + k.
    count = np.zeros(starts.size, dtype=np.int64)
    for step in out:
        count[step[0]] += 1
    offset = np.cumsum(count) - count
    total = int(count.sum())
    cols = [np.empty(total, dtype=c.dtype) for c in out[0]]
    for k, step in enumerate(out):
        at = offset[step[0]] + k
        for col, part in zip(cols, step):
            col[at] = part
    return Fields(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])


def repeated_varints(buf: np.ndarray, fields: Fields, n_msgs: int) -> tuple[np.ndarray, np.ndarray]:
    """Values of a repeated varint field, packed or not, per message in wire order.

    ``fields`` holds the records of one field number. Returns (values,
    per-message counts); values are message-major, as on the wire.
    """
    is_packed = fields.wire == LEN
    if is_packed.all():  # the usual encoding: one packed record per message
        values, counts = packed_varints(buf, fields.start, fields.length)
        return values, _per_message(fields.msg, counts, n_msgs)
    per_record = np.ones(len(fields), dtype=np.int64)
    packed_vals = np.zeros(0, dtype=np.uint64)
    if is_packed.any():
        packed_vals, counts = packed_varints(buf, fields.start[is_packed], fields.length[is_packed])
        per_record[is_packed] = counts
    bad = ~(is_packed | (fields.wire == VARINT))
    if bad.any():
        _fail("repeated varint field has the wrong wire type", fields.start[np.argmax(bad)])
    # Interleave the few unpacked records into the packed values, in wire order.
    packed_before = np.cumsum(np.where(is_packed, per_record, 0)) - np.where(is_packed, per_record, 0)
    loose = ~is_packed
    values = np.insert(packed_vals.astype(np.uint64), packed_before[loose], fields.value[loose])
    return values, _per_message(fields.msg, per_record, n_msgs)


def as_int64(values: np.ndarray) -> np.ndarray:
    """Unsigned wire values as int64 (two's complement for uint64, as protobuf int64)."""
    return values.view(np.int64) if values.dtype == np.uint64 else values.astype(np.int64)


def _per_message(msg: np.ndarray, counts: np.ndarray, n_msgs: int) -> np.ndarray:
    """Sum record counts per message (exact; records are message-major)."""
    out = np.zeros(n_msgs, dtype=np.int64)
    if msg.size and (msg.size == 1 or (msg[1:] > msg[:-1]).all()):
        out[msg] = counts  # at most one record per message
    elif msg.size:
        np.add.at(out, msg, counts)
    return out


def scalar_column(fields: Fields, field: int, n_msgs: int, default: int = 0) -> np.ndarray:
    """The last value of a singular varint/fixed field per message (protobuf semantics)."""
    sel = fields.select(field)
    out = np.full(n_msgs, default, dtype=np.uint64)
    ok = sel.wire != LEN
    out[sel.msg[ok]] = sel.value[ok]
    return out


def span_column(fields: Fields, field: int, n_msgs: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of the last LEN occurrence of ``field`` per message (-1 start = absent)."""
    sel = fields.select(field, LEN)
    start = np.full(n_msgs, -1, dtype=np.int64)
    length = np.zeros(n_msgs, dtype=np.int64)
    start[sel.msg] = sel.start
    length[sel.msg] = sel.length
    return start, length


def varint_fields(buf: np.ndarray, ends: np.ndarray) -> Fields | None:
    """:func:`walk_fields` for the usual small messages that hold only VARINT fields
    with one-byte tags, packed back to back in ``buf`` (message i ends at
    ``ends[i]``, the last at ``buf.size``); None when the data is not like that
    (the caller then walks it field by field, which also reports any damage).

    Every byte below 0x80 ends a varint, so all varints decode at once; a
    message must then be an even run of (tag, value) varints.
    """
    ends = ends.astype(np.int64)
    if not buf.size or ends.size == 0 or int(ends[-1]) != buf.size or (np.diff(ends) < 0).any():
        return None
    last = np.flatnonzero(buf < 0x80)  # the final byte of every varint
    first = np.empty_like(last)
    first[0], first[1:] = 0, last[:-1] + 1
    size = last - first + 1
    if not last.size or int(last[-1]) != buf.size - 1 or int(size.max()) > 10:
        return None
    shift = (7 * (np.arange(buf.size, dtype=np.int64) - np.repeat(first, size))).astype(np.uint64)
    values = np.add.reduceat((buf & 0x7F).astype(np.uint64) << shift, first)
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1]
    starts = starts[ends > starts]  # empty messages hold no field
    begins = np.zeros(buf.size, dtype=bool)
    begins[first] = True
    if not begins[starts].all():
        return None  # a message boundary inside a varint
    msg_start = np.zeros(buf.size, dtype=np.int64)
    msg_start[starts] = 1
    msg_of = (np.cumsum(msg_start) - 1)[first]  # among the non-empty messages
    if (np.bincount(msg_of, minlength=starts.size) % 2).any():
        return None  # an odd number of varints: not (tag, value) pairs
    msg_of = np.flatnonzero(ends > np.append(0, ends[:-1]))[msg_of[0::2]]
    tag, value = values[0::2], values[1::2]
    if (size[0::2] != 1).any() or (tag & np.uint64(7)).any() or (tag < 8).any():
        return None
    zeros = np.zeros(tag.size, dtype=np.int64)
    return Fields(msg_of, (tag >> np.uint64(3)).astype(np.int64), zeros.astype(np.int8), value, zeros, zeros)
