"""Benchmark: `polyprof top` on the same profile in every format, against the pprof input.

The pprof files of bench_pprof.py (real Go allocs profiles, built once into
benchmarks/out/) and pprof's own ``large.cpu`` (a real Go CPU profile, from
``../shared/peer-data`` when present) are converted by polyprof into Perfetto, simpleperf and
Chromium (cached next to them); then `polyprof top` runs on each file in its
own process, best of --repeat (wall time, peak RSS from os.wait4), and the
table gives each format's time as a multiple of the pprof input's time and
its read rate in MB/s of input. Targets (issue #16): at most 1.5x the pprof
time, and at least 50 MB/s for simpleperf and Chromium.

    python benchmarks/bench_formats.py [--repeat 3] [--only large]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_pprof import best, build, byte_compile  # noqa: E402

FORMATS = ("perfetto", "simpleperf", "chromium")


PEER = Path(os.environ.get("POLYPROF_PEER_DATA", HERE.parent.parent / "shared" / "peer-data"))
LARGE_CPU = PEER / "google__pprof" / "internal" / "proftest" / "testdata" / "large.cpu"


def source(name: str) -> Path | None:
    if name != "cpu":
        return build(name)
    return LARGE_CPU if LARGE_CPU.exists() else None


def converted(src: Path, fmt: str) -> Path:
    """``src`` written as ``fmt`` by polyprof (made once, in benchmarks/out/)."""
    out = HERE / "out" / (src.name.replace(".pb.gz", "") + f".{fmt}")
    if not out.exists():
        print(f"converting {src.name} to {fmt}...", file=sys.stderr)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "polyprof", "convert", str(src), "--to", fmt, "-o", str(out)],
                       check=True, stderr=subprocess.DEVNULL)
        print(f"  {out.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("cpu", "small", "large", "worst"), action="append")
    args = ap.parse_args()
    polyprof = [sys.executable, "-m", "polyprof", "top"]
    byte_compile()
    print(f"{'profile':<8} {'format':<11} {'MB':>7} {'top s':>7} {'vs pprof':>8} {'MB/s':>7} {'peak MB':>8}")
    for name in args.only or ["cpu", "small", "large", "worst"]:
        src = source(name)
        if src is None:
            print(f"{name:<8} skipped: {LARGE_CPU} not found (set POLYPROF_PEER_DATA)")
            continue
        base = best(polyprof + [str(src)], args.repeat)
        rows = [("pprof", src, base)]
        for fmt in FORMATS:
            path = converted(src, fmt)
            rows.append((fmt, path, best(polyprof + [str(path)], args.repeat)))
        for fmt, path, (seconds, rss) in rows:
            mb = os.path.getsize(path) / 1e6
            print(f"{name:<8} {fmt:<11} {mb:7.1f} {seconds:7.2f} {seconds / base[0]:7.2f}x "
                  f"{mb / seconds:7.1f} {rss / 2**20:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
