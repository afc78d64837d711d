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

import numpy as np

from polyprof.errors import MalformedInputError

__all__ = ["Fields", "as_buffer", "packed_varints", "ranges", "read_varints", "repeated_varints",
           "scalar_column", "span_column", "walk_fields"]

_SHIFTS = (7 * np.arange(10)).astype(np.uint64)
_STEPS = np.arange(10, dtype=np.int64)

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def as_buffer(data: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _fail(message: str, offset: int) -> None:
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


def packed_varints(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the packed varints of every span; return (values, count per span)."""
    idx = ranges(starts, lengths)
    if idx.size == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(starts.size, dtype=np.int64)
    b = buf[idx]
    term = b < 0x80
    span_of_byte = np.repeat(np.arange(starts.size), lengths.astype(np.int64))
    ends = np.cumsum(lengths.astype(np.int64)) - 1
    nonempty = lengths > 0
    if not term[ends[nonempty]].all():
        bad = np.nonzero(nonempty)[0][np.argmin(term[ends[nonempty]])]
        _fail("truncated packed varint", starts[bad] + lengths[bad] - 1)
    counts = np.bincount(span_of_byte[term], minlength=starts.size).astype(np.int64)
    if term.all():
        return b.astype(np.uint64), counts
    term_at = np.nonzero(term)[0]
    group_start = np.concatenate(([0], term_at[:-1] + 1))
    group = np.cumsum(term) - term
    shift = np.arange(b.size, dtype=np.int64) - group_start[group]
    if shift.max() > 9:
        _fail("over-long varint", idx[np.argmax(shift > 9)])
    parts = (b & 0x7F).astype(np.uint64) << (7 * shift).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, group_start), counts


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

    def select(self, field: int, wire: int | None = None) -> "Fields":
        mask = self.field == field
        if wire is not None:
            mask &= self.wire == wire
        return Fields(self.msg[mask], self.field[mask], self.wire[mask], self.value[mask],
                      self.start[mask], self.length[mask])

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
        tag, pos = read_varints(buf, pos, end)
        wire = (tag & np.uint64(7)).astype(np.int8)
        field = (tag >> np.uint64(3)).astype(np.int64)
        value = np.zeros(msg.size, dtype=np.uint64)
        start = np.zeros(msg.size, dtype=np.int64)
        length = np.zeros(msg.size, dtype=np.int64)
        bad = ~np.isin(wire, (VARINT, I64, LEN, I32)) | (field == 0)
        if bad.any():
            _fail(f"invalid field tag (wire type {int(wire[np.argmax(bad)])})", pos[np.argmax(bad)])
        for wt, handler in ((VARINT, None), (LEN, None), (I64, 8), (I32, 4)):
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
                width = handler
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
    cols = [np.concatenate(c) for c in zip(*out)]
    order = np.argsort(cols[0], kind="stable")
    return Fields(*(c[order] for c in cols))


def repeated_varints(buf: np.ndarray, fields: Fields, n_msgs: int) -> tuple[np.ndarray, np.ndarray]:
    """Values of a repeated varint field, packed or not, per message in wire order.

    ``fields`` holds the records of one field number. Returns (values,
    per-message counts); values are message-major, as on the wire.
    """
    is_packed = fields.wire == LEN
    per_record = np.ones(len(fields), dtype=np.int64)
    packed_vals = np.zeros(0, dtype=np.uint64)
    if is_packed.any():
        packed_vals, counts = packed_varints(buf, fields.start[is_packed], fields.length[is_packed])
        per_record[is_packed] = counts
    bad = ~(is_packed | (fields.wire == VARINT))
    if bad.any():
        _fail("repeated varint field has the wrong wire type", fields.start[np.argmax(bad)])
    offsets = np.cumsum(per_record) - per_record
    total = int(per_record.sum())
    values = np.zeros(total, dtype=np.uint64)
    if is_packed.any():
        values[ranges(offsets[is_packed], per_record[is_packed])] = packed_vals
    values[offsets[~is_packed]] = fields.value[~is_packed]
    counts_per_msg = np.bincount(fields.msg, weights=per_record, minlength=n_msgs).astype(np.int64)
    return values, counts_per_msg


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
