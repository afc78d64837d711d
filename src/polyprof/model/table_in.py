"""A Profile from a table of samples (Arrow or pandas): the way back from ``to_arrow``.

One row per sample. The stack is a ``frames`` column: a list of frame names,
root to leaf, or a string of names joined by ``;`` (folded stacks, root
first). Value columns are named by ``sample_types`` (column -> unit, or a
list of columns counted in ``count``), or found in the schema metadata that
:func:`polyprof.model.table.to_arrow` writes. ``time``, ``pid``, ``tid`` and
``cpu`` columns become those sample columns; every other column becomes a
label (strings as string labels, numbers as numeric labels with the unit
of the field's metadata, lists as several values). Nulls (and NaN) mean
"no label"; null values count 0.

What this keeps of a frame is its name: each distinct name becomes one
function and one location (no file, line, address or mapping), so a
profile from ``to_arrow(stacks="names")`` comes back with the same stacks
by name, values, labels and metadata, but not its binaries or source
positions. Rows are turned into samples column-wise; stacks are interned by
the builder's vectorized ``stacks_from_csr``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import factorize_rows
from polyprof.model.profile import Label, Profile, SampleTable, ValueType
from polyprof.model.table import LABEL_PREFIX, META_KEY, optional_import

__all__ = ["from_arrow", "from_pandas"]

SampleTypes = Mapping[str, str] | Sequence[str] | None


def from_pandas(df: Any, *, sample_types: SampleTypes = None, frames: str = "frames",
                labels: Sequence[str] | None = None) -> Profile:
    """:func:`from_arrow` for a ``pandas.DataFrame`` (``df.attrs["polyprof"]``, set
    by ``Profile.to_pandas()``, stands in for the schema metadata)."""
    pa = optional_import("pyarrow", "polyprof.from_pandas()")
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = getattr(df, "attrs", {}).get("polyprof")
    if meta:
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    return from_arrow(table, sample_types=sample_types, frames=frames, labels=labels)


def from_arrow(table: Any, *, sample_types: SampleTypes = None, frames: str = "frames",
               labels: Sequence[str] | None = None) -> Profile:
    """A profile from an Arrow table (or record batch) of samples (see the module docstring).

    ``sample_types``: ``{"cpu": "nanoseconds"}`` names the value columns and
    their units (the column name is the type); a list of names means unit
    ``count``. Without it the table's ``polyprof`` metadata decides.
    ``labels``: the label columns (default: every other column).
    """
    pa = optional_import("pyarrow", "polyprof.from_arrow()")
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    meta = json.loads((table.schema.metadata or {}).get(META_KEY, b"{}"))
    types, value_cols = _sample_types(table, sample_types, meta)
    if frames not in table.column_names:
        raise OptionsError(f"no stack column {frames!r}: pass {{frames}}=COLUMN naming a list of frame names "
                           "(root first) or ';'-joined names; Profile.to_arrow(stacks='names') writes one", options=("frames",))
    b = ProfileBuilder(meta.get("source_format") or "arrow")
    b.set_sample_types(types)
    _set_metadata(b.meta, meta, types)
    stack = _stacks(pa, b, table.column(frames))
    n = table.num_rows
    values = np.zeros((n, len(types)), dtype=np.int64)
    for i, name in enumerate(value_cols):
        values[:, i] = _ints(table.column(name))
    optional = {c: _ints(table.column(c)) for c in SampleTable.OPTIONAL_COLUMNS
                if c in table.column_names and c not in value_cols}
    taken = {frames, *value_cols, *optional, "stack"}
    label_cols = list(labels) if labels is not None else [c for c in table.column_names if c not in taken]
    labelset = _labelsets(pa, b, table, label_cols, meta.get("labels", {}))
    b.add_samples_bulk(stack, values, labelset, **optional)
    return b.finish()


def _sample_types(table: Any, given: SampleTypes, meta: dict) -> tuple[list[ValueType], list[str]]:
    if given is None and meta.get("sample_types"):
        return [ValueType(t, u) for t, u in meta["sample_types"]], list(meta["value_columns"])
    if given is None:
        numeric = [f.name for f in table.schema if str(f.type).startswith(("int", "uint"))]
        raise OptionsError("which columns hold sample values? pass {sample_types}={'column': 'unit', ...} "
                           f"(integer columns: {', '.join(numeric) or 'none'})", options=("sample_types",))
    pairs = list(given.items()) if isinstance(given, Mapping) else [(name, "count") for name in given]
    missing = [name for name, _ in pairs if name not in table.column_names]
    if missing:
        raise OptionsError(f"{{sample_types}} names columns the table does not have: {', '.join(missing)}",
                           options=("sample_types",))
    return [ValueType(name, unit) for name, unit in pairs], [name for name, _ in pairs]


def _set_metadata(p: Profile, meta: dict, types: list[ValueType]) -> None:
    default = meta.get("default_sample_type", "")
    p.default_sample_type = default if any(vt.type == default for vt in types) else ""
    period_type = meta.get("period_type")
    p.period_type = ValueType(*period_type) if period_type else None
    p.period = int(meta.get("period", 0))
    p.time_nanos = int(meta.get("time_nanos", 0))
    p.duration_nanos = int(meta.get("duration_nanos", 0))
    p.comments = list(meta.get("comments", []))


def _ints(column: Any) -> np.ndarray:
    """An integer (or timestamp) column as int64 numpy, nulls as 0."""
    pa = optional_import("pyarrow", "polyprof.from_arrow()")
    col = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if pa.types.is_timestamp(col.type) or pa.types.is_duration(col.type):
        col = col.cast(pa.int64())
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type)):
        raise OptionsError(f"column of type {col.type} cannot hold sample values or sample numbers")
    return col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def _stacks(pa: Any, b: ProfileBuilder, column: Any) -> np.ndarray:
    """Leaf callsite of every row's stack; one function and location per distinct name."""
    col = column.combine_chunks()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_dictionary(col.type):
        col = pa.compute.split_pattern(col.cast(pa.string()).fill_null(""), ";")
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise OptionsError(f"the stack column must hold lists of frame names or ';'-joined names, not {col.type}")
    pc = pa.compute
    flat = pc.list_flatten(col)
    if not pa.types.is_dictionary(flat.type):
        flat = pc.dictionary_encode(flat.cast(pa.string()))
    names = flat.dictionary.cast(pa.string()).to_pylist()
    codes = flat.indices.fill_null(len(names)).to_numpy(zero_copy_only=False)
    blank = np.array([not name for name in names] + [True], dtype=bool)
    lengths = pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if blank[codes].any():  # null or empty names are no frame (a null row is an empty stack)
        owner = pc.list_parent_indices(col).to_numpy(zero_copy_only=False)
        keep = ~blank[codes]
        lengths = np.bincount(owner[keep], minlength=len(col))
        codes = codes[keep]
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    locations = np.array([b.frame(name) if name else -1 for name in names] + [-1], dtype=np.int32)
    return b.stacks_from_csr(locations[codes], offsets, leaf_first=False)


