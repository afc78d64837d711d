"""Broken Chromium inputs raise one polyprof error with one clear line, never anything else."""

from __future__ import annotations

import base64

import pytest
from test_chromium_support import fixture_bytes, load_message

import polyprof
from polyprof.errors import InputError, MalformedInputError

UMA = fixture_bytes("uma_log.textproto")


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text
    return text


@pytest.mark.parametrize("cut", [1, 2, 5, 17, 40, 100, 200, 333, len(UMA) - 1])
def test_truncated_log(cut: int) -> None:
    with pytest.raises(InputError) as info:
        polyprof.read_all(UMA[:cut])
    one_line(info.value)
    # forced format: always "malformed", never "unrecognized"
    with pytest.raises(MalformedInputError) as info:
        polyprof.read_all(UMA[:cut], format="chromium")
    assert "chromium" in one_line(info.value)


def test_huge_length_prefix() -> None:
    # CallStackProfile.stack (field 8, LEN) claiming 2**62 bytes
    data = b"\x42" + bytes([0x80] * 8 + [0x40]) + b"\x0a\x00"
    with pytest.raises(MalformedInputError):
        polyprof.read_all(data, format="chromium")


def test_garbage_with_forced_format() -> None:
    with pytest.raises(MalformedInputError, match="not a Chromium"):
        polyprof.read_all(b"\xff\xff\xff\xff", format="chromium")


@pytest.mark.parametrize("edit, message", [
    (lambda m: setattr(m.stack_sample[0], "stack_index", 5), "refers to stack 5"),
    (lambda m: setattr(m.stack[0].frame[1], "module_id_index", 9), "refers to module 9"),
    (lambda m: setattr(m.stack[0].frame[1], "module_id_index", -1), "refers to module -1"),
    (lambda m: m.stack_sample[0].metadata.add(name_hash_index=4, value=1), "name hash 4"),
    (lambda m: setattr(m.stack_sample[0], "async_backtrace_index", 2), "async backtrace 2"),
])
def test_dangling_indexes(edit, message: str) -> None:  # noqa: ANN001
    msg = load_message("modules.callstack.textproto")
    edit(msg)
    with pytest.raises(MalformedInputError, match=message) as info:
        polyprof.read_all(msg.SerializeToString())
    one_line(info.value)


def test_profile_metadata_with_bad_name_index() -> None:
    msg = load_message("modules.callstack.textproto")
    msg.profile_metadata.add(name_hash_index=3, value=1)
    with pytest.raises(MalformedInputError, match="name hash 3"):
        polyprof.read_all(msg.SerializeToString())


def test_async_backtrace_with_bad_module_index() -> None:
    msg = load_message("modules.callstack.textproto")
    msg.async_backtrace.add().location.add(address=1, module_id_index=7)
    msg.stack_sample[0].async_backtrace_index = 0
    with pytest.raises(MalformedInputError, match="module 7"):
        polyprof.read_all(msg.SerializeToString())


def test_wrong_wire_type_inside_a_nested_message() -> None:
    # A stack (field 8) whose frame (field 1) is a varint instead of a message.
    data = b"\x42\x02\x08\x01" + b"\x4a\x02\x08\x00"
    with pytest.raises(MalformedInputError):
        polyprof.read_all(data, format="chromium")


def test_bad_base64_beyond_the_sniffed_head() -> None:
    msg = load_message("work_ids.callstack.textproto")
    for _ in range(15000):  # large enough that the text outgrows the detection head
        msg.stack_sample.add(stack_index=0)
    text = base64.b64encode(msg.SerializeToString())
    assert len(text) > 1 << 16
    broken = text[:-10] + b"*" + text[-9:]
    with pytest.raises(MalformedInputError, match="invalid base64") as info:
        polyprof.read_all(broken)
    one_line(info.value)


def test_base64_with_impossible_length() -> None:
    text = base64.b64encode(fixture_bytes("work_ids.callstack.textproto")).rstrip(b"=") + b"A"
    with pytest.raises(InputError) as info:
        polyprof.read_all(text, format="chromium")
    one_line(info.value)


def test_invalid_utf8_in_function_name_does_not_crash() -> None:
    msg = load_message("modules.callstack.textproto")
    msg.stack[0].frame[0].function_name = b"Java\xc3(frame"
    p = polyprof.read_all(msg.SerializeToString())[0]
    assert any("UTF-8" in w for w in p.warnings)


# ---- fuzzing: any bytes either read or raise one of our input errors --------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SEEDS = [fixture_bytes(n) for n in ("uma_log.textproto", "metadata_mixed.callstack.textproto",
                                     "deprecated.callstack.textproto", "windows.sampled.textproto")]


@st.composite
def mutated(draw):  # noqa: ANN001, ANN201
    data = bytearray(draw(st.sampled_from(_SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    cut = draw(st.integers(1, len(data)))
    return bytes(data[:cut])


@settings(max_examples=300, deadline=None)
@given(mutated())
def test_mutated_inputs_read_or_raise_input_errors(data: bytes) -> None:
    for fmt in (None, "chromium"):
        try:
            profiles = polyprof.read_all(data, format=fmt)
        except InputError as exc:
            one_line(exc)
        else:
            for p in profiles:
                polyprof.model.validate.check(p)
