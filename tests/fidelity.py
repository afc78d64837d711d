"""The conversion fidelity matrix: what survives each (source, target) conversion.

For every source file, each of the four protobuf formats is a target: the
profile is written, read back, and compared with the original, per sample
type (name, unit, total, per-function flat/cum at function granularity as
``top --nodecount 0`` gives them), for the default type, labels, times,
pids/tids and thread names. Each difference must be *reported*: named by an
item of the writer's loss report (see :mod:`polyprof.formats.loss` for how
items name their subject) or, for names and units, by ``renamed``. A
difference nobody reported is a failure.

``python tests/fidelity.py`` prints the matrix; the test
(tests/test_fidelity_matrix.py) keeps docs/FIDELITY.md equal to it.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))

import polyprof  # noqa: E402
from polyprof.analysis.options import Options  # noqa: E402
from polyprof.analysis.top import top  # noqa: E402
from polyprof.formats.loss import LossReport  # noqa: E402
from polyprof.model.threads import THREAD_LABELS, sample_threads  # noqa: E402
from polyprof.model.profile import Profile, ValueType  # noqa: E402

#: where the test leaves the rendered matrix for the end-of-run summary (conftest.py prints it)
MATRIX_KEY = __import__("pytest").StashKey[str]()
FORMATS = ("pprof", "perfetto", "simpleperf", "chromium")
CHECKS = ("type name", "unit", "order", "default", "total", "functions", "labels", "times", "pid/tid", "thread names")
_TIME = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": 1_000_000, "seconds": 1_000_000_000}


@dataclass(frozen=True)
class Source:
    """One source file of the matrix: its format, a short name and how to load it."""

    fmt: str
    name: str
    load: Callable[[], bytes | str]


def _peer(rel: str) -> Callable[[], str]:
    return lambda: str(PEER / rel)


def _chromium(name: str) -> Callable[[], bytes]:
    def load() -> bytes:
        from test_chromium_support import fixture_bytes

        return fixture_bytes(name)
    return load


from helpers import PEER  # noqa: E402

_PERFETTO = "google__perfetto/diff_tests_binary/"
SOURCES = (
    Source("pprof", "examples/demo.pb.gz", lambda: str(REPO / "examples/demo.pb.gz")),
    Source("pprof", "go cpu.pb.gz (labels)", _peer("generated/go_runtime_pprof/cpu.pb.gz")),
    Source("pprof", "go heap.pb.gz", _peer("generated/go_runtime_pprof/heap.pb.gz")),
    Source("pprof", "nodejs-wall.pb.gz", _peer("grafana__pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz")),
    Source("pprof", "dotnet.labels.pprof", _peer("grafana__pyroscope/pkg/pprof/testdata/dotnet.labels.pprof")),
    Source("perfetto", "perf_sample_followers", _peer(
        _PERFETTO + "parser__profiling__tests/Profiling__perf_sample_followers.pftrace")),
    Source("perfetto", "frame_types (wall-time)", _peer(
        _PERFETTO + "parser__profiling__tests/Profiling__frame_types.pftrace")),
    Source("perfetto", "heap_profile_intervals", _peer(
        _PERFETTO + "parser__profiling__tests_heap_profiling/ProfilingHeapProfiling__heap_profile_intervals.pftrace")),
    Source("perfetto", "r8 inline_positions", _peer(
        _PERFETTO + "parser__profiling__r8_retrace_compat__tests/R8RetraceCompat__inline_positions.pftrace")),
    Source("simpleperf", "cpu_clock_fp", _peer("generated/simpleperf/cpu_clock_fp.trace")),
    Source("simpleperf", "task_clock_dwarf", _peer("generated/simpleperf/task_clock_dwarf.trace")),
    Source("simpleperf", "two_event_types", _peer(
        "generated/simpleperf_from_aosp_testdata/perf_with_two_event_types.trace")),
    Source("simpleperf", "firefox cpu-clock (off-cpu)", _peer(
        "firefox-devtools__profiler/src/test/fixtures/upgrades/simpleperf-cpu-clock.trace.gz")),
    Source("chromium", "profiling_completed", _chromium("profiling_completed.sampled.textproto")),
    Source("chromium", "windows.sampled", _chromium("windows.sampled.textproto")),
    Source("chromium", "weights_and_counts (heap)", _chromium("weights_and_counts.callstack.textproto")),
    Source("chromium", "metadata_mixed", _chromium("metadata_mixed.callstack.textproto")),
)


@dataclass
class Finding:
    """One difference between an original and its read-back copy."""

    check: str
    subject: str
    reported_by: str | None  # the loss-report item (or rename) that names it; None = unreported


@dataclass
class Cell:
    """A (source format, target format) cell: findings per source file."""

    files: dict[str, list[Finding]] = field(default_factory=dict)
    reports: dict[str, LossReport] = field(default_factory=dict)

    def unreported(self) -> list[tuple[str, Finding]]:
        return [(f, x) for f, xs in self.files.items() for x in xs if x.reported_by is None]

    def summary(self) -> str:
        counts: dict[str, set[str]] = defaultdict(set)
        for name, xs in self.files.items():
            for x in xs:
                counts[x.check].add(name)
        if not counts:
            return "kept"
        n = len(self.files)
        parts = [f"{c} ({len(counts[c])}/{n})" for c in CHECKS if c in counts]
        return "reported: " + ", ".join(parts)


class _Mentions:
    """Finds the loss-report item naming a subject (case-insensitive substring)."""

    def __init__(self, report: LossReport) -> None:
        renames = {f"sample type {k} written as" for k in report.renamed}
        self.items = [it for it in report.items if not any(it.startswith(r) for r in renames)]
        self.renames = report.items

    def __call__(self, *needles: str, default: bool = False) -> str | None:
        pattern = re.compile("|".join(r"(?<![\w-])" + re.escape(n) for n in needles), re.IGNORECASE)
        for item in self.items:
            if item.startswith("default sample type") and not default:
                continue
            if pattern.search(item):
                return item
        return None


    def label(self, key: str) -> str | None:
        """The item naming label ``key`` (an item about labels that quotes or lists the key)."""
        for item in self.items:
            words = set(re.split(r"[\s:,'()]+", item))
            if "label" in item and key in words:
                return item
        return None


def _type_of(text: str) -> ValueType:
    name, _, unit = text.rpartition("/")
    return ValueType(name, unit)


def _scale(a: str, b: str) -> float | None:
    """Factor turning values in unit ``a`` into unit ``b`` (None: not comparable)."""
    if a == b:
        return 1.0
    if a in _TIME and b in _TIME:
        return _TIME[a] / _TIME[b]
    return None


def function_table(p: Profile, index: int) -> dict[str, tuple[int, int]]:
    """name -> (flat, cum) of every function, as ``top --nodecount 0`` gives them."""
    result = top(p, Options(sample_index=index, nodecount=0, nodefraction=0, edgefraction=0))
    return {row.name: (row.flat, row.cum) for row in result.rows}


def _same_table(a: dict[str, tuple[int, int]], b: dict[str, tuple[int, int]], factor: float) -> bool:
    if set(a) != set(b):
        return False
    return all(abs(fa * factor - fb) <= 1e-9 * max(abs(fb), 1) and abs(ca * factor - cb) <= 1e-9 * max(abs(cb), 1)
               for (fa, ca), (fb, cb) in ((a[k], b[k]) for k in a))


def compare(p: Profile, q: Profile, report: LossReport) -> list[Finding]:
    """Every difference between ``p`` and its read-back copy ``q``, with the report item naming it."""
    m = _Mentions(report)
    out: list[Finding] = []
    q_index = {vt: i for i, vt in enumerate(q.sample_types)}
    p_totals, q_totals = p.totals(), q.totals()
    frames = ("inlined", "address", "function name", "symbol", "module")
    positions = []
    for i, vt in enumerate(p.sample_types):
        key = str(vt)
        mapped = _type_of(report.renamed.get(key, key))
        j = q_index.get(mapped)
        if j is None:
            out.append(Finding("type name", key, m(key)))
            continue
        positions.append(j)
        if mapped.type != vt.type:
            out.append(Finding("type name", key, f"renamed to {mapped}"))
        if mapped.unit != vt.unit:
            out.append(Finding("unit", key, f"renamed to {mapped}"))
        factor = _scale(vt.unit, mapped.unit)
        if factor is None or abs(p_totals[i] * factor - q_totals[j]) > 1e-9 * max(abs(q_totals[j]), 1):
            out.append(Finding("total", key, m(key)))
        if factor is None or not _same_table(function_table(p, i), function_table(q, j), factor):
            out.append(Finding("functions", key, m(key) or m(*frames)))
    if positions != sorted(positions):
        out.append(Finding("order", ", ".join(map(str, p.sample_types)), m("reordered")))
    if p.sample_types:
        want = str(p.sample_types[p.default_index()])
        want = _type_of(report.renamed.get(want, want))
        if q.sample_types and q.sample_types[q.default_index()] != want:
            out.append(Finding("default", str(want), m("default sample type", default=True)))
    out += _labels(p, q, m) + _times(p, q, m) + _threads(p, q, m)
    return out


def _label_values(p: Profile) -> dict[str, set]:
    used = np.unique(p.samples.labelset).tolist() if len(p.samples) else []
    values: dict[str, set] = defaultdict(set)
    for ls in used:
        for lb in p.labelsets[ls]:
            values[lb.key].add((lb.str, lb.num, lb.unit))
    return values


def _labels(p: Profile, q: Profile, m: _Mentions) -> list[Finding]:
    a, b = _label_values(p), _label_values(q)
    return [Finding("labels", key, m.label(key)) for key in sorted(a) if key not in THREAD_LABELS and a[key] != b.get(key)]


def _times(p: Profile, q: Profile, m: _Mentions) -> list[Finding]:
    out = []
    if p.time_nanos and q.time_nanos != p.time_nanos:
        out.append(Finding("times", "time_nanos", m("time_nanos", "start time")))
    if p.duration_nanos and q.duration_nanos != p.duration_nanos:
        out.append(Finding("times", "duration", m("duration")))
    pt, qt = p.samples.time, q.samples.time
    if pt is not None and (qt is None or set(pt.tolist()) != set(qt.tolist())):
        out.append(Finding("times", "sample times", m("sample times", "time column", "times")))
    return out


def _threads(p: Profile, q: Profile, m: _Mentions) -> list[Finding]:
    out = []
    for col in ("pid", "tid"):
        a, b = getattr(p.samples, col), getattr(q.samples, col)
        if a is not None and (b is None or set(a.tolist()) != set(b.tolist())):
            out.append(Finding("pid/tid", col, m(f"{col} column", f"sample {col}", f" {col}")))
    named = {(t.tid, t.name) for t in sample_threads(p)[1] if t.name}
    back = {(t.tid, t.name) for t in sample_threads(q)[1] if t.name}
    if not named <= back:
        out.append(Finding("thread names", ", ".join(sorted(n for _, n in named - back)), m("thread")))
    return out


def convert(p: Profile, target: str) -> tuple[Profile, LossReport]:
    """``p`` written as ``target`` and read back (the multi-profile rule of ``polyprof.read`` applies)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"out.{target}"
        report = polyprof.write(p, out, format=target)
        return polyprof.read(out), report


