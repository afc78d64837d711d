"""The catalog's compiled passes over frame-id columns (``perfetto/_catalog_compiled``) give what
the numpy expressions they replace give: the kernels on random runs, ``Catalog.stack_locations``
and the resolver's dense iid lookup on random catalogs, and whole reads of real heap dumps (and the peer corpus's other profiling traces)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.errors import PolyprofError
from polyprof.formats.perfetto import _catalog_compiled as K
from polyprof.formats.perfetto._catalog import Catalog
from polyprof.formats.perfetto import _sequence
from polyprof.formats.perfetto._sequence import _Resolved
from polyprof.model.dump import dump
from polyprof.wire import vector as V
from polyprof.wire.vector import ranges

from helpers import PEER

BINARY = PEER / "google__perfetto" / "diff_tests_binary"
_DTYPES = (np.uint32, np.uint64, np.int32, np.int64)


@st.composite
def runs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(values, starts, lengths, top): runs anywhere in a column of values in [0, top]."""
    top = draw(st.integers(0, 300))
    values = np.array(draw(st.lists(st.integers(0, top), min_size=1, max_size=200)),
                      dtype=draw(st.sampled_from(_DTYPES)))
    spans = draw(st.lists(st.tuples(st.integers(0, values.size - 1), st.integers(0, 20)), max_size=30))
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    lengths = np.array([min(n, values.size - s) for s, n in spans], dtype=np.int64)
    return values, starts, lengths, top


@settings(max_examples=200, deadline=None)
@given(r=runs(), table_type=st.sampled_from((np.uint8, np.uint16, np.int64)))
def test_kernels_are_the_numpy_expressions(r, table_type):
    values, starts, lengths, top = r
    present = np.zeros(top + 1, dtype=bool)
    K.mark_runs(values, starts, lengths, present)
    expected = np.zeros(top + 1, dtype=bool)
    expected[values[ranges(starts, lengths)]] = True
    assert (present == expected).all()
    table = np.arange(top + 1)[::-1].astype(table_type)
    got = K.map_runs(values, starts, lengths, table)
    want = table[values[ranges(starts, lengths)]]
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


@settings(max_examples=200, deadline=None)
@given(a=runs(), b=runs())
def test_map_hash_runs_hashes_as_hash_runs(a, b):
    """Two columns' runs mapped through a table end to end, each run hashed as
    ``wire.vector.hash_runs`` hashes it (the catalog finds stacks of every path by these)."""
    top = max(a[3], b[3])
    table = (np.arange(top + 1, dtype=np.int64) * 7919 % 1000).astype(np.int32)
    parts = [(v, s, n) for v, s, n, _ in (a, b)]
    total = sum(int(n.sum()) for _, _, n in parts)
    out, hashes = K.map_hash_runs(parts, total, table, V.HASH_MIX, V.HASH_BASE)
    want = np.concatenate([table[v[ranges(s, n)]] for v, s, n in parts])
    assert out.dtype == np.int32 and out.tolist() == want.tolist()
    lengths = np.concatenate([n for _, _, n in parts])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    some = lengths > 0
    if some.any():
        sub = np.concatenate([[0], np.cumsum(lengths[some])])
        assert hashes[some].tolist() == V.hash_runs(want.astype(np.int64), sub).tolist()
    assert (hashes[~some] == 0).all() and offsets[-1] == total


def _kernels(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv("POLYPROF_KERNELS", mode)
    monkeypatch.setattr(V, "_compiled", None)
    assert V.compiled() == (mode == "compiled")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stacks=st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=12), min_size=1, max_size=40),
       pick=st.lists(st.integers(0, 39), min_size=1, max_size=40))
def test_stack_locations_and_iid_lookup_agree_under_both_kernels(monkeypatch, stacks, pick):
    got = {}
    monkeypatch.setattr(_sequence, "KERNELS_FROM", 0)
    for mode in ("numpy", "compiled"):
        _kernels(monkeypatch, mode)
        cat = Catalog()
        n_frames = 41
        cat.frames_bulk(np.full(n_frames, -1), np.arange(n_frames), np.zeros(n_frames), np.zeros(n_frames),
                        np.zeros(n_frames))
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in stacks])])
        ids = cat.stacks_bulk(np.concatenate(stacks), offsets)
        half = len(stacks) // 2  # found again in later batches (the hash index sorted in on lookup)
        assert cat.stacks_bulk(np.concatenate(stacks[half:]), offsets[half:] - offsets[half]).tolist() == \
            ids[half:].tolist()
        assert cat.stacks_bulk(np.concatenate(stacks[:half + 1]), offsets[:half + 2]).tolist() == \
            ids[:half + 1].tolist()
        used = np.unique(ids[np.array(pick) % ids.size])
        seen: list[list[int]] = []

        def locations(frames: np.ndarray) -> np.ndarray:
            seen.append(frames.tolist())
            return (frames * 7) % 300  # some share a location; wide enough for uint16

        flat, offs = cat.stack_locations(used, locations)
        resolved = _Resolved()
        iids = np.array(np.concatenate(stacks), dtype=np.uint32)
        cat_ids = resolved.get(iids, lambda new: new.astype(np.int64) * 3)
        got[mode] = (seen, str(flat.dtype), flat.tolist(), offs.tolist(), cat_ids.dtype, cat_ids.tolist(),
                     resolved.iid.tolist())
    assert got["numpy"] == got["compiled"]


