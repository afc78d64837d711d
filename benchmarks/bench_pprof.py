"""Benchmark: `polyprof top` against `go tool pprof -top` on the same pprof files.

Builds (once, cached in benchmarks/out/) real Go allocs profiles with
runtime.MemProfileRate = 1 from benchmarks/gen/allocs_main.go:

- large: >= 500k samples, >= 40 MB uncompressed, `bytes` labels, real-like
  call graph (shared upper stacks, allocations diverging near the leaves);
- worst: the same size with stacks diverging at the root (every level random);
- small: ~100 KB gzip (the issue's "small profile");
- tiny: ~30 KB, where start-up dominates (shown for honesty, no target).

Each command runs in its own process; wall time and peak RSS come from
os.wait4. Best of --repeat runs. Prints a table with the ratios and the
time of `polyprof --help`. Needs `go` (Debian golang-go).

polyprof's modules are byte-compiled first, as `pip install` does: an
editable install under PYTHONDONTWRITEBYTECODE=1 would otherwise recompile
them on every run (about 40 ms), which no installed user pays.

    python benchmarks/bench_pprof.py [--repeat 3] [--only large]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
GEN = HERE / "gen" / "allocs_main.go"

# name -> (allocations, depth, hot paths, random levels)
PROFILES = {
    "tiny": (2500, 12, 200, 4),
    "small": (9000, 12, 200, 4),
    "large": (900000, 26, 20000, 4),
    "worst": (700000, 18, 0, 18),
}


def build(name: str) -> Path:
    path = OUT / f"allocs_{name}.pb.gz"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        n, depth, hot, rnd = PROFILES[name]
        print(f"generating {path.name} with go run ({n} allocations)...", file=sys.stderr)
        subprocess.run(["go", "run", str(GEN), str(path), str(n), str(depth), str(hot), str(rnd)], check=True)
    return path


def measure(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of one run of ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return wall, usage.ru_maxrss * 1024


def best(argv: list[str], repeat: int) -> tuple[float, int]:
    runs = [measure(argv) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def byte_compile() -> None:
    """Byte-compile polyprof's modules, as ``pip install`` does: under PYTHONDONTWRITEBYTECODE=1
    an editable install recompiles them in every timed process (about 40 ms for pprof, 0.1 s
    for the Perfetto reader's modules), which no installed user pays. Every benchmark calls it."""
    import polyprof as package

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(package.__file__).parent)], check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=sorted(PROFILES), action="append")
    args = ap.parse_args()
    if shutil.which("go") is None:
        print("go not found: apt-get install golang-go", file=sys.stderr)
        return 2
    polyprof = [sys.executable, "-m", "polyprof"]
    byte_compile()
    help_time, _ = best(polyprof + ["--help"], max(args.repeat, 5))
    print(f"polyprof --help: {help_time:.3f} s")
    print(f"{'profile':<8} {'MB raw':>7} {'samples':>8} {'polyprof s':>10} {'go s':>8} {'speed-up':>8} "
          f"{'polyprof MB':>11} {'go MB':>8} {'memory':>7}")
    for name in args.only or ["tiny", "small", "large", "worst"]:
        path = build(name)
        raw_mb = len(gzip.decompress(path.read_bytes())) / 1e6
        samples = subprocess.run(polyprof + ["info", str(path), "--format", "json"], capture_output=True,
                                 text=True, check=True).stdout
        n = __import__("json").loads(samples)["samples"]
        ours = best(polyprof + ["top", str(path)], args.repeat)
        theirs = best(["go", "tool", "pprof", "-top", str(path)], args.repeat)
        print(f"{name:<8} {raw_mb:7.1f} {n:8d} {ours[0]:10.2f} {theirs[0]:8.2f} {theirs[0] / ours[0]:7.1f}x "
              f"{ours[1] / 2**20:11.0f} {theirs[1] / 2**20:8.0f} {ours[1] / theirs[1]:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
