"""Rules for the tests themselves: goldens are never created silently, and
shared helpers come from helpers.py, not from conftest."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import GoldenMissing, check_golden

TESTS = Path(__file__).resolve().parent


def test_a_missing_golden_fails_and_is_written_only_on_update(tmp_path):
    with pytest.raises(GoldenMissing, match="--update-goldens"):
        check_golden(tmp_path, "sub/new.txt", "text\n", update=False)
    assert not (tmp_path / "sub" / "new.txt").exists()
    check_golden(tmp_path, "sub/new.txt", "text\n", update=True)
    assert (tmp_path / "sub" / "new.txt").read_text() == "text\n"
    check_golden(tmp_path, "sub/new.txt", "text\n", update=False)
    with pytest.raises(AssertionError, match="differs from golden"):
        check_golden(tmp_path, "sub/new.txt", "other\n", update=False)


def test_no_test_imports_from_conftest():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if "conftest" in names:
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, f"import shared helpers from helpers.py, not conftest: {offenders}"
