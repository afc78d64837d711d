"""The heap-dump sample paths agree: one walk of a ProfilePacket's bytes (``_walked``, with the
per-dump path behind it for whatever it declines) against the per-dump path alone, each under
numpy and compiled kernels, on random, damaged and real packets."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from google.protobuf.message import DecodeError
from hypothesis import strategies as st

from polyprof.errors import MalformedInputError
from polyprof.formats.options import ReadOptions
from polyprof.formats.perfetto import _heap
from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._context import Context
from polyprof.formats.perfetto._framing import chunks
from polyprof.wire import vector as V

from helpers import PEER

REPO = Path(__file__).resolve().parents[1]
BINARY = PEER / "google__perfetto" / "diff_tests_binary"
U64 = st.integers(0, 2**64 - 1)
SMALL = st.integers(0, 300)


@st.composite
def profile_packets(draw: st.DrawFn) -> bytes:
    """A ProfilePacket with a few dumps of random samples (dump-at-max ones, values out of
    int64 range, unknown fields, empty samples), maybe cut or with a byte changed."""
    pp = S.messages()["ProfilePacket"]()
    for _ in range(draw(st.integers(0, 4))):
        d = pp.process_dumps.add()
        d.pid = draw(st.sampled_from([1, 2, 7, 2**63]))
        d.heap_name = draw(st.sampled_from([b"", b"libc.malloc", b"com.android.art", b"\xff"]))
        d.timestamp = draw(st.integers(0, 5))
        d.orig_sampling_interval_bytes = draw(st.sampled_from([0, 4096]))
        for _ in range(draw(st.integers(0, 6))):
            s = d.samples.add()
            s.callstack_id = draw(st.integers(0, 20))
            kind = draw(st.integers(0, 2))
            if kind == 0:
                s.alloc_count, s.self_allocated, s.free_count, s.self_freed = (draw(SMALL) for _ in range(4))
            elif kind == 1:
                s.self_max, s.self_max_count = draw(SMALL), draw(SMALL)
            else:
                s.alloc_count, s.self_allocated = draw(U64), draw(U64)
    data = bytearray(pp.SerializeToString())
    damage = draw(st.integers(0, 3))
    if data and damage == 1:
        del data[draw(st.integers(0, len(data) - 1)):]
    elif data and damage == 2:
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


def _collector(**options: object) -> _heap.HeapCollector:
    return _heap.HeapCollector(Context.new(ReadOptions(**options)))  # type: ignore[arg-type]


def _outcome(run: object, data: bytes) -> object:
    """What a path makes of ``data``: per dump (heap name, whether it was bad UTF-8, iids, values,
    at-max flag), or its error."""
    try:
        _, heaps, dumps = run(data)  # type: ignore[operator]
    except (MalformedInputError, DecodeError, _heap._Decline) as exc:
        return f"{type(exc).__name__} {exc}"
    assert len(heaps) == len(dumps)
    return [(h, bad, None if i is None else (i.tolist(), v.tolist(), bool(m))) for (h, bad), (i, v, m) in zip(heaps, dumps)]


def _walked_or_per_dump(heap: _heap.HeapCollector):  # noqa: ANN202
    def run(data: bytes) -> object:
        try:
            return heap._walked(data)
        except (MalformedInputError, DecodeError, _heap._Decline):
            return heap._per_dump(data)
    return run


def _both_kernels(monkeypatch: pytest.MonkeyPatch, packets: list[bytes], **options: object) -> None:
    got = {}
    for mode in ("numpy", "compiled"):
        monkeypatch.setenv("POLYPROF_KERNELS", mode)
        monkeypatch.setattr(V, "_compiled", None)
        heap = _collector(**options)
        got[mode] = [(_outcome(_walked_or_per_dump(heap), p), _outcome(heap._per_dump, p)) for p in packets]
        assert V.compiled() == (mode == "compiled")
        for new, old in got[mode]:
            assert new == old
    assert got["numpy"] == got["compiled"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(packets=st.lists(profile_packets(), min_size=1, max_size=4),
       options=st.sampled_from([{}, {"pid": frozenset({2})}, {"heap": "libc.malloc"}]))
def test_walk_agrees_with_per_dump_on_random_and_damaged_packets(monkeypatch, packets, options):
    _both_kernels(monkeypatch, packets, **options)


def _real_heap_packets(tmp: Path) -> list[bytes]:
    """The ProfilePackets of real heap dumps: the peer corpus's heapprofd traces (when present)
    and traces from polyprof's own writer."""
    import polyprof
    from test_perfetto_reader import heap_trace

    traces = [heap_trace()]
    go_heap = PEER / "generated" / "go_runtime_pprof" / "heap.pb.gz"  # a real Go heap profile, written as heap dumps
    if go_heap.exists():
        out = tmp / "heap.perfetto"
        polyprof.write(polyprof.read(go_heap), out, format="perfetto")
        traces.append(out.read_bytes())
    if BINARY.is_dir():
        traces += [p.read_bytes() for p in sorted(BINARY.rglob("*.pftrace"))]
    found = []
    for trace in traces:
        for ch in chunks(io.BytesIO(trace)):
            for a, b in zip(ch.starts.tolist(), ch.ends.tolist()):
                pkt = S.messages()["TracePacketLazy"].FromString(ch.buf[a:b])
                if pkt.HasField("profile_packet"):
                    found.append(pkt.profile_packet)
    return found


