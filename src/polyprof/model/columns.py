"""Column helpers shared by readers and analyses."""

from __future__ import annotations

import numpy as np

__all__ = ["factorize_rows"]


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
    combined = np.zeros(n, dtype=np.int64)
    for col in cols:
        uniq, code = np.unique(col, return_inverse=True)
        if uniq.size > 1:
            if int(combined.max()) >= (2**62) // uniq.size:
                _, combined = np.unique(combined, return_inverse=True)
                combined = combined.reshape(-1).astype(np.int64)
            combined = combined * uniq.size + code.reshape(-1)
    _, first, ids = np.unique(combined, return_index=True, return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    if in_order:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rank[ids], first[order]
    return ids, first
