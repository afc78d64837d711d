"""Compiled kernels over whole stacks (numba): bulk interning and outermost-occurrence sums.

:func:`intern_stacks` gives exactly :func:`polyprof.model.bulk_stacks._intern`'s
result (a differential test compares them over random and real stacks) by
another road: the stacks are sorted by content, root first (a multikey
quicksort: three-way partitions on the frame at one depth, so a prefix
shared by many stacks is compared once per partition, and a stack alone in
its partition is never looked at again), and then one linear walk over the
sorted stacks (copied end to end in sorted order first: reading stacks in
a random order costs a cache miss each, so it is done once) hands out
callsites in pre-order with siblings ordered by location — the numbering
the level-by-level numpy walk produces. Only the index of the stacks, the
sorted copy, one int32 per stack and the result are allocated, where the
numpy walk keeps a frontier and per-level copies (a few hundred MB less at
peak on a 7.8M callsite profile, and about twice as quick).

When every stack fits whole in its row of sort keys (words of ``per``
locations) and there are many stacks, the rows are radix-sorted instead
(stable LSD, 11 bits a pass, constant digits skipped) and the walk reads
the new frames straight from the sorted rows, comparing neighbouring rows
word by word for the shared prefix: no copy of the stacks at all. On the
895k-stack benchmark profile this interning took 0.87 s with the quicksort
and the copy, 0.49 s so (CPU, same process; 0.68 -> 0.38 s on the 700k
stacks diverging at the root).

:func:`outermost_sums` is :func:`polyprof.analysis.graph.node_weights`'s
cumulative column for callsites in pre-order: one pass with a running
"covered until" per node instead of a sort of every (callsite, node) pair.

Loaded only for work large enough to pay for numba (see
``polyprof.model.bulk_stacks``); small inputs never import it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from polyprof.model.bulk_stacks import size_dtype

__all__ = ["intern_stacks", "outermost_sums", "subtree_sums", "subtree_sums_in_place"]

#: Partitions this small are finished by insertion sort (fewer passes than more partitioning).
_SMALL = 12
#: Words of each stack carried along in the sort (the rest are read from the stacks when needed).
_KEYS = 4
_KEYS_BYTES = 64 << 20
#: From this many stacks (all of them carried whole in the sort's rows) the rows are radix-sorted.
_RADIX_FROM = 1 << 14
_RADIX_BITS = 11
_RADIX_BUCKETS = 1 << _RADIX_BITS


@njit(inline="always", cache=True, nogil=True)
def _word(flat, start, length, step, i, d, bits, per):  # noqa: ANN001, ANN202 - numba
    """Stack ``i``'s locations at depths ``d .. d+per-1`` (root = 0) packed as one int64 that
    compares as the sequence does: ``location + 1`` per ``bits``-bit digit, 0 past the end
    (so a shorter stack sorts first)."""
    w = np.int64(0)
    n = length[i]
    for t in range(per):
        v = np.int64(flat[start[i] + step * (d + t)]) + 1 if d + t < n else np.int64(0)
        w = (w << bits) | v
    return w


@njit(inline="always", cache=True, nogil=True)
def _less(flat, start, length, step, a, b, d, bits, per):  # noqa: ANN001, ANN202 - numba
    """Whether stack ``a`` sorts before stack ``b``, both equal above depth ``d``."""
    while True:
        x = _word(flat, start, length, step, a, d, bits, per)
        y = _word(flat, start, length, step, b, d, bits, per)
        if x != y:
            return x < y
        if d + per > length[a]:
            return False
        d += per


@njit(cache=True, nogil=True)
def _first_words(flat, start, length, step, bits, per, keys):  # noqa: ANN001, ANN202 - numba
    """Every stack's first ``keys.shape[1]`` words, read in the stacks' own (memory) order."""
    for i in range(keys.shape[0]):
        for w in range(keys.shape[1]):
            keys[i, w] = _word(flat, start, length, step, i, w * per, bits, per)


@njit(inline="always", cache=True, nogil=True)
def _swap(idx, keys, word, a, b):  # noqa: ANN001, ANN202 - numba
    idx[a], idx[b] = idx[b], idx[a]
    word[a], word[b] = word[b], word[a]
    for t in range(keys.shape[1]):
        keys[a, t], keys[b, t] = keys[b, t], keys[a, t]


@njit(inline="always", cache=True, nogil=True)
def _row_less(flat, start, length, step, idx, keys, a, b, w, bits, per):  # noqa: ANN001, ANN202 - numba
    """Whether row ``a`` sorts before row ``b``, both equal above word ``w``."""
    mask = (np.int64(1) << bits) - 1
    for t in range(w, keys.shape[1]):
        x, y = keys[a, t], keys[b, t]
        if x != y:
            return x < y
        if not x & mask:  # both ended inside this word: equal
            return False
    return _less(flat, start, length, step, idx[a], idx[b], max(w, keys.shape[1]) * per, bits, per)


@njit(cache=True, nogil=True)
def _sort(flat, start, length, step, idx, keys, bits, per):  # noqa: ANN001, ANN202 - numba
    """Sort the stack ids ``idx`` by content, root first: a multikey quicksort on words of
    ``per`` locations. Each row carries its stack's first words (``keys``, moved with it), so
    partitions on them read memory in order; deeper words are loaded once per partition into
    ``word`` (a cache miss per stack, as stacks sit in memory in input order)."""
    mask = (np.int64(1) << bits) - 1
    n_keys = keys.shape[1]
    word = np.zeros(idx.size, dtype=np.int64)
    cap = 1024
    work = np.empty((cap, 4), dtype=np.int64)  # lo, hi, word index, whether ``word`` holds it
    work[0, 0], work[0, 1], work[0, 2], work[0, 3] = 0, idx.size, 0, 0
    top = 1
    while top:
        top -= 1
        lo, hi, w, cached = work[top, 0], work[top, 1], work[top, 2], work[top, 3]
        if hi - lo <= _SMALL:
            for k in range(lo + 1, hi):
                j = k
                while j > lo and _row_less(flat, start, length, step, idx, keys, j, j - 1, w, bits, per):
                    _swap(idx, keys, word, j, j - 1)
                    j -= 1
            continue
        deep = w >= n_keys
        if deep and not cached:
            for k in range(lo, hi):
                word[k] = _word(flat, start, length, step, idx[k], w * per, bits, per)
        col = min(w, n_keys - 1)
        a = word[lo] if deep else keys[lo, col]
        b = word[(lo + hi) // 2] if deep else keys[(lo + hi) // 2, col]
        c = word[hi - 1] if deep else keys[hi - 1, col]
        pivot = max(min(a, b), min(max(a, b), c))  # median of three: sorted runs stay balanced
        lt, i, gt = lo, lo, hi - 1
        while i <= gt:
            x = word[i] if deep else keys[i, col]
            if x < pivot:
                _swap(idx, keys, word, lt, i)
                lt += 1
                i += 1
            elif x > pivot:
                _swap(idx, keys, word, gt, i)
                gt -= 1
            else:
                i += 1
        if top + 3 > cap:
            cap *= 2
            grown = np.empty((cap, 4), dtype=np.int64)
            grown[:top] = work[:top]
            work = grown
        for s, e, ww in ((lo, lt, w), (gt + 1, hi, w), (lt, gt + 1, w + 1)):
            if e - s > 1 and (ww == w or pivot & mask):  # equal rows that ended are done
                work[top, 0], work[top, 1], work[top, 2], work[top, 3] = s, e, ww, deep and ww == w
                top += 1


@njit(cache=True, nogil=True)
def _radix(keys, idx, spare, spare_idx, used_bits):  # noqa: ANN001, ANN202 - numba
    """Sort the rows of ``keys`` (whole stacks, ``used_bits`` bits per word) and ``idx`` with them:
    a stable LSD radix sort, 11 bits a pass, last word first, skipping the passes whose digit is
    the same in every row (high digits of sparse ids, words past every stack's end). No branch
    per comparison, where the quicksort mispredicts about every other one on random stacks.
    Returns whether the sorted rows ended in ``spare``/``spare_idx`` (an odd number of passes)."""
    n, n_words = keys.shape
    n_shifts = (used_bits + _RADIX_BITS - 1) // _RADIX_BITS
    hists = np.zeros((n_words, n_shifts, _RADIX_BUCKETS), dtype=np.int64)  # every pass's, in one read
    for r in range(n):
        for w in range(n_words):
            x = keys[r, w]
            for k in range(n_shifts):
                hists[w, k, (x >> (k * _RADIX_BITS)) & (_RADIX_BUCKETS - 1)] += 1
    src, dst, src_i, dst_i = keys, spare, idx, spare_idx
    swapped = False
    for w in range(n_words - 1, -1, -1):
        for k in range(n_shifts):
            hist = hists[w, k]
            if hist.max() == n:  # one digit everywhere: this pass would change nothing
                continue
            total = 0
            for d in range(_RADIX_BUCKETS):
                total, hist[d] = total + hist[d], total
            shift = k * _RADIX_BITS
            for r in range(n):
                d = (src[r, w] >> shift) & (_RADIX_BUCKETS - 1)
                at = hist[d]
                hist[d] = at + 1
                for t in range(n_words):
                    dst[at, t] = src[r, t]
                dst_i[at] = src_i[r]
            src, dst, src_i, dst_i = dst, src, dst_i, src_i
            swapped = not swapped
    return swapped


@njit(cache=True, nogil=True)
def _shared(out, prev, prev_len, p, n):  # noqa: ANN001, ANN202 - numba
    """How many first frames the stack of ``n`` frames at ``out[p:]`` shares with the one of
    ``prev_len`` frames at ``out[prev:]``."""
    m = min(n, prev_len)
    k = 0
    while k < m and out[p + k] == out[prev + k]:
        k += 1
    return k


@njit(cache=True, nogil=True)
def _gather(flat, start, length, step, idx, out, lcp):  # noqa: ANN001, ANN202 - numba
    """Copy the sorted stacks root first into ``out``, end to end, and note the frames each
    shares with the one before it; returns the callsites needed. The one pass that reads the
    stacks in sorted (random) order: the walk after it reads ``out`` in order."""
    p = prev = prev_len = total = 0
    for k in range(idx.size):
        i = idx[k]
        n_i, s = length[i], start[i]
        for d in range(n_i):
            out[p + d] = flat[s + step * d]
        n = _shared(out, prev, prev_len, p, n_i)
        lcp[k] = n
        total += n_i - n
        prev, prev_len = p, n_i
        p += n_i
    return total


@njit(cache=True, nogil=True)
def _lcp_keys(keys, length, idx, bits, per, lcp):  # noqa: ANN001, ANN202 - numba
    """:func:`_gather` when the sorted rows of ``keys`` hold whole stacks: the frames each shares
    with the one before come from comparing the rows word by word (no copy of the stacks)."""
    mask = (np.int64(1) << bits) - 1
    total = 0
    for k in range(idx.size):
        n_i = length[idx[k]]
        n = 0
        if k:
            n = min(n_i, length[idx[k - 1]])
            for t in range(keys.shape[1]):
                x, y = keys[k, t], keys[k - 1, t]
                if x != y:
                    j = 0
                    while ((x >> (bits * (per - 1 - j))) & mask) == ((y >> (bits * (per - 1 - j))) & mask):
                        j += 1
                    n = min(n, t * per + j)
                    break
        lcp[k] = n
        total += n_i - n
    return total


@njit(cache=True, nogil=True)
def _number_keys(keys, length, idx, lcp, bits, per, path, leaf, parent, location, depth, size):  # noqa: ANN001, ANN202
    """:func:`_number` reading the new frames from the sorted rows of ``keys`` (whole stacks)."""
    mask = (np.int64(1) << bits) - 1
    nid = 0
    for k in range(idx.size):
        i = idx[k]
        n_i = length[i]
        d = lcp[k]
        t, shift = d // per, bits * (per - 1 - d % per)
        while d < n_i:
            parent[nid] = path[d - 1] if d else -1
            location[nid] = ((keys[k, t] >> shift) & mask) - 1
            depth[nid] = d
            path[d] = nid
            nid += 1
            d += 1
            shift -= bits
            if shift < 0:
                t, shift = t + 1, bits * (per - 1)
        leaf[i] = path[n_i - 1] if n_i else -1
    _sizes(parent, size, nid)


@njit(cache=True, nogil=True)
def _sizes(parent, size, nid):  # noqa: ANN001, ANN202 - numba
    """Subtree sizes of the first ``nid`` callsites (children come after their parent)."""
    for c in range(nid - 1, -1, -1):
        size[c] += 1
        if parent[c] >= 0:
            size[parent[c]] += size[c]


@njit(cache=True, nogil=True)
def _number(out, length, idx, lcp, path, leaf, parent, location, depth, size):  # noqa: ANN001, ANN202
    """New callsites in pre-order: each sorted stack adds the frames it does not share."""
    nid = p = 0
    for k in range(idx.size):
        i = idx[k]
        n_i = length[i]
        for d in range(lcp[k], n_i):
            parent[nid] = path[d - 1] if d else -1
            location[nid] = out[p + d]
            depth[nid] = d
            path[d] = nid
            nid += 1
        leaf[i] = path[n_i - 1] if n_i else -1
        p += n_i
    _sizes(parent, size, nid)


def intern_stacks(flat: np.ndarray, offsets: np.ndarray,
                  leaf_first: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(leaf, parent, location, depth, size) of stack ``i`` = ``flat[offsets[i]:offsets[i+1]]``,
    numbered as :func:`polyprof.model.bulk_stacks._intern` numbers them."""
    length = np.diff(offsets).astype(np.int64)
    start = (offsets[1:] - 1 if leaf_first else offsets[:-1]).astype(np.int64)
    step = -1 if leaf_first else 1
    idx = np.arange(length.size, dtype=np.int64)
    bits = max(int(flat.max(initial=0)) + 1, 1).bit_length()
    per = max(63 // bits, 1)
    # The first words of every stack ride along in the sort: all of them when they fit in
    # _KEYS_BYTES (then the sorted stacks are read back from them), else _KEYS of them.
    words = -(-int(length.max(initial=0)) // per)
    n_keys = max(min(words, max(_KEYS, _KEYS_BYTES // (8 * max(length.size, 1)))), 1)
    keys = np.empty((length.size, n_keys), dtype=np.int64)
    _first_words(flat, start, length, step, bits, per, keys)
    if n_keys >= words and length.size >= _RADIX_FROM:  # whole stacks in the rows: radix sort them
        spare, spare_idx = np.empty_like(keys), np.empty_like(idx)
        if _radix(keys, idx, spare, spare_idx, bits * per):
            keys, idx = spare, spare_idx
        del spare, spare_idx
    else:
        _sort(flat, start, length, step, idx, keys, bits, per)
    lcp = np.empty(length.size, dtype=np.int32)
    whole = n_keys >= words
    out = keys if whole else np.empty(int(length.sum()), dtype=flat.dtype)
    if whole:
        total = int(_lcp_keys(keys, length, idx, bits, per, lcp))
    else:
        total = int(_gather(flat, start, length, step, idx, out, lcp))
        del keys
    leaf = np.empty(length.size, dtype=np.int32)
    parent, location, depth = (np.empty(total, dtype=np.int32) for _ in range(3))
    size: np.ndarray = np.zeros(total, dtype=size_dtype(total))
    path = np.empty(max(int(length.max(initial=0)), 1), dtype=np.int64)
    if whole:
        _number_keys(keys, length, idx, lcp, bits, per, path, leaf, parent, location, depth, size)
    else:
        _number(out, length, idx, lcp, path, leaf, parent, location, depth, size)
    return leaf, parent, location, depth, size


@njit(cache=True, nogil=True)
def _outermost(location, size, live, loc_start, loc_nodes, subtree, reach, cum):  # noqa: ANN001, ANN202
    for c in range(location.size):
        if not live[c]:
            continue
        loc = location[c]
        end = c + size[c] - 1
        for k in range(loc_start[loc], loc_start[loc + 1]):
            n = loc_nodes[k]
            if c > reach[n]:
                cum[n] += subtree[c]
            if end > reach[n]:
                reach[n] = end


def outermost_sums(location: np.ndarray, size: np.ndarray, live: np.ndarray, loc_start: np.ndarray,
                   loc_nodes: np.ndarray, subtree: np.ndarray, n_nodes: int) -> np.ndarray:
    """Per node, the sum of ``subtree`` over the live callsites holding it that have no
    ancestor holding it (callsite ids in pre-order, ``size`` their subtree sizes; a
    location's nodes are ``loc_nodes[loc_start[loc]:loc_start[loc+1]]``)."""
    reach = np.full(n_nodes, -1, dtype=np.int64)
    cum = np.zeros(n_nodes, dtype=np.int64)
    _outermost(location, size, live, loc_start, loc_nodes, subtree, reach, cum)
    return cum


@njit(cache=True, nogil=True)
def _subtree_sums(parent, out):  # noqa: ANN001, ANN202 - numba
    for c in range(out.size - 1, -1, -1):  # a parent precedes its children
        if parent[c] >= 0:
            out[parent[c]] += out[c]


def subtree_sums_in_place(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """:func:`subtree_sums` into ``values`` itself when it is an int64 column (else a copy)."""
    if values.dtype != np.int64 or not values.flags.writeable or values.ndim != 1:
        return subtree_sums(values, parent)
    _subtree_sums(parent, values)
    return values


def subtree_sums(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Sum of ``values`` (one per callsite) over every subtree, for parents that precede their
    children: one int64 array, where the running-sum form needs three of that size."""
    out = values.astype(np.int64)  # a copy
    _subtree_sums(parent, out)
    return out
