"""pprof ``perftools.profiles.Profile``: reader and writer.

Reading: upb parses the top level (the large repeated messages are declared
``bytes`` so they stay unparsed), then the vectorized kernels decode all
samples, labels, locations and lines at once. Every field of profile.proto is
kept: labels (str, num, num_unit), mapping flags, inline lines with columns,
``is_folded``, drop/keep frames, comments, default sample type, doc_url.

Leniency follows ``go tool pprof``: strings that are not UTF-8 are decoded
with replacement (a warning says how many); id 0, duplicate ids, dangling
references and wrong value counts are errors, as they are for pprof.

Writing: a gzip-compressed profile.proto. Lossless for everything the reader
keeps. Sample columns pprof has no field for (time, pid, tid, cpu) are
written as numeric labels and listed in the loss report; per-format extras
are listed as not kept.
"""

from __future__ import annotations

import gzip
from typing import BinaryIO

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import MalformedInputError
from polyprof.formats.loss import LossReport
from polyprof.formats.options import ReadOptions, WriteOptions
from polyprof.formats.source import Source
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import (
    MAPPING_HAS_FILENAMES,
    MAPPING_HAS_FUNCTIONS,
    MAPPING_HAS_INLINE_FRAMES,
    MAPPING_HAS_LINE_NUMBERS,
    Label,
    Profile,
    ValueType,
)
from polyprof.wire import vector as V
from polyprof.wire.encode import Encoder
from polyprof.wire.schema import Schema
from polyprof.wire.scan import read_varint

__all__ = ["read", "sniff", "write"]

# Field numbers of profile.proto (../shared/spec/wire-formats.md, section 1.2).
_PROFILE_FIELDS = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 0, 8: 0, 9: 0, 10: 0, 11: 2, 12: 0,
                   13: None, 14: 0, 15: 0}
_FLAG_FIELDS = ((7, MAPPING_HAS_FUNCTIONS), (8, MAPPING_HAS_FILENAMES),
                (9, MAPPING_HAS_LINE_NUMBERS), (10, MAPPING_HAS_INLINE_FRAMES))


def _schema() -> type:
    s = Schema("polyprof.pprof", syntax="proto3")
    s.message("ValueType", type=(1, "int64"), unit=(2, "int64"))
    s.message("Profile",
              sample_type=(1, "ValueType", "repeated"),
              sample=(2, "bytes", "repeated"),
              mapping=(3, "bytes", "repeated"),
              location=(4, "bytes", "repeated"),
              function=(5, "bytes", "repeated"),
              string_table=(6, "bytes", "repeated"),
              drop_frames=(7, "int64"), keep_frames=(8, "int64"),
              time_nanos=(9, "int64"), duration_nanos=(10, "int64"),
              period_type=(11, "ValueType"), period=(12, "int64"),
              comment=(13, "int64", "repeated"),
              default_sample_type=(14, "int64"), doc_url=(15, "int64"))
    return s.build()["Profile"]


_PROFILE_CLASS: type | None = None


def _profile_class() -> type:
    global _PROFILE_CLASS
    if _PROFILE_CLASS is None:
        _PROFILE_CLASS = _schema()
    return _PROFILE_CLASS


# ---------------------------------------------------------------- sniffing

def sniff(head: bytes) -> bool:
    """True if the first top-level fields look like a pprof Profile.

    A Perfetto trace also starts with field 1 (LEN), so field-1 payloads must
    look like a ValueType (two small varint fields), and some field other than
    1 must appear or the whole head must be consumed.
    """
    i = 0
    seen = 0
    try:
        while i < len(head) and seen < 64:
            key, i = read_varint(head, i)
            field, wire = key >> 3, key & 7
            expected = _PROFILE_FIELDS.get(field, -1)
            if expected == -1 or (expected is not None and wire != expected):
                return False
            if field == 13 and wire not in (0, 2):
                return False
            if wire == 0:
                _, i = read_varint(head, i)
            elif wire == 2:
                length, i = read_varint(head, i)
                if field in (1, 11):  # sample_type / period_type are ValueTypes
                    body = head[i:i + length]
                    if i + length <= len(head) and not _is_value_type(body):
                        return False
                i += length
            seen += 1
    except IndexError:
        return seen > 0
    return seen > 0


