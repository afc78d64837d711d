"""The pprof reader: upb for the top level, numpy kernels for everything repeated."""

from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import InputError, MalformedInputError
from polyprof.formats.options import ReadOptions
from polyprof.formats.pprof._common import _FLAG_FIELDS, _profile_class
from polyprof.formats.source import Source
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import factorize_rows
from polyprof.model.profile import Label, Profile, ValueType
from polyprof.wire import vector as V

__all__ = ["read"]


def _join(messages: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, messages), dtype=np.int64, count=len(messages))
    ends = np.cumsum(lengths)
    buf = V.as_buffer(b"".join(messages))
    return buf, ends - lengths, ends


def _decode_strings(raw: list[bytes], warnings: list[str]) -> list[str]:
    bad = 0
    out = []
    for s in raw:
        try:
            out.append(s.decode("utf-8"))
        except UnicodeDecodeError:
            bad += 1
            out.append(s.decode("utf-8", errors="replace"))
    if bad:
        warnings.append(f"{bad} string(s) were not valid UTF-8 and were decoded with replacement characters")
    return out


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


def _string_ids(col: np.ndarray, smap: np.ndarray, what: str) -> np.ndarray:
    signed = col.view(np.int64) if col.dtype == np.uint64 else col
    if signed.size and (int(signed.min()) < 0 or int(signed.max()) >= smap.size):
        raise MalformedInputError(f"{what} has a string index outside the string table (size {smap.size})")
    return smap[signed]


def read(source: Source, options: ReadOptions) -> list[Profile]:
    data = source.data()
    msg = _profile_class()()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise MalformedInputError(f"not a valid profile.proto message ({exc})") from None
    return [_build(msg, source.name)]


def _build(msg, name: str) -> Profile:  # noqa: ANN001 - a run-time message class
    b = ProfileBuilder("pprof")
    p = b.meta
    strings = _decode_strings(list(msg.string_table), p.warnings)
    if not strings or strings[0] != "":
        raise MalformedInputError("string table must start with an empty string")
    smap = np.fromiter((b.string(s) for s in strings), dtype=np.int64, count=len(strings))
    text = lambda sid, what: strings[_check_sid(sid, len(strings), what)]  # noqa: E731

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

    fmodel = _functions(b, list(msg.function), smap, strings)
    mmodel = _mappings(b, list(msg.mapping), smap, strings)
    loc_ids = _locations(b, list(msg.location), fmodel, mmodel)
    _samples(b, msg.sample, loc_ids, strings, len(p.sample_types), name)
    return b.finish(check=False)


def _check_sid(sid: int, n: int, what: str) -> int:
    if not 0 <= sid < n:
        raise MalformedInputError(f"{what} has a string index outside the string table (size {n})")
    return sid


def _table(raw: list[bytes]) -> tuple[np.ndarray, V.Fields, int, np.ndarray]:
    """Decode the fields of one repeated table message: (buffer, fields, rows, wire ids)."""
    buf, starts, ends = _join(raw)
    f = V.walk_fields(buf, starts, ends)
    return buf, f, len(raw), V.scalar_column(f, 1, len(raw))


def _functions(b: ProfileBuilder, raw: list[bytes], smap: np.ndarray, strings: list[str]) -> _Ids:
    _, f, n, ids = _table(raw)
    name, system, filename = (_string_ids(V.scalar_column(f, k, n), smap, "function") for k in (2, 3, 4))
    rows = b.functions_bulk(name, system, filename, V.scalar_column(f, 5, n).view(np.int64))
    return _Ids("function", ids, model=rows)


def _mappings(b: ProfileBuilder, raw: list[bytes], smap: np.ndarray, strings: list[str]) -> _Ids:
    _, f, n, ids = _table(raw)
    start, limit, offset = (V.scalar_column(f, k, n).tolist() for k in (2, 3, 4))
    filename, build_id = (_string_ids(V.scalar_column(f, k, n), np.arange(len(strings)), "mapping").tolist()
                          for k in (5, 6))
    flags = np.zeros(n, dtype=np.int64)
    for field, bit in _FLAG_FIELDS:
        flags |= np.where(V.scalar_column(f, field, n) != 0, bit, 0)
    flag_list = flags.tolist()
    rows = np.array([b.mapping(start[i], limit[i], offset[i], strings[filename[i]], strings[build_id[i]],
                               flag_list[i]) for i in range(n)], dtype=np.int64)
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


