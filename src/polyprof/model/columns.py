"""Column helpers shared by readers and analyses."""

from __future__ import annotations

import numpy as np

__all__ = ["factorize_rows"]


def factorize_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Dense id of each row's tuple across ``cols`` and the first row of each id.

    Each column is factorized on its own (1-D sorts are fast), then the codes
    are combined into one integer per row (re-densified before they could
    overflow); far cheaper than ``np.unique(axis=0)``. Ids follow the sorted
    order of the tuples.
    """
    n = cols[0].size if cols else 0
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    varying = [c for c in cols if c.min() != c.max()]  # a constant column adds nothing (and costs a sort)
    if len(varying) <= 1:
        col = varying[0] if varying else np.zeros(n, dtype=np.int8)
        _, first, ids = np.unique(col, return_index=True, return_inverse=True)
        return ids.reshape(-1).astype(np.int64), first
    combined = np.zeros(n, dtype=np.int64)
    for col in varying:
        uniq, code = np.unique(col, return_inverse=True)
        if int(combined.max()) >= (2**62) // uniq.size:
            _, combined = np.unique(combined, return_inverse=True)
            combined = combined.reshape(-1).astype(np.int64)
        combined = combined * uniq.size + code.reshape(-1)
    _, first, ids = np.unique(combined, return_index=True, return_inverse=True)
    return ids.reshape(-1).astype(np.int64), first
