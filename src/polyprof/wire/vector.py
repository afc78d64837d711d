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
    # Continue only the varints still going, one byte position at a time
    # (most are short, so this touches each byte once).
    vals[multi] &= np.uint64(0x7F)
    going = multi
    for k in range(1, 10):
        at = pos[going] + k
        out = at >= limit[going]
        if out.any():
            _fail("truncated varint", pos[going[np.argmax(out)]])
        byte = buf[at]
        vals[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        more = byte >= 0x80
        nxt[going[~more]] = at[~more] + 1
        going = going[more]
        if not going.size:
            return vals, nxt
    _fail("over-long varint (more than 10 bytes)", pos[going[0]])
    raise AssertionError("unreachable")


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


#: Fields decoded in lockstep before the messages still going are handed to
#: :func:`_field_starts` (few long messages: one numpy step per field would be slow).
_LOCKSTEP = 64
_LOCKSTEP_MANY = 1024  # ... unless this many messages are still going; then after this many steps
_WINDOW = 1 << 20  # bytes examined at once by _field_starts (bounds its memory)


def _decode_one(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    """Decode the field starting at each ``pos`` (ending before ``end``).

    Returns (field, wire, value, start, length, next position); raises
    MalformedInputError at the first bad tag, truncation or overrun.
    """
    if (pos >= end).any():
        _fail("truncated field tag", pos[np.argmax(pos >= end)])
    tag_at = pos
    first = buf[pos]
    if (first < 0x80).all():  # the usual case: field numbers below 16
        tag, pos = first.astype(np.uint64), pos + 1
    else:
        tag, pos = read_varints(buf, pos, end)
    wire = (tag & np.uint64(7)).astype(np.int8)
    field = (tag >> np.uint64(3)).astype(np.int64)
    value = np.zeros(pos.size, dtype=np.uint64)
    start = np.zeros(pos.size, dtype=np.int64)
    length = np.zeros(pos.size, dtype=np.int64)
    bad = ~np.isin(wire, (VARINT, I64, LEN, I32)) | (field == 0)
    if bad.any():
        _fail(f"invalid field tag (field {int(field[np.argmax(bad)])}, wire type {int(wire[np.argmax(bad)])})",
              tag_at[np.argmax(bad)])
    for wt in (VARINT, LEN, I64, I32):
        sel = np.nonzero(wire == wt)[0]
        if not sel.size:
            continue
        p = pos[sel]
        if wt == VARINT:
            value[sel], pos[sel] = read_varints(buf, p, end[sel])
        elif wt == LEN:
            ln, p2 = read_varints(buf, p, end[sel])
            over = (ln > np.uint64(1 << 62)) | (p2 + np.minimum(ln, np.uint64(1 << 62)).astype(np.int64) > end[sel])
            if over.any():
                i = int(np.argmax(over))
                _fail(f"length {int(ln[i])} of field {int(field[sel][i])} runs past the end of its message "
                      f"({int(end[sel][i] - p2[i])} bytes left)", p[i])
            ln = ln.astype(np.int64)
            start[sel], length[sel], pos[sel] = p2, ln, p2 + ln
        else:
            width = 8 if wt == I64 else 4
            over = p + width > end[sel]
            if over.any():
                _fail(f"truncated fixed-width field {int(field[sel][np.argmax(over)])}", p[np.argmax(over)])
            value[sel] = _fixed(buf, p, width)
            pos[sel] = p + width
    return field, wire, value, start, length, pos


def walk_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Decode the top-level fields of every message ``buf[starts[i]:ends[i]]``.

    The k-th fields of all messages are decoded together, one numpy step per
    k; messages still going after many steps (a sample with a million
    unpacked ids) have all their field positions found at once by
    :func:`_field_starts`, so time stays linear in the bytes.
    """
    starts = starts.astype(np.int64)
    ends = ends.astype(np.int64)
    msg = np.arange(starts.size, dtype=np.int64)
    pos = starts.copy()
    live = pos < ends
    msg, pos = msg[live], pos[live]
    out: list[tuple[np.ndarray, ...]] = []  # (msg, field, wire, value, start, length, rank)
    step = 0
    while msg.size:
        if step >= _LOCKSTEP_MANY or (step >= _LOCKSTEP and msg.size <= _LOCKSTEP_MANY):
            out.append(_tail(buf, msg, pos, ends[msg], step))
            break
        end = ends[msg]
        *cols, pos = _decode_one(buf, pos, end)
        out.append((msg, *cols, np.full(msg.size, step, dtype=np.int64)))
        live = pos < end
        msg, pos = msg[live], pos[live]
        step += 1
    if not out:
        z = np.zeros(0, dtype=np.int64)
        return Fields(z, z, z.astype(np.int8), z.astype(np.uint64), z, z)
    # A record of rank k of message m goes to offset[m] + k: records stay
    # message-major and in wire order within a message.
    count = np.zeros(starts.size, dtype=np.int64)
    for part in out:
        count += np.bincount(part[0], minlength=starts.size)
    offset = np.cumsum(count) - count
    total = int(count.sum())
    cols = [np.empty(total, dtype=c.dtype) for c in out[0][:6]]
    for part in out:
        at = offset[part[0]] + part[6]
        for col, values in zip(cols, part[:6]):
            col[at] = values
    return Fields(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])


def _tail(buf: np.ndarray, msg: np.ndarray, pos: np.ndarray, end: np.ndarray, step: int) -> tuple[np.ndarray, ...]:
    """The remaining fields of messages ``msg`` (now at ``pos``), ranked from ``step``."""
    order = np.argsort(pos, kind="stable")
    msg, pos, end = msg[order], pos[order], end[order]
    if msg.size > 1 and (pos[1:] < end[:-1]).any():  # overlapping spans: one message at a time
        parts = [_tail(buf, msg[i:i + 1], pos[i:i + 1], end[i:i + 1], step) for i in range(msg.size)]
        return tuple(np.concatenate(c) for c in zip(*parts))
    at = _field_starts(buf, pos, end)
    owner = np.searchsorted(pos, at, side="right") - 1
    field, wire, value, start, length, _ = _decode_one(buf, at, end[owner])
    rank = np.arange(at.size, dtype=np.int64) - np.searchsorted(at, pos)[owner] + step
    return msg[owner], field, wire, value, start, length, rank


def _next_field(buf: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """For every position p in [lo, hi): where the field after one starting at p
    would start (-1 where no valid field can start at p)."""
    stop = min(hi + 32, buf.size)
    b = buf[lo:stop]
    n = stop - lo
    idx = np.arange(n, dtype=np.int64)
    # Length of the varint at every position: distance to the next byte < 0x80.
    term = np.where(b < 0x80, idx, n + 64)
    term = np.minimum.accumulate(term[::-1])[::-1]
    vlen = term - idx + 1
    w = hi - lo
    tag_len = vlen[:w]
    wire = b[:w] & 7
    q = idx[:w] + tag_len  # where the payload starts (relative)
    qc = np.minimum(q, n - 1)
    nxt = np.full(w, -1, dtype=np.int64)
    ok = (tag_len <= 10) & ~((tag_len == 1) & (b[:w] < 8)) & (q < n)
    sel = ok & (wire == VARINT) & (vlen[qc] <= 10)
    nxt[sel] = q[sel] + vlen[qc[sel]]
    sel = ok & (wire == I64)
    nxt[sel] = q[sel] + 8
    sel = ok & (wire == I32)
    nxt[sel] = q[sel] + 4
    sel = np.flatnonzero(ok & (wire == LEN) & (vlen[qc] <= 10))
    if sel.size:
        at = q[sel] + lo
        ln, after = read_varints(buf, at, np.full(sel.size, stop, dtype=np.int64))
        nxt[sel] = after - lo + np.minimum(ln, np.uint64(1 << 40)).astype(np.int64)
    return np.where(nxt >= 0, nxt + lo, -1)


def _field_starts(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Start of every field of the messages ``[pos[i], end[i])`` (sorted, disjoint), sorted.

    Each position's successor (where the next field would start if one
    started there) is computed for a window of bytes at once; the chains
    from the messages' first fields are then followed by pointer doubling,
    so a million-field message costs about twenty numpy passes over its
    bytes. A field that is invalid or runs past its message ends its chain
    (it is kept, so the decoder reports it).
    """
    found = []
    heads, head_end = pos.copy(), end.copy()
    while heads.size:
        lo = int(heads.min())
        hi = min(lo + _WINDOW, int(buf.size))
        now = heads < hi
        h, e = heads[now] - lo, head_end[now]
        nxt = _next_field(buf, lo, hi)
        # Each window position knows the end of the message it lies in.
        region = np.searchsorted(heads[now], np.arange(lo, hi), side="right") - 1
        limit = np.minimum(e[np.maximum(region, 0)], hi)
        jump = np.arange(hi - lo, dtype=np.int64)
        go = (nxt >= 0) & (nxt < limit) & (region >= 0)
        jump[go] = nxt[go] - lo
        on = np.zeros(hi - lo, dtype=bool)
        on[h] = True
        members = h.astype(np.int64)
        while True:
            targets = jump[members]
            new = targets[~on[targets]]
            if not new.size:
                break
            on[new] = True
            members = np.concatenate([members, new])
            jump = jump[jump]
        found.append(np.flatnonzero(on) + lo)
        last = jump[h] + lo
        after = nxt[last - lo]
        more = (after >= hi) & (after < e) & (nxt[last - lo] >= 0)
        heads = np.concatenate([heads[~now], after[more]])
        head_end = np.concatenate([head_end[~now], e[more]])
        order = np.argsort(heads, kind="stable")
        heads, head_end = heads[order], head_end[order]
    return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


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