def _samples(b: ProfileBuilder, samples, locations: _Ids, strings: list[str], width: int,  # noqa: ANN001
             name: str) -> None:
    """Decode every sample chunk by chunk, then intern all stacks at once.

    Labels are left to be decoded on first use (queries such as ``top``
    never need them); their raw spans are kept."""
    n = len(samples)
    if n and width == 0:
        raise MalformedInputError("profile has samples but no sample types")
    locs, counts, values, labels = [], [], [], []
    # Location rows in the narrowest type: the stack interning gathers them level by level.
    loc_dtype = np.min_scalar_type(max(locations.first + len(locations.sorted) - 1, 0))
    for lo in range(0, n, _CHUNK):
        raw = list(samples[lo:lo + _CHUNK])
        buf, starts, ends = _join(raw)
        del raw
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
        labels.append(_label_spans(buf, f.select(3, V.LEN), lo))
    offsets = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    flat = np.concatenate(locs) if locs else np.zeros(0, np.int32)
    locs.clear()
    stacks = b.stacks_from_csr(flat, offsets, leaf_first=True)
    del flat
    b.add_samples_bulk(stacks, np.concatenate(values) if values else np.zeros((0, width), np.int64))
    if any(owner.size for _, owner, _ in labels):
        b.defer_labels(lambda: _decode_labels(b, labels, n, strings, name))


_LabelChunk = tuple[np.ndarray, np.ndarray, np.ndarray]  # label bytes, owner sample, record length


def _label_spans(buf: np.ndarray, fields: V.Fields, first_sample: int) -> _LabelChunk:
    """(bytes, owner sample, length) of one chunk's label records, copied out
    of the chunk's buffer so that it can be freed."""
    return V.gather_spans(buf, fields.start, fields.length), fields.msg + first_sample, fields.length


def _decode_labels(b: ProfileBuilder, chunks: list[_LabelChunk], n: int,
                   strings: list[str], name: str) -> np.ndarray:
    try:
        return _labelsets(b, [_label_columns(*chunk, strings) for chunk in chunks], n, strings)
    except InputError as exc:  # raised after read() returned: name the file here
        exc.format = exc.format or "pprof"
        raise exc.with_path(name) from None


def _label_columns(buf: np.ndarray, owner: np.ndarray, length: np.ndarray, strings: list[str]) -> list[np.ndarray]:
    """[owner sample, key, str, num, unit] of every label record (packed
    one after another in ``buf``), string indexes checked."""
    nl = owner.size
    if not nl:
        return [np.zeros(0, np.int64)] * 5
    end = np.cumsum(length)
    lf = V.varint_fields(buf, end)  # the usual labels: key and str or num (and unit), all varints
    if lf is None:
        lf = V.walk_fields(buf, end - length, end)
    cols = [V.scalar_column(lf, k, nl).view(np.int64) for k in (1, 2, 3, 4)]
    for k, what in ((0, "label key"), (1, "label value"), (3, "label unit")):
        c = cols[k]
        if int(c.min()) < 0 or int(c.max()) >= len(strings):
            raise MalformedInputError(f"{what} has a string index outside the string table")
    return [owner] + cols


def _labelsets(b: ProfileBuilder, parts: list[list[np.ndarray]], n: int, strings: list[str]) -> np.ndarray:
    """Intern the label set of every sample; returns the label-set row per sample."""
    out = np.zeros(n, dtype=np.int32)
    owner, *cols = (np.concatenate(c) for c in zip(*parts)) if parts else [np.zeros(0)] * 5
    nl = owner.size
    if not nl:
        return out
    label_id, label_first = factorize_rows(cols)
    has = np.zeros(n, dtype=bool)
    has[owner] = True
    if (np.diff(owner) > 0).all():  # one label per labelled sample (the usual case): sets are labels
        rows, set_id, set_first = label_id[:, None], label_id, label_first
    else:
        rank = np.arange(nl) - np.searchsorted(owner, owner, side="left")
        width = int(rank.max()) + 1
        grid = np.full((n, width), -1, dtype=np.int64)
        grid[owner, rank] = label_id
        rows = grid[has]
        set_id, set_first = factorize_rows([rows[:, j] for j in range(width)])
    key, sval, num, unit = (c[label_first].tolist() for c in cols)
    label_objs = [Label(strings[key[i]], str=strings[sval[i]]) if sval[i]
                  else Label(strings[key[i]], num=num[i], unit=strings[unit[i]]) for i in range(len(key))]
    sets = [tuple(label_objs[i] for i in row if i >= 0) for row in rows[set_first].tolist()]
    model_ids = np.array([b.labelset(s) for s in sets], dtype=np.int32)
    out[has] = model_ids[set_id]
    return out