def _is_value_type(body: bytes) -> bool:
    i = 0
    try:
        while i < len(body):
            key, i = read_varint(body, i)
            if key not in (0x08, 0x10):
                return False
            _, i = read_varint(body, i)
    except IndexError:
        return False
    return True


# ---------------------------------------------------------------- reading

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
    """Maps wire ids of one table to row numbers (ids must be nonzero and unique)."""

    def __init__(self, what: str, ids: np.ndarray) -> None:
        self.what = what
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
    return [_build(msg)]


def _build(msg) -> Profile:  # noqa: ANN001 - a run-time message class
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
    _samples(b, msg.sample, loc_ids, strings, len(p.sample_types))
    return b.finish(check=False)


def _check_sid(sid: int, n: int, what: str) -> int:
    if not 0 <= sid < n:
        raise MalformedInputError(f"{what} has a string index outside the string table (size {n})")
    return sid


def _functions(b: ProfileBuilder, raw: list[bytes], smap: np.ndarray, strings: list[str]) -> _Ids:
    buf, starts, ends = _join(raw)
    f = V.walk_fields(buf, starts, ends)
    n = len(raw)
    ids = V.scalar_column(f, 1, n)
    name, system, filename = (_string_ids(V.scalar_column(f, k, n), smap, "function") for k in (2, 3, 4))
    rows = b.functions_bulk(name, system, filename, V.scalar_column(f, 5, n).view(np.int64))
    index = _Ids("function", ids)
    index.model = rows  # type: ignore[attr-defined]
    return index


def _mappings(b: ProfileBuilder, raw: list[bytes], smap: np.ndarray, strings: list[str]) -> _Ids:
    buf, starts, ends = _join(raw)
    f = V.walk_fields(buf, starts, ends)
    n = len(raw)
    ids = V.scalar_column(f, 1, n)
    start, limit, offset = (V.scalar_column(f, k, n).tolist() for k in (2, 3, 4))
    filename, build_id = (_string_ids(V.scalar_column(f, k, n), np.arange(len(strings)), "mapping").tolist()
                          for k in (5, 6))
    flags = np.zeros(n, dtype=np.int64)
    for field, bit in _FLAG_FIELDS:
        flags |= np.where(V.scalar_column(f, field, n) != 0, bit, 0)
    flags = flags.tolist()
    rows = np.array([b.mapping(start[i], limit[i], offset[i], strings[filename[i]], strings[build_id[i]],
                               flags[i]) for i in range(n)], dtype=np.int64)
    index = _Ids("mapping", ids)
    index.model = rows  # type: ignore[attr-defined]
    return index


def _locations(b: ProfileBuilder, raw: list[bytes], functions: _Ids, mappings: _Ids) -> _Ids:
    buf, starts, ends = _join(raw)
    f = V.walk_fields(buf, starts, ends)
    n = len(raw)
    ids = V.scalar_column(f, 1, n)
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
    index = _Ids("location", ids)
    index.first = first  # type: ignore[attr-defined]  # model row = first + wire row
    return index


_CHUNK = 1 << 17  # samples decoded at a time: bounds the decoder's working memory


def _samples(b: ProfileBuilder, samples, locations: _Ids, strings: list[str], width: int) -> None:  # noqa: ANN001
    """Decode every sample chunk by chunk, then intern all stacks at once."""
    n = len(samples)
    if n and width == 0:
        raise MalformedInputError("profile has samples but no sample types")
    locs, counts, values, labels = [], [], [], []
    for lo in range(0, n, _CHUNK):
        raw = list(samples[lo:lo + _CHUNK])
        buf, starts, ends = _join(raw)
        del raw
        m = len(starts)
        f = V.walk_fields(buf, starts, ends)
        loc_ids, loc_counts = V.repeated_varints(buf, f.select(1), m)
        locs.append(locations.rows(loc_ids, "a sample").astype(np.int32, copy=False) + np.int32(locations.first))
        counts.append(loc_counts)
        vals, value_counts = V.repeated_varints(buf, f.select(2), m)
        if (value_counts != width).any():
            i = int(np.argmax(value_counts != width))
            raise MalformedInputError(f"sample {lo + i} has {int(value_counts[i])} values, expected {width} "
                                      "(one per sample type)")
        values.append(V.as_int64(vals).reshape(m, width))
        labels.append(_label_columns(buf, f.select(3, V.LEN), strings, lo))
    offsets = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    flat = np.concatenate(locs) if locs else np.zeros(0, np.int32)
    locs.clear()
    stacks = b.stacks_from_csr(flat, offsets, leaf_first=True)
    del flat
    labelset = _labelsets(b, labels, n, strings)
    b.add_samples_bulk(stacks, np.concatenate(values) if values else np.zeros((0, width), np.int64), labelset)


