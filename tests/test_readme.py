"""Every `$ polyprof ...` example in the README runs and succeeds."""

from __future__ import annotations

import re
import shlex

import pytest

from helpers import REPO

README = (REPO / "README.md").read_text()
COMMANDS = [line[2:].strip() for line in re.findall(r"^\$ .*$", README, flags=re.M)]


def test_readme_has_examples():
    assert len(COMMANDS) >= 5


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_example_runs(cli, command, monkeypatch):
    monkeypatch.chdir(REPO)
    argv = shlex.split(command)
    assert argv[0] == "polyprof"
    r = cli(*argv[1:])
    assert r.code == 0, r.err
    assert r.out.strip() or r.err.strip()
