"""Folded stacks against AOSP's stackcollapse.py goldens, plus the writer's own rules.

AOSP's ``simpleperf/testdata/*.foldedstack*`` are byte-for-byte outputs of
``stackcollapse.py`` on recordings that peer-data holds as report-sample
protobuf (``generated/simpleperf_from_aosp_testdata``). Each golden is
checked twice: from ``polyprof.read`` of the protobuf (skipped, with the
reason, while polyprof cannot read it) and from simpleperf's own text dump
of the same file (``tests/simpleperf_dump.py``), which does not depend on
polyprof's reader.

``stackcollapse.py`` leaves out each sample's own frame (its report
library's callchain starts at the caller), so these comparisons use the
writer's ``drop_leaf`` switch.
"""

from __future__ import annotations

import io
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.errors import OptionsError, PolyprofError
from polyprof.formats import folded
from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label

from simpleperf_dump import profile_from_dump
from viewer_profiles import HOSTILE, expected_names, hostile_profile, random_profile

GOLDEN = "jbeich__platform_system_extras/simpleperf/testdata/"
AOSP = "generated/simpleperf_from_aosp_testdata/"
UNKNOWN = {"unknown_style": "unknown"}  # stackcollapse.py without --addrs
CASES = {  # golden -> (recording, stackcollapse.py flags as writer switches, --event-filter)
    "perf_with_jit_symbol.foldedstack": ("perf_with_jit_symbol", {"jit": True, **UNKNOWN}, None),
    "perf_with_jit_symbol.foldedstack_addrs": ("perf_with_jit_symbol", {"addrs": True}, None),
    "perf_with_jit_symbol.foldedstack_with_kernel": ("perf_with_jit_symbol", {"kernel": True, **UNKNOWN}, None),
    "perf_with_jit_symbol.foldedstack_with_pid": ("perf_with_jit_symbol", {"jit": True, "pid": True, **UNKNOWN},
                                                  None),
    "perf_with_jit_symbol.foldedstack_with_tid": ("perf_with_jit_symbol", {"jit": True, "tid": True, **UNKNOWN},
                                                  None),
    "perf_with_two_event_types.foldedstack_cpu_clock": ("perf_with_two_event_types", {}, "cpu-clock"),
}


def _load(peer, recording: str, source: str):  # noqa: ANN001, ANN202
    if source == "simpleperf-dump":
        return profile_from_dump(peer / AOSP / f"{recording}.dump.txt")
    try:
        return polyprof.read(peer / AOSP / f"{recording}.trace")
    except PolyprofError as exc:
        pytest.skip(f"polyprof.read cannot read simpleperf protobuf yet ({exc})")


def _text(p, sample_index, switches) -> str:  # noqa: ANN001
    out = io.BytesIO()
    folded.write(p, out, WriteOptions(sample_index=sample_index, extra={"drop_leaf": True, **switches}))
    return out.getvalue().decode("utf-8")


@pytest.mark.parametrize("source", ["polyprof.read", "simpleperf-dump"])
@pytest.mark.parametrize("golden_name", sorted(CASES))
def test_equals_aosp_stackcollapse_golden(peer, golden_name, source):
    recording, switches, event = CASES[golden_name]
    p = _load(peer, recording, source)
    expected = (peer / GOLDEN / golden_name).read_text()
    if event is None and source == "simpleperf-dump":
        event = p.sample_types[0].type  # stackcollapse.py's default: the first event type
    assert _text(p, event, switches) == expected


@pytest.mark.parametrize("source", ["polyprof.read", "simpleperf-dump"])
def test_two_event_types_default_is_the_first_event(peer, source):
    """The golden splits the first event's weight between the comms 'simpleperf' and 'sleep': the
    process exec'ed. report-sample keeps only a thread's last name, so the protobuf says 'sleep' for
    both; the weights add up to the golden's."""
    p = _load(peer, "perf_with_two_event_types", source)
    golden = dict(line.rsplit(" ", 1) for line in (peer / GOLDEN / "perf_with_two_event_types.foldedstack")
                  .read_text().splitlines())
    assert golden == {"simpleperf": "70372", "sleep": "3913545"}
    index = None if source == "polyprof.read" else "cpu-cycles"  # the reader's default: the first event
    assert _text(p, index, {}) == f"sleep {70372 + 3913545}\n"


