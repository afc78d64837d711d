"""pprof sample labels: checked when the profile is read, turned into label sets on first use.

Reading decodes every label record (key, str, num, num_unit) with the
vectorized kernels and checks its string indexes, so a bad label fails
``read`` and every verb alike. Building the ``Label`` objects and interning
each sample's label set is left until something asks for labels (``top``
never does): the deferred work holds only the decoded columns and the
texts of the strings they use, not the file.

Label sets are interned without a samples x labels grid: samples are
grouped by how many labels they have, and each group's rows are compared
as fixed-width byte strings, so one sample with 20,000 labels among 20,000
samples costs its 20,000 labels, not 400 million cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polyprof.errors import InputError, MalformedInputError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import factorize_rows
from polyprof.model.profile import Label
from polyprof.wire import vector as V

__all__ = ["LabelColumns", "label_columns", "labelsets"]


@dataclass
class LabelColumns:
    """Every label record of some samples: owner sample and the four fields."""

    owner: np.ndarray
    key: np.ndarray
    str: np.ndarray
    num: np.ndarray
    unit: np.ndarray

    @classmethod
    def concat(cls, parts: list["LabelColumns"]) -> "LabelColumns":
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, z, z, z, z)
        return cls(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("owner", "key", "str", "num", "unit")))


def label_columns(buf: np.ndarray, fields: V.Fields, first_sample: int, strings) -> LabelColumns:  # noqa: ANN001
    """Decode the label records ``fields`` (LEN records of samples) and check
    their string indexes against ``strings`` (the reader's string table)."""
    nl = len(fields)
    lbuf = V.gather_spans(buf, fields.start, fields.length)
    end = np.cumsum(fields.length)
    lf = V.varint_fields(lbuf, end)  # the usual labels: key and str or num (and unit), all varints
    if lf is None:
        lf = V.walk_fields(lbuf, end - fields.length, end)
    key, sval, num, unit = (V.scalar_column(lf, k, nl).view(np.int64) for k in (1, 2, 3, 4))
    for col, what in ((key, "key"), (sval, "str"), (unit, "num_unit")):
        bad = (col < 0) | (col >= strings.size)
        if bad.any():
            i = int(np.argmax(bad))
            raise MalformedInputError(f"sample {int(fields.msg[i]) + first_sample}: label {what} = {int(col[i])} "
                                      f"is outside the string table (size {strings.size})")
    narrow = np.int32 if strings.size < 2**31 else np.int64
    return LabelColumns((fields.msg + first_sample).astype(np.int64), key.astype(narrow), sval.astype(narrow),
                        num.copy(), unit.astype(narrow))


def labelsets(b: ProfileBuilder, cols: LabelColumns, n: int, texts: dict[int, str], name: str) -> np.ndarray:
    """Intern the label set of every sample; the label-set row per sample (0 = none)."""
    try:
        return _labelsets(b, cols, n, texts)
    except InputError as exc:  # raised after read() returned: name the file here
        exc.format = exc.format or "pprof"
        raise exc.with_path(name) from None


def _labelsets(b: ProfileBuilder, cols: LabelColumns, n: int, texts: dict[int, str]) -> np.ndarray:
    out = np.zeros(n, dtype=np.int32)
    nl = cols.owner.size
    if not nl:
        return out
    label_id, label_first = factorize_rows([cols.key, cols.str, cols.num, cols.unit])
    # Records are sample-major: each owner's labels are one run.
    run_start = np.flatnonzero(np.r_[True, cols.owner[1:] != cols.owner[:-1]])
    run_len = np.diff(np.r_[run_start, nl])
    owners = cols.owner[run_start]
    key, sval, num, unit = (c[label_first].tolist() for c in (cols.key, cols.str, cols.num, cols.unit))
    label_objs = [Label(texts[key[i]], str=texts[sval[i]]) if sval[i]
                  else Label(texts[key[i]], num=num[i], unit=texts[unit[i]]) for i in range(len(key))]
    if run_start.size == nl:  # one label per labelled sample (the usual case): the sets are the labels
        model = np.array([b.labelset((obj,)) for obj in label_objs], dtype=np.int32)
        out[owners] = model[label_id]
        return out
    for width in np.unique(run_len).tolist():
        group = np.flatnonzero(run_len == width)
        rows = label_id[run_start[group][:, None] + np.arange(width)]
        keys = np.ascontiguousarray(rows).view(np.dtype((np.void, 8 * width))).reshape(-1)
        _, first, set_of_row = np.unique(keys, return_index=True, return_inverse=True)
        model = np.array([b.labelset(tuple(label_objs[i] for i in rows[r].tolist())) for r in first.tolist()],
                         dtype=np.int32)
        out[owners[group]] = model[set_of_row.reshape(-1)]
    return out
