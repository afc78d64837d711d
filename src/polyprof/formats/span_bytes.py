"""Grouping short wire spans by their bytes, for the numpy path of the readers.

Callchain entries repeat a few distinct frames: a 4.9 MB recording of 418k
entries holds 57 distinct ones. Decoding every entry's varints with numpy
costs a pass per byte and step; reading each entry's bytes as a few 64-bit
words and grouping those rows costs a few gathers and sorts, after which only
one entry per distinct byte string is decoded. Rows of equal bytes decode to
equal values; the caller merges byte strings that differ but decode alike
(fields in another order, non-minimal varints), so the result is the same as
grouping the decoded values.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from polyprof.model.columns import factorize_rows
from polyprof.wire import vector as V

__all__ = ["MAX_WORDS", "decoded", "factorize_in_order", "factorize_span_bytes", "last_varints", "sub_spans", "sub_spans_and_fields"]

#: Spans longer than this many 64-bit words are not grouped this way (the caller decodes them all).
MAX_WORDS = 4
_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                 0xFF51AFD7ED558CCD], dtype=np.uint64)
_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=np.uint64)


def _words_at(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian 64-bit word at every ``pos`` (bytes past the buffer's end read as 0):
    one gather from a view of the buffer as a word at every byte (unaligned loads: 418k
    callchain entries in 7 ms, where two gathers from the aligned words and their shifts took
    45), the few words that reach past the end byte by byte."""
    n = buf.size
    if n >= 8 and buf.flags.c_contiguous:
        every = np.ndarray(shape=(n - 7,), dtype="<u8", buffer=buf, strides=(1,))
        if not pos.size or int(pos.max()) + 8 <= n:
            return every[pos]
        out = np.zeros(pos.size, dtype=np.uint64)
        inside = pos + 8 <= n
        out[inside] = every[pos[inside]]
        near_end = np.flatnonzero(~inside)
    else:
        out = np.zeros(pos.size, dtype=np.uint64)
        near_end = np.arange(pos.size)
    for b in range(8):  # the few words that reach past the buffer's end: byte by byte
        at = pos[near_end] + b
        ok = at < n
        out[near_end[ok]] |= buf[at[ok]].astype(np.uint64) << np.uint64(8 * b)
    return out


def _span_word(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, j: int) -> np.ndarray:
    """The ``j``-th little-endian 64-bit word of every span ``buf[starts[i]:starts[i]+lengths[i]]``,
    zero past the span's end."""
    word = _words_at(buf, starts + 8 * j)
    word &= _MASKS[np.clip(lengths - 8 * j, 0, 8)]
    return word


#: The hash bits that pick a slot of the first-sight table (512 kB of int64: cached).
_SLOT_BITS = 16
#: Which bits of the hash each round of slotting uses: rows whose slot's first row holds
#: another hash go to the next round; what remains after these is sorted.
_SLOT_SHIFTS = (44, 24, 4)


