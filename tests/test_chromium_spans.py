"""Chromium entries found in the input (formats/chromium/spans.py) read as upb's lists did.

With the compiled kernels the reader walks the input for each CallStackProfile's stacks and
samples instead of joining upb's bytes objects; every fixture, a converted real profile and
hand-made odd layouts (a profile split in two occurrences, which protobuf merges) must read
exactly as through upb's lists, and the fast path must really be taken where it can be."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_chromium_support import all_fixtures, fixture_bytes, load_message

import polyprof
from polyprof.errors import MalformedInputError
from polyprof.formats.chromium import reader, spans
from polyprof.model.dump import dump
from polyprof.wire.encode import varint as _varint
from polyprof.wire import vector as V

REPO = Path(__file__).resolve().parents[1]


def _dumps(data: bytes, monkeypatch: pytest.MonkeyPatch, *, fast: bool) -> tuple[list[str], int]:
    """Dumps of every profile in ``data`` read with the compiled kernels, entries found in the
    input (``fast``) or taken from upb; and how many profiles took the input's entries."""
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(V, "_compiled", None)
    found = []

    def entries_in(*args):  # noqa: ANN002, ANN202
        got = spans.entries_in(*args)
        found.append(got is not None)
        return got

    monkeypatch.setattr(reader, "entries_in", entries_in)
    if not fast:
        monkeypatch.setattr(reader, "call_stack_spans", lambda kind, buf: [])
    try:
        out = [dump(p) for p in polyprof.read_all(data)]
    except polyprof.PolyprofError as exc:
        out = [f"ERROR {type(exc).__name__} {exc}"]
    monkeypatch.undo()
    return out, sum(found)


def _same(data: bytes, monkeypatch: pytest.MonkeyPatch) -> int:
    fast, taken = _dumps(data, monkeypatch, fast=True)
    slow, none = _dumps(data, monkeypatch, fast=False)
    assert fast == slow
    assert none == 0
    return taken


@pytest.mark.parametrize("name", all_fixtures())
def test_fixtures_read_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numba")
    taken = _same(fixture_bytes(name), monkeypatch)
    if "deprecated" not in name:
        assert taken >= 1


def test_converted_profile_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numba")
    out = tmp_path / "demo.chromium"
    polyprof.write(polyprof.read(REPO / "examples" / "demo.pb.gz"), out, format="chromium")
    assert _same(out.read_bytes(), monkeypatch) == 1


def test_profile_in_two_occurrences_merges_as_protobuf_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SampledProfile whose call_stack_profile (field 9) comes twice: protobuf merges the two,
    so the entries cannot be taken from one span; the reader falls back to upb's lists."""
    pytest.importorskip("numba")
    msg = load_message("windows.sampled.textproto")
    csp = msg.call_stack_profile.SerializeToString()
    half = len(msg.call_stack_profile.stack) // 2
    first = type(msg.call_stack_profile)()
    first.CopyFrom(msg.call_stack_profile)
    del first.stack[half:]
    second = type(msg.call_stack_profile)()
    second.stack.extend(msg.call_stack_profile.stack[half:])
    rest = type(msg)()
    rest.CopyFrom(msg)
    rest.ClearField("call_stack_profile")

    def field9(body: bytes) -> bytes:
        return bytes([9 << 3 | 2]) + _varint(len(body)) + body

    split = rest.SerializeToString() + field9(first.SerializeToString()) + field9(second.SerializeToString())
    whole = rest.SerializeToString() + field9(csp)
    assert _same(split, monkeypatch) == 0
    assert _dumps(split, monkeypatch, fast=True)[0] == _dumps(whole, monkeypatch, fast=True)[0]