def _profile(frames_and_values, *, thread=None):  # noqa: ANN001, ANN202
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    for frames, value in frames_and_values:
        labels = (Label("thread_name", str=thread),) if thread else ()
        b.add_sample(b.stack([b.frame(f) for f in reversed(frames)]) if frames else -1, [1, value], labels=labels)
    return b.finish()


def test_lines_are_summed_sorted_and_zero_lines_dropped():
    p = _profile([(["main", "b"], 5), (["main", "a"], 2), (["main", "b"], 1), (["main", "c"], 0)])
    assert folded.fold(p, WriteOptions()) == [("main;a", 2), ("main;b", 6)]
    assert folded.fold(p, WriteOptions(sample_index="samples")) == [("main;a", 1), ("main;b", 2), ("main;c", 1)]


def test_separators_inside_names_are_replaced_and_reported():
    p = _profile([(["ma;in", "new\nline"], 3)])
    report = LossReport()
    assert folded.fold(p, WriteOptions(), report) == [("ma:in;new line", 3)]
    assert report.items["names with ';' or line breaks changed"] == 2


def test_empty_stacks_need_a_thread_element():
    p = _profile([([], 4), (["f"], 1)])
    report = LossReport()
    assert folded.fold(p, WriteOptions(), report) == [("f", 1)]
    assert report.items["samples with an empty stack (no line to put them on)"] == 1
    assert folded.fold(_profile([([], 4)], thread="T"), WriteOptions()) == [("T", 4)]


def test_thread_element_modes():
    p = _profile([(["f"], 1)], thread="worker")
    assert folded.fold(p, WriteOptions()) == [("worker;f", 1)]
    assert folded.fold(p, WriteOptions(extra={"thread": "none"})) == [("f", 1)]
    assert folded.fold(p, WriteOptions(extra={"pid": True})) == [("worker-0;f", 1)]


def test_unknown_switch_is_an_options_error():
    with pytest.raises(OptionsError, match="unknown option"):
        folded.fold(_profile([(["f"], 1)]), WriteOptions(extra={"colour": True}))


def test_convert_to_folded_reports_what_is_lost(cli, peer, tmp_path):
    out = tmp_path / "simple.folded"
    r = cli("convert", peer / "jlfwong__speedscope/sample/profiles/pprof/simple.prof", "-o", out)
    assert r.code == 0, r.err
    lines = out.read_text().splitlines()
    # speedscope's snapshot of the same file: 'runtime.main;main.main;main.alpha 260.00ms'
    assert "runtime.main;main.main;main.alpha 260000000" in lines
    assert sum(int(x.rsplit(" ", 1)[1]) for x in lines) == 1500000000
    assert "not kept by folded: sample type samples/count not written" in r.err


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_property_lines_hold_every_sample_value(data):
    p = random_profile(data)
    lines = folded.fold(p, WriteOptions(sample_index="cpu"))
    assert sum(v for _, v in lines) == p.totals()[1]  # a thread element gives empty stacks a line
    expected = Counter()
    for i in range(len(p.samples)):
        head = p.labelsets[int(p.samples.labelset[i])][0].str
        names = [n.replace(";", ":") for n in expected_names(p, i)]
        expected[";".join([head] + names)] += int(p.samples.values[i, 1])
    assert dict(lines) == {k: v for k, v in expected.items() if v}


def test_hostile_names_give_one_valid_utf8_line_per_stack():
    out = io.BytesIO()
    folded.write(hostile_profile(), out, WriteOptions())
    lines = out.getvalue().decode("utf-8").split("\n")  # strict: surrogates became U+FFFD
    assert lines[-1] == "" and len(lines) - 1 == len(HOSTILE)
    assert all(line.startswith("main;") and line.rsplit(" ", 1)[1].isdigit() for line in lines[:-1])
