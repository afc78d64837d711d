"""A fast decoder for the common packet shape: varints plus one PerfSample of varints.

A traced_perf sample packet is ``timestamp, sequence id, flags, perf_sample
{cpu, pid, tid, callstack_iid, cpu_mode, timebase_count, ...}``: every
field is a varint except ``perf_sample`` (66), whose content is varints too.
Such a packet is a flat run of varints in which keys and values alternate
(field 66's length stands in its value's place). So a whole chunk decodes
with a few numpy passes over its bytes instead of a field-by-field walk:
the packet payloads are gathered end to end, split into varints at every
byte below 0x80, and read as (key, value) pairs.

A packet is accepted only if that reading is consistent: an even number of
varints, keys of wire type 0 (or field 66), a 66 payload that ends on a
pair boundary inside the packet and holds only varint fields, no varint
longer than ten bytes. The first non-varint field of any other packet shows
up as such a key, so strings and fixed-width fields are never misread: those
packets (interned data, descriptors, producer events, ...) are left to the
general decoder, and ``ok`` says which is which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polyprof.formats.perfetto import _schema as S
from polyprof.wire import vector as V

__all__ = ["Flat", "decode", "decode_flat"]

PERF_KEY = (66 << 3) | 2
_MAX_FLAT = 2048  # bytes: a PerfSample packet is far smaller
_SHIFTS = [np.uint64(7 * k) for k in range(10)]


@dataclass
class Flat:
    """Fields of the packets the fast path accepted (``ok``); the last value of a field wins."""

    ok: np.ndarray
    top: dict[int, tuple[np.ndarray, np.ndarray]]  # field -> (present, value) per packet
    inner: dict[int, tuple[np.ndarray, np.ndarray]]  # fields of the perf_sample payload, per packet
    followers: tuple[np.ndarray, np.ndarray]  # values of repeated inner field 7, and count per packet


def _varints(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Start, end (exclusive) and value of every varint in ``b``; and where one is over-long."""
    ends = np.flatnonzero(b < 0x80) + 1
    starts = np.empty_like(ends)
    if ends.size:
        starts[0] = 0
        starts[1:] = ends[:-1]
    values = (b[starts] & 0x7F).astype(np.uint64)
    live = np.flatnonzero(ends - starts > 1)
    for k in range(1, 10):
        if not live.size:
            break
        values[live] |= (b[starts[live] + k] & 0x7F).astype(np.uint64) << _SHIFTS[k]
        live = live[ends[live] - starts[live] > k + 1]
    return starts, ends, values, live


#: The fields the reader takes from a flat packet: top level, and inside its PerfSample
#: (cpu, pid, tid, callstack_iid, cpu_mode, timebase_count, unwind_error, kernel_records_lost,
#: sample_skipped_reason; 7, the follower counts, is kept as a list).
TOP_FIELDS = (S.F_TIMESTAMP, S.F_SEQ_ID, S.F_SEQUENCE_FLAGS, S.F_INCREMENTAL_CLEARED, S.F_PREVIOUS_DROPPED,
              S.F_CLOCK_ID, S.F_PERF_SAMPLE)
INNER_FIELDS = (1, 2, 3, 4, 5, 6, 16, 17, 18)