def _first_sight(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group of each value, first row of each group), groups in order of first sight: each
    row finds the first row of its value in a table of slots filled in reverse (the first row
    of a slot is written last), a few O(n) passes where a sort of the values took most of the
    time (418k callchain entries: 45 -> 8 ms); values that share slots in every round are sorted."""
    n = h.size
    every = np.arange(n, dtype=np.int64)
    lead, rows = every, every  # rows whose value's first row is not known yet
    table = np.empty(1 << _SLOT_BITS, dtype=np.int64)  # only slots written in a round are read in it
    for shift in _SLOT_SHIFTS:
        if not rows.size:
            break
        hr = h[rows] if rows is not every else h
        slot = ((hr >> np.uint64(shift)) & np.uint64((1 << _SLOT_BITS) - 1)).astype(np.intp)
        table[slot[::-1]] = rows[::-1]  # later writes win: the first row of each slot
        cand = table[slot]
        same = h[cand] == hr  # that first row holds this value: it is the value's first row
        if rows is every:
            lead = cand  # the others are overwritten below
        else:
            lead[rows[same]] = cand[same]
        rows = rows[~same]  # their values' first rows are among them
    if rows.size:
        order = rows[np.argsort(h[rows], kind="stable")]  # equal values: in row order
        sorted_h = h[order]
        new = np.ones(order.size, dtype=bool)
        new[1:] = sorted_h[1:] != sorted_h[:-1]
        lead[order] = order[np.flatnonzero(new)][np.cumsum(new) - 1]
    first = np.flatnonzero(lead == every)
    rank = np.empty(n, dtype=np.int64)
    rank[first] = np.arange(first.size)
    return rank[lead], first


def factorize_span_bytes(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                         long_apart: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """(group of each span ``buf[starts[i]:starts[i]+lengths[i]]`` by its bytes, first span of each
    group), groups numbered in order of first sight. A span longer than :data:`MAX_WORDS` words
    makes it None, or with ``long_apart`` is a group of its own (the caller reads it in full).

    The words are hashed into one column, grouped (one sort), and every span compared with the
    first of its group: a span whose hash collides with other bytes is a group of its own too.
    So equal spans may, very rarely, be split, never different ones merged: callers group the
    decoded values of the groups again."""
    n = starts.size
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    apart = lengths > 8 * MAX_WORDS
    if apart.any() and not long_apart:
        return None
    lengths = np.minimum(lengths, 8 * MAX_WORDS)
    # Word 0 of every span, the later words only of the spans that reach them (callchain
    # entries are mostly one word: 500k Chromium frames, 24k longer).
    word0 = _span_word(buf, starts, lengths, 0)
    h = lengths.astype(np.uint64) * _MIX[0]
    h ^= word0
    h *= _MIX[1]  # wraps modulo 2**64
    h ^= h >> np.uint64(31)
    longer: list[tuple[np.ndarray, np.ndarray]] = []  # (rows reaching word j, their word j)
    for j in range(1, -(-int(lengths.max()) // 8)):
        rows = np.flatnonzero(lengths > 8 * j)
        word = _span_word(buf, starts[rows], lengths[rows], j)
        longer.append((rows, word))
        hr = h[rows]
        hr ^= word
        hr *= _MIX[j + 1]
        hr ^= hr >> np.uint64(31)
        h[rows] = hr
    group, first = _first_sight(h)
    lead = first[group]
    apart |= word0[lead] != word0
    apart |= lengths[lead] != lengths  # (lengths are in the hash, not a column of their own)
    for j, (rows, word) in enumerate(longer, 1):  # equal lengths: the lead has word j too
        lr = lead[rows]
        apart[rows] |= _span_word(buf, starts[lr], lengths[lr], j) != word
    if not apart.any():
        return group, first
    return factorize_rows([np.where(apart, np.arange(n), lead)], in_order=True)


def factorize_in_order(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``factorize_rows(cols, in_order=True)`` of integer columns by a hash of each row and the
    slots of :func:`_first_sight` (46k distinct Chromium frames, four columns: 17.6 -> ~3 ms,
    where every column took a sort); when two different rows share a hash, by
    ``factorize_rows`` itself."""
    n = cols[0].size if cols else 0
    if not n:
        return factorize_rows(cols, in_order=True)
    h = np.full(n, _MIX[0], dtype=np.uint64)
    for j, col in enumerate(cols):
        h ^= col.astype(np.int64, copy=False).view(np.uint64)
        h *= _MIX[1 + j % (_MIX.size - 1)]  # wraps modulo 2**64
        h ^= h >> np.uint64(31)
    group, first = _first_sight(h)
    lead = first[group]
    if all(np.array_equal(col[lead], col) for col in cols):
        return group, first
    return factorize_rows(cols, in_order=True)


def decoded(raws: list[Any]) -> list[str] | None:
    """Every byte string as UTF-8 text, decoded in one call (thousands of symbol names); None
    when one is not UTF-8 or holds a NUL (the caller decodes them one by one)."""
    if not raws:
        return []
    joined = b"\0".join(raws)
    if joined.count(b"\0") != len(raws) - 1:
        return None
    try:
        return joined.decode("utf-8").split("\0")
    except UnicodeDecodeError:
        return None