def matrix(sources: tuple[Source, ...] = SOURCES) -> dict[tuple[str, str], Cell]:
    """Every (source format, target format) cell over ``sources``."""
    cells: dict[tuple[str, str], Cell] = {(s, t): Cell() for s in FORMATS for t in FORMATS}
    for src in sources:
        p = polyprof.read(src.load())
        for target in FORMATS:
            q, report = convert(p, target)
            cell = cells[(src.fmt, target)]
            cell.files[src.name] = compare(p, q, report)
            cell.reports[src.name] = report
    return cells


def render(cells: dict[tuple[str, str], Cell], sources: tuple[Source, ...] = SOURCES) -> str:
    """The matrix as Markdown: the summary table, then what was reported, per file."""
    lines = ["| source \\ target | " + " | ".join(FORMATS) + " |", "|---" * (len(FORMATS) + 1) + "|"]
    for s in FORMATS:
        lines.append(f"| **{s}** | " + " | ".join(cells[(s, t)].summary() for t in FORMATS) + " |")
    lines += ["", "Source files:", ""]
    lines += [f"- {src.fmt}: {src.name}" for src in sources]
    lines += ["", "## What each conversion reports", ""]
    for s in FORMATS:
        for t in FORMATS:
            cell = cells[(s, t)]
            for name, findings in cell.files.items():
                if not findings:
                    continue
                lines.append(f"- {s} → {t}, {name}:")
                for x in findings:
                    why = x.reported_by if x.reported_by is not None else "**NOT REPORTED**"
                    lines.append(f"  - {x.check} `{x.subject}`: {why}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(matrix()))
