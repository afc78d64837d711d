"""``polyprof serve`` as a user runs it: a real process, a real socket, Ctrl-C."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from helpers import REPO
from polyprof.cli.verbs.serve import _http
from polyprof.web.server import accepted_hosts, is_loopback

DEMO = REPO / "examples" / "demo.pb.gz"


def _start(*argv: str, verb: tuple[str, ...] = ("serve",)) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "polyprof", *verb, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    line = proc.stdout.readline()
    if not line.startswith("Serving web UI on "):
        proc.kill()
        raise AssertionError(f"no URL printed: {line!r} {proc.stderr.read()}")
    return proc, line.split()[-1]


def _stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def _get(port: int, path: str, host: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    resp = conn.getresponse()
    return resp.status, resp.read()


def test_serve_prints_the_url_answers_and_stops_on_ctrl_c():
    proc, url = _start(str(DEMO), "--no-browser", "--port", "0", "--focus", "sort")
    try:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with urllib.request.urlopen(url) as resp:
            assert resp.status == 200 and b"polyprof" in resp.read()
            assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
        with urllib.request.urlopen(url + "api/session") as resp:
            assert b'"focus":"sort"' in resp.read()  # the command line's filters start the page
        assert _get(port, "/api/top", f"localhost:{port}")[0] == 200
        status, body = _get(port, "/api/top", f"attacker.example:{port}")
        assert status == 403 and b"DNS rebinding" in body
    finally:
        code, err = _stop(proc)
    assert code == 130
    assert "interrupted" in err and "Traceback" not in err


def test_pprof_spelling_of_the_address(tmp_path):
    proc, url = _start(str(DEMO), "--no-browser", "--http", "127.0.0.1:0")
    code, err = _stop(proc)
    assert url.startswith("http://127.0.0.1:") and code == 130
    assert _http(":8080") == (None, 8080)
    assert _http("localhost:9000") == ("localhost", 9000)
    assert _http("[::1]:80") == ("[::1]", 80)
    for bad in ("8080x", "host:", ":99999", "a:b:1"):
        with pytest.raises(Exception):
            _http(bad)


def test_go_tool_pprof_spelling_starts_the_web_view():
    # what a pprof user types: go tool pprof -http=:8080 -no_browser FILE
    # with pprof's report flags, which start the page as they shape pprof's web view
    proc, url = _start("-http=127.0.0.1:0", "-no_browser", "-cum", "-symbolize=none", "-nodefraction=0.1",
                       "-diff_base", str(DEMO), str(DEMO), verb=())
    try:
        with urllib.request.urlopen(url + "api/session") as resp:
            session = json.loads(resp.read())
    finally:
        code, _ = _stop(proc)
    assert code == 130
    assert [x["name"] for x in session["inputs"]] == ["demo.pb.gz", "demo.pb.gz (base)"]
    assert session["base"] == 1
    assert session["defaults"] == {"cum": "1", "symbolize": "none", "nodefraction": "0.1"}


def test_a_port_in_use_is_a_clear_error(cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", DEMO, "--no-browser", "--port", port)
    assert done.code == 6
    assert f"cannot serve on 127.0.0.1:{port}" in done.err and "--port" in done.err


def test_binding_beyond_loopback_warns():
    proc, url = _start(str(DEMO), "--no-browser", "--host", "0.0.0.0", "--port", "0")
    code, err = _stop(proc)
    assert "warning: serving on 0.0.0.0: anyone who can reach this machine" in err
    assert url.startswith("http://127.0.0.1:")


def test_loopback_and_accepted_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.0.1") and not is_loopback("example.com")
    hosts = accepted_hosts("127.0.0.1", 8080)
    assert {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} <= hosts
    assert not any(h.startswith("0.0.0.0") for h in hosts) and "127.0.0.1" not in hosts
    assert "example.com:8080" in accepted_hosts("example.com", 8080)


def test_unreadable_input_fails_before_serving(cli, tmp_path):
    bad = tmp_path / "bad.pb.gz"
    bad.write_bytes(b"\x1f\x8b garbage")
    done = cli("serve", bad, "--no-browser", "--port", "0")
    assert done.code != 0 and "Traceback" not in done.err and str(bad) in done.err


def test_the_readme_serve_commands_start():
    import re
    import shlex

    lines = re.findall(r"^polyprof serve .*$", (REPO / "README.md").read_text(), flags=re.M)
    runnable = [shlex.split(line.split("#")[0]) for line in lines]
    runnable = [argv for argv in runnable if all((REPO / a).exists() for a in argv[2:] if not a.startswith("-"))]
    assert runnable, "the README shows polyprof serve on a bundled file"
    for argv in runnable:
        proc, url = _start(*argv[2:], "--no-browser", "--port", "0")
        try:
            with urllib.request.urlopen(url + "api/top?nodecount=1") as resp:
                assert resp.status == 200
        finally:
            code, err = _stop(proc)
        assert code == 130, err


def test_several_files_merged_are_one_input_labelled_by_file(tmp_path):
    other = tmp_path / "other.pb.gz"
    other.write_bytes(DEMO.read_bytes())
    proc, url = _start(str(DEMO), str(other), "--merge", "--no-browser", "--port", "0")
    try:
        with urllib.request.urlopen(url + "api/session") as resp:
            inputs = json.loads(resp.read())["inputs"]
        with urllib.request.urlopen(url + "api/labels") as resp:
            keys = {k["key"]: k for k in json.loads(resp.read())["keys"]}
    finally:
        _stop(proc)
    assert [x["name"] for x in inputs] == ["2 files merged"]
    assert sorted(v["value"] for v in keys["input"]["values"]) == ["demo.pb.gz", "other.pb.gz"]
    weights = [v["weight"] for v in keys["input"]["values"]]
    assert weights[0] == weights[1]  # the same file twice: half each
