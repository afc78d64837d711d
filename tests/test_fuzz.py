"""Fuzzing in the test suite: a short smoke run of every target, and the regression corpus.

The smoke run fuzzes each target (``fuzz/run.py``) for a few seconds, two at
a time, with atheris where it is installed (``make test`` installs the
``fuzz`` extra where a wheel exists) and the plain-Python mutator elsewhere.
It fails on any exception outside polyprof's error tree, on an input slower
than the per-input limit, or on one past the memory limit. Every input the
fuzzers ever found lives in ``fuzz/regressions/<target>/`` and is replayed
here under the same limits.

POLYPROF_FUZZ_SMOKE_SECONDS sets the time per binary format target (default
10; the legacy pprof text, sniffer, Breakpad and ELF targets get half); 0
skips the smoke run. Each smoke run starts from the seeds and the
regression corpus alone (its own work directory, emptied first), so it
takes the same time however long ``make fuzz`` campaigns have grown their
corpus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO

RUN = REPO / "fuzz" / "run.py"
sys.path.insert(0, str(REPO / "fuzz"))
from targets import SMOKE_SHARE, TARGETS  # noqa: E402

SECONDS = float(os.environ.get("POLYPROF_FUZZ_SMOKE_SECONDS", "10"))
SMOKE_WORK = REPO / "fuzz" / ".work" / "smoke"


def _engine() -> str:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return "python"
    return "atheris"


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.mark.skipif(SECONDS <= 0, reason="POLYPROF_FUZZ_SMOKE_SECONDS=0")
def test_fuzz_smoke_run_finds_nothing():
    shutil.rmtree(SMOKE_WORK, ignore_errors=True)
    todo = sorted(TARGETS, key=lambda t: SMOKE_SHARE.get(t, 1), reverse=True)
    print(f"fuzz smoke run: engine {_engine()}, {SECONDS:g} s per format target")
    failures = []
    while todo:
        batch, todo = todo[:2], todo[2:]  # two at a time: the machine has two cores
        procs = {t: subprocess.Popen([sys.executable, str(RUN), t, "--seconds",
                                      str(SECONDS * SMOKE_SHARE.get(t, 1)), "--seed", "1",
                                      "--work", str(SMOKE_WORK)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for t in batch}
        for t, proc in procs.items():
            out, _ = proc.communicate(timeout=SECONDS * 6 + 300)
            print(f"--- {t}: exit {proc.returncode}\n{_tail(out, 6)}")
            if proc.returncode != 0:
                failures.append(f"{t} (exit {proc.returncode}):\n{_tail(out)}")
    assert not failures, "fuzzing found inputs outside the limits or the error tree " \
                         "(see fuzz/.work/smoke/<target>/findings):\n" + "\n\n".join(failures)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_regression_corpus_passes_within_the_limits(target):
    done = subprocess.run([sys.executable, str(RUN), target, "--replay"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, _tail(done.stdout + done.stderr)
    assert "replayed" in done.stderr
