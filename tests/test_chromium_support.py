"""Helpers shared by the Chromium and symbolization tests, and checks of the fixtures themselves.

Fixtures are protobuf text files (tests/fixtures/chromium/*.textproto) turned
into wire bytes with polyprof's run-time schema, so the fixtures stay
readable and no binary blob is committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from polyprof.formats.chromium.names import hash_metric_name, module_name_hash
from polyprof.formats.chromium.schema import messages

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "chromium"
SYMBOLS = FIXTURES / "symbols"
_KINDS = {"sampled": "SampledProfile", "callstack": "CallStackProfile"}


def message_kind(name: str) -> str:
    """The message a fixture file holds, from its name (x.sampled.textproto, ...)."""
    return _KINDS.get(name.split(".")[-2], "ChromeUserMetricsExtension")


def load_message(name: str):  # noqa: ANN201 - a run-time message class
    """The parsed message of fixture ``name``."""
    text = (FIXTURES / name).read_text()
    return text_format.Parse(text, messages()[message_kind(name)]())


def fixture_bytes(name: str) -> bytes:
    """The wire bytes of fixture ``name``."""
    return load_message(name).SerializeToString()


def new(kind: str, text: str = ""):  # noqa: ANN201
    """A message of ``kind`` parsed from protobuf text (for small inline cases)."""
    return text_format.Parse(text, messages()[kind]())


def all_fixtures() -> list[str]:
    return sorted(p.name for p in FIXTURES.glob("*.textproto"))


@pytest.mark.parametrize("name", all_fixtures())
def test_every_fixture_parses_and_serializes(name: str) -> None:
    data = fixture_bytes(name)
    assert data
    again = messages()[message_kind(name)]()
    again.ParseFromString(data)
    assert again == load_message(name)


def test_fixture_hashes_are_the_documented_names() -> None:
    # The README's claims about the literal hashes used in the fixtures.
    assert module_name_hash("chrome") == 0x554838A8451AC36C
    assert module_name_hash("libc.so.6") == 0x3CD5DD33C6E5751A
    assert module_name_hash("chrome.dll.pdb") == 0x294FC7646B5C668E
    assert hash_metric_name(b"Back") == 0x0557FA923DCEE4D0
