"""Shared test fixtures: where peer data lives, golden files, the CLI runner."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PEER = Path(os.environ.get("POLYPROF_PEER_DATA", REPO.parent / "shared" / "peer-data"))
GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true",
                     help="rewrite golden text dumps instead of comparing against them")


@pytest.fixture
def peer() -> Path:
    """The peer-data folder; tests using it skip with a visible reason when absent."""
    if not PEER.is_dir():
        pytest.skip(f"peer data not found at {PEER} (set POLYPROF_PEER_DATA)")
    return PEER


def peer_files(pattern: str) -> list[Path]:
    """Peer files matching ``pattern`` (for parametrize); empty when absent."""
    if not PEER.is_dir():
        return []
    return sorted(PEER.glob(pattern))


def small_peer_profiles(peer: Path, max_bytes: int = 300_000):
    """(path, profile) of every readable ``*.pb.gz`` in peer data under ``max_bytes``."""
    import polyprof

    for path in sorted(peer.rglob("*.pb.gz")):
        if path.stat().st_size >= max_bytes:
            continue
        try:
            yield path, polyprof.read(path)
        except polyprof.PolyprofError:
            continue


def peer_id(path: Path) -> str:
    return str(path.relative_to(PEER)) if PEER in path.parents else path.name


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """Compare text with tests/golden/NAME, or rewrite it with --update-goldens."""
    update = request.config.getoption("--update-goldens")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update or not path.exists():
            if not update and os.environ.get("CI"):
                pytest.fail(f"golden {name} is missing; run pytest --update-goldens and commit it")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        expected = path.read_text()
        assert text == expected, f"output differs from golden {name} (refresh with --update-goldens)"

    return check


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def cli():
    """Run the polyprof command line in-process: cli("top", path) -> CliResult."""
    from polyprof.cli.main import main

    def run(*argv: str) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main([str(a) for a in argv])
        return CliResult(code, out.getvalue(), err.getvalue())

    return run


def pytest_terminal_summary(terminalreporter, config) -> None:  # noqa: ANN001
    """Print the conversion fidelity matrix when test_fidelity_matrix computed it."""
    import sys

    fidelity = sys.modules.get("fidelity")
    text = config.stash.get(fidelity.MATRIX_KEY, None) if fidelity is not None else None
    if text:
        terminalreporter.section("conversion fidelity matrix (docs/FIDELITY.md)")
        terminalreporter.write_line(text)
