"""Shared test fixtures: peer data, golden files, the CLI runner.

Helpers that tests import live in ``helpers.py``, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import GOLDEN, PEER, check_golden, run_cli


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true",
                     help="rewrite golden text dumps instead of comparing against them")


@pytest.fixture
def peer() -> Path:
    """The peer-data folder; tests using it skip with a visible reason when absent."""
    if not PEER.is_dir():
        pytest.skip(f"peer data not found at {PEER} (set POLYPROF_PEER_DATA)")
    return PEER


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """Compare text with tests/golden/NAME; a missing file fails (write it with --update-goldens)."""
    update = bool(request.config.getoption("--update-goldens"))
    return lambda name, text: check_golden(GOLDEN, name, text, update=update)


@pytest.fixture
def cli():
    """Run the polyprof command line in-process: cli("top", path) -> CliResult."""
    return run_cli


def pytest_terminal_summary(terminalreporter, config) -> None:  # noqa: ANN001
    """Print the conversion fidelity matrix when test_fidelity_matrix computed it."""
    import sys

    fidelity = sys.modules.get("fidelity")
    text = config.stash.get(fidelity.MATRIX_KEY, None) if fidelity is not None else None
    if text:
        terminalreporter.section("conversion fidelity matrix (docs/FIDELITY.md)")
        terminalreporter.write_line(text)
