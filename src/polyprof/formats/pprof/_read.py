"""The pprof reader: upb for the top level, numpy kernels for everything repeated.

Every index read from the file is checked where it is read (string indexes
against the table, ids against their tables), so a file gets the same
verdict from ``read`` as from any verb; errors name the field and value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import MalformedInputError
from polyprof.formats.options import ReadOptions
from polyprof.formats.pprof._common import _FLAG_FIELDS, _profile_class
from polyprof.formats.pprof._labels import LabelColumns, label_columns, labelsets
from polyprof.formats.pprof._split import split_samples
from polyprof.formats.source import Source
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import distinct
from polyprof.model.memory import release_free_memory
from polyprof.model.profile import Profile, ValueType
from polyprof.wire import vector as V
from polyprof.wire.locate import locate

__all__ = ["read"]


def _join(messages: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, messages), dtype=np.int64, count=len(messages))
    ends = np.cumsum(lengths)
    buf = V.as_buffer(b"".join(messages))
    return buf, ends - lengths, ends


class _Strings:
    """The string table, decoded only where something refers to it.

    A table of millions of empty strings costs its bytes (kept by upb), not
    millions of Python objects: indexes are checked against the table size
    where they are read, and each is decoded (invalid UTF-8 replaced and
    counted for a warning) the first time it is used.
    """

    def __init__(self, table, b: ProfileBuilder) -> None:  # noqa: ANN001 - upb repeated bytes
        self.table = table
        self.size = len(table)
        self.b = b
        self.bad = 0
        self._text: dict[int, str] = {}

    def check(self, col: np.ndarray, what: str) -> np.ndarray:
        """``col`` as int64 string indexes, all inside the table (else MalformedInputError)."""
        signed = col.view(np.int64) if col.dtype == np.uint64 else col.astype(np.int64)
        bad = (signed < 0) | (signed >= self.size)
        if bad.any():
            i = int(np.argmax(bad))
            raise MalformedInputError(f"{what} {i + 1}: string index {int(signed[i])} is outside the string "
                                      f"table (size {self.size})")
        return signed

    def text(self, sid: int, what: str = "string") -> str:
        got = self._text.get(sid)
        if got is None:
            if not 0 <= sid < self.size:
                raise MalformedInputError(f"{what}: string index {sid} is outside the string table "
                                          f"(size {self.size})")
            raw = self.table[sid]
            try:
                got = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.bad += 1
                got = raw.decode("utf-8", errors="replace")
            self._text[sid] = got
        return got

    def texts(self, *cols: np.ndarray) -> dict[int, str]:
        """The text of every distinct (already checked) index in ``cols``."""
        uniq = distinct(np.concatenate(cols)) if cols else np.zeros(0, np.int64)
        return {i: self.text(i) for i in uniq.tolist()}

    def model_ids(self, col: np.ndarray, what: str) -> np.ndarray:
        """The model string id of every index in ``col`` (checked, interned)."""
        uniq, inverse = np.unique(self.check(col, what), return_inverse=True)
        ids = np.array([self.b.string(self.text(i)) for i in uniq.tolist()], dtype=np.int64)
        return ids[inverse.reshape(-1)] if ids.size else np.zeros(0, dtype=np.int64)

    def warn(self, warnings: list[str]) -> None:
        if self.bad:
            warnings.append(f"{self.bad} string(s) were not valid UTF-8 and were decoded with replacement characters")


class _Ids:
    """Maps wire ids of one table to row numbers (ids must be nonzero and unique).

    ``model`` is the model row of every wire row (functions, mappings);
    locations are appended in wire order, so their model row is ``first`` + wire row.
    """

    def __init__(self, what: str, ids: np.ndarray, *, model: np.ndarray | None = None, first: int = 0) -> None:
        self.what = what
        self.model = np.zeros(0, dtype=np.int64) if model is None else model
        self.first = first
        if ids.size and (ids == 0).any():
            raise MalformedInputError(f"found {what} with reserved id 0")
        self.order = np.argsort(ids, kind="stable")
        self.sorted = ids[self.order]
        if ids.size > 1 and (np.diff(self.sorted) == 0).any():
            dup = int(self.sorted[np.argmax(np.diff(self.sorted) == 0)])
            raise MalformedInputError(f"found two {what}s with id {dup}")

    def dense_table(self) -> np.ndarray | None:
        """The model row (``first`` + wire row) at every wire id, -1 where there is none, when the
        ids are dense enough for a table (the usual 1..n); else None."""
        top = int(self.sorted[-1]) if self.sorted.size else 0
        if top > 4 * self.sorted.size + 1024:
            return None
        table = np.full(top + 1, -1, dtype=np.int64)
        table[self.sorted.astype(np.int64)] = self.order + self.first
        return table

    def rows(self, ids: np.ndarray, referrer: str) -> np.ndarray:
        """Row of every id in ``ids``; 0 ids are not allowed here."""
        if not ids.size:
            return np.zeros(0, dtype=np.int64)
        top = int(self.sorted[-1]) if self.sorted.size else 0
        if top <= 4 * self.sorted.size + 1024:  # dense ids (the usual 1..n): direct lookup
            table = np.full(top + 2, -1, dtype=np.int32)
            table[self.sorted.astype(np.int64)] = self.order
            out = table[ids] if int(ids.max()) <= top else table[np.minimum(ids.astype(np.uint64), top + 1)]
            if (out < 0).any():
                missing = int(ids[np.argmax(out < 0)])
                raise MalformedInputError(f"{referrer} refers to missing {self.what} id {missing}")
            return out
        at = np.searchsorted(self.sorted, ids)
        at_c = np.minimum(at, max(self.sorted.size - 1, 0))
        ok = (at < self.sorted.size) & (self.sorted[at_c] == ids) if self.sorted.size else np.zeros(ids.size, bool)
        if not ok.all():
            missing = int(ids[np.argmin(ok)])
            raise MalformedInputError(f"{referrer} refers to missing {self.what} id {missing}")
        return self.order[at_c].astype(np.int64)

    def rows_or_none(self, ids: np.ndarray, referrer: str) -> np.ndarray:
        """Like rows(), but id 0 means "none" and gives -1."""
        out = np.full(ids.size, -1, dtype=np.int64)
        nz = ids != 0
        out[nz] = self.rows(ids[nz], referrer)
        return out


def read(source: Source, options: ReadOptions) -> list[Profile]:
    data = source.data()
    return [_build(data, source.name)]


def _parse(data: bytes) -> tuple[Any, tuple[np.ndarray, np.ndarray] | None]:
    """The parsed message and, for a large input, its samples' spans in ``data`` (then the
    message itself has no samples: see :mod:`polyprof.formats.pprof._split`)."""
    split = split_samples(data)
    if split is not None:
        msg = _profile_class()()
        try:
            msg.ParseFromString(split[0])
            return msg, (split[1], split[2])
        except DecodeError:
            pass  # the whole file's parse below says where
    msg = _profile_class()()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise _locate(data, exc) from None
    return msg, None


def _locate(data: bytes, exc: DecodeError) -> MalformedInputError:
    """The parse error upb gives without a place, with the field and byte offset."""
    found = locate(data, getattr(_profile_class(), "DESCRIPTOR"))  # a generated message class
    if found is not None:
        return MalformedInputError(f"not a valid profile.proto message: {found.message}", offset=found.offset)
    return MalformedInputError(f"not a valid profile.proto message ({exc})")


def _build(data: bytes, name: str) -> Profile:
    msg, spans = _parse(data)
    b = ProfileBuilder("pprof")
    p = b.meta
    strings = _Strings(msg.string_table, b)
    if not strings.size or strings.table[0] != b"":
        raise MalformedInputError("string table must start with an empty string")
    text = strings.text

    p.sample_types = [ValueType(text(vt.type, "sample type"), text(vt.unit, "sample unit"))
                      for vt in msg.sample_type]
    p.drop_frames = text(msg.drop_frames, "drop_frames")
    p.keep_frames = text(msg.keep_frames, "keep_frames")
    p.time_nanos = msg.time_nanos
    p.duration_nanos = msg.duration_nanos
    if msg.HasField("period_type"):
        p.period_type = ValueType(text(msg.period_type.type, "period type"),
                                  text(msg.period_type.unit, "period unit"))
    p.period = msg.period
    p.comments = [text(c, "comment") for c in msg.comment]
    p.default_sample_type = text(msg.default_sample_type, "default_sample_type")
    p.doc_url = text(msg.doc_url, "doc_url")

    fmodel = _functions(b, list(msg.function), strings)
    mmodel = _mappings(b, list(msg.mapping), strings)
    loc_ids = _locations(b, list(msg.location), fmodel, mmodel)
    _samples(b, _sample_chunks(msg.sample, data, spans), loc_ids, strings, len(p.sample_types), name)
    strings.warn(p.warnings)
    profile = b.finish(check=False)
    if spans is not None:  # a large input: its decoding's freed memory goes back before analyses run
        release_free_memory()
    return profile


def _table(raw: list[bytes]) -> tuple[np.ndarray, V.Fields, int, np.ndarray]:
    """Decode the fields of one repeated table message: (buffer, fields, rows, wire ids)."""
    buf, starts, ends = _join(raw)
    f = V.walk_fields(buf, starts, ends)
    return buf, f, len(raw), V.scalar_column(f, 1, len(raw))


def _functions(b: ProfileBuilder, raw: list[bytes], strings: _Strings) -> _Ids:
    _, f, n, ids = _table(raw)
    name, system, filename = (strings.model_ids(V.scalar_column(f, k, n), what)
                              for k, what in ((2, "function name"), (3, "function system_name"),
                                              (4, "function filename")))
    rows = b.functions_bulk(name, system, filename, V.scalar_column(f, 5, n).view(np.int64))
    return _Ids("function", ids, model=rows)


def _mappings(b: ProfileBuilder, raw: list[bytes], strings: _Strings) -> _Ids:
    _, f, n, ids = _table(raw)
    start, limit, offset = (V.scalar_column(f, k, n).tolist() for k in (2, 3, 4))
    filename, build_id = (strings.check(V.scalar_column(f, k, n), what).tolist()
                          for k, what in ((5, "mapping filename"), (6, "mapping build_id")))
    flags = np.zeros(n, dtype=np.int64)
    for field, bit in _FLAG_FIELDS:
        flags |= np.where(V.scalar_column(f, field, n) != 0, bit, 0)
    flag_list = flags.tolist()
    text = strings.text
    rows = np.array([b.mapping(start[i], limit[i], offset[i], text(filename[i]), text(build_id[i]), flag_list[i])
                     for i in range(n)], dtype=np.int64)
    return _Ids("mapping", ids, model=rows)


def _locations(b: ProfileBuilder, raw: list[bytes], functions: _Ids, mappings: _Ids) -> _Ids:
    buf, f, n, ids = _table(raw)
    mapping_rows = mappings.rows_or_none(V.scalar_column(f, 2, n), "a location")
    mapping = np.where(mapping_rows >= 0, mappings.model[np.maximum(mapping_rows, 0)], -1) \
        if len(mappings.model) else np.full(n, -1, dtype=np.int64)
    address = V.scalar_column(f, 3, n)
    folded = V.scalar_column(f, 5, n) != 0
    lines = f.select(4, V.LEN)
    counts = np.bincount(lines.msg, minlength=n).astype(np.int64)
    lf = V.walk_fields(buf, lines.start, lines.start + lines.length)
    nl = len(lines)
    fn_rows = functions.rows_or_none(V.scalar_column(lf, 1, nl), "a location line")
    fn = np.where(fn_rows >= 0, functions.model[np.maximum(fn_rows, 0)], -1) \
        if len(functions.model) else np.full(nl, -1, dtype=np.int64)
    line = V.scalar_column(lf, 2, nl).view(np.int64)
    column = V.scalar_column(lf, 3, nl).view(np.int64)
    first = b.add_locations_bulk(mapping, address, folded, counts, fn, line, column)
    return _Ids("location", ids, first=first)


_CHUNK = 1 << 17  # samples decoded at a time: bounds the decoder's working memory


class _Chunks(NamedTuple):
    """The samples' bytes, ``_CHUNK`` samples at a time: (first sample, buffer, starts, ends);
    ``whole``: (buffer, starts, ends) of all samples when they are spans of the file itself."""

    total: int
    chunks: Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]
    whole: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def _sample_chunks(samples, data: bytes,  # noqa: ANN001 - upb repeated bytes
                   spans: tuple[np.ndarray, np.ndarray] | None) -> _Chunks:
    """The samples as spans of the file's own bytes when :func:`_parse` found them there (a large
    input), else upb's copies joined per chunk."""
    if spans is None:
        n = len(samples)

        def joined() -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
            for lo in range(0, n, _CHUNK):
                yield (lo, *_join(list(samples[lo:lo + _CHUNK])))
        return _Chunks(n, joined())
    buf = V.as_buffer(data)
    starts, ends = spans
    return _Chunks(starts.size, ((lo, buf, starts[lo:lo + _CHUNK], ends[lo:lo + _CHUNK])
                                 for lo in range(0, starts.size, _CHUNK)), (buf, starts, ends))


