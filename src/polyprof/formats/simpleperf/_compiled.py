"""Compiled walks of a report-sample file (numba; imported only with the compiled decode kernels).

Two passes replace the generic ones for the common shape of a recording: every record body is
one payload field, and every sample's callchain entries lie next to each other.

- :func:`frame_payloads` frames the records and finds each one's payload in the same loop,
  instead of framing them and walking every body's fields again.
- :func:`sample_chains` walks the sample payloads once (their scalars and unwinding result, as
  :func:`polyprof.formats._span_compiled.sub_spans` does) and numbers each sample's callchain by
  its bytes first. Only a callchain not seen before has its entries grouped by their bytes and
  written out: a recording repeats callchains (the benchmark's large file, 1.8M samples, has
  825k distinct ones), so half of the 54M entries are never hashed, written, gathered or
  interned one by one.

Both decline (return None) whatever they do not take, and the caller then uses the generic
walk, which reads or names it as before.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from polyprof.formats._span_compiled import _skip, group_of
from polyprof.wire import background
from polyprof.wire._compiled import _varint

__all__ = ["Chains", "frame_payloads", "sample_chains"]

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}  # as wire/_compiled.py: no allocation
_DAMAGED, _FULL, _SPLIT = -2, -1, -3
_MIX = 0x9E3779B97F4A7C15
_AHEAD = 8  # the merge prefetches the table slot of the callchain this many ahead
#: At most this many bytes of entry ids are reserved at once (pages touched only as written);
#: a larger file whose distinct callchains need more runs again with room for every entry.
_RESERVE_MAX = 1 << 31


def _prefetch_of(typingctx, array, index):  # noqa: ANN001, ANN202, ARG001 - numba's intrinsic signature
    """``_prefetch(array, index)``: ask the CPU to bring ``array[index]`` into its caches (LLVM's
    ``prefetch``: read, high locality); no effect on any value. ``index`` must be inside ``array``."""
    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        arrty = signature.args[0]
        ary = context.make_array(arrty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, arrty, ary, [args[1]], wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.void(array, types.int64), codegen


_prefetch: Any = intrinsic(_prefetch_of)


@njit(**_OPTIONS)
def _frame(buf, pos, end, rec_start, kind, pay_start, rec_end):  # noqa: ANN001, ANN202 - numba
    """Records ``<uint32 LE size><body>`` from ``pos`` while each body is one payload field: the
    tag byte of a message field 1 to 6 and a varint length that reaches the body's end. Writes
    each record's body start, kind, payload start and end; returns (records, where it stopped)."""
    k = 0
    while pos + 4 <= end:
        size = np.int64(buf[pos]) | (np.int64(buf[pos + 1]) << 8) | (np.int64(buf[pos + 2]) << 16) | \
            (np.int64(buf[pos + 3]) << 24)
        if size == 0 or size > end - pos - 4 or k >= rec_start.size:
            break
        b, e = pos + 4, pos + 4 + size
        tag = buf[b]
        if tag & 7 != 2 or tag < 10 or tag > 50:  # (field << 3) | 2 for fields 1 to 6
            break
        length, q = _varint(buf, b + 1, e)
        if q < 0 or length != np.uint64(e - q):
            break
        rec_start[k], kind[k], pay_start[k], rec_end[k] = b, tag >> 3, q, e
        k += 1
        pos = e
    return k, pos


