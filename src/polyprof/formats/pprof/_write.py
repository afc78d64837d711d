"""The pprof writer: gzip-compressed profile.proto, lossless for what the reader keeps."""

from __future__ import annotations

import gzip
from typing import BinaryIO

from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.formats.pprof._common import _FLAG_FIELDS
from polyprof.model.profile import Label, Profile
from polyprof.wire.encode import Encoder

__all__ = ["encode", "write"]


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
