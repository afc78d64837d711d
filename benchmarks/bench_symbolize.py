"""Symbolization speed: a 100k-location profile against a ~100 MB debug file.

Generates (once, cached in ``$POLYPROF_BENCH_DIR``, default
``/tmp/polyprof-bench-symbolize``) a C++ program whose template-heavy
translation units give a ~100 MB ``objcopy --only-keep-debug`` file, and a
pprof profile with 100,000 distinct code addresses in it. Then measures,
in one run:

- polyprof with llvm-symbolizer (cold result cache), the target being < 5 s;
- the same again in a new process: the result cache answers (no
  llvm-symbolizer, no DWARF; names are demangled again);
- the peer: bare llvm-symbolizer over the same addresses, as pprof and
  Perfetto drive it (one process, all addresses piped), and the ratio;
- the pure-Python DWARF reader on a sample of the addresses spread over the
  file (so it decodes every compile unit), then the per-address rate on
  more addresses; its full time is extrapolated and labelled so;
- peak memory of polyprof and of its llvm-symbolizer processes together, and
  of the bare peer (resident sizes sampled from /proc).

    python benchmarks/bench_symbolize.py [--repeat N] [--python-sample N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TUS = 16
FUNCS_PER_TU = 40
LOCATIONS = 100_000


def _tu(i: int) -> str:
    lines = ["#include <map>", "#include <vector>", "#include <string>", "#include <algorithm>", f"namespace tu{i} {{",
             "template <typename T> struct Box { T v{}; std::map<int, T> m;",
             "  T get(int k) { auto it = m.find(k); return it == m.end() ? v : it->second; } };"]
    for j in range(FUNCS_PER_TU):
        lines.append(f"struct S{j} {{ int a{{{j}}}; double b{{}}; std::string s; }};")
        lines.append(f"__attribute__((noinline)) int f{j}(int x) {{ Box<S{j}> b; b.m[x] = S{j}{{}}; "
                     f"std::vector<S{j}> v(x % 7 + 1); std::sort(v.begin(), v.end(), "
                     f"[](const S{j}& l, const S{j}& r) {{ return l.a < r.a; }}); return b.get(x).a + (int)v.size(); }}")
    lines.append("}")
    lines.append(f"int tu{i}_entry(int x) {{ return " + " + ".join(f"tu{i}::f{j}(x)" for j in range(FUNCS_PER_TU))
                 + "; }")
    return "\n".join(lines) + "\n"


def build(root: Path) -> tuple[Path, Path]:
    """(stripped binary, debug file), generated and compiled once."""
    exe, debug = root / f"big{TUS}", root / f"big{TUS}.debug"
    if exe.exists() and debug.exists():
        return exe, debug
    root.mkdir(parents=True, exist_ok=True)
    sources = []
    for i in range(TUS):
        path = root / f"tu{i}.cpp"
        if not path.exists() or path.read_text() != _tu(i):
            path.write_text(_tu(i))
        sources.append(path)
    main = root / "main.cpp"
    main.write_text("".join(f"int tu{i}_entry(int);\n" for i in range(TUS))
                    + "int main(int argc, char**) { return " + " + ".join(f"tu{i}_entry(argc)" for i in range(TUS))
                    + "; }\n")
    print(f"compiling {TUS} template-heavy translation units (once; a few minutes)...", file=sys.stderr)

    def compile_one(src: Path) -> Path:
        obj = src.with_suffix(".o")
        if not obj.exists() or obj.stat().st_size == 0 or obj.stat().st_mtime < src.stat().st_mtime:
            subprocess.run(["g++", "-O1", "-g", "-c", str(src), "-o", str(obj)], check=True)
        return obj

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        objects = list(pool.map(compile_one, [*sources, main]))
    full = root / f"big{TUS}.full"
    subprocess.run(["g++", "-o", str(full), *map(str, objects)], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(full), str(debug)], check=True)
    subprocess.run(["strip", "-o", str(exe), str(full)], check=True)
    return exe, debug


def addresses(debug: Path, n: int) -> list[int]:
    """``n`` distinct code addresses inside the program's functions (a fixed seed)."""
    from polyprof.symbolize.elf import ElfFile

    syms = ElfFile(str(debug)).symbols
    spans = [(int(s), int(z)) for s, z in zip(syms.start, syms.size) if z > 4]
    pool = sorted({a for s, z in spans for a in range(s, s + z, 2)})
    random.Random(13).shuffle(pool)
    return sorted(pool[:n])