def frame_payloads(buf: np.ndarray, pos: int, end: int) -> tuple[Any, ...] | None:
    """(body start, payload kind, payload start, body end) of every record from ``pos`` up to
    the zero end marker, and where that marker is; None unless every record until the marker
    is one payload field (the generic framing and field walk then take the file)."""
    room = max((end - pos) // 6, 0)  # a record is at least 4 + 2 bytes
    rec_start, pay_start, rec_end = (np.empty(room, dtype=np.int64) for _ in range(3))
    kind = np.empty(room, dtype=np.uint8)
    k, stop = _frame(buf, pos, end, rec_start, kind, pay_start, rec_end)
    if stop + 4 > end or buf[stop:stop + 4].any():
        return None
    # Views: the reservations' unwritten pages were never touched (copies: 45 MB more fresh memory
    # for the large recording's 1.8M records).
    return rec_start[:k], kind[:k], pay_start[:k], rec_end[:k], np.int64(stop)


@njit(inline="always", **_OPTIONS)
def _word(aligned, r, q):  # noqa: ANN001, ANN202
    """The 8 bytes from byte ``8 * q + r / 8`` of the buffer (``r``: a bit shift, a multiple of 8)."""
    w = aligned[q] >> r
    if r:
        w |= aligned[q + 1] << (np.uint64(64) - r)
    return w


@njit(inline="always", **_OPTIONS)
def _word_of(buf, aligned, s, n, q, r, j, fast):  # noqa: ANN001, ANN202
    """Word ``j`` of ``buf[s:s+n]`` (little-endian, zero past the span's end); ``q``, ``r``: the
    span's aligned word and bit shift; not ``fast``: near the buffer's end, byte by byte."""
    if fast:
        w = _word(aligned, r, q + j)
    else:
        w = np.uint64(0)
        for b in range(8):
            w |= np.uint64(buf[s + 8 * j + b]) << np.uint64(8 * b) if 8 * j + b < n else np.uint64(0)
    if 8 * j + 8 > n:
        w &= (np.uint64(1) << np.uint64(8 * (n - 8 * j))) - np.uint64(1)
    return w


@njit(inline="always", **_OPTIONS)
def _span_hash(buf, aligned, s, n):  # noqa: ANN001, ANN202
    """A hash of ``buf[s:s+n]`` read as little-endian words of eight bytes (the last one padded
    with zeros), in four lanes of words (four independent multiply chains: a callchain of ~40
    words is not one chain of 40 dependent multiplies), the lanes folded together at the end."""
    mix = np.uint64(_MIX)
    q, r = s >> 3, np.uint64(8 * (s & 7))
    fast = q + (n >> 3) + 2 < aligned.size
    words = (n + 7) >> 3
    h0 = np.uint64(n) * mix
    h1, h2, h3 = h0 ^ np.uint64(1), h0 ^ np.uint64(2), h0 ^ np.uint64(3)
    j = 0
    while j + 4 <= words:
        h0 = (h0 ^ (h0 >> np.uint64(29)) ^ _word_of(buf, aligned, s, n, q, r, j, fast)) * mix
        h1 = (h1 ^ (h1 >> np.uint64(29)) ^ _word_of(buf, aligned, s, n, q, r, j + 1, fast)) * mix
        h2 = (h2 ^ (h2 >> np.uint64(29)) ^ _word_of(buf, aligned, s, n, q, r, j + 2, fast)) * mix
        h3 = (h3 ^ (h3 >> np.uint64(29)) ^ _word_of(buf, aligned, s, n, q, r, j + 3, fast)) * mix
        j += 4
    h = (h0 ^ (h0 >> np.uint64(29)) ^ h1) * mix
    h = (h ^ (h >> np.uint64(29)) ^ h2) * mix
    h = (h ^ (h >> np.uint64(29)) ^ h3) * mix
    while j < words:
        h = (h ^ (h >> np.uint64(29)) ^ _word_of(buf, aligned, s, n, q, r, j, fast)) * mix
        j += 1
    return h ^ (h >> np.uint64(32))


@njit(inline="always", **_OPTIONS)
def _same_bytes(buf, aligned, a, b, n):  # noqa: ANN001, ANN202
    """Whether ``buf[a:a+n]`` equals ``buf[b:b+n]``, compared eight bytes at a time."""
    qa, ra, qb, rb = a >> 3, np.uint64(8 * (a & 7)), b >> 3, np.uint64(8 * (b & 7))
    if max(qa, qb) + (n >> 3) + 2 < aligned.size:
        for j in range(n >> 3):
            if _word(aligned, ra, qa + j) != _word(aligned, rb, qb + j):
                return False
        j = n >> 3
        tail = n & 7
        mask = (np.uint64(1) << np.uint64(8 * tail)) - np.uint64(1)
        return tail == 0 or (_word(aligned, ra, qa + j) ^ _word(aligned, rb, qb + j)) & mask == 0
    for j in range(n):
        if buf[a + j] != buf[b + j]:
            return False
    return True


@njit(inline="always", **_OPTIONS)
def _chain_slot(buf, aligned, ctable, cmask, c_hash, c_len, c_start, h, s, n):  # noqa: ANN001, ANN202
    """Probe the callchain table for the ``n`` bytes at ``s`` (hash ``h``): (the slot, the
    group holding equal bytes), or (the empty slot where they go, -1)."""
    at = h & cmask
    while True:
        g = ctable[at]
        if g < 0 or (c_hash[g] == h and c_len[g] == n and _same_bytes(buf, aligned, c_start[g], s, n)):
            return at, g
        at = (at + np.uint64(1)) & cmask


@njit(inline="always", **_OPTIONS)
def _fields(buf, aligned, m, p, end, field, slot, values, present, span, spans, last, last_n,  # noqa: ANN001, ANN202
            last_c):
    """Walk sample ``m``'s fields (scalars and the ``span`` field as ``sub_spans`` does); returns
    (callchain start, end, entries, whether it is the previous sample's callchain
    ``buf[last:last+last_n]`` of ``last_c`` entries) or a negative start: damaged, or entries
    not side by side."""
    cs, ce, c, closed, same = p, p, 0, False, False
    ftag = (field << 3) | 2
    while p < end:
        at = p
        tag, p = _varint(buf, p, end)
        wt = np.int64(tag & np.uint64(7))
        number = np.int64(tag >> np.uint64(3))
        if p < 0 or number == 0 or wt == 3 or wt == 4 or wt == 6 or wt == 7:
            return _DAMAGED, 0, 0, False
        if wt == 0 and number < slot.size and slot[number] >= 0:
            value, p = _varint(buf, p, end)
            if p < 0:
                return _DAMAGED, 0, 0, False
            values[m, slot[number]] = value
            present[m, slot[number]] = True
            closed = c > 0
            continue
        s, n, p = _skip(buf, p, end, wt)
        if p < 0:
            return _DAMAGED, 0, 0, False
        if wt == 2 and number == field:
            if c == 0:
                cs = at
                after = at + last_n
                if last_c > 0 and after <= end and (after == end or buf[after] != ftag) and \
                        _same_bytes(buf, aligned, last, at, last_n):  # a sample per event: often the same
                    p = ce = after
                    c, closed, same = last_c, True, True
                    continue
            elif closed:
                return _SPLIT, 0, 0, False
            c += 1
            # The entries that follow, while their tag and length are one byte each: a tight loop.
            while p + 1 < end and buf[p] == ftag and buf[p + 1] < 0x80:
                p += 2 + np.int64(buf[p + 1])
                c += 1
            if p > end:
                return _DAMAGED, 0, 0, False
            ce = p
            continue
        closed = c > 0
        if wt == 2 and number == span:
            spans[m, 0], spans[m, 1] = s, n
            spans[m, 2] += 1
    return cs, ce, c, same


@njit(inline="always", **_OPTIONS)
def _entries(buf, aligned, cs, ce, etable, ids, k, groups, e_first, e_start, e_len, e_words):  # noqa: ANN001, ANN202
    """Group the entries of one new callchain ``buf[cs:ce]`` (already walked: valid) by their bytes
    through ``etable``, writing their groups from ``ids[k]``; returns (next k, groups), k
    negative when the group arrays are full."""
    p = cs
    while p < ce:
        _, p = _varint(buf, p, ce)
        s, n, p = _skip(buf, p, ce, 2)
        g = group_of(buf, aligned, etable, s, n, k, groups, e_first, e_start, e_len, e_words)
        if g < 0:
            return np.int64(_FULL), groups
        if g == groups:
            groups += 1
        ids[k] = g
        k += 1
    return k, groups


@njit(inline="always", **_OPTIONS)
def _settle(buf, aligned, ctable, cmask, c_first, c_start, c_len, c_hash, c_off, etable, ids, e_first, e_start,  # noqa: ANN001, ANN202
            e_len, e_words, chain_of, pm, m, cs, n, c, h, groups, k, egroups):
    """Number the callchain of sample ``pm`` (``n`` bytes at ``cs``, ``c`` entries, hash ``h``):
    a known one, or the next new one with its entries grouped; samples ``pm:m`` take it (the
    ones after ``pm`` repeat its callchain). Returns (groups, k, entry groups); groups -1 when
    ``ids`` or the entry groups are full."""
    at, g = _chain_slot(buf, aligned, ctable, cmask, c_hash, c_len, c_start, h, cs, n)
    if g < 0:
        if k + c > ids.size:
            return np.int64(_FULL), k, egroups
        k, egroups = _entries(buf, aligned, cs, cs + n, etable, ids, k, egroups, e_first, e_start, e_len, e_words)
        if k < 0:
            return np.int64(_FULL), k, egroups
        ctable[at] = groups
        c_first[groups], c_start[groups], c_len[groups], c_hash[groups], c_off[groups + 1] = pm, cs, n, h, k
        g = groups
        groups += 1
    for j in range(pm, m):
        chain_of[j] = g
    return groups, k, egroups


@njit(**_OPTIONS)
def _chains(buf, aligned, lo, hi, starts, ends, field, slot, values, present, span, spans, chain,  # noqa: ANN001, ANN202
            chain_of, ctable, c_first, c_start, c_len, c_hash, c_off, etable, ids, e_first, e_start, e_len, e_words,
            out):
    """Walk samples ``lo:hi`` (see :func:`sample_chains`), their callchains numbered from 0 in
    these tables; returns the distinct callchains (``out``: the entry groups), or -1 when
    ``ids`` or the entry groups are full, -2 on damage, -3 when a callchain is split.

    Each callchain is looked up one sample late: its table slot is prefetched as soon as its
    hash is known, and the previous callchain is numbered meanwhile (the 16 MB table misses the
    cache on nearly every lookup; waiting for it was ~0.19 s of the large recording's ~0.48 s
    walk). The numbering is the same: callchains are numbered in sample order."""
    cmask = np.uint64(ctable.size - 1)
    groups, k, egroups, last, last_n, last_c = 0, 0, 0, 0, 0, 0
    pm, pcs, pn, pc, ph = -1, 0, 0, 0, np.uint64(0)  # the sample whose callchain waits to be numbered
    c_off[0] = 0
    for m in range(lo, hi):
        cs, ce, c, same = _fields(buf, aligned, m, starts[m], ends[m], field, slot, values, present, span, spans,
                                  last, last_n, last_c)
        if cs < 0:
            return cs
        chain[m] = c
        if same:  # (never the part's first sample: last_c is 0 there)
            if pm < 0:
                chain_of[m] = chain_of[m - 1]
            continue  # else numbered with the waiting sample
        n = ce - cs
        last, last_n, last_c = cs, n, c
        h = _span_hash(buf, aligned, cs, n)
        _prefetch(ctable, np.int64(h & cmask))
        if pm >= 0:
            groups, k, egroups = _settle(buf, aligned, ctable, cmask, c_first, c_start, c_len, c_hash, c_off, etable,
                                         ids, e_first, e_start, e_len, e_words, chain_of, pm, m, pcs, pn, pc,
                                         ph, groups, k, egroups)
            if groups < 0:
                return groups
        pm, pcs, pn, pc, ph = m, cs, n, c, h
    if pm >= 0:
        groups, k, egroups = _settle(buf, aligned, ctable, cmask, c_first, c_start, c_len, c_hash, c_off, etable,
                                     ids, e_first, e_start, e_len, e_words, chain_of, pm, hi, pcs, pn, pc, ph,
                                     groups, k, egroups)
        if groups < 0:
            return groups
    out[0] = egroups
    return groups


@njit(**_OPTIONS)
def _uses(chain_of, c_off, ids, counts, sizes):  # noqa: ANN001, ANN202
    """``sizes[g]``: the callchain entries of every sample that are in byte group ``g``."""
    for m in range(chain_of.size):
        counts[chain_of[m]] += 1
    for g in range(counts.size):
        for j in range(c_off[g], c_off[g + 1]):
            sizes[ids[j]] += counts[g]


class Chains(NamedTuple):
    """What :func:`sample_chains` found: per sample, per distinct callchain, per byte group."""

    values: np.ndarray     # per sample: its varint fields ``numbers`` (the last one wins)
    present: np.ndarray
    span_start: np.ndarray  # per sample: its last LEN field ``span`` (length -1 when none), how many
    span_len: np.ndarray
    span_count: np.ndarray
    chain: np.ndarray      # per sample: its callchain entries
    chain_of: np.ndarray   # per sample: its distinct callchain (numbered in order of first sight)
    chain_first: np.ndarray  # per distinct callchain: its first sample
    offsets: np.ndarray    # per distinct callchain: where its entries start in ``ids`` (and the end)
    ids: np.ndarray        # per entry of the distinct callchains: its byte group (first sight order)
    first: np.ndarray      # per byte group: its first entry in ``ids``, start and length in the buffer
    start: np.ndarray
    length: np.ndarray
    sizes: np.ndarray      # per byte group: the callchain entries of all samples in it


@njit(**_OPTIONS)
def _merge(buf, aligned, ctable, c_first, c_start, c_len, c_hash, c_off, ids, etable, e_first, e_start, e_len,  # noqa: ANN001, ANN202
           e_words, groups, out, b_first, b_start, b_len, b_hash, b_off, b_ids, b_estart, b_elen, b_groups, b_egroups,
           chain_map, emap):
    """Append the distinct callchains of a later part (``b_*``) that the first part's tables do
    not hold, as one walk of all samples would have met them: in their order of first sight,
    their entries' groups numbered on from the first part's (``out[0]``). ``chain_map``: the
    callchain of each of the part's; ``emap``: room for its entry groups' ids here (-1 each).
    Returns the callchains in all, or -1 when full."""
    cmask = np.uint64(ctable.size - 1)
    k, egroups = c_off[groups], out[0]
    for gb in range(b_groups):
        if gb + _AHEAD < b_groups:  # the lookups are independent: their table slots asked for ahead
            _prefetch(ctable, np.int64(b_hash[gb + _AHEAD] & cmask))
        h, s, n = b_hash[gb], b_start[gb], b_len[gb]
        g = _chain_slot(buf, aligned, ctable, cmask, c_hash, c_len, c_start, h, s, n)[1]
        if g >= 0:
            chain_map[gb] = g
            continue
        if k + b_off[gb + 1] - b_off[gb] > ids.size:
            return _FULL
        for j in range(b_off[gb], b_off[gb + 1]):
            lg = b_ids[j]
            if emap[lg] < 0:  # equal bytes are one group: any member's bytes stand for it
                e = group_of(buf, aligned, etable, b_estart[lg], b_elen[lg], k, egroups, e_first, e_start,
                             e_len, e_words)
                if e < 0:
                    return _FULL
                if e == egroups:
                    egroups += 1
                emap[lg] = e
            ids[k] = emap[lg]
            k += 1
        # not added to the table: the part's callchains are distinct, none can meet this one again
        c_first[groups], c_start[groups], c_len[groups], c_hash[groups], c_off[groups + 1] = \
            b_first[gb], s, n, h, k
        chain_map[gb] = groups
        groups += 1
    out[0] = egroups
    return groups


class _Part:
    """The tables of one walk over samples ``lo:hi``: its distinct callchains (room for
    ``chains``) and their entries (room for ``room``; ``cap`` entry-group slots)."""

    def __init__(self, lo: int, hi: int, chains: int, room: int, cap: int) -> None:
        self.lo, self.hi = lo, hi
        self.c_first, self.c_start, self.c_len = (np.empty(chains, dtype=np.int64) for _ in range(3))
        self.c_off = np.empty(chains + 1, dtype=np.int64)
        self.c_hash = np.empty(chains, dtype=np.uint64)
        self.ctable = np.full(1 << max(2 * (hi - lo), 1 << 16).bit_length(), -1,
                              dtype=np.int32 if chains < 2**30 else np.int64)
        # pages touched only as written; two bytes an entry while the entry groups fit (cap // 2 of
        # them: the first try's 32k), 50 MB of the large recording's 25M entries instead of 100
        self.ids = np.empty(room, dtype=np.uint16 if cap // 2 <= 1 << 16 else np.int32)
        self.etable = np.full(cap, -1, dtype=np.int64)
        self.e_first, self.e_start, self.e_len = (np.empty(cap // 2, dtype=np.int64) for _ in range(3))
        self.e_words = np.empty((cap // 2, 2), dtype=np.uint64)
        self.out = np.zeros(1, dtype=np.int64)
        self.groups = _DAMAGED  # until walked

    def walk(self, buf: np.ndarray, aligned: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int,
             slot: np.ndarray, per_sample: tuple[np.ndarray, ...], span: int) -> None:
        values, present, spans, chain, chain_of = per_sample
        self.groups = _chains(buf, aligned, self.lo, self.hi, starts, ends, field, slot, values, present, span, spans,
                              chain, chain_of, self.ctable, self.c_first, self.c_start, self.c_len, self.c_hash,
                              self.c_off, self.etable, self.ids, self.e_first, self.e_start, self.e_len,
                              self.e_words, self.out)

    def merge(self, buf: np.ndarray, aligned: np.ndarray, later: _Part, chain_of: np.ndarray) -> int:
        """Take ``later``'s callchains new to this part (:func:`_merge`); its samples' callchains
        renumbered into these tables."""
        chain_map = np.empty(later.groups, dtype=np.int64)
        got = _merge(buf, aligned, self.ctable, self.c_first, self.c_start, self.c_len, self.c_hash, self.c_off,
                     self.ids, self.etable, self.e_first, self.e_start, self.e_len, self.e_words, self.groups,
                     self.out, later.c_first, later.c_start, later.c_len, later.c_hash, later.c_off, later.ids,
                     later.e_start, later.e_len, later.groups, int(later.out[0]), chain_map,
                     np.full(int(later.out[0]), -1, dtype=np.int64))
        if got >= 0:
            chain_of[later.lo:later.hi] = chain_map[chain_of[later.lo:later.hi]]
        self.groups = int(got)
        return self.groups


#: From this many samples the walk runs on two threads when two CPUs are there (halves of the
#: samples, the second half's callchains merged into the first's tables after): the large
#: benchmark recording's walk takes ~1.2 s of a ~3.5 s read on one.
PARALLEL_FROM = 1 << 17


def _walk_parts(parts: list[_Part], buf: np.ndarray, aligned: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                field: int, slot: np.ndarray, per_sample: tuple[np.ndarray, ...], span: int) -> None:
    """Walk every part: the first on this thread, the others each on its own (the kernel
    releases the GIL); a part whose thread failed keeps ``groups`` -2 (declined)."""
    args = (buf, aligned, starts, ends, field, slot, per_sample, span)
    threads = [threading.Thread(target=p.walk, args=args, name="polyprof-simpleperf-walk", daemon=True)
               for p in parts[1:]]
    for t in threads:
        t.start()
    parts[0].walk(*args)
    for t in threads:
        t.join()


def _split(n: int) -> int:
    """Where the samples are split between two walking threads (``n``: no split): only with a
    CPU to spare (:func:`polyprof.wire.background.spare_cpu`; on a busy machine the second thread
    would only wait for one and add the merge's work, ~0.1 s)."""
    return n // 2 if n >= PARALLEL_FROM and background.spare_cpu() else n


def sample_chains(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, field: int, numbers: tuple[int, ...],
                  span: int, mid: int | None = None) -> Chains | None:
    """Walk the sample payloads ``buf[starts[i]:ends[i]]``: callchain entries (LEN field ``field``)
    numbered by the bytes of each sample's whole callchain, then entries grouped by their bytes
    within the distinct callchains only. None on damage, when a sample's entries are not side
    by side, or when the entries are mostly distinct (the generic walk then takes them).
    Large inputs are walked in two halves at once (``mid``: where, instead of :func:`_split`'s
    choice); the numbering is the one walk's."""
    n = starts.size
    slot = np.full(max(numbers, default=0) + 1, -1, dtype=np.int64)
    slot[list(numbers)] = np.arange(len(numbers))
    values = np.zeros((n, len(numbers)), dtype=np.uint64)
    present = np.zeros((n, len(numbers)), dtype=bool)
    spans = np.zeros((n, 3), dtype=np.int64)
    aligned = buf[:buf.size // 8 * 8].view("<u8")
    chain = np.empty(n, dtype=np.int64)
    chain_of = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    per_sample = (values, present, spans, chain, chain_of)
    mid = _split(n) if mid is None else mid
    sizes = ends - starts
    np.maximum(sizes, 0, out=sizes)
    bytes_, later = int(sizes.sum()), int(sizes[mid:].sum())
    room = min(bytes_ // 2, _RESERVE_MAX // 4)  # an entry is at least two bytes
    cap, most = 1 << 16, 1 << max(bytes_ // 8, 1 << 16).bit_length()
    while cap <= most:
        first = _Part(0, mid, n, room, cap)
        parts = [first] + ([_Part(mid, n, n - mid, min(room, later // 2 + 1), cap)] if mid < n else [])
        _walk_parts(parts, buf, aligned, starts, ends, field, slot, per_sample, span)
        worst = min(p.groups for p in parts)
        if worst >= 0 and len(parts) > 1:
            worst = first.merge(buf, aligned, parts[1], chain_of)
        if worst >= 0:
            return _finish(first.groups, int(first.out[0]), values, present, spans, chain, chain_of, first.c_first,
                           first.c_off, first.ids, first.e_first, first.e_start, first.e_len)
        if worst != _FULL:
            return None
        values[:], present[:], spans[:] = 0, False, 0
        cap, room = cap * 8, max(room, bytes_ // 2)
    return None


def _finish(groups: int, egroups: int, values: np.ndarray, present: np.ndarray, spans: np.ndarray,
            chain: np.ndarray, chain_of: np.ndarray, c_first: np.ndarray, c_off: np.ndarray, ids: np.ndarray,
            e_first: np.ndarray, e_start: np.ndarray, e_len: np.ndarray) -> Chains:
    offsets = c_off[:groups + 1].copy()
    ids = ids[:int(offsets[-1])]  # a view: the reservation's unwritten pages were never touched
    counts = np.zeros(groups, dtype=np.int64)
    sizes = np.zeros(egroups, dtype=np.int64)
    _uses(chain_of, offsets, ids, counts, sizes)
    span_len = spans[:, 1]
    span_len[spans[:, 2] == 0] = -1  # (in place: no other column of the size of the samples)
    return Chains(values, present, spans[:, 0], span_len, spans[:, 2], chain, chain_of, c_first[:groups], offsets,
                  ids, e_first[:egroups].copy(), e_start[:egroups].copy(), e_len[:egroups].copy(), sizes)


def warm_later(field: int, numbers: tuple[int, ...], span: int) -> threading.Thread:
    """Load the machine code of the walk's kernels (:func:`warm_calls`) on a daemon thread,
    started just before a large file is framed: numba loads a kernel on its first call (~0.1 s
    of the large recording's read), and here that happens while the framing kernel runs
    without the GIL."""
    return background.warm_later(lambda: warm_calls(field, numbers, span), "polyprof-simpleperf-warm")


def warm_calls(field: int, numbers: tuple[int, ...], span: int) -> Chains | None:
    """:func:`sample_chains` in two parts (its merge too) and the entry decoder called once on
    two tiny samples, with the argument types a read passes (read-only bytes, as a file's
    mapping or bytes are)."""
    from polyprof.wire import vector as V

    entry = bytes([(field << 3) | 2, 2, 0x08, 0x01])
    buf = np.frombuffer(b"\0\0" + entry * 2 + b"\0" * 16, dtype=np.uint8)
    starts, ends = np.array([2, 6], dtype=np.int64), np.array([6, 10], dtype=np.int64)
    V.scalar_fields(buf, starts + 2, ends, numbers)
    return sample_chains(buf, starts, ends, field, numbers, span, mid=1)