def decode(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Flat:
    """:func:`decode_flat`, by the compiled twin once the wire kernels are compiled (same
    packets accepted, same values of ``TOP_FIELDS`` and ``INNER_FIELDS``; other fields left out)."""
    if not V.compiled():
        return decode_flat(buf, starts, ends)
    from polyprof.formats.perfetto._flat_compiled import decode_flat_compiled

    return Flat(*decode_flat_compiled(buf, starts, ends, TOP_FIELDS, INNER_FIELDS))


def decode_flat(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Flat:
    """Decode every packet ``buf[starts[i]:ends[i]]`` that has the flat shape.

    Packets longer than a sample packet can be (heap dumps, interned data,
    bundles) are not tried.
    """
    small = np.flatnonzero((ends - starts <= _MAX_FLAT) & _maybe_flat(buf, starts, ends))
    if small.size == starts.size:
        return _decode(buf, starts, ends)
    part = _decode(buf, starts[small], ends[small])
    n = starts.size
    ok = np.zeros(n, dtype=bool)
    ok[small] = part.ok

    def spread(cols: dict[int, tuple[np.ndarray, np.ndarray]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        out = {}
        for k, (present, value) in cols.items():
            p, v = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.uint64)
            p[small], v[small] = present, value
            out[k] = (p, v)
        return out

    counts = np.zeros(n, dtype=np.int64)
    counts[small] = part.followers[1]
    return Flat(ok, spread(part.top), spread(part.inner), (part.followers[0], counts))


def _maybe_flat(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, fields: int = 3) -> np.ndarray:
    """False for packets that cannot be flat: one of their first ``fields`` top-level fields
    (parsed as protobuf does, from the start) is neither a varint nor ``perf_sample``, as in
    a sample packet that carries its own interned data. ``_decode`` would refuse those after
    decoding every varint of them; anything unusual (a cut varint, a field running past the
    packet) leaves the packet to it."""
    maybe = np.ones(starts.size, dtype=bool)
    pos = starts.astype(np.int64)
    walking = np.flatnonzero(pos < ends)
    for _ in range(fields):
        if not walking.size:
            break
        p, end = pos[walking], ends[walking]
        key, kw = V.varints_at(buf, p)
        val, vw = V.varints_at(buf, p + kw, 10)
        inside = (kw > 0) & (vw > 0) & (p + kw + vw <= end)
        perf = key == PERF_KEY
        other = inside & ((key & 7) != 0) & ~perf
        maybe[walking[other]] = False
        p = p + kw + vw + np.where(perf, val, 0)
        go = inside & ~other & (p < end) & ~(perf & (val < 0))  # a length past 2**63 stops the look
        walking = walking[go]
        pos[walking] = p[go]
    return maybe


def _decode(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Flat:
    n = starts.size
    lengths = ends - starts
    b = V.gather_spans(buf, starts, lengths)  # a copy (masked below); packets are in order: one mask
    pkt_end = np.cumsum(lengths)
    pkt_start = pkt_end - lengths
    b[pkt_end[lengths > 0] - 1] &= 0x7F  # every packet ends a varint (a bad ending is caught below)
    t_start, t_end, t_val, overlong = _varints(b)
    first = np.searchsorted(t_start, pkt_start)
    count = np.diff(np.append(first, t_start.size))
    ok = (count % 2 == 0) & (count > 0)
    # A packet whose last byte had the continuation bit is not flat: its last
    # varint was cut short by the masking above.
    last_byte = buf[ends[lengths > 0] - 1]
    ok[np.flatnonzero(lengths > 0)[last_byte >= 0x80]] = False
    owner_tok = np.repeat(np.arange(n), count)
    ok[owner_tok[overlong]] = False
    keep = np.repeat(ok, count)
    t_start, t_end, t_val = t_start[keep], t_end[keep], t_val[keep]
    keys, vals = t_val[0::2], t_val[1::2]
    owner = np.repeat(np.arange(n), np.where(ok, count, 0) // 2)
    key_at, val_end = t_start[0::2], t_end[1::2]
    # The perf_sample payload: the pairs after its length, up to its end.
    perf = np.flatnonzero(keys == PERF_KEY)
    pay_start = np.full(n, -1, dtype=np.int64)
    pay_end = np.full(n, -1, dtype=np.int64)
    pay_start[owner[perf]] = val_end[perf]
    pay_end[owner[perf]] = val_end[perf] + vals[perf].astype(np.int64)
    nested = (key_at >= pay_start[owner]) & (key_at < pay_end[owner])
    top_perf = (keys == PERF_KEY) & ~nested
    ok[np.bincount(owner[top_perf], minlength=n) > 1] = False
    has_pay = pay_start >= 0
    boundary = np.zeros(n, dtype=bool)
    boundary[owner[nested & (val_end == pay_end[owner])]] = True
    ok &= ~has_pay | boundary | (pay_end == pay_start)
    ok &= ~has_pay | (pay_end <= pkt_end)
    wire = keys & np.uint64(7)
    ok[owner[(wire != 0) & ~top_perf]] = False
    return _columns(ok, owner, keys, vals, nested, n)


def _columns(ok: np.ndarray, owner: np.ndarray, keys: np.ndarray, vals: np.ndarray, nested: np.ndarray,
             n: int) -> Flat:
    good = ok[owner]
    field = (keys[good] >> np.uint64(3)).astype(np.int64)
    value, who, deep = vals[good], owner[good], nested[good]
    numbers, slot = np.unique(field * 2 + deep, return_inverse=True)
    slot = slot.reshape(-1)
    # One scatter for all fields; for repeated indices the later write wins,
    # which is protobuf's "last value" rule.
    table = np.zeros((n, numbers.size), dtype=np.uint64)
    present = np.zeros((n, numbers.size), dtype=bool)
    table[who, slot] = value
    present[who, slot] = True
    top: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    inner: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for j, code in enumerate(numbers.tolist()):
        (inner if code & 1 else top)[code >> 1] = (present[:, j], table[:, j])
    rep = deep & (field == 7)
    return Flat(ok, top, inner, (value[rep], np.bincount(who[rep], minlength=n).astype(np.int64)))
