"""simpleperf's compiled walks (formats/simpleperf/_compiled.py) against the generic ones.

With the compiled kernels in use, a recording is framed with each record's payload found in
the same pass, and its samples are grouped by callchain bytes before their entries are
grouped. Whatever those walks take must read exactly as the generic walks (every record's
fields, every callchain entry) read it, and whatever they decline (split callchains, odd
records, damage) must still read, or fail, as before: random recordings built byte by byte,
damaged ones, and the peer corpus's real recordings, both ways.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof.api as api
from helpers import PEER
from polyprof.errors import MalformedInputError, PolyprofError
from polyprof.formats.simpleperf import _records as R
from polyprof.model.dump import dump
from polyprof.wire import background
from polyprof.wire import vector as V

pytest.importorskip("polyprof.formats.simpleperf._compiled", reason="numba is not installed: no compiled kernels")


def _varint(v: int, pad: int = 0) -> bytes:
    """``v`` as a varint, with ``pad`` extra (non-minimal) continuation bytes."""
    out = bytearray()
    while True:
        out.append(v & 0x7F)
        v >>= 7
        if not v:
            break
        out[-1] |= 0x80
    if pad:
        out[-1] |= 0x80
        out += b"\x80" * (pad - 1) + b"\x00"
    return bytes(out)


def _len_field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _entry(vaddr: int, fid: int, sid: int, kind: int | None, pad: int) -> bytes:
    body = _varint(1 << 3) + _varint(vaddr, pad) + _varint(2 << 3) + _varint(fid) + _varint(3 << 3) + _varint(sid & (2**64 - 1))
    return body + (_varint(4 << 3) + _varint(kind) if kind is not None else b"")


def _sample(time: int, tid: int, chain: list[bytes], count: int, event: int, unwind: bool, split: bool) -> bytes:
    head = _varint(1 << 3) + _varint(time) + _varint(2 << 3) + _varint(tid)
    tail = _varint(4 << 3) + _varint(count) + _varint(5 << 3) + _varint(event)
    entries = [_len_field(3, e) for e in chain]
    if split and len(entries) > 1:  # another field between two entries: the compiled walk declines
        entries.insert(1, tail)
        tail = b""
    body = head + b"".join(entries) + tail
    if unwind:
        body += _len_field(6, _varint(1 << 3) + _varint(3) + _varint(2 << 3) + _varint(0x1234) + _varint(3 << 3) + _varint(2))
    return _len_field(1, body)


def _file(fid: int, nsym: int) -> bytes:
    body = _varint(1 << 3) + _varint(fid) + _len_field(2, f"/lib/f{fid}.so".encode())
    return _len_field(3, body + b"".join(_len_field(3, f"sym{fid}_{i}".encode()) for i in range(nsym)))


def _make(records: list[bytes], tail: bytes = b"") -> bytes:
    return b"SIMPLEPERF" + (1).to_bytes(2, "little") + b"".join(
        len(r).to_bytes(4, "little") + r for r in records) + b"\0\0\0\0" + tail


@pytest.fixture
def compiled(monkeypatch):
    """The compiled decode kernels for every read, however small."""
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(V, "_compiled", None)


def _read_both(data: bytes, monkeypatch) -> list[str]:
    """The canonical dump (or the error) with the compiled walks, then with the generic ones."""
    out = []
    for chains in (True, False):
        monkeypatch.setattr(R, "CHAINS", chains)
        try:
            out.append(dump(api.read(data, format="simpleperf")))
        except PolyprofError as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    return out


entries = st.tuples(st.sampled_from([0x10, 0x400000, 0x7FFF_FFFF_FFFF, 2**64 - 5]), st.integers(0, 2),
                    st.integers(-1, 3), st.sampled_from([None, 0, 2]), st.sampled_from([0, 0, 0, 1]))
chains = st.lists(st.lists(entries, max_size=6).map(lambda es: [_entry(*e) for e in es]), min_size=1, max_size=5)
samples = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(0, 1), st.booleans(),
                             st.integers(1, 3)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(pool=chains, picks=samples, split=st.sets(st.integers(0, 39), max_size=2), tail=st.binary(max_size=3),
       odd=st.booleans())
def test_random_recordings_read_the_same(compiled, monkeypatch, pool, picks, split, tail, odd):
    """Repeated callchains (next to each other or apart), empty ones, long and non-minimal
    entries, unwinding results; a split callchain or an odd record makes the compiled walk
    decline, which must not change the answer either."""
    records = [_file(f, 4) for f in range(2)]
    for i, (chain, tid, event, unwind, repeat) in enumerate(picks):
        for _ in range(repeat):  # a sample per event often repeats the callchain just before it
            records.append(_sample(1000 + i, tid, pool[chain % len(pool)], 7, event, unwind, i in split))
    if odd:
        records.append(_len_field(9, b"\x08\x01"))  # a record of an unknown kind
    fast, generic = _read_both(_make(records, tail), monkeypatch)
    assert fast == generic


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(12, 10_000), st.integers(0, 255)), min_size=1, max_size=3))
def test_damaged_recordings_fail_or_read_the_same(compiled, monkeypatch, flips):
    pool = [[_entry(0x400000 + 16 * j, j % 2, j % 3, None, 0) for j in range(k)] for k in (3, 5, 0)]
    records = [_file(0, 3), _file(1, 3)] + [_sample(i, 1, pool[i % 3], 1, 0, i % 4 == 0, False) for i in range(60)]
    data = bytearray(_make(records))
    for at, value in flips:
        data[at % len(data)] = value
    fast, generic = _read_both(bytes(data), monkeypatch)
    assert fast == generic


def test_the_compiled_walk_groups_callchains(compiled, monkeypatch):
    """The fast path is taken (samples point at distinct callchains) and lists each distinct
    callchain's entries once; the generic path lists every sample's."""
    pool = [[_entry(0x400000 + 16 * j, 0, j % 3, None, 0) for j in range(k)] for k in (3, 5)]
    data = _make([_file(0, 3)] + [_sample(i, 1, pool[i % 2], 1, 0, False, False) for i in range(10)])
    got = {}
    for chains in (True, False):
        monkeypatch.setattr(R, "CHAINS", chains)
        got[chains] = R.collect(data, []).samples
    fast, generic = got[True], got[False]
    assert fast.chain_of is not None and generic.chain_of is None
    assert fast.chain_of.tolist() == [0, 1] * 5 and fast.offsets.tolist() == [0, 3, 8]
    assert generic.offsets[-1] == 40 == fast.entries == generic.entries
    assert fast.group_size.sum() == 40 and np.array_equal(fast.chain, generic.chain)


def test_real_recordings_read_the_same(compiled, monkeypatch, peer):
    files = [p for d in ("generated/simpleperf", "generated/simpleperf_from_aosp_testdata",
                         "jbeich__platform_system_extras/simpleperf") for p in sorted((PEER / d).rglob("*"))
             if p.is_file() and p.stat().st_size < 8e6 and not p.name.endswith((".txt", ".txt.gz"))]
    read = 0
    for path in files:
        fast, generic = _read_both(path.read_bytes(), monkeypatch)
        assert fast == generic, path
        read += not fast.startswith(("MalformedInputError", "UnsupportedFeatureError", "InputError"))
    assert read >= 5


def test_large_plain_files_are_mapped_and_read_the_same(compiled, monkeypatch, tmp_path):
    """A large plain recording is read through a read-only mapping of the file: the same
    profile as from its bytes; gzipped, damaged and truncated files read or fail as before."""
    import gzip

    from polyprof.formats import simpleperf

    pool = [[_entry(0x400000 + 16 * j, j % 2, j % 3, None, 0) for j in range(k)] for k in (3, 5, 0)]
    data = _make([_file(0, 3), _file(1, 3)] + [_sample(i, 1, pool[i % 3], 1, 0, i % 4 == 0, False) for i in range(60)])
    cases = {"plain": data, "gzip": gzip.compress(data), "cut": data[:-40], "damaged": data[:200] + b"\0" + data[201:]}
    from polyprof.formats import source
    from polyprof.formats.source import Source

    monkeypatch.setattr(source, "SETTLED_AFTER", 0.0)
    for name, content in cases.items():
        path = tmp_path / f"{name}.trace"
        path.write_bytes(content)
        got = []
        for limit in (0, 1 << 40):  # every file mapped; none
            monkeypatch.setattr(simpleperf, "COMPILED_FROM", limit)
            try:
                got.append(dump(api.read(path)))
            except PolyprofError as exc:
                got.append(f"{type(exc).__name__}: {exc}")
        assert got[0] == got[1], name
    assert Source.of(str(tmp_path / "plain.trace")).mapped(0) is not None
    assert Source.of(str(tmp_path / "gzip.trace")).mapped(0) is None


def test_a_file_being_written_is_read_and_a_shrink_is_an_error(compiled, monkeypatch, tmp_path):
    """A mapped file cut while it is read would kill the process (SIGBUS): a file modified in the
    last SETTLED_AFTER seconds is read, not mapped; a mapped file found shorter after the read
    is one clear error, not a profile of a mix of bytes."""
    from helpers import cut_after, settle

    from polyprof.formats import simpleperf
    from polyprof.formats.simpleperf import _reader
    from polyprof.formats.source import Source

    pool = [[_entry(0x400000 + 16 * j, j % 2, j % 3, None, 0) for j in range(k)] for k in (3, 5)]
    data = _make([_file(0, 3), _file(1, 3)] + [_sample(i, 1, pool[i % 2], 1, 0, False, False) for i in range(60)])
    path = tmp_path / "fresh.trace"
    path.write_bytes(data)
    monkeypatch.setattr(simpleperf, "COMPILED_FROM", 0)
    assert Source.of(str(path)).mapped(0) is None  # just written
    settle(path)
    mapped = Source.of(str(path)).mapped(0)
    assert mapped is not None and bytes(mapped) == data
    mapped.close()
    expected = dump(api.read(path))

    real = _reader.read_bytes
    cut_after(monkeypatch, _reader, "read_bytes", path, 100)  # the writer truncates it once every byte was read
    with pytest.raises(MalformedInputError, match=f"shrank from {len(data)} to 100 bytes while it was read"):
        api.read(path)
    monkeypatch.setattr(_reader, "read_bytes", real)
    path.write_bytes(data)  # complete again (and fresh: read, not mapped)
    assert dump(api.read(path)) == expected


def _chains_split_at(data: bytes, monkeypatch, mid: int | None):
    """sample_chains over ``data``'s samples, in one walk (``mid`` None) or split at ``mid``."""
    from polyprof.formats.simpleperf import _compiled as C

    monkeypatch.setattr(C, "_split", (lambda n: n) if mid is None else (lambda n: min(mid, n)))
    buf = np.frombuffer(data, dtype=np.uint8)
    _, kind, start, end, _ = C.frame_payloads(buf, 12, len(data))
    at = np.flatnonzero(kind == 1)
    return C.sample_chains(buf, start[at], end[at], 3, (1, 2, 4, 5), 6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(pool=chains, picks=samples, mid=st.integers(0, 45), split=st.sets(st.integers(0, 39), max_size=1))
def test_a_walk_in_two_parts_numbers_as_one_walk(compiled, monkeypatch, pool, picks, mid, split):
    """Large recordings are walked in two halves on two threads, the second half's callchains
    merged into the first's tables: every column (distinct callchains and entry groups in order
    of first sight, each group's first entry) is the one walk's, wherever the split falls
    (also at either end, between two samples of the same callchain, or with a declined half)."""
    records = [_file(f, 4) for f in range(2)]
    for i, (chain, tid, event, unwind, repeat) in enumerate(picks):
        for _ in range(repeat):
            records.append(_sample(1000 + i, tid, pool[chain % len(pool)], 7, event, unwind, i in split))
    data = _make(records)
    one, two = _chains_split_at(data, monkeypatch, None), _chains_split_at(data, monkeypatch, mid)
    assert (one is None) == (two is None)
    if one is not None:
        for name in one._fields:
            a, b = getattr(one, name), getattr(two, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_the_large_walk_splits_and_reads_the_same(compiled, monkeypatch):
    """From PARALLEL_FROM samples the walk really runs in two parts, and the profile reads as the
    one walk's (and the generic walk's) does."""
    from polyprof.formats.simpleperf import _compiled as C

    pool = [[_entry(0x400000 + 16 * (j * k % 7), j % 2, j % 3, None, 0) for j in range(k)] for k in range(1, 9)]
    data = _make([_file(0, 3), _file(1, 3)] + [_sample(i, 1 + i % 3, pool[(i * i) % 8], 1, i % 2, False, False)
                                               for i in range(400)])
    monkeypatch.setattr(C, "PARALLEL_FROM", 100)
    monkeypatch.setattr(background.os, "getloadavg", lambda: (64.0, 0.0, 0.0))
    assert C._split(400) == 400  # every CPU busy: one walk
    monkeypatch.setattr(background.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert 0 < C._split(400) < 400 or len(background.os.sched_getaffinity(0)) < 2
    fast, generic = _read_both(data, monkeypatch)
    monkeypatch.setattr(C, "PARALLEL_FROM", 1 << 40)
    assert fast == generic == _read_both(data, monkeypatch)[0]


def test_the_warm_up_calls_the_walk_in_two_parts(compiled):
    """What the warm-up thread runs before a large file is framed: the walk in two parts on two
    samples of one callchain (so the merge finds it), without an error it would swallow."""
    from polyprof.formats.simpleperf import _compiled as C

    got = C.warm_calls(3, R._SCALARS, 6)
    assert got is not None and got.chain_of.tolist() == [0, 0] and got.offsets.tolist() == [0, 1]
    C.warm_later(3, R._SCALARS, 6).join(timeout=60)


@pytest.mark.parametrize("mid", [None, 300])
def test_more_entry_groups_than_the_first_try_holds(compiled, monkeypatch, mid):
    """The first walk keeps entry groups as two-byte ids, room for 32k of them; a recording with
    more distinct callchain entries (here 42k, each callchain seen 5 times: enough bytes for the
    walk to try again) is walked again with four-byte ids, in one part or two, and reads as the
    generic walk does."""
    from polyprof.formats.simpleperf import _compiled as C

    chains = [[_entry(0x400000 + 16 * (70 * i + j), 0, -1, None, 0) for j in range(70)] for i in range(600)]
    data = _make([_file(0, 1)] + [_sample(i, 1, chains[i % 600], 1, 0, False, False) for i in range(3000)])
    walk = _chains_split_at(data, monkeypatch, mid)
    assert walk is not None and walk.ids.dtype == np.int32 and walk.first.size == 42000
    assert walk.ids.tolist() == list(range(42000)) and walk.offsets.tolist() == list(range(0, 42001, 70))
    assert walk.chain_of.tolist() == [i % 600 for i in range(3000)]
    monkeypatch.setattr(C, "_split", (lambda n: n) if mid is None else (lambda n: min(mid, n)))
    fast, generic = _read_both(data, monkeypatch)
    assert fast == generic
    few = _chains_split_at(_make([_file(0, 1)] + [_sample(i, 1, chains[i % 2], 1, 0, False, False)
                                                 for i in range(10)]), monkeypatch, mid)
    assert few is not None and few.ids.dtype == np.uint16
