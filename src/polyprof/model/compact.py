"""Compact sample columns for very large profiles: what a sample costs in memory.

A traced_perf trace of a few minutes holds millions of samples, and their
columns are most of what a read keeps. Two forms hold the same numbers in
less memory, and every consumer reads them as it reads the plain form:

- **int32 value columns**, when every value fits (counts, and counter
  deltas such as a cpu-clock period). Sums widen: numpy's ``sum`` and
  ``cumsum`` of int32 give int64, and every accumulator an analysis, a
  writer or the store fills is int64 whatever the values' type;
  ``tests/test_compact_samples.py`` holds every consumer to identical output
  for the plain and the compact form of the same profile.
- **pid, tid and cpu in the narrowest integer type** holding their values
  (int8, int16 or int32: the tids of a device whose ``pid_max`` is 32768 fit
  int16). Consumers widen with ``astype(np.int64)`` where they compute on
  them, as they do for the plain form's int32/int16.
- **a constant optional column** (the ``pid`` of a one-process profile) as a
  read-only view of one value with stride 0: no memory per sample. Indexing
  and ``astype`` give ordinary arrays; nothing writes into a profile's
  columns in place.

A reader opts in with ``ProfileBuilder(compact=True)``; :func:`compact_samples`
turns any sample table into this form.
"""

from __future__ import annotations

import numpy as np

from polyprof.model.profile import SampleTable

__all__ = ["compact_samples", "compact_values", "constant_column", "is_constant_view", "narrow_column", "take_rows"]

_I32 = np.iinfo(np.int32)


def compact_values(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when every value fits (no copy when already int32), else unchanged."""
    if values.dtype == np.int32 or values.dtype.kind not in "iu":
        return values
    if values.size and (int(values.min()) < _I32.min or int(values.max()) > _I32.max):
        return values
    return values.astype(np.int32)


def narrow_column(col: np.ndarray) -> np.ndarray:
    """Integer ``col`` in the narrowest signed type of int8, int16 and int32 holding its values,
    else int64 (no copy when it already is that type; an empty column is int8)."""
    if not col.size:
        return col.astype(np.int8)
    high = int(col.max())
    low = 0 if col.dtype.kind == "u" else int(col.min())  # (decoded varints: one pass, not two)
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= low and high <= info.max:
            return col if col.dtype == t else col.astype(t)
    return col.astype(np.int64, copy=False)


def constant_column(col: np.ndarray) -> np.ndarray:
    """``col`` as a read-only stride-0 view of its one value when every row holds the same value
    (a column of fewer than two rows, or of several values, is returned as it is)."""
    if col.ndim != 1 or col.size < 2 or is_constant_view(col) or col.min() != col.max():
        return col
    return np.broadcast_to(col[:1].copy(), col.shape)


def is_constant_view(col: np.ndarray) -> bool:
    """True for a column :func:`constant_column` made (one value, stride 0)."""
    return col.ndim == 1 and col.size > 1 and col.strides[0] == 0


def take_rows(col: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``col[mask]`` (a boolean mask); a constant view stays one, holding no memory per kept row."""
    if is_constant_view(col):
        return np.broadcast_to(col[:1], (int(np.count_nonzero(mask)),))
    return col[mask]


def compact_samples(table: SampleTable) -> SampleTable:
    """``table`` in compact form, in place: int32 values when they fit, pid/tid/cpu narrowed,
    constant optional columns as stride-0 views. Returns ``table``."""
    table.values = compact_values(table.values)
    for name in SampleTable.OPTIONAL_COLUMNS:
        if name == "time" or table.is_deferred(name):  # times are rarely constant; deferred stay deferred
            continue
        col = getattr(table, name)
        if col is not None:
            setattr(table, name, constant_column(narrow_column(col)))
    return table
