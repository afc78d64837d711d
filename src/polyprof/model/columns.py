"""Column helpers shared by readers and analyses."""

from __future__ import annotations

import numpy as np

__all__ = ["factorize_rows", "unique_inverse"]


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
    if len(varying) <= 1:
        combined = varying[0] if varying else np.zeros(n, dtype=np.int8)
    else:
        combined = np.zeros(n, dtype=np.int64)
        for col in varying:
            uniq, code = unique_inverse(col)
            if int(combined.max()) >= (2**62) // uniq.size:
                _, combined = np.unique(combined, return_inverse=True)
                combined = combined.reshape(-1).astype(np.int64)
            combined = combined * uniq.size + code
    _, first, ids = np.unique(combined, return_index=True, return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    if in_order:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rank[ids], first[order]
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
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, inverse.reshape(-1)
