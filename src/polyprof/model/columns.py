"""Column helpers shared by readers and analyses."""

from __future__ import annotations

import numpy as np

from polyprof.wire.vector import gather_runs, hash_factorize, hash_factorize_spans, hash_runs

__all__ = ["distinct", "factorize_rows", "factorize_runs", "factorize_spans", "runs_equal", "unique_inverse"]


def factorize_rows(cols: list[np.ndarray], *, in_order: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Dense id of each row's tuple across ``cols`` and the first row of each id.

    Each column is factorized on its own (1-D sorts are fast), then the codes
    are combined into one integer per row (re-densified before they could
    overflow); far cheaper than ``np.unique(axis=0)``. Ids follow the sorted
    order of the tuples, or with ``in_order`` the order of their first row
    (which does not depend on how the values themselves were numbered).
    """
    n = cols[0].size if cols else 0
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    varying = [c for c in cols if c.min() != c.max()]  # a constant column adds nothing (and costs a sort)
    hashed = hash_factorize(varying) if varying else None
    if hashed is not None:  # numbered in order of first sight, without a sort of the rows
        ids, first = hashed
        return (ids, first) if in_order else _sorted_ids(varying, ids, first)
    if len(varying) <= 1:
        combined = varying[0] if varying else np.zeros(n, dtype=np.int8)
    else:
        combined = np.zeros(n, dtype=np.int64)
        for col in varying:
            low = int(col.min())  # shifted to start at 0: negative ids (-1: none) sort the same
            if low < 0:  # (a shift that would overflow flips the sign bit instead: same order)
                col = col - low if int(col.max()) - low < 2**62 else \
                    col.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
            uniq, code = unique_inverse(col)
            if int(combined.max()) >= (2**62) // uniq.size:
                _, combined = np.unique(combined, return_inverse=True)
                combined = combined.reshape(-1).astype(np.int64)
            combined = combined * uniq.size + code
    ids, first = _first_rows(combined)
    if in_order:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rank[ids], first[order]
    return ids, first


def _sorted_ids(cols: list[np.ndarray], ids: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids in order of first sight renumbered in the sorted order of their tuples (only the
    distinct tuples are sorted)."""
    order = np.lexsort([c[first] for c in reversed(cols)])
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[ids], first[order]


def _first_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True)``'s (ids, first rows): the ids
    by :func:`unique_inverse`, the first rows by a stable sort of the ids, a radix sort when
    they fit 16 bits (few threads, few label sets: linear in the rows)."""
    uniq, ids = unique_inverse(values)
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids.astype(np.int16) if uniq.size <= 32767 else ids, kind="stable")
    first = order[np.searchsorted(ids[order], np.arange(uniq.size))]
    return ids, first


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for non-negative integer ids, without a sort when
    the ids are dense enough (a presence table: three passes instead of an O(n log n) sort)."""
    values = np.asarray(values)
    if values.size and values.dtype.kind in "iu":
        top, low = int(values.max()), int(values.min())
        if low >= 0 and top < max(4 * values.size, 1 << 16):
            present = np.zeros(top + 1, dtype=bool)
            present[values] = True
            code = np.cumsum(present, dtype=np.int64) - 1
            return np.flatnonzero(present).astype(values.dtype), code[values]
        hashed = hash_factorize([values])
        if hashed is not None:
            inverse, first = _sorted_ids([values], *hashed)
            return values[first], inverse
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, inverse.reshape(-1)


def runs_equal(fa: np.ndarray, oa: np.ndarray, ia: np.ndarray, fb: np.ndarray, ob: np.ndarray,
               ib: np.ndarray) -> np.ndarray:
    """Whether run ``ia[k]`` of (values ``fa``, offsets ``oa``) equals run ``ib[k]`` of (``fb``, ``ob``)."""
    la, lb = oa[ia + 1] - oa[ia], ob[ib + 1] - ob[ib]
    same = la == lb
    check = np.flatnonzero(same & (la > 0))
    if check.size:
        ln = la[check]
        differ = gather_runs(fa, oa[ia[check]], ln) != gather_runs(fb, ob[ib[check]], ln)
        owner = np.repeat(np.arange(check.size), ln)
        same[check[np.bincount(owner[differ], minlength=check.size) > 0]] = False
    return same


def factorize_runs(values: np.ndarray, offsets: np.ndarray,
                   hashes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dense id of each run ``values[offsets[i]:offsets[i+1]]`` by content, and each id's first
    run (ids in order of first sight). Runs are grouped by hash and length, then compared
    value by value: runs whose hashes collide but differ get ids of their own. ``hashes``:
    the runs' :func:`polyprof.wire.vector.hash_runs`, when the caller has them."""
    lengths = np.diff(offsets)
    n = lengths.size
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    hashed = hash_factorize_spans(values, offsets[:-1], lengths) if hashes is None else None
    if hashed is not None:
        return hashed
    h = np.zeros(n, dtype=np.uint64) if hashes is None else hashes
    some = np.flatnonzero(lengths > 0) if hashes is None else np.zeros(0, dtype=np.int64)
    if some.size:
        sub = np.concatenate([[0], np.cumsum(lengths[some])])
        h[some] = hash_runs(gather_runs(values, offsets[some], lengths[some]), sub)
    group, first = factorize_rows([h.view(np.int64), lengths], in_order=True)
    lead = first[group]
    same = lead == np.arange(n)
    other = np.flatnonzero(~same)
    same[other] = runs_equal(values, offsets, other, values, offsets, lead[other])
    if same.all():
        return group, first
    key = np.where(same, lead, np.arange(n))  # a colliding run leads a group of its own
    return factorize_rows([key], in_order=True)


def factorize_spans(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factorize_runs` of the spans ``values[starts[i]:starts[i]+lengths[i]]`` (which may
    overlap or leave gaps): compared in place by the compiled kernels, else gathered end to end."""
    hashed = hash_factorize_spans(values, starts, lengths)
    if hashed is not None:
        return hashed
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return factorize_runs(gather_runs(values, starts, lengths), offsets)


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of an integer column, by a presence table over its range when that is
    no wider than the column (sequence ids, configs, pids: a few values in many rows), no sort."""
    values = np.asarray(values)
    if not values.size:  # np.unique would import numpy.ma (~20 ms) to check for a mask
        return values.reshape(-1).copy()
    if values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if low == high:  # one sequence, one config, one pid: the usual case
            return values[:1].copy()
        if high - low < max(values.size, 1 << 12):
            present = np.zeros(high - low + 1, dtype=bool)
            wide = values if values.dtype.kind == "u" or values.dtype.itemsize == 8 else values.astype(np.int64)
            present[wide - wide.dtype.type(low)] = True  # in [0, high - low]: no overflow
            return (np.flatnonzero(present).astype(wide.dtype) + wide.dtype.type(low)).astype(values.dtype)
    return np.unique(values)
