"""Reading Chromium CallStackProfiles: facts from Chromium's own unit tests and the spec."""

from __future__ import annotations

import json

import pytest
from test_chromium_support import all_fixtures, fixture_bytes, load_message, new

import polyprof
from polyprof.formats.chromium import names as N
from polyprof.formats.options import ReadOptions
from polyprof.model.dump import dump
from polyprof.model.profile import ValueType
from polyprof.model.validate import check


def read(data: bytes, **options) -> polyprof.Profile:  # noqa: ANN003
    profiles = polyprof.read_all(data, options=ReadOptions(**options))
    assert len(profiles) == 1
    check(profiles[0])
    return profiles[0]


def stacks(p: polyprof.Profile) -> list[list[tuple[str, int]]]:
    """Each sample's frames, leaf first, as (module file name or "", address)."""
    out = []
    for i in range(len(p.samples)):
        frames = []
        for loc in p.stack_locations(i):
            frames.append((p.mapping_file(int(p.locations.mapping[loc])), int(p.locations.address[loc])))
        out.append(frames)
    return out


def labels(p: polyprof.Profile, i: int) -> dict:
    return {lb.key: (lb.str if lb.str is not None else lb.num) for lb in p.labelsets[int(p.samples.labelset[i])]}


# ---- hashing (spec 4.4 test vectors; call_stack_profile_builder_unittest) ----

@pytest.mark.parametrize("name, expected", [(b"Back", 0x0557FA923DCEE4D0), (b"Forward", 0x67D2F6740A8EAEBF),
                                            (b"NewTab", 0x290EB683F96572F1)])
def test_hash_metric_name_vectors(name: bytes, expected: int) -> None:
    assert N.hash_metric_name(name) == expected


def test_hash_wire_bytes_are_the_md5_prefix_reversed() -> None:
    # spec 4.4: fixed64 on the wire, so "Back" appears as d0 e4 ce 3d 92 fa 57 05
    msg = new("CallStackProfile", "metadata_name_hash: 0x0557FA923DCEE4D0")
    assert msg.SerializeToString() == bytes.fromhex("29d0e4ce3d92fa5705")


def test_module_name_hashes_posix_utf8_and_windows_utf16() -> None:
    assert N.module_name_hash("/some/path/to/chrome") == 0x554838A8451AC36C
    assert N.module_name_hash("c:\\some\\path\\to\\chrome.exe") == 0x46C3E4166659AC02


# ---- CallStackProfileBuilderTest facts ----------------------------------------

def test_profiling_completed() -> None:
    p = read(fixture_bytes("profiling_completed.sampled.textproto"))
    assert p.extras["process"] == "BROWSER_PROCESS"
    assert p.extras["thread"] == "MAIN_THREAD"
    assert p.extras["trigger_event"] == "PROCESS_STARTUP"
    assert p.extras["profile_labels"] == {"process": "BROWSER_PROCESS", "thread": "MAIN_THREAD"}
    assert stacks(p) == [[("chrome", 0x10), ("chrome", 0x10)], [("chrome", 0x10)]]
    builds = [p.strings[p.mappings.build_id[int(p.locations.mapping[loc])]]
              for i in range(2) for loc in p.stack_locations(i)]
    assert builds == ["1", "2", "3"]
    assert p.duration_nanos == 500_000_000
    assert p.period == 100_000_000 and p.period_type == ValueType("wall", "nanoseconds")
    assert p.sample_types == [ValueType("samples", "count"), ValueType("wall", "nanoseconds")]
    assert p.samples.values.tolist() == [[1, 100_000_000], [1, 100_000_000]]
    assert p.samples.time is None


def test_custom_weights_and_counts_make_a_heap_profile() -> None:
    p = read(fixture_bytes("weights_and_counts.callstack.textproto"))
    assert p.sample_types == [ValueType("inuse_objects", "count"), ValueType("inuse_space", "bytes")]
    assert p.default_sample_type == "inuse_space"
    # weight 42 count 3, then absent weight and count: both mean 1
    assert p.samples.values.tolist() == [[3, 42], [1, 1], [1, 1]]


def test_frame_of_unknown_module_is_an_address_less_frame_without_mapping() -> None:
    p = read(fixture_bytes("modules.callstack.textproto"))
    assert stacks(p) == [[("", 0), ("chrome", 0x10)]]
    leaf = p.stack_locations(0)[0]
    assert int(p.locations.mapping[leaf]) == -1


def test_continued_work_on_the_samples_chromium_expects() -> None:
    p = read(fixture_bytes("work_ids.callstack.textproto"))
    marked = [i for i in range(len(p.samples)) if labels(p, i).get("continued_work") == "true"]
    assert marked == [2, 4]


def test_retrospective_metadata_is_replayed_per_sample() -> None:
    p = read(fixture_bytes("metadata_retro.callstack.textproto"))
    key = "0x0000000000000003[30]"
    assert [labels(p, i) for i in range(4)] == [{}, {key: 300}, {key: 300}, {}]
    assert p.extras["unresolved_metadata_names"] == ["0x0000000000000003"]


