"""Symbols from a real debuginfod server (Debian ``debuginfod``) serving the test programs' debug files.

The server runs on a free port over a directory holding only the debug
files and is stopped after the tests. Covered: a hit (the debug file is
downloaded, cached and used), the cache (a second run with the server
stopped, and ``--offline``, still symbolize), a miss (404: the report names
the URL tried and the file to provide), an answer larger than the size
limit, and a server that accepts but never answers (the time limit).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
import urllib.request

import pytest
from native_programs import recording

import polyprof
from polyprof.formats.options import ReadOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.symbolize import Sources, symbolize


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):  # noqa: ANN001, ANN201
    exe = shutil.which("debuginfod")
    if exe is None:
        pytest.skip("debuginfod not installed (Debian debuginfod; bash .ci/run installs it)")
    rec = recording("cpp")
    served = tmp_path_factory.mktemp("served")
    shutil.copy(rec.program.debug, served / rec.program.debug.name)
    port = _free_port()
    proc = subprocess.Popen([exe, "-F", str(served), "-p", str(port), "-d", str(served.parent / "db.sqlite"),
                             "-t", "0", "-g", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    probe = f"{url}/buildid/{rec.program.build_id}/debuginfo"
    deadline = time.time() + 60
    while True:  # until it has scanned the directory and serves the file
        try:
            with urllib.request.urlopen(probe, timeout=5) as resp:
                resp.read(16)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.skip("debuginfod did not start serving within 60 s")
            time.sleep(0.3)
    yield url, rec, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)


def _names(p: polyprof.Profile) -> set[str]:
    return {p.function_name(int(f)) for f in p.lines.function}


def test_hit_then_cache_then_offline(server, tmp_path, monkeypatch):  # noqa: ANN001
    url, rec, _ = server
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DEBUGINFOD_URLS", raising=False)
    # by build id only: the stripped binary is found at its path, its debug file on the server
    p = polyprof.read(rec.plain, options=ReadOptions(debuginfod=(url,)))
    assert "shapes::fold" in _names(p)
    entry = next(m for m in p.extras["symbolization"]["mappings"] if m["file"].endswith("/hot_cpp"))
    assert f"{url}/buildid/{rec.program.build_id}/debuginfo" in entry["found"]
    cached = tmp_path / "cache" / "debuginfod" / rec.program.build_id / "debuginfo"
    assert cached.read_bytes() == rec.program.debug.read_bytes()
    # the second run answers from the cache: an unreachable server is never asked
    dead = f"http://127.0.0.1:{_free_port()}"
    q = polyprof.read(rec.plain, options=ReadOptions(debuginfod=(dead,)))
    assert _names(q) == _names(p)
    assert "debuginfod cache" in next(m for m in q.extras["symbolization"]["mappings"]
                                      if m["file"].endswith("/hot_cpp"))["found"]
    r = polyprof.read(rec.plain, options=ReadOptions(offline=True, symbolize=True))
    assert _names(r) == _names(p)


def _one_frame(build_id: str) -> polyprof.Profile:
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0x400000, 0x500000, 0, "/nowhere/libmissing.so", build_id)
    b.add_sample(b.stack([b.location(m, 0x401000)]), [1])
    return b.finish()


def _only(url: str, **kw) -> Sources:  # noqa: ANN003
    return Sources(debuginfod=(url,), use_env=False, local_paths=False, system_dirs=(), **kw)


def test_a_miss_is_reported_with_what_to_provide(server, tmp_path, monkeypatch):  # noqa: ANN001
    url, _, _ = server
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path / "cache"))
    bid = "00112233445566778899aabbccddeeff00112233"
    q, report = symbolize(_one_frame(bid), _only(url))
    (entry,) = report.mappings
    assert entry.after == 0 and not entry.source
    assert entry.looked_for[:2] == [f".build-id/00/{bid[2:]}.debug", "libmissing.so"]
    assert f"{url}/buildid/{bid}/debuginfo" in entry.looked_for
    assert any("no symbols for 1 module" in w for w in q.warnings)
    assert (tmp_path / "cache" / "debuginfod" / bid / ".missing").exists()  # not asked again today


def test_an_answer_over_the_size_limit_is_refused(server, tmp_path, monkeypatch):  # noqa: ANN001
    url, rec, _ = server
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path / "cache"))
    p = polyprof.read(rec.plain, options=ReadOptions(symbolize=False))
    q, report = symbolize(p, Sources(debuginfod=(url,), use_env=False, system_dirs=(), max_download=1000))
    entry = next(m for m in report.mappings if m.file.endswith("/hot_cpp"))
    assert entry.after == entry.before < entry.frames  # only what simpleperf named (a sampled "@plt" stub)
    assert any("larger than the limit" in n for n in report.notes), report.notes
    assert not (tmp_path / "cache" / "debuginfod" / rec.program.build_id / "debuginfo").exists()


def test_a_server_that_never_answers_times_out(tmp_path, monkeypatch):  # noqa: ANN001
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path / "cache"))
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accept connections and say nothing
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        q, report = symbolize(_one_frame("ffeeddccbbaa99887766554433221100ffeeddcc"), _only(url, timeout=1.0))
        assert time.monotonic() - started < 15
        assert any("timed out" in n for n in report.notes), report.notes
        assert report.mappings[0].after == 0
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        silent.close()