def test_walk_agrees_with_per_dump_on_real_packets(monkeypatch, tmp_path):
    if not PEER.is_dir():
        pytest.skip(f"peer data not found at {PEER}: only the random packets are compared")
    packets = _real_heap_packets(tmp_path)
    assert len(packets) >= 3 and sum(len(p) for p in packets) > 1000
    _both_kernels(monkeypatch, packets)
    # damaged copies of the real packets: cut at every tenth byte
    _both_kernels(monkeypatch, [p[:k] for p in packets[:3] for k in range(0, len(p), max(1, len(p) // 10))])


def test_walk_is_what_a_clean_packet_takes(tmp_path):
    """The bulk walk itself (not its fallback) answers ordinary packets."""
    heap = _collector()
    for p in _real_heap_packets(tmp_path):
        _, _, dumps = heap._walked(p)
        assert all(i is not None and i.dtype == np.uint64 for i, _, _ in dumps)


@settings(max_examples=200, deadline=None)
@given(keys=st.sets(st.one_of(st.integers(0, 3000), U64), max_size=60),
       queries=st.lists(st.one_of(st.integers(0, 3100), U64), max_size=60))
def test_callstack_lookup_by_table_is_the_binary_search(keys, queries):
    """Interned callstack iids are found by a table when dense and by binary search otherwise:
    the same (position, found) either way."""
    from polyprof.formats.perfetto._tables import _find_sorted

    k = np.array(sorted(keys), dtype=np.uint64)
    q = np.array(queries, dtype=np.uint64)
    at, hit = _find_sorted(k, q)
    expect_hit = np.isin(q, k)
    assert hit.tolist() == expect_hit.tolist()
    assert (k[at[hit]] == q[hit]).all()


def _field(number: int, wire: int, value: int) -> bytes:
    from polyprof.wire.encode import varint

    tag = varint(number << 3 | wire)
    if wire == 0:
        return tag + varint(value)
    if wire == 1:
        return tag + value.to_bytes(8, "little")
    if wire == 5:
        return tag + (value & 0xFFFFFFFF).to_bytes(4, "little")
    raw = (value & 0xFFFFFF).to_bytes(3, "little")
    return tag + varint(len(raw)) + raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(samples=st.lists(st.lists(st.tuples(st.integers(1, 10), st.sampled_from([0, 0, 0, 1, 2, 5]),
                                           st.one_of(SMALL, U64)), max_size=6), max_size=8),
       cut=st.integers(0, 3), trusted=st.booleans())
def test_compiled_heap_samples_are_the_walk(monkeypatch, samples, cut, trusted):
    """HeapSample bytes with any field numbers and wire types (fixed-width values of wanted
    fields, repeats, LEN fields, out-of-range values, a cut last sample): the bulk decode
    (``strict`` False) answers the same under both kernels, or both decline."""
    blobs = [b"".join(_field(n, w, v) for n, w, v in s) for s in samples]
    if blobs and cut:
        blobs[-1] = blobs[-1][:-cut]
    buf = np.frombuffer(b"".join(blobs) + b"\0", dtype=np.uint8)
    ends = np.cumsum([len(b) for b in blobs], dtype=np.int64)
    starts = ends - np.array([len(b) for b in blobs], dtype=np.int64)
    got = {}
    for mode in ("numpy", "compiled"):
        monkeypatch.setenv("POLYPROF_KERNELS", mode)
        monkeypatch.setattr(V, "_compiled", None)
        try:
            i, v, m = _heap._samples(buf, starts, ends, trusted, strict=False)
            got[mode] = (i.dtype.str, i.tolist(), v.dtype.str, v.tolist(), m.tolist())
        except (MalformedInputError, _heap._Decline) as exc:
            got[mode] = type(exc).__name__
    assert got["numpy"] == got["compiled"]


def _series_reference(updates: list[tuple[list[tuple[int, int, int, int]], list[list[int]]]]) -> list:
    """Per update: (ignored, stacks with any value in first-seen order, their totals), by dicts."""
    latest: dict[tuple[int, int, int, int], list[int]] = {}
    node_order: list[int] = []
    out = []
    for keys, values in updates:
        ignored = 0
        for key, v in zip(keys, values):
            if key[3] not in node_order:
                node_order.append(key[3])
            prev = latest.get(key)
            if prev is not None and any(a < b for a, b in zip(v, prev)):
                ignored += 1
            else:
                latest[key] = v
        totals = {n: [0] * 4 for n in node_order}
        for key, v in latest.items():
            totals[key[3]] = [a + b for a, b in zip(totals[key[3]], v)]
        kept = [n for n in node_order if any(totals[n])]
        out.append((ignored, kept, [totals[n] for n in kept]))
    return out


@settings(max_examples=150, deadline=None)
@given(updates=st.lists(st.lists(st.tuples(st.integers(0, 1), st.integers(-1, 1), st.integers(0, 6),
                                           st.integers(-1, 3), st.lists(st.integers(0, 5), min_size=4, max_size=4)),
                                 min_size=1, max_size=12), min_size=1, max_size=4))
def test_series_keep_the_latest_values_per_series(updates):
    """``_Series`` (the cumulative heap counters) against dicts: a value going down is ignored,
    totals per stack in first-seen order. Within one generation (source >= 0) an iid always
    names the same stack, as the resolver's cache makes it."""
    def stack(seq: int, source: int, iid: int, free: int) -> int:
        return free if source < 0 else (seq * 7 + source * 3 + iid) % 5 - 1

    given_updates = [([(q, s, i, stack(q, s, i, f)) for q, s, i, f, _ in u], [v for *_, v in u]) for u in updates]
    series = _heap._Series()
    got = []
    for keys, values in given_updates:
        cols = [np.array([k[j] for k in keys], dtype=np.int64) for j in range(4)]
        ignored = series.update(cols, np.array(values, dtype=np.int64))
        nodes, total = series.totals()
        got.append((ignored, nodes.tolist(), total.tolist()))
    assert got == _series_reference(given_updates)


@settings(max_examples=200, deadline=None)
@given(older=st.sets(st.one_of(st.integers(0, 50), U64), max_size=30),
       newer=st.sets(st.one_of(st.integers(0, 50), U64), max_size=30), after=st.booleans())
def test_callstack_levels_merge_as_first_wins(older, newer, after):
    """Two index levels (sorted, distinct iids) merge into the sorted union, an iid in both
    keeping the older entry: what ``np.unique(return_index)`` of both, older first, gives
    (``after``: the newer iids all above the older, as producers count them up)."""
    from polyprof.formats.perfetto._tables import _Level, _first_wins

    if after:
        newer = {v + 51 for v in newer if v + 51 < 2**64} if all(v <= 50 for v in older) else newer

    def level(iids: set[int], part: int) -> _Level:
        iid = np.array(sorted(iids), dtype=np.uint64)
        n = iid.size
        return _Level(iid, np.full(n, part, dtype=np.int64), np.arange(n, dtype=np.int64) * 3,
                      np.arange(n, dtype=np.int64) + part)

    a, b = level(older, 0), level(newer, 1)
    got = a.merged(b)
    both = [np.concatenate([getattr(a, c), getattr(b, c)]) for c in _Level.COLUMNS]
    keep = _first_wins(both[0])
    for c, want in zip(_Level.COLUMNS, both):
        assert getattr(got, c).dtype == want.dtype and getattr(got, c).tolist() == want[keep].tolist()


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-3, 40), st.integers(0, 2)), min_size=1, max_size=60),
       shape=st.sampled_from(["increasing", "one column", "two columns"]))
