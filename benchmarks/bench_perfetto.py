"""Perfetto reader benchmark: read rate (MB/s) and memory on large traced_perf traces.

Two traces, made by our own writer from synthetic CPU profiles (8 threads on
8 cpus) and kept for the next run: "common", at least 200 MB of samples over
a few thousand distinct stacks used with a skewed frequency, as a real
recording; and "distinct", with more than 100k distinct callstacks (each
used at least once), where interning and stack resolution dominate. Each
read runs in a fresh process so its peak RSS is its own; each trace is read
keeping every sample (memory per sample: the peak RSS (VmHWM) over the
samples, the target's definition, and beside it the peak above a process
baseline measured in the same run: python, numpy, polyprof, numba and the
kernels, from a read of a 1000-sample trace) and with ``ReadOptions.extra["aggregate"]`` (samples summed by
stack, thread, cpu and labels, times dropped), whose memory follows the
distinct samples: the aggregated read of the common trace written twice
over shows it stays bounded as the trace grows, and a full-detail read of
the same program recorded twice as long gives what each added sample costs
(the slope of the peak, which the fixed baseline does not enter); the trace
written twice over is also read keeping every sample, its samples out of
time order as a real recording's are (each cpu's buffer in turn). Targets (issue #16): 50 MB/s on both, at
most 60 bytes per sample. Each read also prints its CPU time and the rate
per CPU second (on a loaded machine the wall time is not the reader's),
and the run prints the load average.

    .venv/bin/python benchmarks/bench_perfetto.py [--only common|distinct]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

#: name -> (samples, distinct stacks, every stack used at least once)
TRACES = {"common": (6_500_000, 4000, False), "distinct": (1_500_000, 120_000, True)}


def make_profile(n: int, seed: int = 7, n_stacks: int = 4000, every: bool = False):  # noqa: ANN201
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
    stacks = np.array([b.stack([locs[j] for j in rng.integers(0, 3000, rng.integers(8, 40))])
                       for _ in range(n_stacks)])
    weights = 1.0 / np.arange(1, stacks.size + 1) ** 1.1
    pick = rng.choice(stacks.size, n, p=weights / weights.sum())
    if every:  # every stack sampled at least once
        pick[rng.permutation(n)[:stacks.size]] = np.arange(stacks.size)
    tid = 4242 + pick % 8
    user, kernel = b.labelset([Label("cpu_mode", str="user")]), b.labelset([Label("cpu_mode", str="kernel")])
    labelset = np.where(pick % 5 == 0, kernel, user)
    values = np.stack([np.ones(n, np.int64), rng.integers(990_000, 1_010_000, n)], axis=1)
    b.add_samples_bulk(stacks[pick], values, labelset, time=10**12 + np.cumsum(rng.integers(50_000, 200_000, n)),
                       pid=np.full(n, 4242), tid=tid, cpu=tid % 8)
    return b.finish()


def generate(path: str, n: int, n_stacks: int, every: bool) -> None:
    from polyprof.formats.options import WriteOptions
    from polyprof.formats.perfetto import write

    t0 = time.perf_counter()
    profile = make_profile(n, n_stacks=n_stacks, every=every)
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

    # The RSS now and VmHWM after, not ru_maxrss: that keeps the parent's high-water mark across
    # fork and exec (a run that generated the traces first reported the generator's peak).
    with open("/proc/self/statm") as statm:
        base = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    t0, c0 = time.perf_counter(), time.process_time()
    profiles = read(Source.of(path), ReadOptions(extra={"aggregate": aggregate}))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "rows": sum(len(p.samples) for p in profiles),
                      "samples": int(sum(p.totals()[0] for p in profiles)),
                      "peak_rss_mb": _vm_hwm_kb() / 1024,
                      "rss_after_imports_mb": base / 1024}))


def _vm_hwm_kb() -> int:
    """This process's peak resident size since its exec, in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no procfs: the best there is


def _read(path: str, mode: str, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, __file__, "--trace", path, "--measure", mode],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def _baseline(directory: str) -> float:
    """Peak RSS (MB) of a process that reads a 1000-sample trace with the compiled kernels forced:
    python, numpy, polyprof, numba and the sample-packet kernels loaded, next to no samples."""
    path = os.path.join(directory, "perf_tiny.pftrace")
    if not os.path.exists(path):
        generate(path, 1000, 50, False)
    return _read(path, "all", dict(os.environ, POLYPROF_KERNELS="compiled"))["peak_rss_mb"]


