"""Our bugs are not bad input, and an interrupted write leaves nothing (issue #17, #10 item 5).

The signal tests run the real command line in a subprocess whose writer is
slowed down after writing part of its output, and kill it mid-write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import polyprof
from polyprof.formats.pprof import _read

from helpers import REPO

DEMO = REPO / "examples" / "demo.pb.gz"


def _boom(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    raise IndexError("injected reader bug")


def test_a_reader_bug_is_an_internal_error_not_bad_input(monkeypatch, cli):
    monkeypatch.setattr(_read, "_build", _boom)
    with pytest.raises(IndexError):  # the library lets it through ...
        polyprof.read(DEMO)
    monkeypatch.delenv("POLYPROF_DEBUG", raising=False)
    result = cli("top", DEMO)  # ... and the command line names it for what it is
    assert result.code == 1
    assert result.err == ("polyprof: internal error, please report: IndexError: injected reader bug "
                          "(POLYPROF_DEBUG=1 shows the traceback)\n")


def test_polyprof_debug_shows_the_traceback(monkeypatch, cli):
    monkeypatch.setattr(_read, "_build", _boom)
    monkeypatch.setenv("POLYPROF_DEBUG", "1")
    result = cli("top", DEMO)
    assert result.code == 1
    assert "Traceback (most recent call last)" in result.err and "_boom" in result.err
    assert result.err.rstrip().endswith("(POLYPROF_DEBUG=1 shows the traceback)")


_SLOW_WRITER = """
import sys, time
from polyprof.formats import folded
def slow(profile, out, options):
    out.write(b"partial output")
    out.flush()
    time.sleep(120)
folded.write = slow
from polyprof.cli.main import main
sys.exit(main(["convert", sys.argv[1], "-o", sys.argv[2]]))
"""


def _start_slow_convert(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    out = tmp_path / "out.folded"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(DEMO), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the temporary file holds the partial output
        temps = list(tmp_path.glob(".polyprof-*"))
        if temps and temps[0].stat().st_size:
            return proc, temps[0], out
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"the writer never started: {proc.communicate()}")


def test_sigterm_mid_write_leaves_nothing(tmp_path):
    proc, temp, out = _start_slow_convert(tmp_path)
    assert temp.name.startswith(f".polyprof-{proc.pid}-")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err.strip().endswith("polyprof: terminated")
    assert not temp.exists() and not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_killed_runs_temporary_is_named_never_deleted(tmp_path, cli):
    proc, temp, out = _start_slow_convert(tmp_path)
    proc.kill()  # SIGKILL: nothing can clean up
    proc.communicate(timeout=60)
    assert temp.exists() and not out.exists()
    result = cli("convert", DEMO, "-o", tmp_path / "again.folded")
    assert result.code == 0
    assert f"polyprof: warning: {temp}: a temporary file left by an interrupted polyprof run" in result.err
    assert temp.exists()  # only the user knows whether it matters
    assert (tmp_path / "again.folded").exists()


def test_a_live_writers_temporary_is_not_reported(tmp_path, cli):
    live = tmp_path / f".polyprof-{os.getpid()}-abcd"  # this process is alive
    live.write_bytes(b"x")
    result = cli("convert", DEMO, "-o", tmp_path / "out.folded")
    assert result.code == 0 and "warning" not in result.err
