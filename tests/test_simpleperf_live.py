"""A fresh recording by the host simpleperf (PyPI wheel ``perftools``, a test extra).

Records a short busy Python process with frame-pointer callchains, converts it
with ``report-sample --protobuf`` and checks our reading against simpleperf's
own ``--dump-protobuf-report`` of the same file. Skips, saying why, where the
wheel is absent, the platform is not Linux x86-64, or ``perf_event_open`` is
not allowed.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polyprof.api as api
from polyprof.model.dump import dump
from polyprof.model.validate import check

from test_simpleperf_conformance import _expected_stacks, _our_stacks, parse_dump


def _simpleperf(tmp: Path) -> Path:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("the perftools wheel ships a host simpleperf for Linux x86-64 only")
    spec = importlib.util.find_spec("perftools")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("perftools wheel not installed (pip install polyprof[test])")
    root = Path(list(spec.submodule_search_locations)[0])
    found = sorted(root.glob("bin/AndroidSdk/ndk/*/simpleperf/bin/linux/x86_64/simpleperf"))
    if not found:
        pytest.skip(f"no linux-x86_64 simpleperf inside {root}")
    exe = tmp / "simpleperf"
    shutil.copy(found[-1], exe)  # wheels do not keep the executable bit
    os.chmod(exe, 0o755)
    return exe


def _run(*argv: object, out: Path | None = None) -> subprocess.CompletedProcess:
    with open(out, "w") if out else open(os.devnull, "w") as fh:
        return subprocess.run([str(a) for a in argv], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=60)


def test_fresh_recording_reads_as_simpleperf_decodes_it(tmp_path):
    exe = _simpleperf(tmp_path)
    data, trace, text = tmp_path / "rec.data", tmp_path / "rec.trace", tmp_path / "rec.dump.txt"
    busy = "import time\nt=time.time()\nwhile time.time()-t<0.3: sum(range(1000))"
    r = _run(exe, "record", "-e", "cpu-clock", "-f", "1000", "--call-graph", "fp", "-o", data,
             sys.executable, "-c", busy)
    if r.returncode != 0 or not data.exists():
        pytest.skip(f"simpleperf record does not work here: {r.stderr.strip().splitlines()[-1:]}")
    r = _run(exe, "report-sample", "--show-callchain", "--remove-gaps", "0", "--protobuf", "-i", data, "-o", trace)
    assert r.returncode == 0, r.stderr
    r = _run(exe, "report-sample", "--dump-protobuf-report", trace, out=text)
    assert r.returncode == 0, r.stderr
    p = api.read(trace)
    check(p)
    d = parse_dump(text)
    assert len(p.samples) == len(d["samples"]) > 0
    assert _our_stacks(p) == _expected_stacks(d)
    assert dump(api.read(api_write(p))) == dump(p)


def api_write(p) -> bytes:
    import io

    from polyprof.formats import simpleperf
    from polyprof.formats.options import WriteOptions

    out = io.BytesIO()
    simpleperf.write(p, out, WriteOptions())
    return out.getvalue()