class _Decoded(NamedTuple):
    """Every sample decoded: location rows (CSR: flat, offsets), values (n x width), labels."""

    flat: np.ndarray
    offsets: np.ndarray
    values: np.ndarray
    labels: LabelColumns | None


def _samples(b: ProfileBuilder, samples: _Chunks, locations: _Ids, strings: _Strings, width: int,
             name: str) -> None:
    """Decode every sample, then intern all stacks at once.

    Labels are decoded and checked here; their label sets are built on
    first use (queries such as ``top`` never need them)."""
    n = samples.total
    if n and width == 0:
        raise MalformedInputError("profile has samples but no sample types")
    # Location rows in the narrowest type: the stack interning gathers them level by level.
    loc_dtype = np.min_scalar_type(max(locations.first + len(locations.sorted) - 1, 0))
    got = _decode_compiled(samples, locations, strings, width, loc_dtype)
    if got is None:
        got = _decode_numpy(samples, locations, strings, width, loc_dtype)
    flat, offsets, values, cols = got
    del got
    if n > _CHUNK:  # the decoders' garbage goes back before the callsite tree is built
        release_free_memory()
    stacks = b.stacks_from_csr(flat, offsets, leaf_first=True, distinct=True)  # pprof merges equal samples
    del flat
    b.add_samples_bulk(stacks, values)
    if cols is not None:
        texts = strings.texts(cols.key, cols.str, cols.unit)
        b.defer_labels(lambda: labelsets(b, cols, n, texts, name))


