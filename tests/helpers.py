"""Helpers shared by the tests: where the repository and peer data live,
golden files, running the CLI in-process. Tests import them from here
(``from helpers import PEER``); ``conftest.py`` only defines fixtures."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polyprof.model.profile import Profile

REPO = Path(__file__).resolve().parents[1]
PEER = Path(os.environ.get("POLYPROF_PEER_DATA", REPO.parent / "shared" / "peer-data"))
GOLDEN = Path(__file__).resolve().parent / "golden"


def peer_files(pattern: str) -> list[Path]:
    """Peer files matching ``pattern`` (for parametrize); empty when absent."""
    if not PEER.is_dir():
        return []
    return sorted(PEER.glob(pattern))


def small_peer_profiles(peer: Path, max_bytes: int = 300_000) -> Iterator[tuple[Path, Profile]]:
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


class GoldenMissing(AssertionError):
    """A golden file the test compares with does not exist."""


def numpy_only(owner: object, kernel: Any, *args: Any) -> Any:  # noqa: ANN401
    """``kernel(*args)`` with the compiled twins of ``owner`` (a kernel module such as
    ``wire.vector`` or ``model.tree``, which keeps its loaded twins in ``_compiled``) switched
    off: the numpy answer a differential test compares the compiled one with."""
    saved = owner._compiled  # type: ignore[attr-defined]
    owner._compiled = False  # type: ignore[attr-defined]
    try:
        return kernel(*args)
    finally:
        owner._compiled = saved  # type: ignore[attr-defined]


def settle(path: Path) -> None:
    """Date ``path``'s last change back past ``Source.mapped``'s settling time: it is mapped."""
    import time

    from polyprof.formats import source

    old = time.time() - 2 * source.SETTLED_AFTER
    os.utime(path, (old, old))


def cut_after(monkeypatch: Any, owner: object, name: str, path: Path, size: int) -> None:  # noqa: ANN401
    """Make ``owner.name`` (a reader's function) cut the file ``path`` to ``size`` bytes once it
    has read it: a file shrinking while a reader holds its map."""
    real = getattr(owner, name)

    def cut(*args: Any) -> Any:  # noqa: ANN401
        got = real(*args)
        os.truncate(path, size)
        return got

    monkeypatch.setattr(owner, name, cut)


def check_golden(folder: Path, name: str, text: str, *, update: bool) -> None:
    """Compare ``text`` with ``folder/name``; with ``update``, (re)write the file instead.

    A missing golden file is a failure, never silently created: goldens are
    written only when asked (``pytest --update-goldens``) and then reviewed
    and committed."""
    path = folder / name
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise GoldenMissing(f"golden {name} is missing: run pytest --update-goldens, review it and commit it")
    expected = path.read_text()
    assert text == expected, f"output differs from golden {name} (refresh with --update-goldens)"


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def run_cli(*argv: object) -> CliResult:
    """Run the polyprof command line in-process, capturing its output."""
    from polyprof.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in argv])
    return CliResult(code, out.getvalue(), err.getvalue())
