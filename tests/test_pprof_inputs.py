"""Inputs as pprof users give them: several files, '-' (stdin), http(s) URLs with
--seconds, a timeout and a size limit (pprof's legacy formats: test_pprof_legacy.py)."""

from __future__ import annotations

import io
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import go_pprof_refs as refs
import pytest
from helpers import PEER

SAMPLE = PEER / refs.SAMPLE


@pytest.fixture
def server(peer):
    """A local pprof-like HTTP endpoint; records the queries it saw."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlsplit(self.path)
            seen.append({"path": url.path, **{k: v[0] for k, v in parse_qs(url.query).items()}})
            if url.path == "/debug/pprof/profile":
                body = SAMPLE.read_bytes()
            elif url.path == "/slow":
                time.sleep(3)
                body = SAMPLE.read_bytes()
            elif url.path.startswith("/peer/"):
                body = (PEER / url.path[len("/peer/"):]).read_bytes()
            else:
                self.send_error(404, "no such profile")
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.handle_error = lambda *args: None  # a client that timed out is not an error here
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    time.sleep(0.1)
    httpd.server_close()


def test_url_equals_file_and_uses_pprofs_default_path(cli, server):
    host, seen = server
    by_file = cli("top", SAMPLE)
    for url in (f"http://{host}", f"{host}/debug/pprof/profile"):
        r = cli("top", url)
        assert r.code == 0, r.err
        assert r.out == by_file.out
        assert f"fetching http://{host}/debug/pprof/profile" in r.err
    assert [s["path"] for s in seen] == ["/debug/pprof/profile"] * 2


def test_seconds_asks_the_server_for_a_duration(cli, server):
    host, seen = server
    r = cli("top", f"http://{host}/debug/pprof/profile", "--seconds", "2")
    assert r.code == 0, r.err
    assert seen[-1]["seconds"] == "2" and "timeout 3s" in r.err  # pprof: 1.5 x the duration


def test_url_errors_are_one_line_exit_2(cli, server, monkeypatch):
    host, _ = server
    r = cli("top", f"http://{host}/nothing")
    assert r.code == 2 and "server answered 404" in r.err and "Traceback" not in r.err
    r = cli("top", f"http://{host}/slow", "--timeout", "1")
    assert r.code == 2 and "cannot fetch" in r.err
    monkeypatch.setenv("POLYPROF_MAX_DOWNLOAD", "100")
    r = cli("top", f"http://{host}/debug/pprof/profile")
    assert r.code == 2 and "100-byte limit" in r.err


def test_url_equals_live_go_tool_pprof(cli, server):
    if not refs.go_available():
        pytest.skip("go tool pprof not available (install Debian golang-go)")
    host, _ = server
    url = f"http://{host}/peer/{refs.HEAP}"
    code, text, err = refs.Go().run(["-top", "-sample_index=alloc_space"], url)
    assert code == 0, err
    assert cli("top", url, "-sample_index=alloc_space").out == text.decode()


def test_stdin(cli, monkeypatch, peer):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SAMPLE.read_bytes())))
    r = cli("top", "-")
    assert r.code == 0, r.err
    assert r.out == cli("top", SAMPLE).out


def test_stdin_errors_name_stdin(cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"not a profile at all")))
    r = cli("top", "-")
    assert r.code == 3 and r.err.startswith("polyprof: error: <stdin>:")
    assert cli("top", "-", "-").code == 6  # stdin can be read once


def test_several_files_merge_as_pprof(cli, peer):
    """Stored references of go tool pprof with two inputs are in test_pprof_flags
    (top/traces/raw-two-files); here: merging a file with itself doubles it."""
    one = cli("top", SAMPLE, "--format", "json", "--nodefraction", "0")
    two = cli("top", SAMPLE, SAMPLE, "--format", "json", "--nodefraction", "0")
    import json

    a, b = json.loads(one.out), json.loads(two.out)
    assert b["total"] == 2 * a["total"]
    assert [(r["name"], 2 * r["flat"], 2 * r["cum"]) for r in a["rows"]] == \
        [(r["name"], r["flat"], r["cum"]) for r in b["rows"]]
