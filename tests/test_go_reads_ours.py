"""`go tool pprof` reads what polyprof writes, with the same numbers.

For every pprof file in peer-data, our rewrite must give exactly the `-top`
and `-traces` text that go tool pprof prints for the original. Needs Debian
golang-go (`go`); skipped with the reason when it is absent.
"""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest

import polyprof
from polyprof.formats import pprof

from helpers import REPO, peer_id
from test_pprof import PPROF

GO = shutil.which("go")
pytestmark = pytest.mark.skipif(GO is None, reason="go tool pprof not installed (apt-get install golang-go)")


def _pprof(*args: str) -> str:
    done = subprocess.run([GO, "tool", "pprof", *args], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode("utf-8", errors="replace")


FILES = [REPO / "examples" / "demo.pb.gz"] + PPROF


@pytest.mark.parametrize("path", FILES, ids=[peer_id(p) for p in FILES])
def test_go_tool_pprof_reads_our_output_identically(path, tmp_path):
    ours = tmp_path / "ours.pb.gz"
    out = io.BytesIO()
    pprof.write(polyprof.read(path), out, polyprof.WriteOptions())
    ours.write_bytes(out.getvalue())
    flags = ["-nodefraction=0", "-edgefraction=0", "-nodecount=0"]
    assert _pprof("-top", *flags, str(ours)) == _pprof("-top", *flags, str(path))
    assert _pprof("-traces", str(ours)) == _pprof("-traces", str(path))