def test_mixed_keyed_and_unkeyed_metadata() -> None:
    p = read(fixture_bytes("metadata_mixed.callstack.textproto"))
    h100, h101 = "0x0000000000000064", "0x0000000000000065"
    assert [labels(p, i) for i in range(4)] == [
        {h100: 20, f"{h100}[50]": 10},
        {h100: 11, f"{h100}[50]": 10},
        {h100: 11},
        {h100: 11, h101: 11},
    ]
    assert p.extras["profile_metadata"] == {h101: 5}
    assert p.extras["profile_labels"] == {h101: 5}


def test_metadata_names_file_resolves_hashes(tmp_path) -> None:  # noqa: ANN001
    names = tmp_path / "names.txt"
    names.write_text("Back\n\nForward\nNewTab\n")
    profiles = polyprof.read_all(fixture_bytes("uma_log.textproto"),
                                 options=ReadOptions(metadata_names=str(names)))
    p = profiles[0]
    assert labels(p, 0) == {"Back": 1}
    assert labels(p, 2) == {"Back": 1, "Forward[7]": -3, "0x00000000000000ab": 9}
    assert labels(p, 3) == {"Forward[7]": -3, "0x00000000000000ab": 9}  # Back was unset
    assert p.extras["unresolved_metadata_names"] == ["0x00000000000000ab"]


