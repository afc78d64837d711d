"""Real test programs for symbolization, built once per test session.

C, C++ (-O2, templates, inlining) and Rust (when ``rustc`` is installed)
programs from ``tests/fixtures/symbolize`` are compiled with debug info and
frame pointers; for each, ``bin/NAME`` is the unstripped build,
``debug/NAME.debug`` the ``objcopy --only-keep-debug`` file and
``run/NAME`` the ``strip``ped copy that is run and recorded. Each program
runs for the seconds of its own CPU time it is given, not wall time: a
recording gets about the same samples however loaded the machine is. Recordings are
made with the host simpleperf of the ``perftools`` wheel (test extra):
``plain.trace`` is simpleperf's report of the stripped binary (address
frames), ``self.trace`` the same recording reported with ``--symdir bin``
(simpleperf symbolizing it itself). Everything lives in one temporary
directory removed when the session ends. Tests skip, saying why, when a
compiler, binutils or simpleperf is missing or recording is not allowed.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCES = Path(__file__).resolve().parent / "fixtures" / "symbolize"
_ROOT: Path | None = None
_BUILT: dict[str, Program | str] = {}
_RECORDED: dict[str, Recording | str] = {}


@dataclass
class Program:
    name: str
    bin: Path
    debug: Path
    run: Path
    build_id: str


@dataclass
class Recording:
    program: Program
    plain: Path
    self_symbolized: Path


def root() -> Path:
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="polyprof-native-"))
        atexit.register(shutil.rmtree, _ROOT, True)
    return _ROOT


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed (bash .ci/run installs it)")
    return found


def _compile(name: str, out: Path) -> None:
    src = SOURCES / {"c": "hot.c", "cpp": "hot.cpp", "rust": "hot.rs", "nopie": "hot.c", "lib": "hot.c"}[name]
    if name == "rust":
        cmd = [_tool("rustc"), "-O", "-g", "-C", "force-frame-pointers=yes", "-o", str(out), str(src)]
    else:
        cc = _tool("g++" if name == "cpp" else "gcc")
        cmd = [cc, "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(out), str(src)]
        cmd += {"nopie": ["-no-pie", "-fno-pie"], "lib": ["-shared", "-fPIC"]}.get(name, [])
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)


def _earlier(cache: dict, name: str):  # noqa: ANN001, ANN202
    """What an earlier call made for ``name`` (None if none); skips again if that call skipped."""
    got = cache.get(name)
    if isinstance(got, str):
        pytest.skip(got)
    return got


def program(name: str) -> Program:
    """The program ``name`` (c, cpp, rust, nopie, lib), built once; skips when it cannot be."""
    got = _earlier(_BUILT, name)
    if got is not None:
        return got
    base = root()
    for d in ("bin", "debug", "run"):
        (base / d).mkdir(exist_ok=True)
    exe = "libhot.so" if name == "lib" else f"hot_{name}"
    try:
        _compile(name, base / "bin" / exe)
        subprocess.run([_tool("objcopy"), "--only-keep-debug", str(base / "bin" / exe),
                        str(base / "debug" / f"{exe}.debug")], check=True, capture_output=True, timeout=120)
        subprocess.run([_tool("strip"), "-o", str(base / "run" / exe), str(base / "bin" / exe)],
                       check=True, capture_output=True, timeout=120)
    except subprocess.CalledProcessError as exc:
        _BUILT[name] = f"cannot build {exe}: {exc.stderr.decode(errors='replace')[-300:]}"
        pytest.skip(str(_BUILT[name]))
    from polyprof.symbolize.elf import build_id_of

    got = _BUILT[name] = Program(exe, base / "bin" / exe, base / "debug" / f"{exe}.debug", base / "run" / exe,
                                 build_id_of(str(base / "bin" / exe)))
    return got


def simpleperf() -> Path:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("the perftools wheel ships a host simpleperf for Linux x86-64 only")
    spec = importlib.util.find_spec("perftools")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("perftools wheel not installed (pip install polyprof[test])")
    exe = root() / "simpleperf"
    if not exe.exists():
        found = sorted(Path(list(spec.submodule_search_locations)[0]).glob(
            "bin/AndroidSdk/ndk/*/simpleperf/bin/linux/x86_64/simpleperf"))
        if not found:
            pytest.skip("no linux-x86_64 simpleperf in the perftools wheel")
        shutil.copy(found[-1], exe)  # wheels do not keep the executable bit
        os.chmod(exe, 0o755)
    return exe


def recording(name: str) -> Recording:
    """A simpleperf recording of the stripped ``name`` program (0.4 s of CPU), reported twice."""
    got = _earlier(_RECORDED, name)
    if got is not None:
        return got
    prog = program(name)
    exe = simpleperf()
    out = root() / f"rec_{name}"
    out.mkdir(exist_ok=True)
    data = out / "perf.data"
    r = subprocess.run([str(exe), "record", "-e", "cpu-clock", "-f", "4000", "--call-graph", "fp", "-o", str(data),
                        str(prog.run), "0.4"], capture_output=True, text=True, timeout=120)
    if not data.exists() or "Samples recorded" not in r.stderr:
        _RECORDED[name] = f"simpleperf record does not work here: {r.stderr.strip().splitlines()[-1:]}"
        pytest.skip(str(_RECORDED[name]))
    plain, self_sym = out / "plain.trace", out / "self.trace"
    for target, extra in ((plain, []), (self_sym, ["--symdir", str(prog.bin.parent)])):
        subprocess.run([str(exe), "report-sample", "--show-callchain", "--protobuf", "-i", str(data),
                        "-o", str(target), *extra], check=True, capture_output=True, timeout=120)
    got = _RECORDED[name] = Recording(prog, plain, self_sym)
    return got