def test_series_groups_are_the_in_order_factorization(rows, shape):
    """``_heap._groups`` (a strictly increasing column: every row its own group, without the
    factorization) numbers rows as ``factorize_rows(..., in_order=True)`` does, whatever the
    columns."""
    from polyprof.model.columns import factorize_rows

    first = np.array([r for r, _ in rows], dtype=np.int64)
    if shape == "increasing":
        first = np.cumsum(np.abs(first) + 1) - 5  # strictly increasing, negative ones too
    cols = [first] if shape != "two columns" else [first, np.array([c for _, c in rows], dtype=np.int64)]
    got, want = _heap._groups(cols), factorize_rows(cols, in_order=True)
    assert [a.tolist() for a in got] == [b.tolist() for b in want]
    assert all(a.dtype == b.dtype for a, b in zip(got, want))


def test_a_read_trace_keeps_no_interned_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a heap trace is read, its generations' interned tables and the heap series are dropped
    before the profiles are built (they hold every frame id of every callstack); the profiles
    come out as the builder would make them from the catalog alone."""
    import polyprof
    from polyprof.formats.perfetto import _build
    from test_perfetto_reader import heap_trace

    seen = {}
    build = _build.build_profiles

    def spy(r):  # noqa: ANN001, ANN202
        out = build(r)
        gens = [*r._gens.values(), *(s.gen for s in r.seqs.values())]
        seen["stack_parts"] = sum(len(g.tables.stack_parts) for g in gens)
        seen["frames"] = sum(g.tables.frames.iid.size + g.stacks.iid.size for g in gens)
        seen["series"] = len(r.heap._series)
        return out

    data = heap_trace()
    want = [p.samples.values.tolist() for p in polyprof.read_all(data)]
    monkeypatch.setattr(_build, "build_profiles", spy)
    got = [p.samples.values.tolist() for p in polyprof.read_all(data)]
    assert seen == {"stack_parts": 0, "frames": 0, "series": 0}
    assert got == want and len(got) >= 1