def _heap_traces(tmp_path) -> list[bytes]:  # noqa: ANN001
    from test_perfetto_reader import heap_trace

    traces = [heap_trace()]
    go_heap = PEER / "generated" / "go_runtime_pprof" / "heap.pb.gz"  # a real Go heap profile as heap dumps
    if go_heap.exists():
        out = tmp_path / "heap.perfetto"
        polyprof.write(polyprof.read(go_heap), out, format="perfetto")
        traces.append(out.read_bytes())
    if BINARY.is_dir():
        traces += [p.read_bytes() for p in sorted(BINARY.rglob("*.pftrace")) if "profiling" in p.parent.name]
    return traces


def _read(trace: bytes) -> object:
    try:
        return [(dump(p), p.callsites.parent.tolist(), p.callsites.location.tolist())
                for p in polyprof.read_all(io.BytesIO(trace))]
    except PolyprofError as exc:
        return str(exc)


def test_real_heap_dumps_read_the_same_under_both_kernels(monkeypatch, tmp_path):
    """Whole reads: every profile's dump and callsite table are the same under both kernels."""
    traces = _heap_traces(tmp_path)
    monkeypatch.setattr(_sequence, "KERNELS_FROM", 0)  # the compiled passes on these small traces too
    got = {}
    for mode in ("numpy", "compiled"):
        _kernels(monkeypatch, mode)
        got[mode] = [_read(t) for t in traces]
    assert got["numpy"] and got["numpy"] == got["compiled"]


_CS_FIELD = st.one_of(st.tuples(st.sampled_from([1, 2]), st.just(0),
                                st.one_of(st.integers(0, 300), st.integers(0, 2**32 + 5), st.integers(0, 2**64 - 1))),
                      st.tuples(st.sampled_from([2, 3]), st.sampled_from([0, 2]), st.integers(0, 300)))


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(st.lists(_CS_FIELD, max_size=8), max_size=10), cut=st.integers(0, 2),
       overlong=st.booleans())
def test_uint32_callstack_decoder_is_the_general_one(entries, cut, overlong):
    """Callstack entries (iids and frame ids of any size, packed frame ids, other fields,
    overlong varints, a cut last entry): ``callstack_entries32`` answers what the general
    compiled decoder then the uint32 narrowing give, or declines."""
    from polyprof.formats.perfetto._flat_compiled import callstack_entries
    from polyprof.wire.encode import varint

    def field(number: int, wire: int, value: int) -> bytes:
        if wire == 2:
            body = b"".join(varint(v) for v in range(value % 5))
            return varint(number << 3 | 2) + varint(len(body)) + body
        raw = varint(value)
        if overlong and value < 128:
            raw = bytes([raw[0] | 0x80, 0])
        return varint(number << 3) + raw

    blobs = [b"".join(field(*f) for f in e) for e in entries]
    if blobs and cut:
        blobs[-1] = blobs[-1][:max(len(blobs[-1]) - cut, 0)]
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    buf = np.frombuffer(b"".join(blobs) + b"\x00", dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    got = K.callstack_entries32(buf, starts, starts + lengths)
    if got is None:
        return
    want = callstack_entries(buf, starts, starts + lengths)
    assert want is not None and want[1].max() <= 0xFFFFFFFF
    assert got[1].dtype == np.uint32
    for a, b in zip(got, want):
        assert a.tolist() == b.tolist()


_WARM_CHECK = """
import io, sys
import numpy as np
sys.path.insert(0, {tests!r})
import polyprof
from polyprof.formats.perfetto import _catalog_compiled as K, _sequence
from polyprof.model import _stacks_compiled as S
from polyprof.wire import _compiled as W, background
from test_perfetto_reader import heap_trace

kernels = [K._callstacks32, K._mark, K._map_hash, K._map, W._factorize, S._first_words, S._radix,
           S._lcp_keys, S._number_keys, S._subtree_sums, S._outermost]
K.warm_calls()
warmed = {{k: set(k.signatures) for k in kernels}}
background.warm_later = lambda calls, name: None  # the read's own warm-up: already done above
_sequence.KERNELS_FROM = 0
S._RADIX_FROM = 1  # the radix sort on this small trace's stacks too
polyprof.read_all(io.BytesIO(heap_trace()))
assert all(warmed.values()), warmed
new = {{k.py_func.__name__: set(k.signatures) - warmed[k] for k in kernels if set(k.signatures) - warmed[k]}}
assert not new, new
print("ok")
"""


def test_the_warm_up_loads_the_kernels_with_the_types_a_read_passes(tmp_path):
    """``warm_calls`` (run on a thread from a large trace's first heap dump) calls every kernel
    with the argument types the read then passes: a heap-dump read (compiled kernels, in a fresh
    process) adds no signature to the kernels it warmed, so none is loaded twice or compiled."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "warm.py"
    script.write_text(_WARM_CHECK.format(tests=str(Path(__file__).parent)))
    env = dict(os.environ, POLYPROF_KERNELS="compiled")
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_a_heap_dump_read_warms_the_kernels_once_and_only_compiled(monkeypatch):
    """A read with the compiled kernels starts the warm-up at its first heap dump, once; a numpy
    read (small traces) loads nothing."""
    from test_perfetto_reader import heap_trace

    from polyprof.wire import background

    for mode, expected in (("numpy", []), ("compiled", [K.warm_calls])):
        _kernels(monkeypatch, mode)
        calls: list[object] = []
        monkeypatch.setattr(background, "warm_later", lambda c, name: calls.append(c))
        polyprof.read_all(io.BytesIO(heap_trace() + heap_trace()))
        assert calls == expected, mode