def test_missing_metadata_names_file_is_an_input_error(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(polyprof.InputError, match="names file not found"):
        polyprof.read_all(fixture_bytes("uma_log.textproto"),
                          options=ReadOptions(metadata_names=str(tmp_path / "nope.txt")))


def test_deprecated_sample_encoding_with_cumulative_phases() -> None:
    p = read(fixture_bytes("deprecated.callstack.textproto"))
    assert p.samples.values[:, 0].tolist() == [3, 1, 2]
    assert p.samples.values[:, 1].tolist() == [300_000_000, 100_000_000, 200_000_000]
    phases = [labels(p, i)["process_phases"] for i in range(3)]
    assert phases == ["MAIN_LOOP_START,MAIN_NAVIGATION_START", "MAIN_LOOP_START,MAIN_NAVIGATION_START",
                      "MAIN_LOOP_START,MAIN_NAVIGATION_START,FIRST_NONEMPTY_PAINT"]


def test_sample_time_offsets_become_times_from_profile_start() -> None:
    p = read(fixture_bytes("windows.sampled.textproto"))
    assert p.samples.time.tolist() == [0, 100_000_000]
    assert p.mapping_file(0) == "chrome.dll.pdb"  # UTF-16LE name hash resolved
    assert p.extras["trigger_event"] == "JANKY_TASK" and p.extras["process"] == "GPU_PROCESS"


def test_async_backtrace_is_kept_as_a_label() -> None:
    msg = load_message("modules.callstack.textproto")
    msg.async_backtrace.add().location.add(address=0x40, module_id_index=0)
    msg.async_backtrace[0].location.add()
    msg.stack_sample[0].async_backtrace_index = 0
    p = read(msg.SerializeToString())
    assert json.loads(labels(p, 0)["async_backtrace"]) == [["chrome", "2", 0x40], ["", "", 0]]


def test_function_name_frames_and_unresolved_module_names() -> None:
    profiles = polyprof.read_all(fixture_bytes("uma_log.textproto"))
    renderer = profiles[1]
    assert renderer.extras["thread"] == "COMPOSITOR_THREAD"
    assert renderer.mapping_file(0) == "md5:0123456789abcdef"
    root = renderer.stack_locations(0)[-1]
    fn = int(renderer.lines.function[renderer.locations.line_start[root]])
    assert renderer.function_name(fn) == "org.chromium.base.task.PostTask.runOrPostTask"


def test_uma_log_holds_three_profiles_with_log_facts() -> None:
    profiles = polyprof.read_all(fixture_bytes("uma_log.textproto"))
    assert [p.extras["process"] for p in profiles] == ["BROWSER_PROCESS", "RENDERER_PROCESS", "BROWSER_PROCESS"]
    assert [p.extras["trigger_event"] for p in profiles] == ["PERIODIC_COLLECTION", "PERIODIC_COLLECTION",
                                                            "PERIODIC_HEAP_COLLECTION"]
    for p in profiles:
        assert p.extras["client_id"] == "0x1234567890abcdef"
        assert p.extras["app_version"] == "120.0.6099.71-64"
        assert p.extras["channel"] == "CHANNEL_STABLE"
        assert p.extras["container"] == "ChromeUserMetricsExtension"
    heap = profiles[2]
    assert heap.samples.values.tolist() == [[2, 4096], [1, 65536]]
    assert heap.extras["profile_time_offset_ms"] == 60000


def test_merge_option_makes_one_profile_with_process_and_thread_labels() -> None:
    profiles = polyprof.read_all(fixture_bytes("uma_log.textproto"), options=ReadOptions(merge=True))
    assert len(profiles) == 1
    p = profiles[0]
    assert [str(vt) for vt in p.sample_types] == ["samples/count", "wall/nanoseconds",
                                                 "inuse_objects/count", "inuse_space/bytes"]
    assert p.default_sample_type == "wall"
    assert p.extras["merged_profiles"] == 3
    assert "process" not in p.extras and p.extras["client_id"] == "0x1234567890abcdef"
    assert len(p.samples) == 8
    assert labels(p, 0)["process"] == "BROWSER_PROCESS"
    assert labels(p, 5) == {"process": "RENDERER_PROCESS", "thread": "COMPOSITOR_THREAD"}
    assert labels(p, 6) == {"process": "BROWSER_PROCESS", "thread": "UNKNOWN_THREAD"}
    assert p.samples.values.tolist()[5:] == [[1, 100_000_000, 0, 0], [0, 0, 2, 4096], [0, 0, 1, 65536]]


def test_api_read_of_a_log_with_one_kind_merges_with_labels() -> None:
    log = load_message("uma_log.textproto")
    del log.sampled_profile[2]  # drop the heap profile
    p = polyprof.read(log.SerializeToString())
    assert len(p.samples) == 6
    assert {labels(p, i)["thread"] for i in range(6)} == {"MAIN_THREAD", "COMPOSITOR_THREAD"}


def test_unknown_enum_values_are_kept_by_number() -> None:
    msg = load_message("profiling_completed.sampled.textproto")
    msg.process, msg.thread, msg.trigger_event = 42, 99, 12
    p = read(msg.SerializeToString())
    assert (p.extras["process"], p.extras["thread"], p.extras["trigger_event"]) == \
        ("PROCESS_42", "THREAD_99", "TRIGGER_12")


def test_invalid_utf8_build_id_is_replaced_with_a_warning() -> None:
    msg = load_message("modules.callstack.textproto")
    msg.module_id[0].build_id = b"\xff\xfeAB0"
    p = read(msg.SerializeToString())
    assert p.strings[p.mappings.build_id[0]] == "\ufffd\ufffdAB0"
    assert any("not valid UTF-8" in w for w in p.warnings)


def test_perf_only_sampled_profiles_are_unsupported() -> None:
    log = new("ChromeUserMetricsExtension", 'client_id: 1 sampled_profile { trigger_event: 1 perf_data: "x" }')
    with pytest.raises(polyprof.errors.UnsupportedFeatureError, match="perf"):
        polyprof.read_all(log.SerializeToString(), format="chromium")


# ---- detection ----------------------------------------------------------------

@pytest.mark.parametrize("name", all_fixtures())
def test_every_fixture_is_detected_as_chromium(name: str) -> None:
    assert polyprof.detect(fixture_bytes(name)).name == "chromium"


def test_base64_text_is_detected_and_read() -> None:
    import base64

    data = fixture_bytes("uma_log.textproto")
    text = base64.encodebytes(data)  # with newlines every 76 characters
    assert polyprof.detect(text).name == "chromium"
    assert dump(polyprof.read_all(text)[0]) == dump(polyprof.read_all(data)[0])
    urlsafe = base64.urlsafe_b64encode(data).rstrip(b"=")
    assert dump(polyprof.read_all(urlsafe)[0]) == dump(polyprof.read_all(data)[0])


def test_the_writer_output_is_not_taken_for_pprof() -> None:
    from polyprof.formats import pprof

    for name in all_fixtures():
        assert not pprof.sniff(fixture_bytes(name)), name


def test_sniff_says_not_mine_to_peer_data(peer) -> None:  # noqa: ANN001
    from polyprof.formats import chromium
    from polyprof.formats.source import Source

    files = [f for f in peer.rglob("*") if f.is_file()]
    assert files
    claimed = [str(f) for f in files if chromium.sniff(Source.of(f).head())]
    assert claimed == []


def test_peer_pprof_files_still_detect_as_pprof(peer) -> None:  # noqa: ANN001
    files = sorted(peer.rglob("*.pb.gz")) + sorted(peer.glob("google__pprof/internal/**/*.cpu"))
    pprof_files = [f for f in files if polyprof.detect(f).name == "pprof"]
    assert len(pprof_files) >= 3
    for f in files:
        assert polyprof.detect(f).name != "chromium", f


@pytest.mark.parametrize("data", [b"hello world, not a profile\n", b"\x08\x96\x01", bytes(range(256)),
                                  b"AAAAAAAAAAAAAAAA", b"Cg==$$", b"\x0a\x02\x08\x01\x12\x00"])
def test_sniff_rejects_other_content(data: bytes) -> None:
    from polyprof.formats import chromium

    assert not chromium.sniff(data)


def test_golden_dumps(golden) -> None:  # noqa: ANN001
    for name in all_fixtures():
        text = "".join(dump(p) for p in polyprof.read_all(fixture_bytes(name)))
        golden(f"chromium/{name.replace('.textproto', '')}.dump", text)
