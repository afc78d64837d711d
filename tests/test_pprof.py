"""pprof reader and writer: goldens, round trips, strictness and leniency."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest

import polyprof
from polyprof.errors import MalformedInputError
from polyprof.formats import pprof
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.profile import Label
from polyprof.model.validate import check
from polyprof.wire.encode import Encoder

from helpers import PEER, REPO, peer_files, peer_id

PPROF_FILES = [p for p in peer_files("**/*") if p.is_file() and p.suffix not in (".txt", ".json", ".md", ".snap", ".go")
               and "go_tool_pprof" not in str(p)]


def _pprof_files():
    out = []
    for path in PPROF_FILES:
        try:
            if polyprof.detect(path).name == "pprof" and "dotnet-pprof-3" not in path.name:
                out.append(path)  # dotnet-pprof-3 is invalid: see the refusal test
        except polyprof.PolyprofError:
            pass
    return out


PPROF = _pprof_files()
GOLDEN_FILES = ["generated/go_runtime_pprof/cpu.pb.gz", "generated/go_runtime_pprof/heap.pb.gz",
                "google__pprof/internal/driver/testdata/go.nomappings.crash",
                "grafana__pyroscope/pkg/pprof/testdata/malformed/no_addr_no_line.pb.gz",
                "grafana__pyroscope/pkg/og/convert/pprof/testdata/invalid_utf8.pb.gz",
                "grafana__pyroscope/pkg/pprof/testdata/dotnet.labels.pprof"]


def test_peer_pprof_files_are_found(peer):
    assert len(PPROF) >= 40


@pytest.mark.parametrize("rel", GOLDEN_FILES)
def test_golden_dump(peer, golden, rel):
    profile = polyprof.read(PEER / rel)
    golden(f"pprof/{rel.replace('/', '__')}.dump.txt", dump(profile))


def test_demo_profile_golden(golden):
    golden("pprof/demo.pb.gz.dump.txt", dump(polyprof.read(REPO / "examples" / "demo.pb.gz")))


@pytest.mark.parametrize("path", PPROF, ids=[peer_id(p) for p in PPROF])
def test_round_trip_is_lossless(path):
    first = polyprof.read(path)
    check(first)
    out = io.BytesIO()
    report = pprof.write(first, out, polyprof.WriteOptions())
    assert not report, report.lines()
    assert out.getvalue()[:2] == b"\x1f\x8b"  # written gzip-compressed
    second = polyprof.read(out.getvalue())
    check(second)
    assert dump(second) == dump(first)


def test_raw_and_gzip_read_the_same(peer):
    path = PEER / "generated/go_runtime_pprof/heap.pb.gz"
    raw = gzip.decompress(path.read_bytes())
    assert dump(polyprof.read(raw)) == dump(polyprof.read(path))


def test_dotnet_function_id_zero_is_refused_like_go_tool_pprof(peer):
    path = PEER / "grafana__pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-3.pb.gz"
    expected = (PEER / "generated/go_tool_pprof/grafana__pyroscope/pkg/og/convert/pprof/testdata/"
                "dotnet-pprof-3.pb.gz.top.error.txt").read_text()
    assert "reserved ID=0" in expected
    with pytest.raises(MalformedInputError, match="reserved id 0") as err:
        polyprof.read(path)
    assert str(path) in str(err.value)


def test_invalid_utf8_is_read_with_replacement_and_a_warning(peer):
    p = polyprof.read(PEER / "grafana__pyroscope/pkg/og/convert/pprof/testdata/invalid_utf8.pb.gz")
    assert any("\ufffd" in s for s in p.strings)
    assert any("UTF-8" in w for w in p.warnings)


# ---- hand-built profiles exercising every field --------------------------------

def _wire(strings, *, samples=(), locations=(), functions=(), mappings=(), extra=b"") -> bytes:
    e = Encoder()
    e.message(1, Encoder().varint_field(1, 1).varint_field(2, 2))
    for s in samples:
        e.message(2, s)
    for m in mappings:
        e.message(3, m)
    for loc in locations:
        e.message(4, loc)
    for f in functions:
        e.message(5, f)
    for s in strings:
        e.bytes_field(6, s.encode(), always=True)
    return e.getvalue() + extra


STRINGS = ["", "samples", "count", "main", "main.go", "key", "value", "bytes", "/bin/app", "build-1", "url"]


def _location(id_, fn, mapping=0, line=7):
    return Encoder().varint_field(1, id_).varint_field(2, mapping).varint_field(3, 0x1000 + id_) \
        .message(4, Encoder().varint_field(1, fn).varint_field(2, line))


def _sample(locs, value, labels=()):
    s = Encoder().packed_field(1, locs).packed_field(2, [value])
    for lab in labels:
        s.message(3, lab)
    return s


def test_every_field_is_kept():
    fn = Encoder().varint_field(1, 1).varint_field(2, 3).varint_field(3, 3).varint_field(4, 4).varint_field(5, 3)
    mapping = Encoder().varint_field(1, 1).varint_field(2, 0x400000).varint_field(3, 0x500000) \
        .varint_field(5, 8).varint_field(6, 9).varint_field(7, 1).varint_field(10, 1)
    inline_loc = Encoder().varint_field(1, 2).varint_field(2, 1).varint_field(3, 0x2000) \
        .message(4, Encoder().varint_field(1, 1).varint_field(2, 3).varint_field(3, 9)) \
        .message(4, Encoder().varint_field(1, 1).varint_field(2, 4)).varint_field(5, 1)
    labels = [Encoder().varint_field(1, 5).varint_field(2, 6), Encoder().varint_field(1, 7).varint_field(3, 42)
              .varint_field(4, 7)]
    tail = Encoder().varint_field(7, 3).varint_field(8, 4).varint_field(9, 123).varint_field(10, 456) \
        .message(11, Encoder().varint_field(1, 1).varint_field(2, 2)).varint_field(12, 10) \
        .packed_field(13, [5, 6]).varint_field(14, 1).varint_field(15, 10).getvalue()
    data = _wire(STRINGS, samples=[_sample([2, 1], 5, labels), _sample([1], -3)],
                 locations=[_location(1, 1, mapping=1), inline_loc], functions=[fn], mappings=[mapping],
                 extra=tail)
    p = polyprof.read(data)
    assert (p.drop_frames, p.keep_frames, p.time_nanos, p.duration_nanos) == ("main", "main.go", 123, 456)
    assert (str(p.period_type), p.period, p.comments, p.default_sample_type, p.doc_url) == \
        ("samples/count", 10, ["key", "value"], "samples", "url")
    assert p.labelsets[p.samples.labelset[0]] == (Label("key", str="value"), Label("bytes", num=42, unit="bytes"))
    assert p.samples.values[:, 0].tolist() == [5, -3]
    assert int(p.mappings.flags[0]) == 1 | 8
    loc = int(p.callsites.location[p.samples.stack[0]])
    assert list(p.locations.lines_of(loc)) and bool(p.locations.folded[loc])
    assert p.lines.column.tolist().count(9) == 1
    assert dump(polyprof.read(pprof.encode(p))) == dump(p)


def test_unpacked_and_packed_repeated_fields_read_alike():
    fn = Encoder().varint_field(1, 1).varint_field(2, 3)
    locs = [_location(1, 1), _location(2, 1)]
    packed = _sample([1, 2], 4)
    unpacked = Encoder().unpacked_field(1, [1, 2]).unpacked_field(2, [4])
    a = polyprof.read(_wire(STRINGS, samples=[packed], locations=locs, functions=[fn]))
    b = polyprof.read(_wire(STRINGS, samples=[unpacked], locations=locs, functions=[fn]))
    assert dump(a) == dump(b)


@pytest.mark.parametrize("case,message", [
    ("dangling_location", "missing location id 9"),
    ("dangling_function", "missing function id 5"),
    ("duplicate_location", "two locations with id 1"),
    ("location_id_zero", "location with reserved id 0"),
    ("wrong_value_count", "has 2 values, expected 1"),
    ("string_out_of_range", "outside the string table"),
    ("first_string_not_empty", "must start with an empty string"),
])
def test_invalid_references_are_clear_errors(case, message):
    fn = Encoder().varint_field(1, 1).varint_field(2, 3)
    locs = [_location(1, 1)]
    samples = [_sample([1], 1)]
    strings = STRINGS
    if case == "dangling_location":
        samples = [_sample([9], 1)]
    elif case == "dangling_function":
        locs = [_location(1, 5)]
    elif case == "duplicate_location":
        locs = [_location(1, 1), _location(1, 1)]
    elif case == "location_id_zero":
        locs = [_location(0, 1)]
        samples = []
    elif case == "wrong_value_count":
        samples = [Encoder().packed_field(1, [1]).packed_field(2, [1, 2])]
    elif case == "string_out_of_range":
        fn = Encoder().varint_field(1, 1).varint_field(2, 99)
    elif case == "first_string_not_empty":
        strings = ["x"] + STRINGS[1:]
    with pytest.raises(MalformedInputError, match=message):
        polyprof.read(_wire(strings, samples=samples, locations=locs, functions=[fn]))


def test_writer_reports_columns_pprof_cannot_hold():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    stack = b.stack([b.frame("f")])
    b.add_sample(stack, [1], time=5, tid=7)
    b.meta.extras["lost_samples"] = 3
    p = b.finish()
    out = io.BytesIO()
    report = pprof.write(p, out, polyprof.WriteOptions())
    lines = " ".join(report.lines())
    assert "time" in lines and "tid" in lines and "lost_samples" in lines
    back = polyprof.read(out.getvalue())
    assert {lb.key for lb in back.labelsets[back.samples.labelset[0]]} == {"time", "tid"}
    assert np.array_equal(back.samples.values, p.samples.values)


def _labelled_wire(label) -> bytes:
    fn = Encoder().varint_field(1, 1).varint_field(2, 3)
    return _wire(STRINGS, samples=[_sample([1], 5, [label]), _sample([1], 2)],
                 locations=[_location(1, 1)], functions=[fn])


def test_labels_are_decoded_on_first_use_only():
    from polyprof.analysis.top import top

    p = polyprof.read(_labelled_wire(Encoder().varint_field(1, 5).varint_field(2, 6)))
    assert p.samples.is_deferred("labelset") and p.is_deferred("labelsets")
    assert [r.flat for r in top(p).rows] == [7]  # top never needs labels
    assert p.samples.is_deferred("labelset")
    assert p.labelsets[p.samples.labelset[0]] == (Label("key", str="value"),)
    assert p.samples.labelset.tolist() == [1, 0]
    assert not p.samples.is_deferred("labelset") and not p.is_deferred("labelsets")


def test_copies_and_pickles_of_a_profile_hold_its_labels():
    import copy
    import pickle

    data = _labelled_wire(Encoder().varint_field(1, 7).varint_field(3, 42).varint_field(4, 7))
    expected = dump(polyprof.read(data))
    assert "{bytes=42[bytes]}" in expected
    for clone in (copy.deepcopy, copy.copy, lambda p: pickle.loads(pickle.dumps(p))):
        p = polyprof.read(data)
        assert dump(clone(p)) == expected


def test_a_corrupt_label_fails_on_every_verb(tmp_path, cli):
    path = tmp_path / "bad-label.pb"
    path.write_bytes(_labelled_wire(Encoder().varint_field(1, 99).varint_field(2, 6)))
    with pytest.raises(MalformedInputError, match="sample 0: label key = 99 is outside the string table") as err:
        polyprof.read(path)
    assert "bad-label.pb" in str(err.value)
    for verb in ("dump", "top", "info"):  # the same verdict whatever the verb
        failed = cli(verb, path)
        assert failed.code == 4 and failed.out == ""
        assert failed.err.count("\n") == 1 and "bad-label.pb" in failed.err and "label key" in failed.err