def profile(exe: Path, addrs: list[int], out: Path) -> None:
    import polyprof
    from polyprof.model.builder import ProfileBuilder
    from polyprof.symbolize.elf import ElfFile

    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, str(exe), ElfFile(str(exe)).build_id)
    locs = [b.location(m, a) for a in addrs]
    for i in range(0, len(locs), 10):  # stacks of 10 frames, every location used once
        b.add_sample(b.stack(locs[i:i + 10]), [1])
    polyprof.write(b.finish(), out)


def _pure_python(debug: Path, first: list[int], then: list[int]) -> tuple[float, float, float, int]:
    """The pure-Python DWARF reader in a child process of its own: (seconds for ``first``, seconds
    for ``then`` afterwards, peak MB, compile units decoded).

    Its cost is mostly per compile unit (pyelftools decodes a unit's DIEs and
    line table whole, once), then per address: ``first`` is spread over the
    whole file so it pays for every unit; ``then`` shows the per-address rate
    once units are decoded.
    """
    code = ("import resource, sys, time\nfrom polyprof.symbolize.dwarf import DwarfReader\n"
            "a, b = (([int(x) for x in part.split()]) for part in sys.stdin.read().split('|'))\n"
            "t = time.perf_counter(); r = DwarfReader(sys.argv[1])\n"
            "for x in a: r.lookup(x)\n"
            "t1 = time.perf_counter()\n"
            "for x in b: r.lookup(x)\n"
            "t2 = time.perf_counter()\n"
            "print(t1 - t, t2 - t1, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(r._units))\n")
    done = subprocess.run(["nice", sys.executable, "-c", code, str(debug)],
                          input=" ".join(map(str, first)) + "|" + " ".join(map(str, then)),
                          capture_output=True, text=True, check=True)
    t_first, t_then, peak, units = done.stdout.split()
    return float(t_first), float(t_then), float(peak), int(units)


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) / 1024 for line in fh if line.startswith("VmRSS:")), 0.0)
    except OSError:
        return 0.0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                kids = []
            out.extend(kids)
            todo.extend(kids)
    return out


