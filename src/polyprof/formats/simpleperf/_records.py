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
from types import ModuleType
from typing import Any

import numpy as np

from polyprof.errors import MalformedInputError
from polyprof.formats.simpleperf import _flat as F
from polyprof.formats.simpleperf._framing import HEADER_SIZE, check_header, records, trailing
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
    """Sample records as columns: ``chain`` callchain entries per sample; the entries of the
    distinct callchains flat (leaf first) as rows of the few distinct entries."""

    time: np.ndarray
    tid: np.ndarray
    event_count: np.ndarray
    event_type: np.ndarray
    chain: np.ndarray
    chain_of: np.ndarray | None  # per sample: its distinct callchain (None: each sample its own)
    chain_first: np.ndarray | None  # per distinct callchain: its first sample (None: the same)
    offsets: np.ndarray     # per distinct callchain: where its entries start in ``entry`` (and the end)
    entries: int            # callchain entries of all samples
    entry: np.ndarray       # per entry of the distinct callchains: its group of equal bytes
    entry_row: np.ndarray   # per such group: its row in the distinct entries below
    group_size: np.ndarray  # per such group: the callchain entries of all samples in it
    first: np.ndarray       # per distinct entry: its first entry in ``entry``
    vaddr: np.ndarray       # the distinct (vaddr, file, symbol, execution type) entries, in
    file_id: np.ndarray     # order of first sight
    symbol_id: np.ndarray
    exec_type: np.ndarray
    unwind: dict[str, np.ndarray]  # per sample: has, has_code, code, has_raw, raw, has_addr, addr

    def __len__(self) -> int:
        return self.time.size

    def sample_of(self, entry: int) -> int:
        """The first sample holding entry ``entry`` of ``entry``."""
        chain = int(np.searchsorted(self.offsets, entry, side="right")) - 1
        return chain if self.chain_first is None else int(self.chain_first[chain])


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

    def __init__(self, f: V.Fields | None, kind: int) -> None:
        if f is not None:  # else the caller fills the spans in (:meth:`whole`)
            sel = f.select(kind, V.LEN)
            self._spans(sel.msg, sel.start, sel.start + sel.length)

    @classmethod
    def whole(cls, record: np.ndarray, start: np.ndarray, end: np.ndarray) -> _Payloads:
        """The payloads ``start:end`` of records ``record``, one each (distinct records: each its
        own item, no grouping)."""
        part = cls(None, 0)
        part.record = part.records = record
        part.start, part.end = start, end
        part._item = None  # each span its own item: numbered when asked (rarely, for samples)
        return part

    def _spans(self, record: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        self.record = record
        self.start, self.end = start, end
        first = np.ones(record.size, dtype=bool)
        first[1:] = record[1:] != record[:-1]
        self._item: np.ndarray | None = np.cumsum(first) - 1
        self.records = record[first]

    @property
    def item(self) -> np.ndarray:
        """The item (merged record) of every span."""
        if self._item is None:
            self._item = np.arange(self.records.size)
        return self._item

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


#: Whether the compiled kernels of :mod:`._compiled` may take the file (a test turns them off to
#: compare with the generic walks).
CHAINS = True
_compiled: ModuleType | bool | None = None  # simpleperf/_compiled.py once loaded; False: unavailable


#: From this size the walk's kernels are loaded on a thread while the file is framed.
WARM_FROM = 64 << 20


def _kernels() -> ModuleType | None:
    """simpleperf's compiled walks when the compiled decode kernels are in use (large inputs)."""
    global _compiled
    if not CHAINS or not V.compiled():
        return None
    if _compiled is None:
        _compiled = V.import_compiled("polyprof.formats.simpleperf._compiled")
    return _compiled if isinstance(_compiled, ModuleType) else None


def collect(data: bytes, warnings: list[str]) -> Records:
    buf = np.frombuffer(data, dtype=np.uint8)
    framed = _framed(data, buf, warnings)
    starts, ends = records(data, warnings) if framed is None else (framed[0], framed[3])
    try:
        if framed is None:
            return _decode(data, buf, starts, ends, warnings)
        kind, pay_start, rec_end = framed[1:]
        parts = {}
        for k in range(SAMPLE, SWITCH + 1):
            at = np.flatnonzero(kind == k)
            run = slice(int(at[0]), int(at[-1]) + 1) if at.size and at[-1] - at[0] + 1 == at.size else at
            parts[k] = _Payloads.whole(at, pay_start[run], rec_end[run])  # a run of records: views
        return _assemble(data, buf, starts, parts, Counter(), warnings)
    except MalformedInputError as exc:
        raise _located(data, starts, ends, exc) from None


def _framed(data: bytes, buf: np.ndarray, warnings: list[str]) -> tuple[np.ndarray, ...] | None:
    """Compiled: (body start, payload kind, payload start, body end) of every record when each
    record is one payload field (the usual file), else None (and no warning added)."""
    fast = _kernels()
    if fast is None:
        return None
    check_header(data)
    if len(data) >= WARM_FROM:
        fast.warm_later(3, _SCALARS, 6)  # (the sample walk's arguments, as _samples passes them)
    got = fast.frame_payloads(buf, HEADER_SIZE, len(data))
    if got is None:
        return None
    trailing(len(data) - int(got[4]) - 4, warnings)
    return got[:4]


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
    return _assemble(data, buf, starts, parts, odd, warnings)


def _assemble(data: bytes, buf: np.ndarray, starts: np.ndarray, parts: dict[int, _Payloads], odd: Counter,
              warnings: list[str]) -> Records:
    """The records from their payloads by kind (``odd``: what the framing noticed)."""
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
    fast = _kernels() if part.start.size == n else None
    chains = fast.sample_chains(buf, part.start, part.end, 3, _SCALARS, 6) if fast is not None else None
    if chains is not None:
        vals, present, u_count = chains.values, chains.present, chains.span_count
        by_chain = (chains.chain_of, chains.chain_first, chains.offsets)
        entry, group_size = chains.ids, chains.sizes
        entry_row, entries, first = _distinct(buf, chains.first, chains.start, chains.length)  # as _walked: entries
        u_vals, u_present = _unwinding(buf, part, chains.span_start, chains.span_len, u_count)  # first
        chain = chains.chain
    else:
        vals, present, (chain, entry, group_size, entry_row, entries, first), (u_count, u_vals, u_present) = \
            _walked(buf, part)
        if part.start.size != n:  # payloads repeated in a record merge: scalars by their last value
            vals, present = _last_present(part.item, vals, present, n)
            chain = np.bincount(part.item, weights=chain, minlength=n).astype(np.int64)
            u_count = np.bincount(part.item, weights=u_count, minlength=n).astype(np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(chain, out=offsets[1:])
        by_chain = (None, None, offsets)
    owner = np.flatnonzero(u_count) if not n or int(u_count.max()) <= 1 else np.repeat(np.arange(n), u_count)
    u_vals, u_present = _last_present(owner, u_vals, u_present, n)
    u: dict[str, np.ndarray] = {"has": u_count > 0}
    for j, name in enumerate(("code", "raw", "addr")):
        u[f"has_{name}"] = u_present[:, j]
        column = u_vals[:, j]
        # (no result anywhere: zeros, left untouched: 43 MB of fresh pages on the large recording)
        u[name] = column if name == "addr" else _u32(column) if owner.size else column.view(np.int64)
    col = lambda j: vals[:, j]  # noqa: E731
    return Samples(time=col(0), tid=_i32(col(1)), event_count=col(2), event_type=_u32(col(3)),
                   chain=chain, chain_of=by_chain[0], chain_first=by_chain[1], offsets=by_chain[2],
                   entries=int(chain.sum()), entry=entry, entry_row=entry_row, group_size=group_size, first=first,
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
    u_vals, u_present = _unwinding(buf, part, u_start, u_len, u_count)
    return vals, present, entries, (u_count, u_vals, u_present)


def _unwinding(buf: np.ndarray, part: _Payloads, start: np.ndarray, length: np.ndarray,
               count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, present) of the unwinding result of every sample that has one, from its span
    (``count`` results per sample: in parts, they are merged as protobuf does)."""
    if count.size and int(count.max()) > 1:
        return V.nested_scalars(buf, part.start, part.end, 6, _UNWIND)[1:]
    has = np.flatnonzero(count)
    return V.scalar_fields(buf, start[has], start[has] + length[has], _UNWIND)


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
