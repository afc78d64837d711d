"""No unused imports, undefined names or dead assignments (pyflakes rules, via ruff)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from helpers import REPO


def test_pyflakes_rules_pass():
    ruff = shutil.which("ruff", path=str(REPO / ".venv" / "bin")) or shutil.which("ruff")
    if ruff is None:
        try:
            import ruff as _  # noqa: F401
        except ImportError:
            pytest.skip("ruff not installed (pip install -e '.[test]')")
        ruff_cmd = [sys.executable, "-m", "ruff"]
    else:
        ruff_cmd = [ruff]
    done = subprocess.run([*ruff_cmd, "check", "--select", "F", "--output-format", "concise",
                           "src", "tests", "benchmarks", "fuzz"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
