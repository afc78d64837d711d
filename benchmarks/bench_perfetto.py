"""Perfetto reader benchmark: read rate (MB/s) and peak memory on a large traced_perf trace.

The trace is made by our own writer from a synthetic CPU profile (8 threads
on 8 cpus, a few thousand distinct stacks used with a skewed frequency, as
a real recording), at least 200 MB unless ``--samples`` says otherwise, and
kept for the next run. Each read runs in a fresh process so its peak RSS is
its own; it is read twice: keeping every sample, and with
``ReadOptions.extra["aggregate"]`` (samples summed by stack, thread, cpu and
labels, times dropped), whose memory follows the distinct samples.

    .venv/bin/python benchmarks/bench_perfetto.py [--samples N] [--trace PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

DEFAULT_SAMPLES = 6_500_000


def make_profile(n: int, seed: int = 7):  # noqa: ANN201
    import numpy as np

    from polyprof.model.builder import ProfileBuilder
    from polyprof.model.profile import Label

    rng = np.random.default_rng(seed)
    b = ProfileBuilder("perfetto")
    b.set_sample_types([("samples", "count"), ("cpu-clock", "nanoseconds")])
    b.meta.extras["profile_labels"] = {"kind": "perf", "event": "cpu-clock", "pid": 4242, "process_name": "bench"}
    b.meta.extras["perf_event"] = {"timebase": "cpu-clock", "unit": "nanoseconds", "frequency": 1000}
    libs = [b.mapping(0x7000_0000 + k * 0x100_0000, 0x7000_0000 + (k + 1) * 0x100_0000, 0,
                      f"/system/lib64/lib{k}.so", f"{k:02x}" * 20) for k in range(8)]
    locs = [b.location(libs[i % 8], 0x1000 + 16 * i, [(b.function(f"ns::Class{i % 97}::method_{i}"), 0, 0)])
            for i in range(3000)]
    stacks = np.array([b.stack([locs[j] for j in rng.integers(0, 3000, rng.integers(8, 40))]) for _ in range(4000)])
    weights = 1.0 / np.arange(1, stacks.size + 1) ** 1.1
    pick = rng.choice(stacks.size, n, p=weights / weights.sum())
    tid = 4242 + pick % 8
    user, kernel = b.labelset([Label("cpu_mode", str="user")]), b.labelset([Label("cpu_mode", str="kernel")])
    labelset = np.where(pick % 5 == 0, kernel, user)
    values = np.stack([np.ones(n, np.int64), rng.integers(990_000, 1_010_000, n)], axis=1)
    b.add_samples_bulk(stacks[pick], values, labelset, time=10**12 + np.cumsum(rng.integers(50_000, 200_000, n)),
                       pid=np.full(n, 4242), tid=tid, cpu=tid % 8)
    return b.finish()


def generate(path: str, n: int) -> None:
    from polyprof.formats.options import WriteOptions
    from polyprof.formats.perfetto import write

    t0 = time.perf_counter()
    profile = make_profile(n)
    with open(path + ".tmp", "wb") as out:
        report = write(profile, out, WriteOptions())
    os.replace(path + ".tmp", path)
    print(f"generated {path}: {os.path.getsize(path) / 1e6:.1f} MB, {n} samples in "
          f"{time.perf_counter() - t0:.1f} s (loss report: {report.lines() or 'none'})")


def measure(path: str, aggregate: bool) -> None:
    """Child process: read once and print one JSON line."""
    from polyprof.formats.options import ReadOptions
    from polyprof.formats.perfetto import read
    from polyprof.formats.source import Source

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    profiles = read(Source.of(path), ReadOptions(extra={"aggregate": aggregate}))
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "rows": sum(len(p.samples) for p in profiles),
                      "samples": int(sum(p.totals()[0] for p in profiles)),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "rss_after_imports_mb": base / 1024}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=DEFAULT_SAMPLES)
    ap.add_argument("--trace", default=os.path.join(tempfile.gettempdir(), "polyprof-bench-perf.pftrace"))
    ap.add_argument("--measure", choices=("all", "aggregate"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.trace, args.measure == "aggregate")
        return 0
    if not os.path.exists(args.trace):
        generate(args.trace, args.samples)
    size = os.path.getsize(args.trace)
    print(f"trace: {args.trace} ({size / 1e6:.1f} MB)")
    for mode in ("all", "aggregate"):
        out = subprocess.run([sys.executable, __file__, "--trace", args.trace, "--measure", mode],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"read ({'every sample' if mode == 'all' else 'aggregated'}): {r['seconds']:.1f} s, "
              f"{size / 1e6 / r['seconds']:.1f} MB/s, {r['samples']} samples in {r['rows']} rows, "
              f"peak RSS {r['peak_rss_mb']:.0f} MB ({r['rss_after_imports_mb']:.0f} MB after imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