def test_uma_log_with_several_profiles_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log of SampledProfiles with and without call stacks: each profile its own span."""
    pytest.importorskip("numba")
    msg = load_message("uma_log.textproto")
    extra = msg.sampled_profile.add()
    extra.CopyFrom(load_message("windows.sampled.textproto"))
    msg.sampled_profile.add()  # no call stacks (ChromeOS perf data): skipped, its index kept
    msg.sampled_profile.add().CopyFrom(extra)
    assert _same(msg.SerializeToString(), monkeypatch) == len(msg.sampled_profile) - 1


def _cuts(data: bytes, monkeypatch: pytest.MonkeyPatch) -> list[bool] | None:
    """Which profiles of ``data`` upb parsed without their entries (None: it parsed them all)."""
    seen: list = []

    def without(*args):  # noqa: ANN002, ANN202
        got = spans.without_entries(*args)
        seen.append(got)
        return got

    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(V, "_compiled", None)
    monkeypatch.setattr(reader, "without_entries", without)
    try:
        polyprof.read_all(data)
    except polyprof.PolyprofError:
        pass
    monkeypatch.undo()
    return seen[0][1] if seen and seen[0] is not None else None


def test_upb_parses_the_profile_without_its_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A converted profile and a log of several: upb gets the input without any stack or sample
    entry (a few bytes of it), and the profiles read as from upb's lists (``_same``)."""
    pytest.importorskip("numba")
    out = tmp_path / "demo.chromium"
    polyprof.write(polyprof.read(REPO / "examples" / "demo.pb.gz"), out, format="chromium")
    data = out.read_bytes()
    kind = reader.detect(data[:reader.HEAD])
    buf = V.as_buffer(data)
    where = spans.call_stack_spans(kind, buf)
    found = [spans.entries_in(buf, s, None, None) for s in where]
    shrunk, cut = spans.without_entries(kind, data, buf, where, found)
    assert cut == [True]
    parsed = reader.S.messages(True)[kind]()
    parsed.ParseFromString(shrunk)
    csp = parsed.call_stack_profile if kind != reader.CALLSTACK else parsed
    assert len(csp.stack) == len(csp.stack_sample) == 0 and len(csp.module_id) > 0
    assert len(shrunk) < len(data) // 10
    assert _same(data, monkeypatch) == 1
    log = load_message("uma_log.textproto")
    log.sampled_profile.add()  # no call stacks: kept as it is
    log.sampled_profile.add().CopyFrom(load_message("windows.sampled.textproto"))
    assert _cuts(log.SerializeToString(), monkeypatch) == [True, True, True, False, True]


