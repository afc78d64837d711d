"""Shared by the web view's tests: real inputs of every format, an in-process app, a served page."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

import polyprof
from helpers import PEER, REPO
from polyprof.model.profile import Profile

SIMPLEPERF = PEER / "firefox-devtools__profiler/src/test/fixtures/upgrades/simpleperf-cpu-clock.trace.gz"
INPUTS = {
    "pprof": lambda tmp: REPO / "examples" / "demo.pb.gz",
    "perfetto": lambda tmp: PEER / "google__perfetto/diff_tests_binary/parser__profiling__tests"
                                   "/Profiling__stack_sample_inline_callstack.pftrace",
    "simpleperf": lambda tmp: SIMPLEPERF,
    "uma": lambda tmp: _uma(tmp),
}
HOST = "127.0.0.1:8080"


def _uma(tmp: Path) -> Path:
    from test_chromium_support import fixture_bytes

    path = tmp / "windows.uma"
    path.write_bytes(fixture_bytes("windows.sampled.textproto"))
    return path


def input_path(kind: str, tmp: Path) -> Path:
    path = INPUTS[kind](tmp)
    if not path.exists():
        pytest.skip(f"peer data not found: {path} (set POLYPROF_PEER_DATA)")
    return path


def session(*inputs: Path | tuple[str, Profile], base: Path | None = None):  # noqa: ANN201
    """A Session over files (read as the CLI reads them) or (name, Profile) pairs."""
    from polyprof.web.session import Input, Session

    made = []
    for x in inputs:
        name, profile = x if isinstance(x, tuple) else (x.name, polyprof.read(x))
        made.append(Input(name, str(x[0] if isinstance(x, tuple) else x), profile))
    if base is not None:
        made.append(Input(base.name + " (base)", str(base), polyprof.read(base), is_base=True))
    return Session(made)


def app(*inputs, base: Path | None = None):  # noqa: ANN001, ANN201
    from polyprof.web.app import App

    return App(session(*inputs, base=base), [HOST], log=lambda text: None)


def get(application, url: str, status: int = 200) -> dict:  # noqa: ANN001
    resp = application.handle("GET", url, {"Host": HOST})
    assert resp.status == status, (url, resp.status, resp.body[:300])
    return json.loads(resp.body) if resp.header("Content-Type") == "application/json" else resp


def cli_json(cli, *argv) -> dict:  # noqa: ANN001
    done = cli(*argv, "--format", "json")
    assert done.code == 0, done.err
    return json.loads(done.out)


@contextmanager
def served(application):  # noqa: ANN001, ANN201
    """``application`` on a real socket (127.0.0.1, a free port) in a thread; yields its URL."""
    from polyprof.web import server

    httpd = server.make_server(application, "127.0.0.1", 0)
    application.hosts = server.accepted_hosts("127.0.0.1", httpd.server_port)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
