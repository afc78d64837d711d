"""The compiled decode kernels (numba) give exactly the numpy kernels' results.

Random messages (valid and damaged) go through both forms of every kernel
in ``wire.vector``; real files of every format are read with
``POLYPROF_KERNELS=numpy`` and ``=compiled`` and their canonical dumps
compared. Without numba the compiled side is skipped, visibly.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import PEER, REPO, numpy_only
from polyprof.errors import MalformedInputError
from polyprof.wire import vector as V

compiled = pytest.importorskip("polyprof.wire._compiled", reason="numba is not installed: no compiled kernels")


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


field = st.one_of(
    st.tuples(st.integers(1, 40), st.just(0), st.integers(0, 2**64 - 1)),  # varint
    st.tuples(st.integers(1, 40), st.just(2), st.binary(max_size=12)),  # LEN
    st.tuples(st.integers(1, 40), st.just(1), st.integers(0, 2**64 - 1)),  # fixed64
    st.tuples(st.integers(1, 40), st.just(5), st.integers(0, 2**32 - 1)),  # fixed32
)


def _encode(fields: list) -> bytes:
    out = bytearray()
    for number, wire, value in fields:
        out += _varint(number << 3 | wire)
        if wire == 0:
            out += _varint(value)
        elif wire == 2:
            out += _varint(len(value)) + value
        else:
            out += value.to_bytes(8 if wire == 1 else 4, "little")
    return bytes(out)


messages = st.lists(st.lists(field, max_size=8), min_size=1, max_size=12)


def _spans(bodies: list[bytes], damage: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = bytearray(b"\x00".join(bodies))  # a gap byte between messages: spans, not one run
    if damage is not None and data:
        data[damage % len(data)] ^= 0xFF
    lengths = np.array([len(b) for b in bodies], dtype=np.int64)
    starts = np.cumsum(lengths + 1) - lengths - 1
    return np.frombuffer(bytes(data), dtype=np.uint8), starts, starts + lengths


def _same(a, b) -> None:  # noqa: ANN001
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(np.asarray(x), np.asarray(y))


@settings(max_examples=200, deadline=None)
@given(messages, st.one_of(st.none(), st.integers(0, 10_000)))
def test_field_walker_twins_agree(msgs, damage):
    buf, starts, ends = _spans([_encode(m) for m in msgs], damage)
    try:
        expected = numpy_only(V, V.walk_fields, buf, starts, ends)
    except MalformedInputError as exc:
        expected = exc
    got = compiled.walk_fields(buf, starts, ends)
    if isinstance(expected, MalformedInputError):
        assert got is None  # the compiled walker declines; numpy then raises its precise error
        return
    cols = ("msg", "field", "wire", "value", "start", "length")
    _same(tuple(getattr(expected, c) for c in cols), got)


@settings(max_examples=200, deadline=None)
@given(messages, st.lists(st.integers(1, 40), min_size=1, max_size=4, unique=True))
def test_scalar_twins_agree(msgs, numbers):
    buf, starts, ends = _spans([_encode(m) for m in msgs])
    numbers = tuple(numbers)
    f = V.walk_fields(buf, starts, ends)
    values, present = compiled.scalar_fields(buf, starts, ends, numbers)
    for j, number in enumerate(numbers):
        col = np.zeros(starts.size, dtype=np.uint64)
        sel = (f.field == number) & (f.wire == V.VARINT)
        col[f.msg[sel]] = f.value[sel]
        assert np.array_equal(values[:, j], col)
        assert np.array_equal(present[:, j], np.isin(np.arange(starts.size), f.msg[sel]))
    outer = [_encode([(3, 2, _encode(m))] * 2 + [(1, 0, 7)]) for m in msgs]
    buf, starts, ends = _spans(outer)
    got = compiled.nested_scalars(buf, starts, ends, 3, numbers)
    sub = V.walk_fields(buf, starts, ends).select(3, V.LEN)
    want = _numpy_scalars(buf, sub.start, sub.start + sub.length, numbers)
    _same((np.bincount(sub.msg, minlength=starts.size), *want), got[:3])
    for span in (-1, numbers[0]):  # with the span of a LEN field of every sub-message
        _same(numpy_only(V, V.nested_fields, buf, starts, ends, 3, numbers, span),
              compiled.nested_scalars(buf, starts, ends, 3, numbers, span))


def _numpy_scalars(buf, starts, ends, numbers):  # noqa: ANN001, ANN202
    f = V.walk_fields(buf, starts, ends)
    values = np.zeros((starts.size, len(numbers)), dtype=np.uint64)
    present = np.zeros((starts.size, len(numbers)), dtype=bool)
    for j, number in enumerate(numbers):
        sel = (f.field == number) & (f.wire == V.VARINT)
        values[f.msg[sel], j] = f.value[sel]
        present[f.msg[sel], j] = True
    return values, present


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=6), min_size=1, max_size=10))
def test_packed_varint_twins_agree(spans):
    bodies = [b"".join(_varint(v) for v in span) for span in spans]
    buf, starts, ends = _spans(bodies)
    b = V.gather_spans(buf, starts, ends - starts)
    got = compiled.packed_varints(b, ends - starts)
    assert got is not None
    _same((np.array([v for span in spans for v in span], dtype=np.uint64),
           np.array([len(s) for s in spans])), got)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10**6), min_size=1, max_size=20), min_size=1, max_size=30))
def test_run_hash_and_gather_twins_agree(runs):
    values = np.array([v for r in runs for v in r], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in runs])]).astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    assert np.array_equal(compiled.hash_runs(values, offsets, V._HASH_MIX, V._HASH_BASE),
                          _numpy_hash(values, offsets))
    assert np.array_equal(compiled.gather_runs(values, offsets[:-1][::-1].copy(), lengths[::-1].copy()),
                          values[V.ranges(offsets[:-1][::-1], lengths[::-1])])


def _numpy_hash(values, offsets):  # noqa: ANN001, ANN202
    lengths = np.diff(offsets)
    place = np.arange(values.size) - np.repeat(offsets[:-1], lengths)
    x = (values.astype(np.uint64) + np.uint64(1)) * V._HASH_MIX
    x ^= x >> np.uint64(31)
    powers = np.full(max(int(lengths.max()), 1), V._HASH_BASE, dtype=np.uint64)
    powers[0] = 1
    return np.add.reduceat(x * np.multiply.accumulate(powers)[place], offsets[:-1])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=300), max_size=20), st.integers(0, 3))
def test_record_framing_twins_agree(bodies, cut):
    packets = b"".join(b"\x0a" + _varint(len(b)) + b for b in bodies)
    buf = np.frombuffer(packets[:len(packets) - cut], dtype=np.uint8)
    starts, ends, stop = compiled.frame_packets(buf, 0, buf.size, 1 << 28)
    want_s, want_e, want_stop = numpy_only(V, V.tagged_records, buf, 0, buf.size, 1 << 28)
    _same((want_s, want_e, want_stop), (starts, ends, stop))
    sized = b"".join(len(b"\x0a" + b).to_bytes(4, "little") + b"\x0a" + b for b in bodies) + b"\0\0\0\0"
    buf = np.frombuffer(sized, dtype=np.uint8)
    got = compiled.le32_records(buf, 0, buf.size)
    want = numpy_only(V, V.le32_records, buf, 0, buf.size, b"\x0a")
    _same(want, got)


_ROWS = st.integers(1, 60).flatmap(lambda n: st.lists(
    st.one_of(st.lists(st.integers(-3, 3), min_size=n, max_size=n),
              st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n).map(lambda v: np.array(v, np.uint64)),
              st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n),
              st.lists(st.booleans(), min_size=n, max_size=n)), min_size=1, max_size=4))


@settings(max_examples=200, deadline=None)
@given(_ROWS, st.booleans())
@example([[0, 0, 1], [0, 1, -(2**63) + 1]], False)  # the numpy side's shift once overflowed here
def test_hash_factorize_twins_agree(cols, in_order):
    """The compiled hash table numbers rows exactly as the numpy sort does, in both orders."""
    from polyprof.model.columns import factorize_rows, unique_inverse
    cols = [np.asarray(c) for c in cols]
    want = numpy_only(V, lambda: factorize_rows(cols, in_order=in_order))
    want_u = numpy_only(V, unique_inverse, cols[0])
    saved = V._compiled, V.HASH_FACTORIZE_AFTER
    V._compiled, V.HASH_FACTORIZE_AFTER = compiled, 1
    try:
        _same(want, factorize_rows(cols, in_order=in_order))
        _same(want_u, unique_inverse(cols[0]))
    finally:
        V._compiled, V.HASH_FACTORIZE_AFTER = saved


def test_hash_factorize_grows_its_table_and_leaves_mostly_distinct_rows_to_the_sort():
    rng = np.random.default_rng(7)
    rows = [rng.integers(0, 300, 400_000), rng.integers(0, 200, 400_000)]  # ~60k groups: the table grows
    ids, first = compiled.factorize([c.astype(np.int64) for c in rows])
    assert first.size > 32768 and np.array_equal(ids[first], np.arange(first.size))
    key = rows[0] * 1000 + rows[1]
    assert np.array_equal(key[first][ids], key) and np.unique(key).size == first.size
    assert compiled.factorize([np.arange(400_000, dtype=np.int64)]) is None


_SPANS = st.lists(st.lists(st.integers(0, 5), max_size=6), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(_SPANS, st.sampled_from([np.uint8, np.uint16, np.int32, np.int64]))
def test_span_factorize_twins_agree(runs, dtype):
    """Spans numbered by content in place (compiled table, empty spans included) as the numpy
    hash-and-sort numbers the gathered runs; overlapping spans read the same values."""
    from polyprof.model.columns import factorize_runs, factorize_spans
    values = np.array([v for r in runs for v in r], dtype=dtype)
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    want = numpy_only(V, factorize_runs, values, offsets)
    starts = offsets[:-1][::-1].copy()  # the same spans listed backwards: a second, overlapping view
    want_back = numpy_only(V, factorize_spans, values, starts, lengths[::-1].copy())
    saved = V._compiled, V.HASH_FACTORIZE_AFTER
    V._compiled, V.HASH_FACTORIZE_AFTER = compiled, 1
    try:
        _same(want, factorize_runs(values, offsets))
        _same(want_back, factorize_spans(values, starts, lengths[::-1].copy()))
    finally:
        V._compiled, V.HASH_FACTORIZE_AFTER = saved


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), max_size=5), min_size=1, max_size=8),
       st.lists(st.integers(0, 7), min_size=1, max_size=60), st.booleans())
def test_repeated_stacks_intern_as_the_level_walk_does(base, picks, leaf_first):
    """Grouping repeated stacks first (compiled) builds the callsite tree the plain walk builds."""
    from polyprof.model import bulk_stacks
    stacks = [base[i % len(base)] for i in picks]
    flat = np.array([v for s in stacks for v in s] or [0], dtype=np.int32)[:sum(map(len, stacks))]
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in stacks])]).astype(np.int64)
    if not flat.size:
        return
    want = bulk_stacks._intern(flat, offsets, leaf_first)
    saved = V._compiled, V.HASH_FACTORIZE_AFTER
    V._compiled, V.HASH_FACTORIZE_AFTER = compiled, 1
    try:
        got = bulk_stacks.intern_stacks(flat, offsets, leaf_first)
    finally:
        V._compiled, V.HASH_FACTORIZE_AFTER = saved
    for name in ("leaf", "parent", "location", "depth", "size"):
        assert np.array_equal(getattr(want, name), getattr(got, name)), name


_ENTRY = st.lists(st.tuples(st.integers(1, 5), st.sampled_from([0, 1, 2**40, 2**64 - 1])), max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(_ENTRY, st.just(None)), max_size=6), min_size=1, max_size=10))
def test_grouped_nested_rows_twins_agree(payloads):
    """Sub-messages grouped by content as they are decoded (compiled) give the rows, groups and
    first rows that decoding every row and factorizing in order of first sight gives."""
    from polyprof.model.columns import factorize_rows
    bodies = [_encode([(3, 2, _encode([(n, 0, v) for n, v in entry])) if entry is not None else (7, 0, 1)
                       for entry in payload]) for payload in payloads]
    buf, starts, ends = _spans(bodies)
    numbers = (1, 2, 3, 4)
    counts, values, _ = numpy_only(V, V.nested_scalars, buf, starts, ends, 3, numbers)
    ids, first = numpy_only(V, lambda: factorize_rows([values[:, j].view(np.int64) for j in range(4)],
                                                    in_order=True))
    saved = V._compiled
    V._compiled = compiled
    try:
        got = V.hash_nested_scalars(buf, starts, ends, 3, numbers)
    finally:
        V._compiled = saved
    assert got is not None
    _same((counts, ids, values[first], first), got)


_DUMP = """
import sys
from polyprof.api import read_all
from polyprof.model.dump import dump
for path in sys.argv[1:]:
    try:
        print("\\n".join(dump(p) for p in read_all(path)))
    except Exception as exc:
        print("ERROR", type(exc).__name__, exc)
