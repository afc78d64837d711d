"""File, Thread, MetaInfo and LostSituation records decoded by the field walker (_flat.py) read
exactly as upb parses them: random field soups (odd wire types, repeats, values past 32 bits,
payloads split in two spans of one record) and real recordings, compared field by field and
as whole profiles read both ways."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.formats.simpleperf import _flat as F
from polyprof.formats.simpleperf import _records as R
from polyprof.formats.simpleperf._framing import frame
from polyprof.formats.simpleperf._schema import record_class
from polyprof.model.dump import dump
from polyprof.wire.encode import varint as _varint

REPO = Path(__file__).resolve().parents[1]
KINDS = {R.FILE: ("file", F.FILE), R.THREAD: ("thread", F.THREAD), R.META: ("meta_info", F.META),
         R.LOST: ("lost", F.LOST)}



def _field(number: int, wire: int, value: int, raw: bytes) -> bytes:
    tag = _varint(number << 3 | wire)
    if wire == 0:
        return tag + _varint(value)
    if wire == 1:
        return tag + value.to_bytes(8, "little")
    if wire == 5:
        return tag + (value & 0xFFFFFFFF).to_bytes(4, "little")
    return tag + _varint(len(raw)) + raw


fields = st.lists(st.tuples(st.integers(0, 8), st.sampled_from([0, 0, 2, 2, 1, 5]),
                            st.integers(0, 2**64 - 1), st.binary(max_size=6)), max_size=12)


def _payload(soup: list) -> bytes:
    return b"".join(_field(*f) for f in soup)


def _records(kind: int, soups: list[list], split: list[bool]) -> bytes:
    """A file of one record per soup, its payload split in two spans where ``split`` says."""
    bodies = []
    for soup, cut in zip(soups, split):
        body = _payload(soup)
        half = len(soup) // 2 if cut else len(soup)
        first, second = _payload(soup[:half]), _payload(soup[half:])
        parts = [first, second] if cut else [body]
        bodies.append(b"".join(_field(kind, 2, 0, p) for p in parts))
    return frame(bodies)


def _same_fields(got: F.Flat, want: object, spec: dict) -> None:
    for name, (_, kind) in spec.items():
        value = getattr(want, name)
        assert getattr(got, name) == (list(value) if kind == "repeated" else value), name
        if kind != "repeated":
            assert got.HasField(name) == want.HasField(name), name  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), soups=st.lists(fields, min_size=1, max_size=4),
       split=st.lists(st.booleans(), min_size=4, max_size=4))
def test_walker_decodes_as_upb(kind: int, soups: list, split: list) -> None:
    data = _records(kind, soups, split)
    starts, ends = R.records(data, [])
    buf = np.frombuffer(data, dtype=np.uint8)
    parts = R._Payloads(R.V.walk_fields(buf, starts, ends), kind)
    name, spec = KINDS[kind]
    got = F.decode(data, parts.spans(), spec)
    if got is None:  # refused (field 0, a varint past 64 bits): upb reads it, see the next test
        return
    want = parts.messages(data, R._kind_classes()[name])  # what the walk takes, upb takes too
    assert len(got) == len(want) == len(soups)
    for g, w in zip(got, want):
        _same_fields(g, w, spec)


def _read_both(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    def refuse(*args: object) -> None:
        return None

    def read() -> str:
        try:
            return "\n".join(dump(p) for p in polyprof.read_all(data, format="simpleperf"))
        except polyprof.PolyprofError as exc:
            return f"ERROR {exc}"

    walker = read()
    with monkeypatch.context() as m:
        m.setattr(F, "decode", refuse)  # refused: the reader falls back to upb
        upb = read()
    return walker, upb


@settings(max_examples=60, deadline=None)
@given(soups=st.lists(st.tuples(st.sampled_from(sorted(KINDS)), fields), max_size=6))
def test_profiles_read_the_same_both_ways(soups: list) -> None:
    with pytest.MonkeyPatch.context() as mp:
        bodies = [_field(kind, 2, 0, _payload(soup)) for kind, soup in soups]
        walker, upb = _read_both(frame(bodies), mp)
        assert walker == upb


def test_real_recordings_read_the_same_both_ways(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "demo.simpleperf"
    polyprof.write(polyprof.read(REPO / "examples" / "demo.pb.gz"), out, format="simpleperf")
    peer = REPO.parent / "shared" / "peer-data"
    files = [out, *sorted(peer.glob("generated/simpleperf/*.trace")),
             *sorted(peer.glob("jbeich__platform_system_extras/**/*.proto_data"))[:6]]
    read = 0
    for path in files:
        walker, upb = _read_both(path.read_bytes(), monkeypatch)
        assert walker == upb, path
        read += not walker.startswith("ERROR")
    assert read >= 1 + (len(files) > 1)


def test_file_names_come_from_the_walker() -> None:
    """A File with every field twice, the id past 32 bits: the last value wins, truncated as upb."""
    f = _payload([(1, 0, 2**32 + 7, b""), (2, 2, 0, b"/a"), (3, 2, 0, b"x"), (2, 2, 0, b"/b"), (3, 2, 0, b"y"),
                  (1, 2, 0, b"odd"), (4, 0, 3, b"")])
    data = frame([_field(R.FILE, 2, 0, f)])
    buf = np.frombuffer(data, dtype=np.uint8)
    starts, ends = R.records(data, [])
    part = R._Payloads(R.V.walk_fields(buf, starts, ends), R.FILE)
    got = F.decode(data, part.spans(), F.FILE)[0]
    assert (got.id, got.path, got.symbol, got.mangled_symbol) == (7, b"/b", [b"x", b"y"], [])
    assert got.HasField("path") and not record_class()().HasField("file")
