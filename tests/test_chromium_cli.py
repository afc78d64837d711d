"""End to end: info/top/convert/dump/symbolize on Chromium files, and go tool pprof on our output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_chromium_support import SYMBOLS, fixture_bytes

import polyprof
from polyprof.model.dump import dump


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, fixture in (("log", "uma_log.textproto"), ("win", "windows.sampled.textproto")):
        path = tmp_path / f"{name}.uma"
        path.write_bytes(fixture_bytes(fixture))
        out[name] = path
    return out


def test_info_shows_process_thread_trigger_and_symbolized_share(cli, files) -> None:  # noqa: ANN001
    r = cli("info", files["win"], "--symbols", SYMBOLS)
    assert r.code == 0, r.err
    assert "  process: GPU_PROCESS" in r.out  # info is words, not JSON (issue #15)
    assert "  trigger_event: JANKY_TASK" in r.out
    assert "    share: 100.0%" in r.out
    assert "Symbolized:   2/2 frames 100.0% (before: 0)  chrome.dll.pdb" in r.out


def test_info_of_a_mixed_log_lists_profiles_or_merges(cli, files) -> None:  # noqa: ANN001
    r = cli("info", files["log"])
    assert r.code == 0 and "holds 3 profiles" in r.out
    r = cli("top", files["log"])  # an analysis needs one profile: the error says how
    assert r.code == 6 and "different kinds" in r.err and "--merge" in r.err
    r = cli("info", files["log"], "--merge")
    assert r.code == 0 and "merged_profiles: 3" in r.out


def test_top_with_symbols(cli, files) -> None:  # noqa: ANN001
    r = cli("top", files["win"], "--symbols", SYMBOLS)
    assert r.code == 0, r.err
    assert "logging::CheckError::~CheckError()" in r.out and "ChromeMain" in r.out


def test_dump_matches_the_library(cli, files) -> None:  # noqa: ANN001
    r = cli("dump", files["win"])
    assert r.code == 0
    assert r.out == dump(polyprof.read(files["win"]))


def test_metadata_names_flag(cli, files, tmp_path) -> None:  # noqa: ANN001
    names = tmp_path / "names.txt"
    names.write_text("Back\nForward\n")
    r = cli("dump", files["log"], "--merge", "--metadata-names", names)
    assert r.code == 0, r.err
    assert "Back=1" in r.out and "Forward[7]=-3" in r.out


def test_symbolize_verb_writes_a_symbolized_profile(cli, files, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "win.sym.uma"
    r = cli("symbolize", files["win"], "--symbols", SYMBOLS, "-o", out)
    assert r.code == 0, r.err
    assert "symbolized 2 of 2 address frames (100.0%; 0 had names before)" in r.err
    assert "found    chrome.dll.pdb (16B2A4281DED442E9A36FCE8CBD2972610): 0 -> 2 of 2 frames; Breakpad symbols" in r.err
    assert "inlined frames written as separate frames" in r.err
    p = polyprof.read(out)
    names = {p.function_name(int(f)) for f in p.lines.function}
    assert names == {"logging::CheckError::~CheckError()", "_purecall", "ChromeMain"}


def test_symbolize_verb_to_pprof_keeps_everything(cli, files, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "win.pb.gz"
    r = cli("symbolize", files["win"], "--symbols", SYMBOLS, "-o", out, "--format", "json")
    assert r.code == 0, r.err
    p = polyprof.read(out)
    assert "ChromeMain" in {p.function_name(int(f)) for f in p.lines.function}


def test_symbolize_verb_without_symbols_says_what_to_provide(cli, files, tmp_path) -> None:  # noqa: ANN001
    r = cli("symbolize", files["win"], "-o", tmp_path / "x.uma", "--offline")
    assert r.code == 0, r.err
    assert ("missing  chrome.dll.pdb (16B2A4281DED442E9A36FCE8CBD2972610): 0 -> 0 of 2 frames; provide one of: "
            "chrome.dll.pdb, chrome.dll.pdb/16B2A4281DED442E9A36FCE8CBD29726A/chrome.dll.sym (Breakpad)") in r.err


def test_convert_to_chromium_and_back(cli, files, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "again.cspb"
    r = cli("convert", files["win"], "-o", out)
    assert r.code == 0, r.err
    assert dump(polyprof.read(out)) == dump(polyprof.read(files["win"]))


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (Debian golang-go provides 'go tool pprof')")
    return go


def _pprof(go: str, *args: str, cwd: Path) -> str:
    env = {"HOME": str(cwd), "GOCACHE": str(cwd / "gocache"), "PATH": "/usr/bin:/bin",
           "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    run = subprocess.run([go, "tool", "pprof", "-symbolize=none", *args], capture_output=True, text=True,
                         cwd=cwd, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_go_tool_pprof_reads_a_converted_uma_log(cli, files, tmp_path) -> None:  # noqa: ANN001
    go = _go()
    out = tmp_path / "uma.pb.gz"
    r = cli("convert", files["log"], "--merge", "--symbols", SYMBOLS, "-o", out)
    assert r.code == 0, r.err
    raw = _pprof(go, "-raw", str(out), cwd=tmp_path)
    assert "samples/count wall/nanoseconds[dflt] inuse_objects/count inuse_space/bytes" in raw
    assert "process:[RENDERER_PROCESS] thread:[COMPOSITOR_THREAD]" in raw
    assert "base::subtle::RefCountedThreadSafeBase::AddRefImpl() const ../../base/memory/ref_counted.h:40" in raw
    top = _pprof(go, "-top", "-sample_index=wall", str(out), cwd=tmp_path)
    assert "Total samples = 600ms" in top  # 6 CPU samples x 100 ms
    chrome_main = next(line for line in top.splitlines() if line.rstrip().endswith(" ChromeMain"))
    assert chrome_main.split()[3] == "300ms"  # cum: 3 of the browser's 4 samples pass through it
    heap = _pprof(go, "-top", "-sample_index=inuse_space", str(out), cwd=tmp_path)
    assert "68kB total" in heap or "68.00kB total" in heap
