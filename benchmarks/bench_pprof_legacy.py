"""Benchmark: `polyprof top` against `go tool pprof -top` on pprof's legacy formats.

Writes (once, cached in benchmarks/out/) deterministic synthetic legacy
profiles shaped like real ones (5,000 functions, stacks 5-40 deep):

- cpu: a gperftools binary CPU profile, 64-bit little-endian, 200k samples
  (~40 MB) with its /proc/self/maps section;
- heap: a heap_v2 text profile, 100k sample lines (~18 MB), with maps;
- small-cpu / small-heap: the same shapes with 2k samples.

Each command runs in its own process (see bench_pprof.py for how time and
peak RSS are taken); best of --repeat runs, ratios printed.

    python benchmarks/bench_pprof_legacy.py [--repeat 3] [--only cpu]
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_pprof import OUT, best  # noqa: E402 - one way to time a run

FUNCTIONS = [0x400000 + i * 0x40 for i in range(5000)]
MAPS = "00400000-00600000 r-xp 00000000 08:01 1 /usr/bin/server\n"
PROFILES = {"small-cpu": ("cpu", 2_000), "small-heap": ("heap", 2_000), "cpu": ("cpu", 200_000),
            "heap": ("heap", 100_000)}


def _cpu(n: int, rnd: random.Random) -> bytes:
    words = [0, 3, 0, 10000, 0]
    for _ in range(n):
        depth = rnd.randint(5, 40)
        words += [rnd.randint(1, 5), depth, *(rnd.choice(FUNCTIONS) for _ in range(depth))]
    words += [0, 1, 0]
    return struct.pack(f"<{len(words)}Q", *words) + MAPS.encode()


def _heap(n: int, rnd: random.Random) -> bytes:
    lines = ["heap profile: 1: 1 [ 1: 1] @ heap_v2/524288"]
    for _ in range(n):
        count = rnd.randint(1, 9)
        stack = " ".join(hex(rnd.choice(FUNCTIONS)) for _ in range(rnd.randint(5, 30)))
        lines.append(f"{count}: {count * rnd.randint(8, 4096)} [{count}: {count * 4096}] @ {stack}")
    return ("\n".join(lines) + "\nMAPPED_LIBRARIES:\n" + MAPS).encode()


def build(name: str) -> Path:
    kind, n = PROFILES[name]
    path = OUT / f"legacy_{name}.{kind}"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        path.write_bytes((_cpu if kind == "cpu" else _heap)(n, random.Random(3)))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=sorted(PROFILES), action="append")
    args = ap.parse_args()
    if shutil.which("go") is None:
        print("go not found: apt-get install golang-go", file=sys.stderr)
        return 2
    import polyprof as package

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(package.__file__).parent)], check=True)
    polyprof = [sys.executable, "-m", "polyprof"]
    print(f"{'profile':<10} {'MB':>6} {'polyprof s':>10} {'go s':>8} {'speed-up':>8} {'polyprof MB':>11} "
          f"{'go MB':>8} {'memory':>7}")
    for name in args.only or list(PROFILES):
        path = build(name)
        ours = best(polyprof + ["top", str(path)], args.repeat)
        theirs = best(["go", "tool", "pprof", "-top", str(path)], args.repeat)
        print(f"{name:<10} {path.stat().st_size / 1e6:6.1f} {ours[0]:10.2f} {theirs[0]:8.2f} "
              f"{theirs[0] / ours[0]:7.1f}x {ours[1] / 2**20:11.0f} {theirs[1] / 2**20:8.0f} "
              f"{ours[1] / theirs[1]:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