def _factorize(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row ids of equal tuples across ``cols``, and the first row of each id.

    Each column is factorized on its own (1-D sorts are fast), then the codes
    are combined into one integer per row; far cheaper than unique(axis=0).
    """
    combined = np.zeros(cols[0].size, dtype=np.int64)
    for col in cols:
        uniq, code = np.unique(col, return_inverse=True)
        if uniq.size and combined.size and int(combined.max()) >= (2**62) // max(uniq.size, 1):
            _, combined = np.unique(combined, return_inverse=True)  # re-densify before overflow
        combined = combined * uniq.size + code.reshape(-1)
    uniq, first, ids = np.unique(combined, return_index=True, return_inverse=True)
    return ids.reshape(-1), first


def _label_columns(buf: np.ndarray, labels: V.Fields, strings: list[str], first_sample: int) -> list[np.ndarray]:
    """[owner sample, key, str, num, unit] of every label record, string indexes checked."""
    nl = len(labels)
    if not nl:
        return [np.zeros(0, np.int64)] * 5
    lf = V.walk_fields(buf, labels.start, labels.start + labels.length)
    cols = [V.scalar_column(lf, k, nl).view(np.int64) for k in (1, 2, 3, 4)]
    for k, what in ((0, "label key"), (1, "label value"), (3, "label unit")):
        c = cols[k]
        if int(c.min()) < 0 or int(c.max()) >= len(strings):
            raise MalformedInputError(f"{what} has a string index outside the string table")
    return [labels.msg + first_sample] + cols


def _labelsets(b: ProfileBuilder, parts: list[list[np.ndarray]], n: int, strings: list[str]) -> np.ndarray:
    """Intern the label set of every sample; returns the label-set row per sample."""
    out = np.zeros(n, dtype=np.int32)
    owner, *cols = (np.concatenate(c) for c in zip(*parts)) if parts else [np.zeros(0)] * 5
    nl = owner.size
    if not nl:
        return out
    label_id, label_first = _factorize(cols)
    first_of_owner = np.searchsorted(owner, owner, side="left")
    rank = np.arange(nl) - first_of_owner
    width = int(rank.max()) + 1
    grid = np.full((n, width), -1, dtype=np.int64)
    grid[owner, rank] = label_id
    has = np.zeros(n, dtype=bool)
    has[owner] = True
    rows = grid[has]
    set_id, set_first = _factorize([rows[:, j] for j in range(width)])
    key, sval, num, unit = (c[label_first].tolist() for c in cols)
    label_objs = [Label(strings[key[i]], str=strings[sval[i]]) if sval[i]
                  else Label(strings[key[i]], num=num[i], unit=strings[unit[i]]) for i in range(len(key))]
    sets = [tuple(label_objs[i] for i in row if i >= 0) for row in rows[set_first].tolist()]
    model_ids = np.array([b.labelset(s) for s in sets], dtype=np.int32)
    out[has] = model_ids[set_id]
    return out


# ---------------------------------------------------------------- writing

_COLUMN_LABELS = {"time": "nanoseconds", "pid": "", "tid": "", "cpu": ""}


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` as gzip-compressed profile.proto."""
    report = LossReport("pprof")
    data = encode(profile, report)
    out.write(gzip.compress(data, compresslevel=6, mtime=0))
    return report


def encode(p: Profile, report: LossReport | None = None) -> bytes:
    """The uncompressed profile.proto bytes of ``p``."""
    report = report if report is not None else LossReport("pprof")
    strings: dict[str, int] = {"": 0}

    def sid(text: str) -> int:
        i = strings.get(text)
        if i is None:
            i = strings[text] = len(strings)
        return i

    e = Encoder()
    for vt in p.sample_types:
        e.message(1, Encoder().varint_field(1, sid(vt.type)).varint_field(2, sid(vt.unit)))
    _encode_samples(p, e, sid, report)
    ms = p.mappings
    mstr = p.strings
    for i in range(len(ms)):
        m = Encoder().varint_field(1, i + 1).varint_field(2, int(ms.start[i])) \
            .varint_field(3, int(ms.limit[i])).varint_field(4, int(ms.offset[i])) \
            .varint_field(5, sid(mstr[ms.filename[i]])).varint_field(6, sid(mstr[ms.build_id[i]]))
        flags = int(ms.flags[i])
        for field, bit in _FLAG_FIELDS:
            m.varint_field(field, 1 if flags & bit else 0)
        e.message(3, m)
    loc = p.locations
    lf, ll, lc = p.lines.function.tolist(), p.lines.line.tolist(), p.lines.column.tolist()
    starts = loc.line_start.tolist()
    for i in range(len(loc)):
        m = Encoder().varint_field(1, i + 1).varint_field(2, int(loc.mapping[i]) + 1) \
            .varint_field(3, int(loc.address[i]))
        for r in range(starts[i], starts[i + 1]):
            m.message(4, Encoder().varint_field(1, lf[r] + 1).varint_field(2, ll[r]).varint_field(3, lc[r]))
        m.varint_field(5, 1 if loc.folded[i] else 0)
        e.message(4, m)
    fs = p.functions
    for i in range(len(fs)):
        e.message(5, Encoder().varint_field(1, i + 1).varint_field(2, sid(mstr[fs.name[i]]))
                  .varint_field(3, sid(mstr[fs.system_name[i]])).varint_field(4, sid(mstr[fs.filename[i]]))
                  .varint_field(5, int(fs.start_line[i])))
    tail = Encoder()
    tail.varint_field(7, sid(p.drop_frames)).varint_field(8, sid(p.keep_frames))
    tail.varint_field(9, p.time_nanos).varint_field(10, p.duration_nanos)
    if p.period_type is not None:
        tail.message(11, Encoder().varint_field(1, sid(p.period_type.type)).varint_field(2, sid(p.period_type.unit)))
    tail.varint_field(12, p.period)
    comments = [sid(c) for c in p.comments]
    if comments:
        tail.packed_field(13, comments)
    tail.varint_field(14, sid(p.default_sample_type)).varint_field(15, sid(p.doc_url))
    if p.extras:
        report.add(f"format-specific facts not kept ({', '.join(sorted(p.extras))})", len(p.extras))
    table = Encoder()
    for text in strings:  # dicts keep insertion order: index order
        table.bytes_field(6, text.encode("utf-8", errors="surrogatepass"), always=True)
    return e.getvalue() + table.getvalue() + tail.getvalue()


def _encode_samples(p: Profile, e: Encoder, sid, report: LossReport) -> None:  # noqa: ANN001
    s = p.samples
    extra_cols = [(name, getattr(s, name)) for name in s.OPTIONAL_COLUMNS if getattr(s, name) is not None]
    for name, _ in extra_cols:
        report.add(f"sample {name} column written as numeric label '{name}'", len(s))
    stack_cache: dict[int, bytes] = {}
    label_cache: dict[int, bytes] = {}
    parents = p.callsites.parent
    locs = p.callsites.location
    values = s.values.tolist()
    stacks = s.stack.tolist()
    labelsets = s.labelset.tolist()
    extra_values = [(name, col.tolist()) for name, col in extra_cols]
    for i in range(len(s)):
        node = stacks[i]
        loc_bytes = stack_cache.get(node)
        if loc_bytes is None:
            ids = []
            cur = node
            while cur >= 0:
                ids.append(int(locs[cur]) + 1)
                cur = int(parents[cur])
            loc_bytes = stack_cache[node] = Encoder().packed_field(1, ids).getvalue() if ids else b""
        ls = labelsets[i]
        lab = label_cache.get(ls)
        if lab is None:
            enc = Encoder()
            for label in p.labelsets[ls]:
                _encode_label(enc, sid, label)
            lab = label_cache[ls] = enc.getvalue()
        body = Encoder()
        body.raw(loc_bytes)
        body.packed_field(2, values[i], signed=True)
        body.raw(lab)
        for name, col in extra_values:
            _encode_label(body, sid, Label(name, num=col[i], unit=_COLUMN_LABELS[name]))
        e.message(2, body)


def _encode_label(enc: Encoder, sid, label: Label) -> None:  # noqa: ANN001
    m = Encoder().varint_field(1, sid(label.key))
    if label.str is not None:
        m.varint_field(2, sid(label.str))
    else:
        m.varint_field(3, label.num or 0).varint_field(4, sid(label.unit))
    enc.message(3, m)
