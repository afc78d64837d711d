"""Every record of a report-sample file decoded at once, into columns.

The records' fields are walked together by the numpy (or compiled) field
walker, then the samples' fields, then their callchain entries: no Python
step per record, sample or frame. The few File, Thread, MetaInfo and
LostSituation records are decoded from the same walk (:mod:`._flat`; upb
only when the walker refuses their bytes), so protobuf is not imported. A payload that occurs
twice in one record is merged, as protobuf does (its fields read in wire
order, the last value of a scalar winning). A record the walker rejects is
parsed again with upb to name the problem as before.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyprof.errors import MalformedInputError
from polyprof.formats.simpleperf import _flat as F
from polyprof.formats.simpleperf._framing import records
from polyprof.formats.simpleperf._schema import record_class
from polyprof.formats.span_bytes import sub_spans_and_fields
from polyprof.model.columns import factorize_rows
from polyprof.wire import vector as V

__all__ = ["Records", "Samples", "collect"]

SAMPLE, LOST, FILE, THREAD, META, SWITCH = 1, 2, 3, 4, 5, 6
_U32 = np.uint64(0xFFFFFFFF)


def _u32(values: np.ndarray) -> np.ndarray:
    """The low 32 bits of a uint64 column as int64, in place (a column is 7 MB per million
    callchain entries: no copies)."""
    values &= _U32
    return values.view(np.int64)


def _i32(values: np.ndarray) -> np.ndarray:
    """The low 32 bits of a uint64 column as a signed int32 widened to int64, in place."""
    out = _u32(values)
    out ^= 1 << 31
    out -= 1 << 31
    return out


@dataclass
class Samples:
    """Sample records as columns: ``chain`` callchain entries per sample, their entries flat (leaf
    first) as rows of the few distinct entries."""

    time: np.ndarray
    tid: np.ndarray
    event_count: np.ndarray
    event_type: np.ndarray
    chain: np.ndarray
    entry: np.ndarray       # per callchain entry: its group of equal bytes (54M in a 614 MB file)
    entry_row: np.ndarray   # per such group: its row in the distinct entries below
    group_size: np.ndarray  # per such group: its callchain entries
    first: np.ndarray       # per distinct entry: its first callchain entry
    vaddr: np.ndarray       # the distinct (vaddr, file, symbol, execution type) entries, in
    file_id: np.ndarray     # order of first sight
    symbol_id: np.ndarray
    exec_type: np.ndarray
    unwind: dict[str, np.ndarray]  # per sample: has, has_code, code, has_raw, raw, has_addr, addr

    def __len__(self) -> int:
        return self.time.size


@dataclass
class Records:
    """Everything in the file, sorted by kind; samples keep their file order."""

    samples: Samples
    switches: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # samples before, time, tid, switch_on
    files: dict[int, Any] = field(default_factory=dict)
    threads: dict[int, Any] = field(default_factory=dict)
    meta: Any = None
    lost: list[Any] = field(default_factory=list)
    odd: Counter = field(default_factory=Counter)


class _Payloads:
    """The payload spans of one kind, with the record each belongs to and its item number
    (spans of one record share an item: they merge)."""

    def __init__(self, f: V.Fields, kind: int) -> None:
        sel = f.select(kind, V.LEN)
        self.record = sel.msg
        self.start, self.end = sel.start, sel.start + sel.length
        first = np.ones(sel.msg.size, dtype=bool)
        first[1:] = sel.msg[1:] != sel.msg[:-1]
        self.item = np.cumsum(first) - 1
        self.records = sel.msg[first]

    @property
    def n(self) -> int:
        return self.records.size

    def fields(self, buf: np.ndarray) -> V.Fields:
        """The fields of every item (merged spans: in wire order)."""
        f = V.walk_fields(buf, self.start, self.end)
        f.msg = self.item[f.msg]
        return f

    def spans(self) -> list[list[tuple[int, int]]]:
        """The payload spans of every item, in wire order."""
        out: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        for k, a, b in zip(self.item.tolist(), self.start.tolist(), self.end.tolist()):
            out[k].append((a, b))
        return out

    def messages(self, data: bytes, kind_class: Any) -> list[Any]:
        """Every item parsed with upb (for the few records of rare kinds)."""
        from google.protobuf.message import DecodeError

        out: list[Any] = []
        bounds = np.searchsorted(self.item, np.arange(self.n + 1))
        for k in range(self.n):
            lo, hi = bounds[k], bounds[k + 1]
            raw = b"".join(data[a:b] for a, b in zip(self.start[lo:hi].tolist(), self.end[lo:hi].tolist()))
            try:
                out.append(kind_class.FromString(raw))
            except DecodeError as exc:
                raise MalformedInputError(f"record {int(self.records[k]) + 1} is not a valid Record message "
                                          f"({exc})", offset=int(self.start[lo])) from None
        return out


def collect(data: bytes, warnings: list[str]) -> Records:
    starts, ends = records(data, warnings)
    buf = np.frombuffer(data, dtype=np.uint8)
    try:
        return _decode(data, buf, starts, ends, warnings)
    except MalformedInputError as exc:
        raise _located(data, starts, ends, exc) from None


def _decode(data: bytes, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, warnings: list[str]) -> Records:
    f = V.walk_fields(buf, starts, ends)
    payload = (f.wire == V.LEN) & (f.field >= SAMPLE) & (f.field <= SWITCH)
    kinds = np.zeros((starts.size, SWITCH + 1), dtype=bool)
    kinds[f.msg[payload], f.field[payload]] = True
    per_record = kinds.sum(axis=1)
    odd: Counter = Counter()
    if (per_record == 0).any():
        odd["record(s) of an unknown kind were skipped"] += int((per_record == 0).sum())
    if (per_record > 1).any():
        odd["record(s) held several payloads (a oneof); all were read"] += int((per_record > 1).sum())
    parts = {k: _Payloads(f, k) for k in range(SAMPLE, SWITCH + 1)}
    samples = _samples(buf, parts[SAMPLE])
    recs = Records(samples, _switches(buf, parts[SWITCH], parts[SAMPLE].records), odd=odd)
    flat = _flat_records(data, parts)
    for msg, record in zip(flat["file"], parts[FILE].records.tolist()):
        if msg.id in recs.files:
            raise MalformedInputError(f"two File records have id {msg.id}", offset=int(starts[record]) - 4)
        recs.files[msg.id] = msg
    for msg in flat["thread"]:
        if msg.thread_id in recs.threads:
            odd["extra Thread record(s) for an already described thread; the last one was used"] += 1
        recs.threads[msg.thread_id] = msg
    metas = flat["meta_info"]
    if metas:
        recs.meta = metas[0]
        if len(metas) > 1:
            odd["extra MetaInfo record(s) ignored; the first one was used"] += len(metas) - 1
    recs.lost = flat["lost"]
    warnings.extend(f"{n} {what}" for what, n in sorted(odd.items()))
    return recs


def _flat_records(data: bytes, parts: dict[int, _Payloads]) -> dict[str, list[Any]]:
    """The File, Thread, MetaInfo and LostSituation records by kind: decoded by a plain walk of
    their fields (:mod:`._flat`) up to ``WALK_MAX`` bytes of them, else (or when that walk
    refuses some bytes) by upb, which then names the problem or takes them, as before."""
    kinds = {"file": (FILE, F.FILE), "thread": (THREAD, F.THREAD), "meta_info": (META, F.META),
             "lost": (LOST, F.LOST)}
    size = sum(int((parts[kind].end - parts[kind].start).sum()) for kind, _ in kinds.values())
    if size <= F.WALK_MAX:
        walked = {name: F.decode(data, parts[kind].spans(), spec) for name, (kind, spec) in kinds.items()}
        if all(v is not None for v in walked.values()):
            return {name: v for name, v in walked.items() if v is not None}
    classes = _kind_classes()
    return {name: parts[kind].messages(data, classes[name]) for name, (kind, _) in kinds.items()}


def _kind_classes() -> dict[str, Any]:
    empty = record_class()()
    return {name: type(getattr(empty, name)) for name in ("file", "thread", "meta_info", "lost")}


_SCALARS, _ENTRY, _UNWIND = (1, 2, 4, 5), (1, 2, 3, 4), (3, 1, 2)  # field numbers read


def _samples(buf: np.ndarray, part: _Payloads) -> Samples:
    n = part.n
    vals, present, (chain, entry, group_size, entry_row, entries, first), (u_count, u_vals, u_present) = \
        _walked(buf, part)
    if part.start.size != n:  # payloads repeated in a record merge: scalars by their last value
        vals, present = _last_present(part.item, vals, present, n)
        chain = np.bincount(part.item, weights=chain, minlength=n).astype(np.int64)
        u_count = np.bincount(part.item, weights=u_count, minlength=n).astype(np.int64)
    u_vals, u_present = _last_present(np.repeat(np.arange(n), u_count), u_vals, u_present, n)
    u: dict[str, np.ndarray] = {"has": u_count > 0}
    for j, name in enumerate(("code", "raw", "addr")):
        u[f"has_{name}"] = u_present[:, j]
        u[name] = u_vals[:, j] if name == "addr" else _u32(u_vals[:, j])
    col = lambda j: vals[:, j]  # noqa: E731
    return Samples(time=col(0), tid=_i32(col(1)), event_count=col(2), event_type=_u32(col(3)),
                   chain=chain, entry=entry, entry_row=entry_row, group_size=group_size, first=first,
                   vaddr=entries[:, 0], file_id=_u32(entries[:, 1]),
                   symbol_id=_i32(entries[:, 2]), exec_type=_u32(entries[:, 3]), unwind=u)


def _distinct(buf: np.ndarray, first_bytes: np.ndarray, lo: np.ndarray,
              length: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct entry of each byte group, values of each distinct entry, its first entry) from
    the entries grouped by bytes (each group's first entry, its start and length): byte strings
    that decode alike (fields in another order, longer varints) are one entry, numbered as
    grouping every entry's values would number them."""
    values, _ = V.scalar_fields(buf, lo, lo + length, _ENTRY)
    group, first = _group_values(values)
    return group, values[first], first_bytes[first]