def _doubled(path: str) -> str:
    """The trace written twice over (a longer recording of the same program)."""
    out = path.replace(".pftrace", "-x2.pftrace")
    if not os.path.exists(out):
        with open(out + ".tmp", "wb") as dst:
            for _ in range(2):
                with open(path, "rb") as src:
                    shutil.copyfileobj(src, dst, 16 << 20)
        os.replace(out + ".tmp", out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(TRACES), action="append")
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    ap.add_argument("--trace", help=argparse.SUPPRESS)
    ap.add_argument("--measure", choices=("all", "aggregate"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.trace, args.measure == "aggregate")
        return 0
    os.makedirs(args.dir, exist_ok=True)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_pprof import byte_compile

    byte_compile()
    base = _baseline(args.dir)
    print(f"process baseline (python, numpy, polyprof, numba and its kernels loaded): {base:.0f} MB peak RSS; "
          f"load average {os.getloadavg()[0]:.1f}")
    for name in args.only or sorted(TRACES):
        n, n_stacks, every = TRACES[name]
        path = os.path.join(args.dir, f"perf_{name}.pftrace")
        if not os.path.exists(path):
            generate(path, n, n_stacks, every)
        size = os.path.getsize(path)
        print(f"trace {name}: {size / 1e6:.1f} MB, {n_stacks} distinct stacks")
        for mode in ("all", "aggregate"):
            r = _read(path, mode)
            samples = max(r["samples"], 1)
            per_sample = r["peak_rss_mb"] * 2**20 / samples  # the target's definition: VmHWM / samples
            marginal = (r["peak_rss_mb"] - base) * 2**20 / samples
            print(f"  read ({'every sample' if mode == 'all' else 'aggregated'}): {r['seconds']:.1f} s, "
                  f"{size / 1e6 / r['seconds']:.1f} MB/s (CPU {r['cpu_seconds']:.1f} s: "
                  f"{size / 1e6 / r['cpu_seconds']:.1f} MB/s), {r['samples']} samples in {r['rows']} rows, "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB ({r['rss_after_imports_mb']:.0f} MB after imports"
                  + (f", {per_sample:.0f} bytes/sample; {marginal:.0f} above the baseline)" if mode == "all"
                     else ")")
                  + ("  [targets: >= 50 MB/s" + (", <= 60 bytes/sample]" if mode == "all" else "]")))
        if name == "common":
            r2 = _read(_doubled(path), "aggregate")
            r1 = _read(path, "aggregate")
            print(f"  aggregated, trace written twice over: peak RSS {r2['peak_rss_mb']:.0f} MB vs "
                  f"{r1['peak_rss_mb']:.0f} MB once ({r2['peak_rss_mb'] / r1['peak_rss_mb']:.2f}x for 2x the "
                  f"samples)")
            x2 = _read(_doubled(path), "all")
            print(f"  every sample, the trace written twice over (its second half earlier than the first's end, "
                  f"so every sample is sorted by time): {x2['seconds']:.1f} s, "
                  f"{2 * size / 1e6 / x2['seconds']:.1f} MB/s (CPU {x2['cpu_seconds']:.1f} s), peak RSS "
                  f"{x2['peak_rss_mb']:.0f} MB, {x2['peak_rss_mb'] * 2**20 / max(x2['samples'], 1):.0f} bytes/sample")
            longer = path.replace(".pftrace", "-long.pftrace")
            if not os.path.exists(longer):
                generate(longer, 2 * n, n_stacks, every)
            a2, a1 = _read(longer, "all"), _read(path, "all")
            slope = (a2["peak_rss_mb"] - a1["peak_rss_mb"]) * 2**20 / max(a2["samples"] - a1["samples"], 1)
            print(f"  every sample, the same program recorded twice as long: peak RSS {a2['peak_rss_mb']:.0f} MB "
                  f"vs {a1['peak_rss_mb']:.0f} MB: {slope:.0f} bytes per added sample (the memory that grows "
                  f"with the trace; the peak over the samples above also holds the fixed baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
