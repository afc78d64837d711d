"""Time and peak memory of each hostile case of ``cases.py``, through the CLI.

Each (case, verb) runs ``polyprof`` in a fresh process under an address-space
cap (so a regression cannot take the machine down) and prints wall time,
CPU time (user + system: what the machine's load does not inflate), peak
RSS, the exit code and the first line of stderr::

    python fuzz/measure.py [--cap-mb 4096] [--timeout 120] [NAME-SUBSTRING ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES  # noqa: E402

_OUTPUTS = {"convert": "out.pb.gz", "folded": "out.folded", "speedscope": "out.speedscope.json",
            "perfetto": "out.pftrace", "simpleperf": "out.trace", "chromium": "out.callstack",
            "firefox": "out.firefox.json"}


def command(verb: str, path: str, workdir: str) -> list[str]:
    """The polyprof command line that runs ``verb`` on ``path``."""
    base = [sys.executable, "-m", "polyprof"]
    if verb in _OUTPUTS:
        return base + ["convert", path, "-o", os.path.join(workdir, _OUTPUTS[verb])]
    return base + [verb, path]


def run(argv: list[str], cap_mb: int, timeout: float) -> tuple[float, float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS MB, exit code, first stderr line) of one run."""
    def limit() -> None:
        cap = cap_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limit)
    try:
        _, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        code = -9
        err = f"timeout after {timeout:.0f} s".encode() + b"\n" + err
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the helper runs one child: this is it
    rss = usage.ru_maxrss / 1024
    cpu = usage.ru_utime + usage.ru_stime
    lines = err.decode("utf-8", "replace").strip().splitlines() or [""]
    return wall, cpu, rss, code, (lines[-1] if code == -9 else lines[0])[:160]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--cap-mb", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, (build, verbs) in CASES.items():
            if args.names and not any(n in name for n in args.names):
                continue
            path = os.path.join(tmp, "input")
            data = build()
            Path(path).write_bytes(data)
            for verb in verbs:
                # ru_maxrss of RUSAGE_CHILDREN is a maximum over all children: measure in a helper.
                helper = [sys.executable, __file__, "--one", verb, path, str(args.cap_mb), str(args.timeout)]
                out = subprocess.run(helper, capture_output=True, text=True).stdout.strip()
                print(f"{name} [{len(data)} B] {verb}: {out}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        verb, path, cap, timeout = sys.argv[2:6]
        with tempfile.TemporaryDirectory() as work:
            wall, cpu, rss, code, line = run(command(verb, path, work), int(cap), float(timeout))
        print(f"{wall:.2f} s wall, {cpu:.2f} s CPU, {rss:.0f} MB, exit {code}: {line}")
        sys.exit(0)
    sys.exit(main())
