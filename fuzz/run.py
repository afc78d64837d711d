"""Run a fuzz target with atheris (libFuzzer), or with a plain-Python mutator where
atheris is not installed; or replay the regression corpus.

    python fuzz/run.py TARGET [--seconds 20] [--timeout 2] [--rss-mb 1024] [--engine auto|atheris|python]
    python fuzz/run.py TARGET --replay        # every input in fuzz/regressions/TARGET
    python fuzz/run.py --list

A finding is an exception outside polyprof's error tree, an input slower than
``--timeout`` seconds, or one that takes the process past ``--rss-mb`` MB.
The plain-Python engine and the replay count CPU seconds (a loaded machine
does not make an input "slow"); libFuzzer's own timeout is wall-clock time,
so it gets ``--wall-timeout`` (5 s by default) instead.
Findings are written to fuzz/.work/TARGET/findings/; once understood and
fixed, copy each into fuzz/regressions/TARGET/ (the test suite replays that
directory). The exit status is 0 when nothing was found.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import resource
import signal
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WORK = HERE / ".work"
REGRESSIONS = HERE / "regressions"


class SlowInput(Exception):
    """An input ran past the time limit (raised from a timer signal)."""


def _dirs(target: str, work: Path = WORK) -> tuple[Path, Path, Path, Path]:
    base = work / target
    dirs = (base / "corpus", base / "seeds", base / "findings", REGRESSIONS / target)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


def _write_seeds(target: str, seed_dir: Path) -> None:
    from seeds import seeds

    for name, data in seeds(target).items():
        (seed_dir / name).write_bytes(data)


def _save(findings: Path, kind: str, data: bytes) -> Path:
    path = findings / f"{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- one input, guarded

def _guarded(target: str, data: bytes, timeout: float) -> str | None:
    """Run one input; the kind of finding ("crash", "slow", "oom") or None."""
    from targets import run

    signal.setitimer(signal.ITIMER_PROF, timeout)  # CPU time: a loaded machine does not make it fail
    try:
        run(target, data)
    except SlowInput:
        return "slow"
    except MemoryError:
        return "oom"
    except Exception:  # noqa: BLE001 - this is what fuzzing looks for
        traceback.print_exc()
        return "crash"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    return None


def _limit_memory(rss_mb: int) -> None:
    """Cap the address space at what the process uses now plus ``rss_mb`` MB (a MemoryError past it)."""
    with open("/proc/self/statm") as fh:
        vm_pages = int(fh.read().split()[0])
    cap = vm_pages * resource.getpagesize() + (rss_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _rss_now_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _on_alarm(signum: int, frame: object) -> None:
    raise SlowInput()


# ---------------------------------------------------------------- engines

def _mutate(rng: random.Random, data: bytes, pool: list[bytes], max_len: int) -> bytes:
    """One random edit of ``data``: bit flips, interesting varints, cuts, copies, splices."""
    b = bytearray(data or b"\x00")
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(8)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[min(i, len(b) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x1F, 0x8B))
        elif op == 2:
            value = rng.choice((0, 1, 127, 128, 2**31 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, rng.randrange(2**20)))
            v = bytearray()
            while True:
                v.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
                value >>= 7
                if not value:
                    break
            b[i:i] = v
        elif op == 3 and b:
            del b[i:i + rng.randrange(1, 16)]
        elif op == 4 and b:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 64)] * rng.choice((1, 2, 16))
        elif op == 5 and pool:
            other = rng.choice(pool)
            j = rng.randrange(len(other) + 1)
            b = b[:i] + bytearray(other[j:j + rng.randrange(1, 256)]) + b[i:]
        elif op == 6:
            b = b[:i]
        else:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return bytes(b[:max_len])


def _warm_up(target: str, seed_dir: Path) -> None:
    """Run every seed once, untimed: the first valid input imports the lazily loaded
    writers, which must not count against the time limit of an input."""
    from targets import run

    for path in sorted(seed_dir.iterdir()):
        try:
            run(target, path.read_bytes())
        except Exception:  # noqa: BLE001 - findings among the seeds are found again by the engine
            pass


def _python_engine(target: str, args: argparse.Namespace, dirs: tuple[Path, ...]) -> int:
    corpus, seed_dir, findings, regressions = dirs
    _warm_up(target, seed_dir)
    pool = [p.read_bytes() for d in (seed_dir, regressions, corpus) for p in sorted(d.iterdir()) if p.is_file()]
    rng = random.Random(args.seed)
    _limit_memory(args.rss_mb)
    signal.signal(signal.SIGPROF, _on_alarm)
    end = time.monotonic() + args.seconds
    runs = found = 0
    while time.monotonic() < end:
        data = _mutate(rng, rng.choice(pool) if pool else b"", pool, args.max_len)
        kind = _guarded(target, data, args.timeout)
        runs += 1
        if kind:
            found += 1
            print(f"fuzz: {target}: {kind}: {_save(findings, kind, data)}", file=sys.stderr)
            if not args.keep_going:
                break
    print(f"fuzz: {target}: python engine: {runs} executions, {found} finding(s)", file=sys.stderr)
    return 1 if found else 0


def _atheris_engine(target: str, args: argparse.Namespace, dirs: tuple[Path, ...]) -> int:
    import atheris

    # Everything of polyprof must be imported inside this block to be instrumented
    # (coverage feedback), seeds included: building them imports the writers.
    with atheris.instrument_imports(include=["polyprof"]):
        _write_seeds(target, dirs[1])
        import targets
        from polyprof.formats import registry

        for spec in registry.available():  # readers are imported lazily: load them to instrument them
            spec.load()
        import polyprof.analysis.top  # noqa: F401
        import polyprof.symbolize.breakpad  # noqa: F401
        _warm_up(target, dirs[1])
    corpus, seed_dir, findings, regressions = dirs
    argv = [sys.argv[0], str(corpus), str(seed_dir), str(regressions),
            f"-max_total_time={int(args.seconds)}", f"-timeout={max(1, round(args.wall_timeout))}",
            f"-rss_limit_mb={args.rss_mb + _rss_now_mb()}", f"-max_len={args.max_len}", f"-artifact_prefix={findings}/",
            f"-seed={args.seed}", "-print_final_stats=1"]

    def one_input(data: bytes) -> None:
        try:
            targets.run(target, data)
        except Exception:
            # saved here: this libFuzzer (no sanitizer runtime) does not always write the crash unit
            print(f"fuzz: {target}: crash: {_save(findings, 'crash', data)}", file=sys.stderr)
            raise

    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0


def _keep_going(target: str, args: argparse.Namespace) -> int:
    """libFuzzer stops at its first finding (and its -fork mode cannot re-run this
    script): run it again, on the corpus grown so far, until the time is used.

    libFuzzer's timeouts are wall-clock time and its memory limit is the whole
    process's: on a loaded machine, or after hours of corpus growth, an innocent
    input can trip them. Each timeout/oom finding is replayed alone, by CPU time
    and with the input's own memory limit; one that passes moves to
    ``findings/unconfirmed/`` and does not count."""
    import subprocess

    findings = _dirs(target, args.work)[2]
    end, runs, found = time.monotonic() + args.seconds, 0, 0
    while (left := end - time.monotonic()) > 5:
        before = set(findings.iterdir())
        cmd = [sys.executable, __file__, target, "--engine", "atheris", "--seconds", str(int(left)),
               "--seed", str(args.seed + runs), "--work", str(args.work), "--timeout", str(args.timeout),
               "--wall-timeout", str(args.wall_timeout), "--rss-mb", str(args.rss_mb), "--max-len", str(args.max_len)]
        runs += 1
        if subprocess.run(cmd).returncode != 0:
            found += sum(_confirmed(target, path, args) for path in sorted(set(findings.iterdir()) - before)
                         if path.is_file())
    print(f"fuzz: {target}: {runs} libFuzzer run(s), {found} confirmed finding(s)", file=sys.stderr)
    return 1 if found else 0


def _confirmed(target: str, path: Path, args: argparse.Namespace) -> bool:
    """Whether the finding at ``path`` fails again when replayed alone (crashes always count)."""
    import subprocess

    if not path.name.startswith(("timeout-", "oom-", "slow-unit-")):
        return True
    again = subprocess.run([sys.executable, __file__, target, "--replay", str(path), "--timeout", str(args.timeout),
                            "--rss-mb", str(args.rss_mb), "--work", str(args.work)])
    if again.returncode == 0:
        (path.parent / "unconfirmed").mkdir(exist_ok=True)
        path.rename(path.parent / "unconfirmed" / path.name)
        print(f"fuzz: {target}: {path.name} is within the limits when replayed alone (load, or libFuzzer's "
              "own memory): moved to unconfirmed/", file=sys.stderr)
        return False
    return True


def _replay(target: str, args: argparse.Namespace) -> int:
    """Every regression input of ``target`` (or the files named) must pass, within the limits."""
    seed_dir = _dirs(target, args.work)[1]
    _write_seeds(target, seed_dir)
    _warm_up(target, seed_dir)
    _limit_memory(args.rss_mb)
    signal.signal(signal.SIGPROF, _on_alarm)
    bad = 0
    paths = args.files or sorted(p for p in (REGRESSIONS / target).glob("*") if p.is_file())
    for path in paths:
        t0 = time.perf_counter()
        kind = _guarded(target, path.read_bytes(), args.timeout)
        if kind:
            bad += 1
            print(f"fuzz: {target}: {path.name}: {kind} ({time.perf_counter() - t0:.2f} s)", file=sys.stderr)
    print(f"fuzz: {target}: replayed {len(paths)} input(s), {bad} failed", file=sys.stderr)
    return 1 if bad else 0


def main() -> int:
    from targets import TARGETS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="?", choices=sorted(TARGETS))
    ap.add_argument("files", nargs="*", type=Path, help="with --replay: these inputs instead of the regressions")
    ap.add_argument("--list", action="store_true", help="print the target names")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("FUZZ_TIMEOUT", 2)),
                    help="seconds one input may take (default 2, or FUZZ_TIMEOUT)")
    ap.add_argument("--wall-timeout", type=float, default=float(os.environ.get("FUZZ_WALL_TIMEOUT", 5)),
                    help="wall-clock seconds per input under atheris (libFuzzer measures no CPU time; default 5)")
    ap.add_argument("--rss-mb", type=int, default=500, help="memory one input may take, in MB, on top of "
                    "what the fuzzing process itself uses (default 500)")
    ap.add_argument("--max-len", type=int, default=1 << 16)
    ap.add_argument("--engine", choices=("auto", "atheris", "python"), default="auto")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "1")))
    ap.add_argument("--keep-going", action="store_true", help="collect findings instead of stopping at the first")
    ap.add_argument("--replay", action="store_true", help="replay fuzz/regressions/TARGET instead of fuzzing")
    ap.add_argument("--work", type=Path, default=WORK, help="where corpus, seeds and findings go "
                    "(default fuzz/.work; the test suite's smoke run uses its own, so a corpus grown "
                    "by long campaigns does not lengthen it)")
    args = ap.parse_intermixed_args()
    if args.list:
        print("\n".join(sorted(TARGETS)))
        return 0
    if not args.target:
        ap.error("name a target (--list shows them)")
    if args.replay:
        return _replay(args.target, args)
    dirs = _dirs(args.target, args.work)
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "python"
    if engine == "atheris" and args.keep_going:
        return _keep_going(args.target, args)
    if engine == "atheris":
        return _atheris_engine(args.target, args, dirs)
    _write_seeds(args.target, dirs[1])
    return _python_engine(args.target, args, dirs)


if __name__ == "__main__":
    sys.exit(main())