def last_varints(f: V.Fields, n: int, numbers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(values, present), each (n messages x numbers), of the varint fields ``numbers`` in walked
    fields ``f``: the last occurrence wins, other wire types are skipped (as
    :func:`polyprof.wire.vector.scalar_fields` reads them, without walking the messages again)."""
    values = np.zeros((n, len(numbers)), dtype=np.uint64)
    present = np.zeros((n, len(numbers)), dtype=bool)
    for j, number in enumerate(numbers):
        sel = np.flatnonzero((f.field == number) & (f.wire == V.VARINT))
        values[f.msg[sel], j] = f.value[sel]  # the last occurrence is written last: it wins
        present[f.msg[sel], j] = True
    return values, present


_compiled: ModuleType | bool | None = None  # formats/_span_compiled.py once loaded; False: unavailable


def _twin() -> ModuleType | None:
    """The compiled twin when the decode kernels are in use (large inputs), else None."""
    global _compiled
    if not V.compiled():
        return None
    if _compiled is None:
        _compiled = V.import_compiled("polyprof.formats._span_compiled")
    return _compiled if isinstance(_compiled, ModuleType) else None


def sub_spans(buf: np.ndarray, starts: np.ndarray,
              ends: np.ndarray, field: int) -> tuple[np.ndarray, ...]:
    """The LEN fields ``field`` (sub-messages) of every message ``buf[starts[i]:ends[i]]`` grouped
    by their bytes: (sub-messages per message, group of each, and of each group: its first
    sub-message's number, start and length, its size), groups in order of first sight. Equal
    bytes may be split into groups (numpy: long spans, hash collisions), so callers group the
    groups' decoded values again. Compiled, one pass that keeps no per-field column (24.8M
    Chromium frames: a 100 MB id column instead of a 1 GB field table)."""
    return sub_spans_and_fields(buf, starts, ends, field)[:6]


def sub_spans_and_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int,
                         numbers: tuple[int, ...] = (), span: int = -1) -> tuple[np.ndarray, ...]:
    """:func:`sub_spans`, and from the same pass: the varint fields ``numbers`` of every message
    (values, present; each messages x numbers, the last occurrence winning, as
    :func:`last_varints`) and its LEN fields ``span`` (start and length of the last one,
    length -1 when none; how many)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    fast = _twin()
    if fast is not None:
        got = fast.sub_spans(buf, starts, ends, field, numbers, span)
        if got is not None:
            return got
    if V.compiled() or field >= 16:  # (the compiled twin declined: damage; its walker names it)
        f = V.walk_fields(buf, starts, ends)
        subs = f.select(field, V.LEN)
    else:
        subs, f = walk_runs(buf, starts, ends, field)
    counts = np.bincount(subs.msg, minlength=starts.size).astype(np.int64)
    grouped = factorize_span_bytes(buf, subs.start, subs.length, long_apart=True)
    assert grouped is not None  # long spans are groups of their own
    group, first = grouped
    values, present = last_varints(f, starts.size, numbers)
    inner = subs if span == field else f.select(span, V.LEN)  # (walk_runs keeps the runs apart)
    span_start = np.zeros(starts.size, dtype=np.int64)
    span_len = np.full(starts.size, -1, dtype=np.int64)
    span_start[inner.msg], span_len[inner.msg] = inner.start, inner.length  # the last one is written last
    return (counts, group, first, subs.start[first], subs.length[first], np.bincount(group, minlength=first.size),
            values, present, span_start, span_len, np.bincount(inner.msg, minlength=starts.size).astype(np.int64))


def walk_runs(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int) -> tuple[V.Fields, V.Fields]:
    """:func:`polyprof.wire.vector.walk_fields` split in two: (the LEN fields ``field``, every
    other field), each message-major in wire order, with the walker's errors. A callchain is
    a run of such fields with a one-byte tag and length: those are taken with three gathers
    per lockstep step instead of a whole field decode (the numpy walk of a 4.9 MB recording's
    samples: ~2x quicker); anything else goes through the walker's own step (``field`` below
    16, the tag being one byte)."""
    tag = (field << 3) | V.LEN
    n = starts.size
    msg = np.flatnonzero(starts < ends)
    pos, end = starts[msg].astype(np.int64), ends[msg].astype(np.int64)
    runs: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []  # (msg, start, length, step)
    other: list[tuple[np.ndarray, ...]] = []  # (msg, field, wire, value, start, length, rank)
    last = max(buf.size - 1, 0)
    step = 0
    while msg.size:
        if step >= V._LOCKSTEP_MANY or (step >= V._LOCKSTEP and msg.size <= V._LOCKSTEP_MANY):
            other.append(V._tail(buf, msg, pos, end, step))  # long messages: as the walker does
            break
        ln = buf[np.minimum(pos + 1, last)].astype(np.int64)
        fast = (buf[pos] == tag) & (ln < 0x80) & (pos + 2 + ln <= end)
        if fast.all():  # every message at a run (a stack's frames): no selection
            start = pos + 2
            runs.append((msg, start, ln, step))
            pos = start + ln
        else:
            at = np.flatnonzero(fast)
            runs.append((msg[at], pos[at] + 2, ln[at], step))
            pos[at] += 2 + ln[at]
            slow = np.flatnonzero(~fast)
            *cols, pos[slow] = V._decode_one(buf, pos[slow], end[slow])
            other.append((msg[slow], *cols, np.full(slow.size, step, dtype=np.int64)))
        live = pos < end
        if not live.all():
            msg, pos, end = msg[live], pos[live], end[live]
        step += 1
    if not other:  # runs only: the k-th field of a message is its run of step k
        return _runs_only(n, runs, field)
    return _message_major(n, [(m, s, ln, np.full(m.size, k, dtype=np.int64)) for m, s, ln, k in runs], other, field)


def _runs_only(n: int, runs: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]], field: int) -> tuple[V.Fields, V.Fields]:
    """:func:`_message_major` for messages that are all runs: each step's runs written straight
    to their places (a 4.9 MB Chromium profile's 500k frames: no sort, no slot table)."""
    count = np.bincount(np.concatenate([m for m, *_ in runs]), minlength=n) if runs else np.zeros(n, dtype=np.int64)
    offset = np.cumsum(count) - count
    total = int(count.sum())
    start, length = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    for m, s, ln, k in runs:
        at = offset[m]
        at += k
        start[at], length[at] = s, ln
    z = np.zeros(0, dtype=np.int64)
    def same(value: int, dtype: type) -> np.ndarray:  # one value for every run: a read-only view
        return np.broadcast_to(np.array(value, dtype=dtype), (total,))

    return (V.Fields(np.repeat(np.arange(n, dtype=np.int64), count), same(field, np.int64), same(V.LEN, np.int8),
                     same(0, np.uint64), start, length),
            V.Fields(z, z, z.astype(np.int8), z.astype(np.uint64), z, z))