"""


def _real_inputs() -> list[Path]:
    picks = ["google__perfetto/diff_tests_binary", "generated/simpleperf", "jbeich__platform_system_extras"]
    files = [p for d in picks for p in sorted((PEER / d).rglob("*")) if p.is_file() and p.stat().st_size < 8e6]
    return files[:: max(1, len(files) // 60)]


@pytest.mark.slow
def test_real_files_read_the_same_with_both_kernels(peer, tmp_path):
    """Perfetto traces, simpleperf recordings, and pprof/Chromium files converted from peer profiles."""
    import polyprof

    files = [str(p) for p in _real_inputs()]
    for src in sorted(peer.rglob("*.pb.gz"))[:12]:
        try:
            profile = polyprof.read(src)
        except polyprof.PolyprofError:
            continue
        files.append(str(src))  # pprof itself: compiled, its samples are spans of the file's bytes
        for fmt in ("chromium", "perfetto", "simpleperf"):
            out = tmp_path / f"{src.name}.{fmt}"
            polyprof.write(profile, out, format=fmt)
            files.append(str(out))
    runs = {}
    for mode in ("numpy", "compiled"):
        runs[mode] = subprocess.run([sys.executable, "-c", _DUMP, *files], capture_output=True, text=True,
                                    env={"POLYPROF_KERNELS": mode, "PYTHONPATH": str(REPO / "src"),
                                         "PATH": "/usr/bin:/bin"}, check=True).stdout
    assert runs["numpy"].count("polyprof-dump") > 50
    assert runs["numpy"] == runs["compiled"]


def test_small_inputs_do_not_load_the_compiled_kernels(tmp_path):
    """numba's import (~0.5 s) is paid only by reads large enough to win it back."""
    import polyprof

    demo = REPO / "examples" / "demo.pb.gz"
    files = [str(demo)]
    for fmt in ("chromium", "perfetto", "simpleperf"):
        out = tmp_path / f"demo.{fmt}"
        polyprof.write(polyprof.read(demo), out, format=fmt)
        files.append(str(out))
    code = ("import sys; from polyprof.cli.main import main\n"
            "for f in sys.argv[1:]: main(['top', f, '--nodecount', '3'])\n"
            "print('numba loaded:', 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, *files], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}).stdout
    assert out.count("flat%") == 4 and out.strip().endswith("numba loaded: False")


def test_pprof_samples_from_file_spans_match_upb_copies(peer, monkeypatch):
    """With the compiled walker, pprof samples are read as spans of the file (a top-level walk)
    instead of upb's copies joined per chunk: same profile, also across chunk boundaries."""
    import polyprof
    from polyprof.formats.pprof import _read
    from polyprof.model.dump import dump

    monkeypatch.setattr(_read, "_CHUNK", 7)
    sources = [p for p in sorted(peer.rglob("*.pb.gz")) if p.stat().st_size < 2e6][:10] + [REPO / "examples" / "demo.pb.gz"]
    dumps = {}
    for mode in ("numpy", "compiled"):
        monkeypatch.setenv("POLYPROF_KERNELS", mode)
        monkeypatch.setattr(V, "_compiled", None)
        out = []
        for src in sources:
            try:
                out.append(dump(polyprof.read(src)))
            except polyprof.PolyprofError as exc:
                out.append(f"ERROR {exc}")
        dumps[mode] = out
        assert V.compiled() == (mode == "compiled")
    assert sum("ERROR" not in d for d in dumps["numpy"]) >= 5
    assert dumps["numpy"] == dumps["compiled"]


def _read_both_ways(monkeypatch, path: Path) -> dict[str, str]:
    """polyprof's dump of ``path`` (or its error) read with numpy kernels and with compiled ones."""
    import polyprof
    from polyprof.model.dump import dump

    got = {}
    for mode in ("numpy", "compiled"):
        monkeypatch.setenv("POLYPROF_KERNELS", mode)
        monkeypatch.setattr(V, "_compiled", None)
        try:
            got[mode] = dump(polyprof.read(path))
        except polyprof.PolyprofError as exc:
            got[mode] = f"ERROR {exc}"
    return got


def test_pprof_split_declines_exactly(monkeypatch, tmp_path):
    """A sample record whose length is not in its shortest varint form, and a cut file: the
    split read declines, and both reads agree (profile, or error wording and offset)."""
    import gzip

    from polyprof.formats.pprof._split import split_samples

    data = gzip.decompress((REPO / "examples" / "demo.pb.gz").read_bytes())
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(V, "_compiled", None)
    found = split_samples(data)
    assert found is not None and found[1].size > 3 and len(found[0]) < len(data)
    start, end = int(found[1][2]), int(found[2][2])
    size = end - start
    assert size < 128  # one length byte in the file; padded to two here
    padded = data[:start - 2] + bytes([0x12, 0x80 | size, 0x00]) + data[start:]
    assert split_samples(padded) is None
    (tmp_path / "padded.pb").write_bytes(padded)
    (tmp_path / "cut.pb").write_bytes(data[: len(data) // 2])
    for name in ("padded.pb", "cut.pb"):
        got = _read_both_ways(monkeypatch, tmp_path / name)
        assert got["numpy"] == got["compiled"]
    assert got["numpy"].startswith("ERROR")
