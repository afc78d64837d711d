"""Benchmark: samples as a table (`Profile.to_arrow`) against `top` on the same profile.

The issue's bar: on the large allocs profile of bench_pprof.py (~900k
samples, `bytes` labels), `profile.to_arrow()` takes at most 1.5x the time
of `polyprof.top(profile)`. Both run on a profile already read, each in a
fresh process with the modules already imported (so `to_arrow` pays for
decoding the deferred labels, as a user's first call does, but not for
importing pyarrow); best of --repeat. Also shown: the stack as frame
names (`stacks="names"`), `to_pandas()`, and `from_arrow` of the names table.

    python benchmarks/bench_table.py [--repeat 3] [--profile large]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_pprof import PROFILES, build  # noqa: E402 - the same generated profiles

OPERATIONS = {
    "top": "polyprof.top(p)",
    "to_arrow": "p.to_arrow()",
    "to_arrow names": "p.to_arrow(stacks='names')",
    "to_pandas": "p.to_pandas()",
    "from_arrow": "polyprof.from_arrow(t)",
}
PREPARE = {"from_arrow": "t = p.to_arrow(stacks='names')"}

# Modules are imported before the clock starts (the same for every operation):
# a session imports pyarrow once; the deferred labels are not decoded.
DRIVER = """
import sys, time, polyprof
import polyprof.analysis.top, polyprof.model.table, polyprof.model.table_in, pyarrow, pandas
p = polyprof.read(sys.argv[1])
{prepare}
start = time.perf_counter()
{operation}
print(time.perf_counter() - start)
"""


def measure(path: Path, name: str, repeat: int) -> float:
    code = DRIVER.format(prepare=PREPARE.get(name, ""), operation=OPERATIONS[name])
    runs = [float(subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(repeat)]
    return min(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="large")
    args = ap.parse_args()
    path = build(args.profile)
    times = {name: measure(path, name, args.repeat) for name in OPERATIONS}
    print(f"{args.profile}: {path.name}, best of {args.repeat}, each in a fresh process")
    for name, seconds in times.items():
        print(f"  {name:<15} {seconds:7.2f} s   {seconds / times['top']:5.2f}x top")
    ratio = times["to_arrow"] / times["top"]
    verdict = "meets" if ratio <= 1.5 else "MISSES"
    print(f"to_arrow / top = {ratio:.2f} ({verdict} the 1.5x bar)")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
