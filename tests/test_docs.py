"""The library documentation is true: every code block of docs/API.md and the
README's Python examples run, in order, and every public name is documented."""

from __future__ import annotations

import os
import re

import pytest

import polyprof
from helpers import REPO

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

API = (REPO / "docs" / "API.md").read_text()
README = (REPO / "README.md").read_text()


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder where examples/demo.pb.gz is the demo profile and outputs may go."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name,text", [("docs/API.md", API), ("README.md", README)])
def test_every_python_block_runs(name, text, workdir, capsys):
    blocks = _python_blocks(text)
    assert blocks, f"{name} has no python examples"
    namespace: dict = {"__name__": "__docs__"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{name}[python block {i + 1}]", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - report which block failed
            pytest.fail(f"{name}: python block {i + 1} failed: {type(exc).__name__}: {exc}\n{block}")
    assert capsys.readouterr().out  # the examples print what they show
    if name == "docs/API.md":  # what the examples write is there
        assert {"out.folded", "out.speedscope.json", "built.pb.gz"} <= set(os.listdir(workdir))


def test_every_public_name_is_documented():
    headings = " ".join(re.findall(r"^### (.*)$", API, flags=re.M)).replace("\\_", "_")
    documented = set(re.findall(r"polyprof\.(\w+)", headings))
    assert documented == set(polyprof.__all__)