def test_entry_with_a_long_length_encoding_is_left_to_upb(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack whose length is a two-byte varint where one byte would do: its record cannot be
    cut from its payload's position, so upb parses the whole input; same profile either way."""
    pytest.importorskip("numba")
    msg = load_message("windows.sampled.textproto")
    csp = msg.call_stack_profile
    body = csp.stack[0].SerializeToString()
    assert len(body) < 128
    rest = type(csp)()
    rest.CopyFrom(csp)
    del rest.stack[:1]
    padded = bytes([8 << 3 | 2, 0x80 | len(body), 0x00]) + body + rest.SerializeToString()
    plain = bytes([8 << 3 | 2, len(body)]) + body + rest.SerializeToString()
    outer = type(msg)()
    outer.CopyFrom(msg)
    outer.ClearField("call_stack_profile")

    def sampled(inner: bytes) -> bytes:
        return outer.SerializeToString() + bytes([9 << 3 | 2]) + _varint(len(inner)) + inner

    assert _cuts(sampled(padded), monkeypatch) is None
    assert _cuts(sampled(plain), monkeypatch) == [True]
    assert _same(sampled(padded), monkeypatch) == 1
    assert _dumps(sampled(padded), monkeypatch, fast=True)[0] == _dumps(sampled(plain), monkeypatch, fast=True)[0]


def test_damage_upb_finds_outside_the_entries_is_named_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module identifier whose bytes are not a message, after more fields than detection
    examines: the walker takes the profile's fields, upb rejects the input without its
    entries, and the error is the whole input's (same text, same offset as reading upb's lists)."""
    pytest.importorskip("numba")
    msg = load_message("windows.sampled.textproto")
    stack = msg.call_stack_profile.stack[0].SerializeToString()
    many = (bytes([8 << 3 | 2]) + _varint(len(stack)) + stack) * 6000
    csp = msg.call_stack_profile.SerializeToString() + many + bytes([2 << 3 | 2, 2, 0x0f, 0x01])
    outer = type(msg)()
    outer.CopyFrom(msg)
    outer.ClearField("call_stack_profile")
    data = outer.SerializeToString() + bytes([9 << 3 | 2]) + _varint(len(csp)) + csp
    monkeypatch.setenv("POLYPROF_KERNELS", "compiled")
    monkeypatch.setattr(V, "_compiled", None)
    errors = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(reader, "call_stack_spans", lambda kind, buf: [])
        with pytest.raises(polyprof.PolyprofError) as exc:
            polyprof.read_all(data, format="chromium")
        errors.append((type(exc.value).__name__, str(exc.value)))
    monkeypatch.undo()
    assert errors[0] == errors[1] and errors[0][0] == "MalformedInputError"


def test_large_file_is_read_from_a_memory_map_as_from_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain file from the compiled reads' size on is mapped, not copied into bytes
    (``Source.mapped``; the size lowered here): the profiles are the bytes' ones, and a gzip
    file or bytes given directly are not mapped."""
    pytest.importorskip("numba")
    from polyprof.formats import source
    from polyprof.formats.source import Source

    out = tmp_path / "demo.chromium"
    polyprof.write(polyprof.read(REPO / "examples" / "demo.pb.gz"), out, format="chromium")
    data = out.read_bytes()
    want = [dump(p) for p in polyprof.read_all(data)]
    maps = []
    mapped = Source.mapped

    def spy(self, compiled_from):  # noqa: ANN001, ANN202
        got = mapped(self, compiled_from)
        maps.append(got is not None)
        return got

    monkeypatch.setattr(Source, "mapped", spy)
    monkeypatch.setattr(source, "SETTLED_AFTER", 0.0)  # (just written: read, not mapped)
    monkeypatch.setattr(reader, "COMPILED_FROM", 1)
    monkeypatch.setattr(V, "_compiled", None)
    got = [dump(p) for p in polyprof.read_all(out)]
    import gzip
    (tmp_path / "demo.chromium.gz").write_bytes(gzip.compress(data))
    gz = [dump(p) for p in polyprof.read_all(tmp_path / "demo.chromium.gz")]
    from_bytes = [dump(p) for p in polyprof.read_all(data)]
    monkeypatch.undo()
    V._compiled = None
    assert got == want == gz == from_bytes
    assert maps == [True, False, False]


def test_a_mapped_file_cut_while_read_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A settled large file is mapped; one found shorter after the read is one clear error
    (``Source.unchanged``), and one just written is read, not mapped (``SETTLED_AFTER``)."""
    from helpers import cut_after, settle

    from polyprof.formats.source import Source

    out = tmp_path / "demo.chromium"
    polyprof.write(polyprof.read(REPO / "examples" / "demo.pb.gz"), out, format="chromium")
    size = out.stat().st_size
    assert Source.of(str(out)).mapped(1) is None  # just written
    settle(out)
    mapped = Source.of(str(out)).mapped(1)
    assert mapped is not None and len(mapped) == size
    mapped.close()
    monkeypatch.setattr(V, "_compiled", V._compiled)  # (whatever a size of 1 loads is undone)
    monkeypatch.setattr(reader, "COMPILED_FROM", 1)
    cut_after(monkeypatch, reader, "_read", out, 10)
    with pytest.raises(MalformedInputError, match=f"shrank from {size} to 10 bytes while it was read"):
        polyprof.read_all(out)
