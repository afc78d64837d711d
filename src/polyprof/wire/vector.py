"""Vectorized protobuf decode kernels (numpy).

Python loops over hundreds of thousands of small messages cost seconds, so the
hot paths decode *many messages at once*: :func:`walk_fields` steps through
the fields of N messages in lockstep (one numpy step per field position, not
per message), and :func:`packed_varints` decodes every packed varint of many
spans in one pass. These are the kernels a compiled decoder may later
replace; readers only see the :class:`Fields` result.

All kernels check bounds and raise :class:`polyprof.errors.MalformedInputError`
with the byte offset of the first problem; they never read past a span.

Compiled twins (:mod:`polyprof.wire._compiled`, numba) replace the kernels
whose numpy form needs many passes (the field walker, multi-byte packed
varints, packet framing) once a process has decoded enough bytes for
loading them to pay off (``_kernels``); results are identical, so when it
switches over does not matter. ``POLYPROF_KERNELS=numpy`` keeps numpy only,
``=compiled`` switches at once (tests compare the two).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from dataclasses import dataclass
from dataclasses import field as dc_field
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import NoReturn

import numpy as np

from polyprof.errors import MalformedInputError

__all__ = ["Fields", "as_buffer", "compiled_kernels", "compiled_wanted", "expect", "expect_sized", "sized_read", "gather_spans", "hash_factorize", "hash_factorize_spans", "hash_nested_scalars", "import_compiled", "nested_fields", "packed_varints", "prefetch",
           "ranges", "read_varints", "repeated_varints", "scalar_column", "span_column", "walk_fields", "as_int64"]


VARINT, I64, LEN, I32 = 0, 1, 2, 5

#: Bytes decoded by a process before the compiled kernels are loaded (numba's import and the
#: cached machine code cost about half a second; below this much work numpy is as quick).
COMPILED_AFTER = 24 << 20
_compiled: ModuleType | None | bool = None  # the module once loaded; False: not available or disabled
_work = 0


_prefetch: threading.Thread | None = None  # loading the compiled kernels while an input inflates


def prefetch(nbytes: int, compiled_from: int | None = None) -> None:
    """A compressed input of ``nbytes`` is about to be inflated: when it will use the compiled
    kernels whatever it inflates to (``compiled_from``, by default ``COMPILED_FOR_INPUT``, already
    compressed), import them and
    load their first machine code on a thread meanwhile (zlib releases the GIL while it inflates;
    importing numba costs about half a second, which then overlaps the inflating)."""
    global _prefetch
    threshold = COMPILED_FOR_INPUT if compiled_from is None else compiled_from
    if _compiled is None and _prefetch is None and compiled_wanted(nbytes, threshold):
        _prefetch = threading.Thread(target=_warm, args=(sys.getswitchinterval(),), name="polyprof-load-kernels",
                                     daemon=True)
        # The inflating thread needs the GIL back after every chunk: hand it over sooner than the
        # default 5 ms, or it waits longer than it inflates.
        sys.setswitchinterval(_SWITCH)
        _prefetch.start()


_SWITCH = 0.0005


def _warm(interval: float) -> None:
    try:
        module = import_compiled("polyprof.wire._compiled")
        if isinstance(module, ModuleType):
            module.warm()
    finally:
        sys.setswitchinterval(interval)


def compiled_kernels() -> ModuleType | None:
    """The compiled decode kernels if a read has loaded them (their functions return None where
    the numpy twins would raise), else None."""
    return _kernels(0)


def compiled() -> bool:
    """Whether the compiled kernels are in use (readers may then skip numpy-only shortcuts)."""
    return _kernels(0) is not None


def _kernels(work: int) -> ModuleType | None:
    """The compiled kernels if they are (or now become) worth using, else None."""
    global _compiled, _work
    if _compiled is None:
        _work += work
        if not compiled_wanted(_work, COMPILED_AFTER):
            return None
        if _prefetch is not None:
            _prefetch.join()  # the import under way (a second import would only wait for it)
        _compiled = import_compiled("polyprof.wire._compiled")
    return _compiled if isinstance(_compiled, ModuleType) else None


def compiled_wanted(amount: int, threshold: int) -> bool:
    """Whether compiled kernels should take ``amount`` of work: ``POLYPROF_KERNELS=numpy`` never,
    ``=compiled`` always, otherwise from ``threshold`` on (the decode and tree kernels' one rule)."""
    mode = os.environ.get("POLYPROF_KERNELS", "auto")
    return mode == "compiled" or (mode != "numpy" and amount >= threshold)


def import_compiled(name: str) -> ModuleType | bool:
    """The compiled-kernel module ``name``; False when numba is missing (or not built for this
    platform): numpy it is."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return False


#: An input this large loads the compiled kernels before its first decode (measured: a 4.9 MB
#: simpleperf or Chromium file reads 1.3-1.6x quicker compiled, numba's import included; a
#: 2.5 MB pprof profile 1.9x slower).
COMPILED_FOR_INPUT = 4 << 20


def expect(nbytes: int) -> None:
    """A read of ``nbytes`` (an input's whole content) is about to be decoded: a large input uses
    the compiled kernels from its first kernel call on (its first decodes may be small, e.g. a
    Chromium profile's samples before its stacks); a smaller one counts towards the switch."""
    _kernels(COMPILED_AFTER if nbytes >= COMPILED_FOR_INPUT else nbytes)


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
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    fast = _kernels(0)
    if fast is not None and buf.ndim == 1 and int(starts.min()) >= 0 and int((starts + lengths).max()) <= buf.size:
        return fast.gather_runs(buf, starts, np.ascontiguousarray(lengths))
    if starts.size > 1 and (starts[1:] < starts[:-1] + lengths[:-1]).any():
        return buf[ranges(starts, lengths)]  # unordered spans: explicit positions
    # Ordered spans cut the part of the buffer they cover into span, gap, span, ..., span:
    # a mask of the span bytes is one repeat of an alternating pattern.
    n = starts.size
    lo = int(starts[0])
    runs = np.empty(2 * n - 1, dtype=np.int64)
    runs[0::2] = lengths
    runs[1::2] = starts[1:] - (starts[:-1] + lengths[:-1])
    pattern = np.zeros(2 * n - 1, dtype=bool)
    pattern[0::2] = True
    return buf[lo:lo + int(runs.sum())][np.repeat(pattern, runs)]


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
    fast = _kernels(b.size)
    if fast is not None:
        got = fast.packed_varints(b, lengths)
        if got is not None:
            return got
    vals = (b[group_start] & 0x7F).astype(np.uint64)
    for k in range(1, int(lens.max())):  # one pass per byte position, over varints that long
        more = np.flatnonzero(lens > k)
        vals[more] |= (b[group_start[more] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return vals, counts


#: Selects from one :class:`Fields` answered by a mask over all records before they are grouped
#: by a sort (a stable sort of the field numbers costs about as much as a few masks).
_MASKED_SELECTS = 2


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
    _selects: int = dc_field(default=0, repr=False, compare=False)

    def select(self, field: int, wire: int | None = None) -> "Fields":
        """The records of one field number (and wire type), in the same order."""
        self._selects += 1
        if self._groups is None and self._selects <= _MASKED_SELECTS:  # a mask: cheaper than a sort
            keep = self.field == field
            if wire is not None:
                keep &= self.wire == wire
            idx = np.flatnonzero(keep)
            return Fields(self.msg[idx], self.field[idx], self.wire[idx], self.value[idx],
                          self.start[idx], self.length[idx])
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
_LONG_MESSAGE_BYTES = 8 * _LOCKSTEP  # messages this long on average (and few): no lockstep at all
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


def walk_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, few_fields: bool = False) -> Fields:
    """Decode the top-level fields of every message ``buf[starts[i]:ends[i]]``.

    The k-th fields of all messages are decoded together, one numpy step per
    k; messages still going after many steps (a sample with a million
    unpacked ids) have all their field positions found at once by
    :func:`_field_starts`, so time stays linear in the bytes. A batch of few
    long messages (a heap dump's thousands of samples) goes there at once:
    each lockstep step is a numpy pass of fixed cost whatever the message
    count. Same fields, same order either way; on damaged input, which of
    several damaged places is named may differ. ``few_fields``: the caller knows the messages
    hold a few long fields (trace packets, a packet's dumps), which the lockstep walks in a
    few steps where finding every field position costs a numpy pass per byte (6 packets of
    430 kB: 36 ms -> under 1 ms); they go to :func:`_field_starts` only after the usual
    number of steps.
    """
    starts = starts.astype(np.int64)
    ends = ends.astype(np.int64)
    fast = _kernels(int((ends - starts).sum()) if starts.size else 0)
    if fast is not None:
        got = fast.walk_fields(buf, starts, ends)
        if got is not None:
            return Fields(*got)
    msg = np.arange(starts.size, dtype=np.int64)
    pos = starts.copy()
    live = pos < ends
    msg, pos = msg[live], pos[live]
    few_long = msg.size <= _LOCKSTEP_MANY and int((ends[msg] - pos).sum()) >= _LONG_MESSAGE_BYTES * msg.size
    lockstep = 0 if few_long and not few_fields else _LOCKSTEP
    out: list[tuple[np.ndarray, ...]] = []  # (msg, field, wire, value, start, length, rank)
    step = 0
    while msg.size:
        if step >= _LOCKSTEP_MANY or (step >= lockstep and msg.size <= _LOCKSTEP_MANY):
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
    if not is_packed.any() and (fields.wire == VARINT).all():  # all unpacked (Perfetto's callstacks)
        return fields.value, np.bincount(fields.msg, minlength=n_msgs).astype(np.int64)
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


def varints_at(buf: np.ndarray, pos: np.ndarray, width: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A varint of at most ``width`` bytes at each ``pos``, never raising: (values, byte lengths).

    A varint that runs past the buffer or past ``width`` bytes has length 0
    (for callers that probe many positions, most of them not varints).
    """
    pos = np.asarray(pos, dtype=np.int64)
    vals = np.zeros(pos.size, dtype=np.int64)
    length = np.zeros(pos.size, dtype=np.int64)
    going = np.ones(pos.size, dtype=bool)
    for k in range(width):
        at = pos + k
        inside = going & (at < buf.size)
        b = np.where(inside, buf[np.minimum(at, buf.size - 1)], 0x80).astype(np.int64)
        vals = np.where(going, vals | ((b & 0x7F) << (7 * k)), vals)
        ends = going & inside & (b < 0x80)
        length[ends] = k + 1
        going &= inside & (b >= 0x80)
        if not going.any():
            break
    return vals, length


def follow_chain(cand: np.ndarray, nxt: np.ndarray, valid: np.ndarray, start: int) -> tuple[np.ndarray, int]:
    """Walk a chain of records whose starts are among ``cand`` (ascending), all at once.

    Record ``i`` starts at ``cand[i]`` and the next one at ``nxt[i]`` (>
    ``cand[i]``) when ``valid[i]``. From ``start`` the chain goes on while it
    lands on valid candidates. Returns the candidate indices on the chain, in
    order, and where it stopped (the first position that is not a valid
    candidate). Pointer doubling: log2(chain length) gathers of all
    candidates instead of one step per record, so false candidates (bytes
    that only look like a record start) cost nothing but their share of the
    gathers.
    """
    m = cand.size
    at = int(np.searchsorted(cand, start))
    if at >= m or cand[at] != start or not valid[at]:
        return np.zeros(0, dtype=np.int64), start
    j = np.searchsorted(cand, nxt)
    jc = np.minimum(j, m - 1)
    hit = (j < m) & (cand[jc] == nxt) & valid[jc] & valid
    jump = np.append(np.where(hit, jc, m), m)  # m: the chain ends after this record
    path = np.array([at], dtype=np.int64)
    while True:
        ahead = jump[path]
        ahead = ahead[ahead < m]
        if not ahead.size:
            break
        path = np.concatenate([path, ahead])
        if ahead.size < path.size - ahead.size:  # the chain ended inside this doubling
            break
        jump = jump[jump]
    last = int(path[-1])
    return path, int(nxt[last])


def walk_varint_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """:func:`walk_fields` for messages that are usually varint fields only (heap samples,
    interned frames, unpacked id lists): their bytes gathered end to end go through
    :func:`varint_fields`, a few passes whatever their field count; when that declines
    (or with the compiled walker, which is quicker), the field walker. Same result."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if _kernels(0) is None and starts.size:
        lengths = ends - starts
        fast = varint_fields(gather_spans(buf, starts, lengths), np.cumsum(lengths))
        if fast is not None:
            return fast
    return walk_fields(buf, starts, ends)

def tagged_records(buf: np.ndarray, pos: int, end: int, max_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The run of records ``0A <length> <payload>`` (field 1, LEN: a repeated message at
    the top level, as a Perfetto trace's packets) from ``pos``, while they are complete
    (within ``end``) and no longer than ``max_len``: (payload starts, payload ends, where the
    run stopped). The caller handles whatever stops the run (another record, a cut one)."""
    fast = _kernels(end - pos)
    if fast is not None:
        return fast.frame_packets(buf, pos, end, max_len)
    cand = np.flatnonzero(buf[pos:end] == 0x0A) + pos
    length, width = varints_at(buf, cand + 1)
    nxt = cand + 1 + width + length
    valid = (width > 0) & (nxt <= end) & (length <= max_len)
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    while True:
        path, stop = follow_chain(cand, nxt, valid, pos)
        if not path.size:
            break
        starts.append(nxt[path] - length[path])
        ends.append(nxt[path])
        pos = stop
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)  # noqa: E731
    return cat(starts), cat(ends), pos


_HASH_MIX = np.uint64(0x9E3779B97F4A7C15)
_HASH_BASE = np.uint64(0xC2B2AE3D27D4EB4F)


def hash_runs(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each non-empty run ``values[offsets[i]:offsets[i+1]]`` (non-negative
    ints), order-sensitive: sum over k of mix(v_k) * B**k, modulo 2**64, where
    mix(x) = y ^ (y >> 31) with y = (x + 1) * M. Equal runs, equal hashes; callers
    confirm equality of runs whose hashes match."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    fast = _kernels(values.size * 8)
    if fast is not None:
        return fast.hash_runs(values, offsets, _HASH_MIX, _HASH_BASE)
    lengths = np.diff(offsets)
    place = np.arange(values.size, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    x = (values.astype(np.uint64) + np.uint64(1)) * _HASH_MIX
    x ^= x >> np.uint64(31)
    powers = np.full(max(int(lengths.max()), 1), _HASH_BASE, dtype=np.uint64)
    powers[0] = 1
    x *= np.multiply.accumulate(powers)[place]  # wraps modulo 2**64
    return np.add.reduceat(x, offsets[:-1])


def gather_runs(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``values[starts[i]:starts[i]+lengths[i]]`` for every i, end to end
    (``values[ranges(starts, lengths)]`` without building the index array when compiled)."""
    fast = _kernels(int(lengths.sum()) * values.itemsize if lengths.size else 0)
    if fast is not None and values.ndim == 1:
        return fast.gather_runs(values, np.ascontiguousarray(starts, dtype=np.int64),
                                np.ascontiguousarray(lengths, dtype=np.int64))
    return values[ranges(starts, lengths)]


def le32_records(buf: np.ndarray, pos: int, end: int, first_bytes: bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """The run of records ``<uint32 LE size> <body>`` from ``pos`` (a simpleperf file's), while
    they are complete within ``end`` and not empty: (body starts, body ends, where the run
    stopped). Bodies start with one of ``first_bytes`` (the protobuf tags they may begin
    with): numpy looks for record starts among the bytes such a body could follow; a record
    whose body starts otherwise, or is 16 MB or more, ends the run there. The caller
    handles whatever stops a run (the zero end marker, a cut or odd record)."""
    fast = _kernels(end - pos)
    if fast is not None:
        return fast.le32_records(buf, pos, end)
    region = buf[pos:end]
    if region.size < 5:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), pos
    tag = np.zeros(256, dtype=bool)
    tag[list(first_bytes)] = True
    cand = np.flatnonzero(region[3:-1] == 0)  # a size's high byte; then the body's first byte, on
    cand = cand[tag[region[4:][cand]]] + pos  # those ~10% only (4.9 MB recording: 6 -> 2.7 ms)
    size = buf[cand].astype(np.int64) | (buf[cand + 1].astype(np.int64) << 8) | (buf[cand + 2].astype(np.int64) << 16)
    nxt = cand + 4 + size
    valid = (size > 0) & (nxt <= end)
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    while True:
        path, stop = follow_chain(cand, nxt, valid, pos)
        if not path.size:
            break
        starts.append(cand[path] + 4)
        ends.append(nxt[path])
        pos = stop
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)  # noqa: E731
    return cat(starts), cat(ends), pos


def scalar_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                  numbers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Varint fields ``numbers`` of every message ``buf[starts[i]:ends[i]]``: (values, present),
    each (messages x numbers); the last occurrence of a field wins and fields of other wire
    types are skipped (as :func:`scalar_column` over ``select(number, VARINT)``). For many
    small messages of a few scalars (callchain entries, heap samples) without materializing
    every field."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    fast = _kernels(int((ends - starts).sum()) if starts.size else 0)
    if fast is not None:
        got = fast.scalar_fields(buf, starts, ends, numbers)
        if got is not None:
            return got
    f = walk_varint_fields(buf, starts, ends)
    values = np.zeros((starts.size, len(numbers)), dtype=np.uint64)
    present = np.zeros((starts.size, len(numbers)), dtype=bool)
    for j, number in enumerate(numbers):
        sel = (f.field == number) & (f.wire == VARINT)
        values[f.msg[sel], j] = f.value[sel]
        present[f.msg[sel], j] = True
    return values, present


def nested_scalars(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int,
                   numbers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varint fields ``numbers`` of every sub-message in field ``field`` (LEN records) of every
    message ``buf[starts[i]:ends[i]]``: (sub-messages per message, values, present), values and
    present being (sub-messages x numbers) in wire order; as :func:`scalar_fields` on the
    sub-messages (a sample's callchain entries) without listing every field on the way."""
    counts, values, present, _, _ = nested_fields(buf, starts, ends, field, numbers)
    return counts, values, present


def nested_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int, numbers: tuple[int, ...],
                  span: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`nested_scalars`, and with ``span`` the (start, length) of the last LEN field
    ``span`` of every sub-message (length -1 when it has none; both empty without ``span``)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    fast = _kernels(int((ends - starts).sum()) if starts.size else 0)
    if fast is not None:
        got = fast.nested_scalars(buf, starts, ends, field, numbers, span)
        if got is not None:
            return got
    f = walk_fields(buf, starts, ends)
    sub = f.select(field, LEN)
    values, present = scalar_fields(buf, sub.start, sub.start + sub.length, numbers)
    lstart = np.zeros(len(sub) if span >= 0 else 0, dtype=np.int64)
    llen = np.full(lstart.size, -1, dtype=np.int64)
    if span >= 0 and len(sub):
        inner = walk_fields(buf, sub.start, sub.start + sub.length).select(span, LEN)
        lstart[inner.msg], llen[inner.msg] = inner.start, inner.length  # the last one is written last
    return np.bincount(sub.msg, minlength=starts.size).astype(np.int64), values, present, lstart, llen


def varint_fields(buf: np.ndarray, ends: np.ndarray) -> Fields | None:
    """:func:`walk_fields` for the usual small messages that hold only VARINT fields
    with one-byte tags, packed back to back in ``buf`` (message i ends at
    ``ends[i]``, the last at ``buf.size``); None when the data is not like that
    (the caller then walks it field by field, which also reports any damage).

    Every byte below 0x80 ends a varint, so all varints are found at once; each is
    read from its first byte, and only the varints still running take another
    (ids and counts are one to three bytes); the message of each field is a binary
    search of the message starts among the varint starts. A message must be an
    even run of (tag, value) varints.
    """
    ends = ends.astype(np.int64)
    if not buf.size or ends.size == 0 or int(ends[-1]) != buf.size or (np.diff(ends) < 0).any():
        return None
    last = np.flatnonzero(buf < 0x80)  # the final byte of every varint
    if not last.size or int(last[-1]) != buf.size - 1:  # no varint ends, or the last one runs off the end
        return None
    first = np.empty_like(last)
    first[0], first[1:] = 0, last[:-1] + 1
    values = _varint_values(buf, first, last)
    if values is None:
        return None
    lengths = np.diff(ends, prepend=0)
    msg_of = _pair_messages(first, ends, lengths)
    if msg_of is None:
        return None
    tag, value = values[0::2], values[1::2]
    if (last[0::2] != first[0::2]).any() or (tag & np.uint64(7)).any() or (tag < 8).any():
        return None  # a tag of two bytes or more, a non-VARINT field, or field 0
    zeros = np.zeros(tag.size, dtype=np.int64)
    return Fields(msg_of, (tag >> np.uint64(3)).astype(np.int64), zeros.astype(np.int8), value, zeros, zeros)


_SHIFTS = [np.uint64(7 * k) for k in range(10)]


def _varint_values(buf: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray | None:
    """The value of each varint ``buf[first[i]:last[i]+1]`` (None if one is over ten bytes);
    bits past the 64th are dropped, as the field walker drops them."""
    values = (buf[first] & 0x7F).astype(np.uint64)
    live = np.flatnonzero(last > first)
    for k in range(1, 10):
        if not live.size:
            return values
        values[live] |= (buf[first[live] + k] & 0x7F).astype(np.uint64) << _SHIFTS[k]
        live = live[last[live] > first[live] + k]
    return None if live.size else values


def _pair_messages(first: np.ndarray, ends: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
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


#: Rows below which a sort is as quick as hashing (and needs no compiled kernel).
HASH_FACTORIZE_AFTER = 1 << 18


def hash_factorize(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(group of each row, first row of each group) of the rows of one to four integer
    columns, groups numbered in order of first sight, by the compiled hash table; None when the
    compiled kernels are not in use, the input is small or mostly distinct rows (the caller sorts
    instead; both ways give the same numbering)."""
    n = cols[0].size if cols else 0
    if n < HASH_FACTORIZE_AFTER or len(cols) > 4 or any(c.dtype.kind not in "iub" for c in cols):
        return None
    fast = _kernels(n * 8 * len(cols))
    if fast is None:
        return None
    as64 = [np.ascontiguousarray(c.view(np.int64) if c.dtype == np.uint64 else c, dtype=np.int64) for c in cols]
    return fast.factorize(as64)


def hash_factorize_spans(values: np.ndarray, starts: np.ndarray,
                         lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(group of each span ``values[starts[i]:starts[i]+lengths[i]]`` by content, first span of
    each group), groups numbered in order of first sight, by the compiled hash table (spans
    compared in place: no gather, no hash column); None when the compiled kernels are not in
    use or the input is small (the caller hashes and sorts instead: the same numbering, unless
    two different spans share a 64-bit hash and a third equals the second, which the numpy
    path numbers apart)."""
    if starts.size < HASH_FACTORIZE_AFTER // 4 or values.ndim != 1 or values.dtype.kind not in "iub":
        return None
    fast = _kernels(int(lengths.sum()) * values.itemsize)
    if fast is None:
        return None
    return fast.factorize_spans(values, starts, lengths)


def hash_nested_scalars(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int,
                        numbers: tuple[int, ...]) -> tuple[np.ndarray, ...] | None:
    """:func:`nested_scalars` with the sub-messages' rows grouped by content as they are read
    (compiled hash table; callchain entries repeat a few distinct frames): (sub-messages per
    message, group of each, values of each group (groups x numbers), first sub-message of each
    group), groups in order of first sight, as ``factorize_rows(..., in_order=True)`` numbers
    them. None when the compiled kernels are not in use, the rows are mostly distinct or the
    data is damaged (the caller decodes every row, which also names the damage)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    fast = _kernels(int((ends - starts).sum()) if starts.size else 0)
    return None if fast is None else fast.nested_ids(buf, starts, ends, field, numbers)


def expect_sized(nbytes: int, compiled_from: int) -> None:
    """:func:`expect` with a reader's own input size from which the compiled kernels pay: a
    reader whose numpy path groups repeated records before decoding them is quicker by numpy on
    inputs that the default :data:`COMPILED_FOR_INPUT` would compile (numba's loading costs
    0.5-1 s of CPU). Smaller inputs count towards the switch, as with :func:`expect`."""
    _kernels(COMPILED_AFTER if nbytes >= compiled_from else nbytes)


@contextmanager
def sized_read(nbytes: int, compiled_from: int) -> Iterator[None]:
    """A read of a whole input of ``nbytes`` whose reader knows from which size the compiled
    kernels pay (``compiled_from``): below it (and unless ``POLYPROF_KERNELS`` says otherwise)
    the block runs by numpy even when its decodes add up to the work that would load numba
    mid-read (a 4.9 MB recording decodes 26 MB in all); kernels already loaded are used. The
    work counted before the block is restored after it."""
    global _compiled, _work
    if _compiled is not None or compiled_wanted(nbytes, compiled_from):
        yield
        return
    _compiled, before = False, _work
    try:
        yield
    finally:
        _compiled, _work = None, before



#: :func:`hash_runs`'s constants, for kernels elsewhere that hash runs as it does (added for the
#: Perfetto catalog's fused frame pass; a test checks those hashes equal :func:`hash_runs`).
HASH_MIX, HASH_BASE = _HASH_MIX, _HASH_BASE
