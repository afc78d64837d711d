"""Symbolization speed: a 100k-location profile against a ~100 MB debug file.

Generates (once, cached in ``$POLYPROF_BENCH_DIR``, default
``/tmp/polyprof-bench-symbolize``) a C++ program whose template-heavy
translation units give a ~100 MB ``objcopy --only-keep-debug`` file, and a
pprof profile with 100,000 distinct code addresses in it. Then measures,
in one run:

- polyprof with llvm-symbolizer (cold result cache), the target being < 5 s;
- the same again: the result cache answers (no llvm-symbolizer, no DWARF);
- the peer: bare llvm-symbolizer over the same addresses, as pprof and
  Perfetto drive it (one process, all addresses piped), and the ratio;
- the pure-Python DWARF reader on a sample of the addresses (its full time
  is extrapolated and labelled so; ``--python-all`` measures all of them);
- peak memory (this process and llvm-symbolizer, from getrusage).

    python benchmarks/bench_symbolize.py [--python-sample N] [--python-all]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
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


def _pure_python(debug: Path, sample: list[int]) -> tuple[float, float]:
    """(seconds, peak MB) of the pure-Python reader on ``sample``, in a child process of its own."""
    code = ("import resource, sys, time\nfrom polyprof.symbolize.elf import ElfFile\n"
            "from polyprof.symbolize.resolve import Module, Resolver\n"
            "d = ElfFile(sys.argv[1]); a = [int(x) for x in sys.stdin.read().split()]\n"
            "t = time.perf_counter(); Resolver('python').resolve(Module(d.build_id, debug=d), a)\n"
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n")
    done = subprocess.run([sys.executable, "-c", code, str(debug)], input=" ".join(map(str, sample)),
                          capture_output=True, text=True, check=True)
    seconds, peak = done.stdout.split()
    return float(seconds), float(peak)


def timed(fn):  # noqa: ANN001, ANN201
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python-sample", type=int, default=2000, help="addresses for the pure-Python timing")
    ap.add_argument("--python-all", action="store_true", help="time the pure-Python reader on every address")
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

    import polyprof
    from polyprof.formats.options import ReadOptions
    from polyprof.symbolize import Sources, symbolize

    raw = polyprof.read(pprof, options=ReadOptions(symbolize=False))
    with tempfile.TemporaryDirectory() as cache:
        os.environ["POLYPROF_CACHE_DIR"] = cache
        sources = Sources(paths=(str(debug.parent),), engine="llvm", use_env=False, system_dirs=())
        cold, (p1, r1) = timed(lambda: symbolize(raw, sources))
        warm, (p2, r2) = timed(lambda: symbolize(raw, sources))
    assert r1.symbolized == r2.symbolized and r2.cache_hits >= len(addrs) * 0.99, (r1.symbolized, r2.cache_hits)
    request = "".join(f"{a:#x}\n" for a in addrs)
    peer, _ = timed(lambda: subprocess.run([llvm, "--no-demangle", "-i", f"--obj={debug}"], input=request,
                                           capture_output=True, text=True, check=True))
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    sample = addrs if args.python_all else addrs[::max(1, len(addrs) // args.python_sample)]
    py, py_mb = _pure_python(debug, sample)
    print(f"polyprof + llvm-symbolizer, cold cache: {cold:6.2f} s  ({r1.symbolized} of {r1.frames} frames named)")
    print(f"polyprof, result cache hit:           {warm:6.2f} s  ({r2.cache_hits} answers from the cache)")
    print(f"bare llvm-symbolizer (peer):           {peer:6.2f} s  -> polyprof/peer = {cold / peer:.2f}x")
    label = "measured" if args.python_all else f"{len(sample)} addresses measured, extrapolated"
    print(f"pure-Python DWARF reader:              {py * len(addrs) / len(sample):6.1f} s  ({label}; "
          f"{py:.1f} s for {len(sample)}; peak memory {py_mb:.0f} MB)")
    print(f"peak memory with llvm-symbolizer: polyprof {own:.0f} MB, llvm-symbolizer {child:.0f} MB")
    print(f"target < 5 s with llvm-symbolizer: {'met' if cold < 5 else 'NOT met'}; "
          f"memory < 1 GB: {'met' if max(own, child) < 1024 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