def _labelsets(pa: Any, b: ProfileBuilder, table: Any, names: list[str], keys: dict[str, str]) -> np.ndarray:
    """Label-set row of every sample: distinct combinations of the label columns
    are found with numpy, and only those are turned into Label tuples."""
    n = table.num_rows
    if not names or not n:
        return np.zeros(n, dtype=np.int32)
    parts = [_label_codes(pa, table, name, keys) for name in names]
    ids, first = factorize_rows([codes for codes, _ in parts])
    sets = [tuple(lab for codes, decode in parts for lab in decode(int(codes[row]))) for row in first.tolist()]
    model = np.array([b.labelset(s) if s else 0 for s in sets], dtype=np.int32)
    return model[ids]


def _label_codes(pa: Any, table: Any, name: str, keys: dict[str, str]):  # noqa: ANN202
    """(code per row, code -> labels) of one label column; code 0 is "no label"."""
    field = table.schema.field(name)
    key = keys.get(name) or (name[len(LABEL_PREFIX):] if name.startswith(LABEL_PREFIX) else name)
    unit = (field.metadata or {}).get(b"unit", b"").decode()
    col = table.column(name).combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        rows = col.to_pylist()  # several values per sample: rare, done per row
        distinct = sorted({tuple(r) for r in rows if r}, key=repr)
        index = {v: i + 1 for i, v in enumerate(distinct)}
        codes = np.array([index[tuple(r)] if r else 0 for r in rows], dtype=np.int64)
        return codes, lambda c: tuple(_label(key, v, unit) for v in distinct[c - 1]) if c else ()
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):  # pandas makes ints with gaps floats
        present = col.is_valid().to_numpy(zero_copy_only=False) & ~np.isnan(
            col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64))
        nums = np.nan_to_num(col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)).astype(np.int64)
        uniq, codes = np.unique(nums, return_inverse=True)
        codes = np.where(present, codes.reshape(-1) + 1, 0)
        return codes, lambda c: (Label(key, num=int(uniq[c - 1]), unit=unit),) if c else ()
    if not pa.types.is_dictionary(col.type):
        col = pa.compute.dictionary_encode(col.cast(pa.string()))
    texts = col.dictionary.cast(pa.string()).to_pylist()
    codes = col.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
    return codes, lambda c: (Label(key, str=texts[c - 1]),) if c and texts[c - 1] is not None else ()


def _label(key: str, value: Any, unit: str) -> Label:
    return Label(key, num=int(value), unit=unit) if isinstance(value, int) else Label(key, str=str(value))