def _group_values(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return factorize_rows([values[:, j].view(np.int64) for j in range(values.shape[1])], in_order=True)


def _walked(buf: np.ndarray, part: _Payloads) -> tuple[Any, ...]:
    """(scalars, present, callchain entries, unwinding results) of every sample payload, from one
    walk of the payloads (:func:`polyprof.formats.span_bytes.sub_spans_and_fields`: compiled,
    one pass; numpy, one field walk): callchain entries grouped by their bytes, each distinct
    byte string decoded once, and regrouped by value (the numbering of grouping every entry)."""
    got = sub_spans_and_fields(buf, part.start, part.end, 3, _SCALARS, 6)
    chain, by_bytes, first_bytes, lo, length, sizes, vals, present, u_start, u_len, u_count = got
    entries = (chain, by_bytes, sizes, *_distinct(buf, first_bytes, lo, length))
    if u_count.size and int(u_count.max()) > 1:  # an unwinding result in parts: merge them as protobuf does
        u_count, u_vals, u_present = V.nested_scalars(buf, part.start, part.end, 6, _UNWIND)
    else:
        has = np.flatnonzero(u_count)
        u_vals, u_present = V.scalar_fields(buf, u_start[has], u_start[has] + u_len[has], _UNWIND)
    return vals, present, entries, (u_count, u_vals, u_present)


def _last_present(owner: np.ndarray, values: np.ndarray, present: np.ndarray,
                  n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows merged by ``owner``: per column, the value of the last row where it is present."""
    out = np.zeros((n, values.shape[1]), dtype=values.dtype)
    has = np.zeros((n, values.shape[1]), dtype=bool)
    for j in range(values.shape[1]):
        sel = present[:, j]
        out[owner[sel], j] = values[sel, j]  # later rows are written last: they win
        has[owner[sel], j] = True
    return out, has


def _scalar(f: V.Fields, number: int, n: int) -> np.ndarray:
    """The last varint value of field ``number`` per message (0 when absent)."""
    sel = (f.field == number) & (f.wire == V.VARINT)  # masks: cheaper than grouping for a few fields
    out = np.zeros(n, dtype=np.uint64)
    out[f.msg[sel]] = f.value[sel]
    return out


def _switches(buf: np.ndarray, part: _Payloads,
              sample_records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(samples before, time, tid, switch_on) of every ContextSwitch, in file order."""
    n = part.n
    f = part.fields(buf)
    before = np.searchsorted(sample_records, part.records, side="right")  # a sample in the same record counts
    return before, _scalar(f, 2, n), _u32(_scalar(f, 3, n)), _scalar(f, 1, n) != 0


def _located(data: bytes, starts: np.ndarray, ends: np.ndarray, exc: MalformedInputError) -> MalformedInputError:
    """The error for the record holding the walker's problem, worded by upb when upb rejects it too."""
    if exc.offset is None or not starts.size:
        return exc
    from google.protobuf.message import DecodeError

    index = max(int(np.searchsorted(starts, exc.offset, side="right")) - 1, 0)
    a, b = int(starts[index]), int(ends[index])
    try:
        record_class().FromString(data[a:b])
    except DecodeError as upb:
        return MalformedInputError(f"record {index + 1} is not a valid Record message ({upb})", offset=a - 4)
    return MalformedInputError(f"record {index + 1} is not a valid Record message ({exc.message})",
                               offset=exc.offset)
