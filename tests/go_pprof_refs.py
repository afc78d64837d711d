"""Stored ``go tool pprof`` references for every profile in ../shared/peer-data.

    python tests/go_pprof_refs.py            # refresh tests/references/go_pprof (needs Debian golang-go)
    python tests/go_pprof_refs.py --check    # compare the stored references with a live run
    python tests/go_pprof_refs.py --flags    # refresh only tests/references/go_pprof_flags

For every peer file that ``go tool pprof -raw`` reads (pprof protobufs and
pprof's legacy formats in google__pprof/profile/testdata) this stores,
under
``tests/references/go_pprof/<peer path>/``:

- ``raw.txt`` — ``-raw``;
- ``<type>.top.txt``, ``.tree.txt``, ``.traces.txt``, ``.tags.txt``,
  ``.peek.txt`` — ``-top``, ``-tree``, ``-traces``, ``-tags`` and ``-peek
  REGEX`` for every sample type, with pprof's *default* node/edge fractions
  and node counts (no flag but ``-sample_index`` for the other types; the
  peek regex is the first row of the top report, see :func:`peek_regex`);
- ``<type>.dot`` — ``-dot`` for the default sample type;
- ``error.txt`` when go refuses the file (its message);

and under ``tests/references/go_pprof_flags/`` one report per entry of
:data:`FLAG_CASES` (pprof's flags: fractions, units, sample-type shortcuts,
``-mean``, tag options, ``-base``...).

References over 200 kB are stored gzip-compressed (``.txt.gz``; read them
with ``zcat``); over 1 MB, only as a digest (``.sha256``: SHA-256, size,
line count and the first lines), which still checks every byte. Go runs with TZ=UTC and an empty binary search path, so the
output does not depend on the binaries of this machine.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFS = HERE / "references" / "go_pprof"
PEER = Path(os.environ.get("POLYPROF_PEER_DATA", HERE.parents[0].parent / "shared" / "peer-data"))
REPORTS = ("top", "tree", "traces", "tags", "peek")
_BIG = 200_000
_HUGE = 1_000_000
_HEAD_LINES = 40
# renderings of go tool pprof itself, not profiles
_SKIP_DIRS = ("generated/go_tool_pprof",)


def go_available() -> bool:
    return shutil.which("go") is not None


class Go:
    """Runs ``go tool pprof`` in a scratch HOME (no binaries to find, UTC times)."""

    def __init__(self) -> None:
        self.home = tempfile.mkdtemp(prefix="polyprof-go-")
        self.env = {**os.environ, "TZ": "UTC", "HOME": self.home, "PPROF_TMPDIR": self.home,
                    "PPROF_BINARY_PATH": self.home}

    def run(self, args: list[str], path: str | Path, timeout: int = 300) -> tuple[int, bytes, bytes]:
        done = subprocess.run(["go", "tool", "pprof", *args, str(path)], capture_output=True,
                              env=self.env, timeout=timeout)
        return done.returncode, done.stdout, done.stderr


def sample_types(raw: str) -> list[tuple[str, bool]]:
    """(type, is default) of every sample type, from ``-raw`` text."""
    lines = raw.splitlines()
    header = lines[lines.index("Samples:") + 1] if "Samples:" in lines else ""
    out = []
    for part in header.split():
        vtype = part.split("/", 1)[0]
        out.append((vtype, part.endswith("[dflt]")))
    if out and not any(d for _, d in out):
        out[-1] = (out[-1][0], True)  # pprof's default: the last type
    return out


def type_key(types: list[tuple[str, bool]], i: int) -> str:
    """The file-name part and ``-sample_index`` value of type ``i`` (its name, or its
    number when two types share the name)."""
    name = types[i][0]
    return name if [t for t, _ in types].count(name) == 1 and name else str(i)


def peek_regex(top_text: str) -> str | None:
    """``^name$`` of the first row of a top report (None when it has no rows)."""
    lines = top_text.splitlines()
    for i, line in enumerate(lines):
        if line.split() == ["flat", "flat%", "sum%", "cum", "cum%"] and i + 1 < len(lines):
            row = lines[i + 1]
            name = row.split(None, 5)[5] if len(row.split(None, 5)) == 6 else ""
            name = re.sub(r" \((partial-)?inline\)$", "", name)
            return "^" + re.escape(name) + "$" if name else None
    return None


def candidates(peer: Path = PEER) -> Iterator[Path]:
    for path in sorted(peer.rglob("*")):
        rel = path.relative_to(peer).as_posix()
        if path.is_file() and not rel.startswith(_SKIP_DIRS) and not rel.endswith((".string", ".md", ".txt")):
            yield path


def ref_dir(path: Path, peer: Path = PEER) -> Path:
    return REFS / path.relative_to(peer)


def _variants(path: Path) -> tuple[Path, Path, Path]:
    return path, path.with_name(path.name + ".gz"), path.with_name(path.name + ".sha256")


def digest(data: bytes) -> bytes:
    """The ``.sha256`` form of a reference too large to store."""
    head = b"\n".join(data.split(b"\n")[:_HEAD_LINES])
    lines = data.count(b"\n")
    return (f"sha256 {hashlib.sha256(data).hexdigest()}\nbytes {len(data)}\nlines {lines}\n"
            "first lines:\n").encode() + head + b"\n"


def read_ref(path: Path) -> tuple[bytes, bool] | None:
    """A stored reference and whether it is a digest (compare with :func:`digest`), None when absent."""
    plain, gz, sha = _variants(path)
    if plain.exists():
        return plain.read_bytes(), False
    if gz.exists():
        return gzip.decompress(gz.read_bytes()), False
    return (sha.read_bytes(), True) if sha.exists() else None


def same(ref: tuple[bytes, bool] | None, data: bytes) -> bool:
    """Whether ``data`` is what reference ``ref`` (from :func:`read_ref`) holds."""
    return ref is not None and ref[0] == (digest(data) if ref[1] else data)


def _store(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    plain, gz, sha = _variants(path)
    for old in (plain, gz, sha):
        old.unlink(missing_ok=True)
    if len(data) > _HUGE:
        sha.write_bytes(digest(data))
    elif len(data) > _BIG:
        gz.write_bytes(gzip.compress(data, 9, mtime=0))
    else:
        plain.write_bytes(data)


def generate(path: Path, go: Go) -> dict[str, bytes] | None:
    """Every reference of one peer file (file name -> bytes), None if go does not read it."""
    code, raw, err = go.run(["-raw"], path)
    if code:
        return None if b"unrecognized profile format" in err or b"parsing profile" in err else \
            {"error.txt": err}
    out = {"raw.txt": raw}
    types = sample_types(raw.decode("utf-8", errors="replace"))
    for i, (_, default) in enumerate(types):
        key = type_key(types, i)
        flags = [] if default else [f"-sample_index={key}"]
        for report in REPORTS:
            if report == "peek":
                rx = peek_regex(out[f"{key}.top.txt"].decode("utf-8", errors="replace"))
                if rx is None:
                    continue
                args = ["-peek", rx]
            else:
                args = [f"-{report}"]
            code, text, err = go.run([*flags, *args], path)
            out[f"{key}.{report}.txt"] = text if code == 0 else b"error: " + err
        if default:
            code, text, err = go.run(["-dot"], path)
            out[f"{key}.dot"] = text if code == 0 else b"error: " + err
    return out


# ---------------------------------------------------------------- flags

FLAGS = HERE / "references" / "go_pprof_flags"
HEAP = "generated/go_runtime_pprof/heap.pb.gz"
ALLOCS = "generated/go_runtime_pprof/allocs.pb.gz"
CPU = "generated/go_runtime_pprof/cpu.pb.gz"
BLOCK = "generated/go_runtime_pprof/block.pb.gz"
SAMPLE = "google__pprof/internal/report/testdata/sample.cpu"
LABELS = "grafana__pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"
CPP = "google__pprof/internal/driver/testdata/cppbench.cpu_no_samples_type"

#: (reference name, report, peer file, pprof flags): polyprof gets the same flags, in
#: pprof's spelling, after "polyprof REPORT FILE" (``-base=`` values are peer paths;
#: ``+PATH`` is one more input file, after FILE).
FLAG_CASES: list[tuple[str, str, str, list[str]]] = [
    ("top-nodecount", "top", SAMPLE, ["-nodecount=5"]),
    ("top-no-trim", "top", SAMPLE, ["-nodefraction=0", "-edgefraction=0"]),
    ("top-nodefraction", "top", LABELS, ["-nodefraction=0.05"]),
    ("top-cum", "top", SAMPLE, ["-cum"]),
    ("top-unit-ms", "top", SAMPLE, ["-unit=ms"]),
    ("top-unit-auto", "top", HEAP, ["-unit=auto", "-alloc_space"]),
    ("top-mean", "top", BLOCK, ["-mean"]),
    ("top-total-delay", "top", BLOCK, ["-total_delay"]),
    ("top-contentions", "top", BLOCK, ["-contentions"]),
    ("top-mean-delay", "top", BLOCK, ["-mean_delay"]),
    ("top-inuse-space", "top", HEAP, ["-inuse_space"]),
    ("top-inuse-objects", "top", HEAP, ["-inuse_objects"]),
    ("top-alloc-space", "top", HEAP, ["-alloc_space"]),
    ("top-alloc-objects", "top", HEAP, ["-alloc_objects"]),
    ("top-sample-index-number", "top", CPU, ["-sample_index=0"]),
    ("top-relative", "top", HEAP, ["-relative_percentages", "-focus=main"]),
    ("top-lines", "top", SAMPLE, ["-lines"]),
    ("top-files", "top", SAMPLE, ["-files"]),
    ("top-addresses-noinlines", "top", SAMPLE, ["-addresses", "-noinlines"]),
    ("top-symbolize-none", "top", CPP, ["-symbolize=none"]),
    ("top-tagfocus", "top", LABELS, ["-tagfocus=function=fast"]),
    ("top-tagroot", "top", LABELS, ["-tagroot=function", "-nodecount=8"]),
    ("top-tagleaf", "top", LABELS, ["-tagleaf=function,foo", "-nodecount=8"]),
    ("top-base", "top", HEAP, [f"-base={ALLOCS}"]),
    ("top-diff-base", "top", HEAP, [f"-diff_base={ALLOCS}", "-alloc_space"]),
    ("tree-cum-nodecount", "tree", SAMPLE, ["-cum", "-nodecount=10"]),
    ("tree-edgefraction", "tree", HEAP, ["-edgefraction=0.05", "-alloc_space"]),
    ("tree-tagroot", "tree", LABELS, ["-tagroot=function"]),
    ("tree-base", "tree", HEAP, [f"-base={ALLOCS}"]),
    ("traces-mean", "traces", BLOCK, ["-mean"]),
    ("traces-unit", "traces", HEAP, ["-unit=kB"]),
    ("traces-taghide", "traces", LABELS, ["-taghide=profile_id"]),
    ("traces-tagleaf", "traces", LABELS, ["-tagleaf=function"]),
    ("tags-alloc-space", "tags", HEAP, ["-alloc_space"]),
    ("tags-tagshow", "tags", LABELS, ["-tagshow=func"]),
    ("tags-focus", "tags", LABELS, ["-focus=fast"]),
    ("raw-focus", "raw", SAMPLE, ["-focus=mapassign"]),
    ("raw-symbolize-none", "raw", CPP, ["-symbolize=none"]),
    ("dot-nodecount", "dot", SAMPLE, ["-nodecount=10"]),
    ("dot-focus", "dot", HEAP, ["-focus=main", "-alloc_space"]),
    ("dot-edgefraction", "dot", LABELS, ["-edgefraction=0.01", "-nodefraction=0.001"]),
    ("dot-tagroot", "dot", LABELS, ["-tagroot=function"]),
    ("dot-base", "dot", HEAP, [f"-base={ALLOCS}"]),
    ("dot-lines", "dot", SAMPLE, ["-lines"]),
    ("peek-cum", "peek", SAMPLE, ["-cum", r"-peek=runtime\.map"]),
    ("top-two-files", "top", HEAP, [f"+{ALLOCS}"]),
    ("traces-two-files", "traces", CPU, [f"+{CPU}", "-nodecount=3"]),
    ("raw-two-files", "raw", HEAP, [f"+{ALLOCS}"]),
]


def peer_flags(flags: list[str], peer: Path = PEER) -> list[str]:
    """``flags`` with peer-relative ``-base``/``-diff_base`` values and ``+PATH`` inputs made
    absolute (inputs without the ``+``)."""
    out = [re.sub(r"^(-(?:diff_)?base=)(.*)$", lambda m: m.group(1) + str(peer / m.group(2)), f) for f in flags]
    return [str(peer / f[1:]) if f.startswith("+") else f for f in out]


def go_flag_run(go: Go, report: str, rel: str, flags: list[str]) -> tuple[int, bytes, bytes]:
    """``go tool pprof -REPORT FLAGS FILE [MORE FILES]`` for a FLAG_CASES entry."""
    options = [f for f in peer_flags([f for f in flags if not f.startswith("+")])]
    inputs = [str(PEER / rel)] + peer_flags([f for f in flags if f.startswith("+")])
    args = options if report == "peek" else [f"-{report}", *options]
    return go.run([*args, *inputs[:-1]], inputs[-1])


def generate_flags(go: Go) -> dict[str, bytes]:
    out = {}
    for name, report, rel, flags in FLAG_CASES:
        code, text, err = go_flag_run(go, report, rel, flags)
        out[f"{name}.txt"] = text if code == 0 else b"error: " + err
    return out


def main(argv: list[str]) -> int:
    if not go_available():
        print("go is not installed (Debian: apt-get install golang-go)", file=sys.stderr)
        return 1
    if not PEER.is_dir():
        print(f"peer data not found at {PEER}", file=sys.stderr)
        return 1
    check = "--check" in argv
    go, differ, count = Go(), [], 0
    for path in ([] if "--flags" in argv else candidates()):
        refs = generate(path, go)
        if refs is None:
            continue
        count += 1
        for name, data in refs.items():
            target = ref_dir(path) / name
            if check:
                if not same(read_ref(target), data):
                    differ.append(str(target.relative_to(HERE)))
            else:
                _store(target, data)
        print(f"{'checked' if check else 'wrote'} {path.relative_to(PEER)} ({len(refs)} references)",
              file=sys.stderr)
    for name, data in generate_flags(go).items():
        if check:
            if not same(read_ref(FLAGS / name), data):
                differ.append(f"references/go_pprof_flags/{name}")
        else:
            _store(FLAGS / name, data)
    if check and differ:
        print("differ from a live run:\n  " + "\n  ".join(differ), file=sys.stderr)
        return 1
    print(f"{count} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
