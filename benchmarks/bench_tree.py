"""Benchmark: the tree kernels behind ``polyprof serve``'s filter change, numpy against compiled.

On the large pprof of bench_pprof.py (~900k samples; a 3M-node flame graph)
it does what the server does when a filter changes — apply the focus
filter, build the complete flame graph, index it, take the sandwich of the
hottest function (``sandwich``; and of the root's first child, on nearly
every stack: ``sandwich*``) — once
with ``POLYPROF_KERNELS=numpy`` and once with ``=compiled`` (numba twins of
the tree kernels, :mod:`polyprof.model._tree_compiled`), each in its own
process, best of ``--repeat`` (wall and CPU seconds, so a loaded machine
shows), and prints the ratio. Both runs' flame graphs must be identical
(a digest of every column is compared).

    .venv/bin/python benchmarks/bench_tree.py [--repeat 3] [--focus REGEX]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_RUN = r"""
import hashlib, json, sys, time
import numpy as np
from polyprof import api
from polyprof.analysis import filters
from polyprof.analysis.flame import flame_tree
from polyprof.analysis.flameview import FlameIndex
from polyprof.analysis.options import Options
from polyprof.analysis.sandwich import sandwich

path, focus, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
profile = api.read(path)
best: dict = {}
for _ in range(repeat):
    o = Options(focus=focus)
    steps = {}
    t, c = time.perf_counter(), time.process_time()
    kept = filters.apply(profile, o)
    steps["filter"] = (time.perf_counter() - t, time.process_time() - c)
    t, c = time.perf_counter(), time.process_time()
    graph = flame_tree(kept, o, max_nodes=0, min_fraction=0)
    index = FlameIndex(graph)
    steps["flame"] = (time.perf_counter() - t, time.process_time() - c)
    hot = graph.name_table[int(np.argmax(np.bincount(graph.name_ids, weights=graph.self)))]
    for step, name in (("sandwich", hot), ("sandwich*", graph.names[1])):
        t, c = time.perf_counter(), time.process_time()
        sandwich(index, name, min_fraction=1 / 4000)  # the page's resolution (serve's default)
        steps[step] = (time.perf_counter() - t, time.process_time() - c)
    for k, v in steps.items():
        best[k] = min(best.get(k, v), v)
digest = hashlib.sha1("\n".join(graph.names).encode())
for col in (graph.parent, graph.self, graph.total, graph.start, graph.width, graph.depth):
    digest.update(np.ascontiguousarray(col).tobytes())
print(json.dumps({"steps": best, "nodes": len(graph), "digest": digest.hexdigest()}))
"""


def run(mode: str, path: Path, focus: str, repeat: int) -> dict:
    env = dict(os.environ, POLYPROF_KERNELS=mode)
    out = subprocess.run([sys.executable, "-c", _RUN, str(path), focus, str(repeat)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--focus", default=r"main\.", help="the focus filter applied (default: %(default)s)")
    args = ap.parse_args()
    from bench_pprof import build

    path = build("large")
    load = os.getloadavg()[0]
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB), focus={args.focus!r}, best of {args.repeat}, "
          f"load average {load:.2f} on {os.cpu_count()} CPUs")
    got = {mode: run(mode, path, args.focus, args.repeat) for mode in ("numpy", "compiled")}
    if got["numpy"]["digest"] != got["compiled"]["digest"]:
        raise SystemExit("the compiled kernels gave a different flame graph")
    print(f"  flame graph: {got['numpy']['nodes']:,} nodes, identical in both runs")
    print(f"  {'step':<10} {'numpy s':>9} {'(cpu)':>7} {'compiled s':>11} {'(cpu)':>7} {'ratio':>6}")
    for step in got["numpy"]["steps"]:
        (nw, nc), (cw, cc) = got["numpy"]["steps"][step], got["compiled"]["steps"][step]
        print(f"  {step:<10} {nw:9.2f} {nc:7.2f} {cw:11.2f} {cc:7.2f} {nw / cw:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