def _run_sampled(cmd: list[str], **kw) -> tuple[subprocess.CompletedProcess, float, float, float]:
    """``cmd`` run to the end, with the peak resident memory (MB, sampled every 20 ms) of the
    process itself and of all its descendants together (the llvm-symbolizer processes), and the
    CPU seconds (user + system) of all of them: a measure the machine's load does not inflate."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=kw.get("env"))
    peaks = [0.0, 0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peaks[0] = max(peaks[0], _rss_mb(proc.pid))
            peaks[1] = max(peaks[1], sum(_rss_mb(k) for k in _descendants(proc.pid)))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate(kw.get("input"))
    done.set()
    sampler.join()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime  # with its waited-for children
    return subprocess.CompletedProcess(cmd, 0, out, err), peaks[0], peaks[1], cpu


def _symbolize_run(pprof: Path, debug: Path, cache: str) -> dict:
    """One ``symbolize`` of the profile in a fresh process (as a user's second command would be:
    no name or file memo left in memory), timed around the call; with peak memory of the
    process and of its llvm-symbolizer children together."""
    code = ("import json, os, sys, time\nimport polyprof\n"
            "from polyprof.formats.options import ReadOptions\nfrom polyprof.symbolize import Sources, symbolize\n"
            "raw = polyprof.read(sys.argv[1], options=ReadOptions(symbolize=False))\n"
            "src = Sources(paths=(sys.argv[2],), engine='llvm', use_env=False, system_dirs=())\n"
            "t = time.perf_counter(); p, r = symbolize(raw, src); s = time.perf_counter() - t\n"
            "print(json.dumps({'seconds': s, 'named': r.symbolized, 'frames': r.frames, 'hits': r.cache_hits,\n"
            "  'lines': len(p.lines)}))\n")
    env = {**os.environ, "POLYPROF_CACHE_DIR": cache}
    done, own, children, cpu = _run_sampled([sys.executable, "-c", code, str(pprof), str(debug.parent)], env=env)
    return {**json.loads(done.stdout), "mb": own, "child_mb": children, "cpu": cpu}


def timed(fn):
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python-sample", type=int, default=100,
                    help="addresses for the pure-Python timing (0: skip it; it takes many minutes)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds of cold, cache hit and peer runs")
    args = ap.parse_args()
    llvm = shutil.which("llvm-symbolizer")
    if llvm is None or shutil.which("g++") is None:
        print("needs g++ and llvm-symbolizer (bash .ci/run installs them)", file=sys.stderr)
        return 1
    root = Path(os.environ.get("POLYPROF_BENCH_DIR", "/tmp/polyprof-bench-symbolize"))
    exe, debug = build(root)
    addrs = addresses(debug, LOCATIONS)
    pprof = root / "profile.pb.gz"
    profile(exe, addrs, pprof)
    print(f"debug file: {debug.stat().st_size / 1e6:.0f} MB; profile: {len(addrs)} locations")

    from polyprof.symbolize.llvm import _default_jobs

    request = "".join(f"{a:#x}\n" for a in addrs)
    colds, warms, peers = [], [], []
    for _ in range(args.repeat):  # interleaved, so a burst of load on the shared machine hits all three
        with tempfile.TemporaryDirectory() as cache:
            colds.append(_symbolize_run(pprof, debug, cache))
            warms.append(_symbolize_run(pprof, debug, cache))
        seconds, (_, peer_mb, _, peer_cpu) = timed(lambda: _run_sampled(
            [llvm, "--no-demangle", "-i", "--functions=linkage", f"--obj={debug}"], input=request))
        peers.append({"seconds": seconds, "mb": peer_mb, "cpu": peer_cpu})
    assert all(c["named"] == w["named"] and w["hits"] >= len(addrs) * 0.99 for c, w in zip(colds, warms))
    cold, warm, peer = (min(runs, key=lambda r: r["seconds"]) for runs in (colds, warms, peers))

    def middle(runs: list[dict], key: str = "seconds") -> float:
        return statistics.median(r[key] for r in runs)

    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs; "
          f"llvm-symbolizer processes: {_default_jobs()}); best and median of {args.repeat} interleaved runs")
    print(f"polyprof + llvm-symbolizer, cold cache:   {cold['seconds']:6.2f} s best, {middle(colds):6.2f} s median  "
          f"({cold['named']} of {cold['frames']} frames named, {cold['lines']} lines)")
    print(f"polyprof, result cache hit (new process): {warm['seconds']:6.2f} s best, {middle(warms):6.2f} s median  "
          f"({warm['hits']} answers from the cache)")
    print(f"bare llvm-symbolizer (peer, 1 process):   {peer['seconds']:6.2f} s best, {middle(peers):6.2f} s median")
    print(f"  -> polyprof cold/peer = {cold['seconds'] / peer['seconds']:.2f}x best, "
          f"{middle(colds) / middle(peers):.2f}x median; cache hit/peer = {warm['seconds'] / peer['seconds']:.2f}x")
    print(f"CPU seconds (user+system, every process; polyprof's include Python start-up and reading the "
          f"profile), median: polyprof cold {middle(colds, 'cpu'):.2f}, cache hit {middle(warms, 'cpu'):.2f}, "
          f"peer {middle(peers, 'cpu'):.2f}")
    if args.python_sample:
        spread = addrs[::max(1, len(addrs) // args.python_sample)]
        later = [a for a in addrs[len(addrs) // (2 * len(spread))::max(1, len(addrs) // len(spread))]
                 if a not in set(spread)]
        t_first, t_then, py_mb, units = _pure_python(debug, spread, later)
        whole = t_first + t_then / max(1, len(later)) * (len(addrs) - len(spread))
        print(f"pure-Python DWARF reader (niced): {t_first:.1f} s for {len(spread)} addresses spread over the file "
              f"({units} compile units decoded), then {1000 * t_then / max(1, len(later)):.1f} ms per address "
              f"({len(later)} more) -> {whole:.0f} s for all {len(addrs)} (extrapolated); peak memory "
              f"{py_mb:.0f} MB")
    print(f"peak memory (sampled): polyprof {cold['mb']:.0f} MB, its llvm-symbolizer processes together "
          f"{cold['child_mb']:.0f} MB; bare peer {peer['mb']:.0f} MB")
    print(f"target < 5 s with llvm-symbolizer: {'met' if cold['seconds'] < 5 else 'NOT met'}; "
          f"memory < 1 GB: {'met' if max(cold['mb'], cold['child_mb']) < 1024 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