def _message_major(n: int, runs: list[tuple[np.ndarray, ...]], other: list[tuple[np.ndarray, ...]],
                   field: int) -> tuple[V.Fields, V.Fields]:
    """The walked parts (step-major) as message-major Fields in wire order: a field of rank k of
    message m is the walker's field ``offset[m] + k``; the walker's own LEN fields ``field`` (a
    longer tag or length) go with the runs."""
    z = np.zeros(0, dtype=np.int64)
    r: list[np.ndarray] = [np.concatenate(c) for c in zip(*runs)] if runs else [z] * 4
    o: list[np.ndarray] = [np.concatenate(c) for c in zip(*other)] if other else \
        [z, z, z.astype(np.int8), z.astype(np.uint64), z, z, z]
    moved = (o[1] == field) & (o[2] == V.LEN)
    if moved.any():
        r = [np.concatenate([a, b[moved]]) for a, b in zip(r, (o[0], o[4], o[5], o[6]))]
        o = [c[~moved] for c in o]
    count = np.bincount(r[0], minlength=n) + np.bincount(o[0], minlength=n)
    offset = np.cumsum(count) - count
    at = offset[r[0]] + r[3]
    is_run = np.zeros(int(count.sum()), dtype=bool)
    is_run[at] = True
    slot = np.empty(is_run.size, dtype=np.int64)
    slot[at] = np.arange(at.size)
    slot[offset[o[0]] + o[6]] = np.arange(o[0].size)
    take_r, take_o = slot[is_run], slot[~is_run]
    r = [c[take_r] for c in r[:3]]
    o = [c[take_o] for c in o[:6]]
    n_r = r[0].size
    runs_f = V.Fields(r[0], np.full(n_r, field, dtype=np.int64), np.full(n_r, V.LEN, dtype=np.int8),
                      np.zeros(n_r, dtype=np.uint64), r[1], r[2])
    return runs_f, V.Fields(o[0], o[1], o[2], o[3], o[4], o[5])
