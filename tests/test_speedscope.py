"""speedscope JSON: speedscope's own pprof import snapshot, and the file format's structure.

speedscope's ``pprof.test.ts.snap`` holds, for simple.prof, every frame
(name, file, line, self and total weight) and the timeline as
``stack weight`` lines (consecutive equal samples merged, as its
``dumpProfile`` prints them). Opening our file must give the same: the
frames and weights below are computed from our JSON the way speedscope's
``Profile`` computes them.

Structure: the fields of ``FileFormat.File`` / ``SampledProfile`` in
speedscope's ``src/lib/file-format-spec.ts``.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.formats import speedscope
from polyprof.formats.options import WriteOptions

from viewer_profiles import HOSTILE, expected_names, hostile_profile, random_profile

SIMPLE = "jlfwong__speedscope/sample/profiles/pprof/simple.prof"
SNAPSHOT = "jlfwong__speedscope/src/import/__snapshots__/pprof.test.ts.snap"
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def write(p, **extra) -> dict:  # noqa: ANN001
    out = io.BytesIO()
    speedscope.write(p, out, WriteOptions(extra=extra))
    return json.loads(out.getvalue().decode("utf-8"))


def check_structure(doc: dict) -> None:
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    for f in frames:
        assert isinstance(f["name"], str) and set(f) <= {"name", "file", "line", "col"}
        assert isinstance(f.get("file", ""), str) and isinstance(f.get("line", 0), int)
    assert doc["profiles"] and 0 <= doc["activeProfileIndex"] < len(doc["profiles"])
    assert isinstance(doc["name"], str) and doc["exporter"].startswith("polyprof@")
    for prof in doc["profiles"]:
        assert prof["type"] == "sampled" and prof["unit"] in UNITS and isinstance(prof["name"], str)
        assert len(prof["samples"]) == len(prof["weights"]) > 0
        assert prof["startValue"] <= prof["endValue"]
        assert all(0 <= i < len(frames) for stack in prof["samples"] for i in stack)


def _parse_snapshot_frames(peer) -> list[dict]:  # noqa: ANN001
    text = (peer / SNAPSHOT).read_text()
    out = []
    for block in re.findall(r"Frame \{(.*?)\}", text, flags=re.S):
        fields = dict(re.findall(r'"(\w+)": ("[^"]*"|\d+|undefined)', block))
        out.append({"name": fields["name"].strip('"'), "file": fields["file"].strip('"'),
                    "line": int(fields["line"]), "self": int(fields["selfWeight"]),
                    "total": int(fields["totalWeight"])})
    return out


def test_frames_and_timeline_equal_speedscope_import_snapshot(peer):
    doc = write(polyprof.read(peer / SIMPLE))
    check_structure(doc)
    prof = doc["profiles"][doc["activeProfileIndex"]]
    assert prof["unit"] == "nanoseconds" and prof["name"] == "cpu"  # speedscope takes the last type, cpu
    frames = doc["shared"]["frames"]
    self_w, total_w = Counter(), Counter()
    for stack, w in zip(prof["samples"], prof["weights"]):
        self_w[stack[-1]] += w
        for i in set(stack):
            total_w[i] += w
    got = sorted((f["name"], f.get("file"), f.get("line"), self_w[i], total_w[i]) for i, f in enumerate(frames))
    want = sorted((f["name"], f["file"], f["line"], f["self"], f["total"]) for f in _parse_snapshot_frames(peer))
    assert len(want) == 25 and got == want
    # the timeline: consecutive equal stacks merge, then "a;b;c 260.00ms"
    merged: list[list] = []
    for stack, w in zip(prof["samples"], prof["weights"]):
        if merged and merged[-1][0] == stack:
            merged[-1][1] += w
        else:
            merged.append([stack, w])
    timeline = [(";".join(frames[i]["name"] for i in s), f"{w / 1e6:.2f}") for s, w in merged]
    text = (peer / SNAPSHOT).read_text()
    expected = re.findall(r'^\s+"([^"\n]+) ([0-9.]+)ms",$', text, flags=re.M)
    assert len(expected) == 9 and timeline == expected


def test_one_profile_per_thread_and_sample_type(peer):
    p = polyprof.read(peer / "firefox-devtools__profiler/src/test/fixtures/upgrades/simpleperf-cpu-clock.trace.gz")
    doc = write(p)
    check_structure(doc)
    names = [prof["name"] for prof in doc["profiles"]]
    assert len(names) == len(set(names))
    main = [prof for prof in doc["profiles"] if prof["name"] == "com.example.sampleapplication (tid 7657) — cpu-clock"]
    assert len(main) == 1 and main[0]["unit"] == "nanoseconds"
    # Firefox's snapshot of the same file: 139.5 ms of cpu-clock on the main thread
    assert sum(main[0]["weights"]) == pytest.approx(139.5e6)
    for t, vt in enumerate(p.sample_types):
        mine = [prof for prof in doc["profiles"] if prof["name"].endswith("— " + vt.type)]
        assert sum(sum(prof["weights"]) for prof in mine) == p.totals()[t]
    active = doc["profiles"][doc["activeProfileIndex"]]["name"]
    assert active.endswith("— " + p.default_sample_type)


def test_hostile_names_survive_as_json_text():
    doc = write(hostile_profile(), name="<b>group</b>")
    check_structure(doc)
    names = {f["name"] for f in doc["shared"]["frames"]}
    # lone surrogates cannot be UTF-8: they become U+FFFD; everything else is kept as is
    assert names == {"main"} | {re.sub("[\ud800-\udfff]", "\ufffd", n) for n in HOSTILE}
    assert doc["name"] == "<b>group</b>"


def test_convert_by_extension(cli, peer, tmp_path):
    out = tmp_path / "simple.speedscope.json"
    r = cli("convert", peer / SIMPLE, "-o", out)
    assert r.code == 0, r.err
    check_structure(json.loads(out.read_text()))


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_property_every_sample_keeps_its_stack_and_value(data):
    p = random_profile(data)
    doc = write(p)
    check_structure(doc)
    frames = [f["name"] for f in doc["shared"]["frames"]]
    got, want = Counter(), Counter()
    for prof in doc["profiles"]:
        kind = prof["name"].rsplit("— ", 1)[1]
        thread = prof["name"].split(" (tid")[0]
        for stack, w in zip(prof["samples"], prof["weights"]):
            got[(kind, thread, tuple(frames[i] for i in stack))] += w
    for i in range(len(p.samples)):
        thread = p.labelsets[int(p.samples.labelset[i])][0].str
        for t, vt in enumerate(p.sample_types):
            if int(p.samples.values[i, t]):
                want[(vt.type, thread, tuple(expected_names(p, i)))] += int(p.samples.values[i, t])
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}
