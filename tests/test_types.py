"""mypy finds no error in src/ (configuration: [tool.mypy] in pyproject.toml).

Part of ``make test`` so that type hints cannot drift into lies: every
function body is checked, annotated or not.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import REPO


def test_mypy_is_clean_on_src():
    pytest.importorskip("mypy", reason="mypy not installed (pip install -e '.[test]')")
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