def _decode_compiled(samples: _Chunks, locations: _Ids, strings: _Strings, width: int,
                     loc_dtype: np.dtype) -> _Decoded | None:
    """All samples in one compiled pass (a large input whose samples are spans of the file), or
    None: no compiled kernels, sparse location ids, or anything unusual (the numpy path names it)."""
    table = locations.dense_table()
    if samples.whole is None or table is None or V.compiled_kernels() is None:
        return None
    from polyprof.formats.pprof._samples_compiled import decode_samples

    got = decode_samples(*samples.whole, width, table, loc_dtype, strings.size)
    if got is None:
        return None
    cols = LabelColumns(got.owner, got.key, got.str, got.num, got.unit) if got.owner.size else None
    return _Decoded(got.locs, got.offsets, got.values, cols)


def _decode_numpy(samples: _Chunks, locations: _Ids, strings: _Strings, width: int,
                  loc_dtype: np.dtype) -> _Decoded:
    """The samples chunk by chunk with the vectorized kernels, checking every field."""
    n = samples.total
    locs, counts, values, labels = [], [], [], []
    for lo, buf, starts, ends in samples.chunks:
        m = len(starts)
        f = V.walk_fields(buf, starts, ends)
        loc_ids, loc_counts = V.repeated_varints(buf, f.select(1), m)
        rows = locations.rows(loc_ids, "a sample")
        locs.append((rows + locations.first).astype(loc_dtype) if locations.first else rows.astype(loc_dtype))
        counts.append(loc_counts)
        vals, value_counts = V.repeated_varints(buf, f.select(2), m)
        if (value_counts != width).any():
            i = int(np.argmax(value_counts != width))
            raise MalformedInputError(f"sample {lo + i} has {int(value_counts[i])} values, expected {width} "
                                      "(one per sample type)")
        values.append(V.as_int64(vals).reshape(m, width))
        label_fields = f.select(3, V.LEN)
        if len(label_fields):
            labels.append(label_columns(buf, label_fields, lo, strings))
    offsets = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    flat = np.concatenate(locs) if locs else np.zeros(0, loc_dtype)
    all_values = np.concatenate(values) if values else np.zeros((0, width), np.int64)
    return _Decoded(flat, offsets, all_values, LabelColumns.concat(labels) if labels else None)
