"""``polyprof REPORT FILE`` with no flags prints what ``go tool pprof -REPORT FILE`` prints.

Reports: top, tree, traces, peek, tags (per sample type), raw (per file) and
graph (``-dot``, the default sample type): every node label, edge weight and
attribute, not only the layout-free parts.

For every peer file go reads, every sample type and every report, the CLI's
output must equal the stored reference byte for byte (tests/references/
go_pprof, made by ``python tests/go_pprof_refs.py`` with Debian's go; see
that module). Other sample types are selected with pprof's own spelling
(``-sample_index=TYPE``), the peek regex is the reference's. The live test
at the end re-runs go on a few files to show the references are current.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import go_pprof_refs as refs
from helpers import PEER

REPORTS = ("top", "tree", "traces", "peek", "tags")


def _cases() -> list[tuple[str, str, str, bool]]:
    """(peer path, type key, report, is default type) of every stored reference."""
    out = []
    for raw in sorted(refs.REFS.rglob("raw.txt*")):
        folder = raw.parent
        rel = folder.relative_to(refs.REFS).as_posix()
        text = refs.read_ref(folder / "raw.txt")
        types = refs.sample_types(text[0].decode("utf-8", errors="replace")) if text and not text[1] else []
        if not types:  # a digest: the type names come from the reference file names
            keys = sorted({f.name.split(".")[0] for f in folder.glob("*.top.txt*")})
            types = [(k, (folder / f"{k}.dot").exists()) for k in keys]
        out.append((rel, "", "raw", True))
        for i, (_, default) in enumerate(types):
            key = refs.type_key(types, i)
            out += [(rel, key, report, default) for report in REPORTS
                    if refs.read_ref(folder / f"{key}.{report}.txt") is not None]
            if default and refs.read_ref(folder / f"{key}.dot") is not None:
                out.append((rel, key, "graph", True))
    return out


CASES = _cases()


def _text(data: bytes | str) -> str:
    """pprof prints invalid UTF-8 raw; we decode it with replacement characters."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return re.sub("\ufffd+", "\ufffd", text)


def _argv(rel: str, key: str, report: str, default: bool) -> list[str]:
    path = str(PEER / rel)
    argv = [report, path]
    if report == "peek":
        top = refs.read_ref(refs.REFS / rel / f"{key}.top.txt")
        argv.append(refs.peek_regex(top[0].decode("utf-8", errors="replace")))
    if not default:
        argv.append(f"-sample_index={key}")
    return argv


def test_there_are_references():
    assert len(CASES) >= 450, "expected go tool pprof references for every peer file and sample type"


@pytest.fixture(scope="module")
def read_once():
    """Each peer file is read once for all its reports (the CLI reads through polyprof.read)."""
    import functools

    import polyprof

    original = polyprof.read
    cached = functools.lru_cache(maxsize=4)(lambda path, fmt: original(path, format=fmt))

    def read(src, *, format=None, options=None):  # noqa: A002
        return cached(src, format) if isinstance(src, str) and src.startswith(str(PEER)) else \
            original(src, format=format, options=options)

    polyprof.read = read
    yield
    polyprof.read = original


@pytest.mark.parametrize("case", CASES, ids=["/".join(x for x in c[:3] if x) for c in CASES])
def test_report_equals_go_tool_pprof(peer, cli, read_once, case):
    rel, key, report, default = case
    name = f"{key}.dot" if report == "graph" else f"{key}.{report}.txt" if key else f"{report}.txt"
    ref = refs.read_ref(refs.REFS / rel / name)
    assert ref is not None
    if ref[0].startswith(b"error: "):
        pytest.fail(f"go refused this report; compare the error instead: {ref[0][:200]!r}")
    done = cli(*_argv(rel, key, report, default))
    assert done.code == 0, done.err
    if ref[1]:  # a digest of a large reference
        assert refs.same(ref, done.out.encode()), f"differs from go tool pprof ({ref[0][:200]!r})"
    else:
        assert _text(done.out).split("\n") == _text(ref[0]).split("\n")


@pytest.mark.slow
@pytest.mark.parametrize("rel", ["google__pprof/internal/report/testdata/sample.cpu",
                                 "generated/go_runtime_pprof/heap.pb.gz",
                                 "grafana__pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"])
def test_references_are_current(peer, rel):
    if not refs.go_available():
        pytest.skip("go tool pprof not available (install Debian golang-go)")
    live = refs.generate(PEER / rel, refs.Go())
    assert live is not None
    stale = [name for name, data in live.items() if not refs.same(refs.read_ref(refs.REFS / rel / name), data)]
    assert not stale, f"run python tests/go_pprof_refs.py: {stale} differ from go tool pprof"


def test_reference_layout_is_readable():
    """Every reference is text (or a digest of text); nothing binary sneaks in."""
    for path in refs.REFS.rglob("*"):
        if path.is_file() and path.suffix not in (".gz",):
            path.read_bytes().decode("utf-8", errors="strict") if path.suffix == ".sha256" else None
    assert Path(refs.REFS).is_dir()


REFUSED = sorted(p.parent.relative_to(refs.REFS).as_posix() for p in refs.REFS.rglob("error.txt"))


@pytest.mark.parametrize("rel", REFUSED)
def test_files_go_refuses_are_refused(peer, cli, rel):
    """Where go tool pprof reports a malformed profile, polyprof does too (exit 4, one line)."""
    go_error = (refs.REFS / rel / "error.txt").read_text()
    r = cli("top", PEER / rel)
    assert "malformed profile" in go_error
    assert r.code == 4 and r.err.count("\n") == 1, r.err
