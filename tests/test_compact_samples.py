"""Every consumer reads the compact sample form (model/compact.py) exactly as the plain form.

For each profile P (real ones from peer data of every format, and hypothesis-built ones whose values
sit at the int32 limits), C is a deep copy of P put in compact form (int32 values, constant optional
columns as read-only stride-0 views). Every consumer then runs on P and on C and must give the same
output, byte for byte: the command line's verbs (text and ``--format json``, every filter flag, every
writer through ``convert``), ``to_arrow``/``to_pandas`` (schemas too), ``dump``, pickling, merge, the
store (DuckDB ingest and queries) and the web view's API answers. Both sides run with the compiled
kernels forced and with numpy only (``POLYPROF_KERNELS``), so the int32 and read-only specializations
of the numba kernels are compiled and held to the numpy answers too.
"""

from __future__ import annotations

import copy
import io
import os
import pickle
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote

import numpy as np
import pytest
from helpers import PEER, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.model.builder import ProfileBuilder
from polyprof.model.compact import compact_samples, is_constant_view
from polyprof.model.profile import Label, Profile

I32 = np.iinfo(np.int32)
#: every writer (Perfetto's also in test_perfetto_writer_reads_the_same_compact, at the int32 limits)
WRITERS = {"pprof": ".pb.gz", "perfetto": ".pftrace", "simpleperf": ".trace", "chromium": ".uma",
           "folded": ".folded", "speedscope": ".speedscope.json", "firefox": ".firefox.json"}
REAL = {
    "go-heap": "grafana__pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz",
    "go-cpu-labels": "generated/go_runtime_pprof/cpu.pb.gz",
    "simpleperf": "generated/simpleperf/cpu_clock_fp.trace",
    "simpleperf-offcpu": "generated/simpleperf_from_aosp_testdata/perf_with_trace_offcpu_v2.trace",
    "firefox-simpleperf": "firefox-devtools__profiler/src/test/fixtures/upgrades/simpleperf-cpu-clock.trace.gz",
}


def compact_copy(p: Profile) -> Profile:
    """A deep copy of ``p`` (no shared mutable state) with its samples in compact form."""
    c = copy.deepcopy(p)
    compact_samples(c.samples)
    return c


def is_compact(p: Profile) -> bool:
    s = p.samples
    return s.values.dtype == np.int32 or any(
        col is not None and is_constant_view(col) for col in (getattr(s, n) for n in ("pid", "tid", "cpu")))


@contextmanager
def reading(make: Callable[[], Profile]) -> Iterator[None]:
    """Every read (the command line's, the store's) gives a fresh ``make()``, whatever the file."""
    def read_all(*args: Any, **kwargs: Any) -> list[Profile]:
        return [make()]

    polyprof.read_all  # noqa: B018 - resolve the lazy attribute so it can be patched
    with mock.patch("polyprof.api.read_all", read_all), mock.patch.object(polyprof, "read_all", read_all):
        yield


@contextmanager
def kernels(mode: str) -> Iterator[None]:
    with mock.patch.dict(os.environ, {"POLYPROF_KERNELS": mode}):
        yield


# ---------------------------------------------------------------- the consumers

def _facts(p: Profile) -> dict[str, Any]:
    """What the command lines below refer to: a hot function, label keys, a pid, a tid, a time window."""
    from polyprof.analysis.top import top

    s = p.samples
    rows = top(p, nodecount=0).rows if len(p.samples) else []
    names = [r.name for r in rows if r.name]
    keys = sorted({lab.key for labels in p.labelsets for lab in labels})
    facts: dict[str, Any] = {"name": names[0] if names else "x",
                             "hot": "^" + re.escape(names[0]) + "$" if names else "x",
                             "any": "|".join(re.escape(n) for n in names[1:4]) or "x", "keys": keys}
    for name in ("pid", "tid"):
        col = getattr(s, name)
        facts[name] = str(int(col[len(col) // 2])) if col is not None and len(col) else None
    if s.time is not None and len(s.time):
        span = int(s.time.max()) - int(s.time.min())
        facts["window"] = f"{span // 4}ns:{3 * span // 4}ns"
    return facts


def cli_commands(p: Profile) -> list[list[str]]:
    """Every verb with the flags that change which samples or values it reads."""
    f = _facts(p)
    json_ = ["--format", "json"]
    out = [["info"], ["info", *json_], ["top"], ["top", "--nodecount", "0", *json_], ["top", "--cum", *json_],
           ["tree", *json_], ["tree"], ["peek", f["hot"], *json_], ["traces", *json_], ["traces"], ["tags", *json_],
           ["tags"], ["raw"], ["graph"], ["dump"], ["validate", *json_], ["validate"], ["list", f["hot"]],
           ["top", "--mean", *json_], ["top", "--relative-percentages", "--focus", f["any"], *json_],
           ["top", "--unit", "auto"], ["top", "--nodefraction", "0.05", "--edgefraction", "0.05"],
           ["diff", "IN", "--by", "both", "--nodecount", "0", *json_],
           ["diff", "IN", "--normalize", "total", *json_], ["top", "--base", "IN", *json_],
           ["top", "--diff-base", "IN", *json_]]
    for flag in ("--focus", "--ignore", "--hide", "--show", "--show-from", "--prune-from"):
        out += [["top", flag, f["hot"], *json_], ["tree", flag, f["any"], *json_], ["traces", flag, f["any"], *json_]]
    out += [["top", "--granularity", g, *json_] for g in ("lines", "addresses", "modules", "files", "filefunctions")]
    out += [["top", "--noinlines", *json_]]
    out += [["top", "--sample-index", str(i), *json_] for i in range(len(p.sample_types))]
    out += [["tree", "--sample-index", str(i), *json_] for i in range(len(p.sample_types))]
    for key in f["keys"][:2]:
        out += [["top", "--tagroot", key, *json_], ["top", "--tagleaf", key, *json_], ["tags", "--tagshow", key, *json_],
                ["traces", "--tagfocus", f"{key}=.", *json_],
                ["top", "--tagignore", f"{key}=.", *json_]]
    for name in ("pid", "tid"):
        if f[name] is not None:
            out += [["top", f"--{name}", f[name], *json_], ["traces", f"--{name}", f[name], *json_]]
    if f.get("window"):
        out += [["top", "--time-range", f["window"], *json_], ["tree", "--time-range", f["window"], *json_]]
    if p.samples.tid is not None:
        out += [["top", "--thread", ".", *json_]]
    out += [["flame", "-o", "OUT.svg"], ["flame", "-o", "OUT.html"], ["flame", "--inverted", "-o", "OUT.svg"],
            ["diff", "IN", "--flame", "OUT.svg", *json_], ["merge", "IN", "-o", "OUT.pb.gz"]]
    out += [["convert", "-o", f"OUT{ext}"] for ext in WRITERS.values()]
    out += [["convert", "--hide", f["hot"], "-o", "OUT.pb.gz"], ["symbolize", "--offline", "-o", "OUT.pb.gz"]]
    return out


def cli_outputs(make: Callable[[], Profile], commands: list[list[str]], tmp: Path) -> dict[str, Any]:
    """Exit code, stdout, stderr and any written file of every command, reading ``make()``."""
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "in.pb.gz"
    src.write_bytes(b"")
    got: dict[str, Any] = {}
    with reading(make):
        for argv in commands:
            out = next((a for a in argv if a.startswith("OUT")), None)
            argv2 = [str(tmp / a) if a.startswith("OUT") else str(src) if a == "IN" else a for a in argv]
            r = run_cli(argv2[0], src, *argv2[1:])
            written = None
            if out is not None and (tmp / out).exists():
                written = (tmp / out).read_bytes()
                (tmp / out).unlink()
            got[" ".join(argv)] = (r.code, r.out, r.err, written)
    return got


def library_outputs(p: Profile) -> dict[str, Any]:
    """The library's own consumers of a profile (those the command line does not print)."""
    from polyprof.analysis.flame import flame_tree
    from polyprof.analysis.timeline import timeline
    from polyprof.model.dump import dump
    from polyprof.model.merge import merge, negated
    from polyprof.model.validate import check

    check(p)
    got: dict[str, Any] = {"totals": p.totals(), "dump": dump(p), "repr": repr(p)}
    back = pickle.loads(pickle.dumps(p))
    got["pickled"] = (dump(back), back.samples.values.dtype == p.samples.values.dtype)
    got["merge"] = dump(merge([p, p]))
    got["negated"] = dump(negated(p))
    for inverted in (False, True):
        t = flame_tree(p, max_nodes=0, min_fraction=0, inverted=inverted)
        got[f"flame{inverted}"] = (t.names, t.total.tolist(), t.self.tolist(), t.parent.tolist())
    for group in ("thread", "process"):
        r = timeline(p, bins=37, group=group)
        got[f"timeline-{group}"] = (r.total, r.counts.tolist(), [repr(t) for t in r.threads], r.untimed)
    for stacks in ("id", "both"):
        table = p.to_arrow(stacks=stacks)
        got[f"arrow-{stacks}"] = (str(table.schema), table.to_pylist())
        frame = p.to_pandas(stacks=stacks)
        got[f"pandas-{stacks}"] = (list(frame.dtypes.astype(str)), frame.to_json())
    got["arrow-callsites"] = str(p.to_arrow("callsites"))
    return got


def web_outputs(p: Profile, *, base: Profile | None = None) -> dict[str, Any]:
    """The JSON the page gets from every endpoint of ``polyprof serve`` over ``p``."""
    from polyprof.web.app import App
    from polyprof.web.session import Input, Session

    inputs = [Input("in", "in.pb.gz", p)] + ([] if base is None else [Input("base", "base.pb.gz", base, is_base=True)])
    application = App(Session(inputs), ["127.0.0.1:8080"], log=lambda text: None)

    def get(url: str) -> Any:
        resp = application.handle("GET", url, {"Host": "127.0.0.1:8080"})
        return (resp.status, resp.body)

    f = {k: quote(v, safe="") if isinstance(v, str) else v for k, v in _facts(p).items()}
    urls = ["/api/session", "/api/info?p=0", "/api/top?p=0&nodecount=0", "/api/tree?p=0", "/api/traces?p=0",
            f"/api/peek?p=0&regex={f['hot']}", "/api/flame?p=0&min_fraction=0&max_nodes=0",
            "/api/flame?p=0&inverted=1", "/api/flame?p=0&min_fraction=0.05", "/api/node?p=0&id=1",
            "/api/calltree?p=0&id=0", "/api/labels?p=0", "/api/timeline?p=0&bins=50",
            "/api/timeline?p=0&group=process", f"/api/top?p=0&hide={f['hot']}", f"/api/top?p=0&prune_from={f['any']}",
            f"/api/flame?p=0&focus={f['any']}", "/api/download?p=0&format=pprof", "/api/download?p=0&format=simpleperf",
            "/api/download?p=0&format=perfetto"]
    urls += [f"/api/sandwich?p=0&fn={f['name']}", f"/api/sandwich?p=0&fn={f['name']}&side=callers&id=0"]
    for key in (quote(k, safe="") for k in f["keys"][:2]):
        urls += [f"/api/top?p=0&tagroot={key}", f"/api/flame?p=0&tagroot={key}", f"/api/flame?p=0&tagleaf={key}"]
    if base is not None:
        urls += ["/api/diff?p=0&b=1&by=both&nodecount=0", "/api/flame?p=0&b=1"]
    return {url: get(url) for url in urls}


def store_outputs(make: Callable[[], Profile], tmp: Path) -> dict[str, Any]:
    """A DuckDB store holding the profile: the ingest's counts and a few queries."""
    from polyprof.store.handle import Store
    from polyprof.store.ingest import ingest

    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "in.pb.gz"
    src.write_bytes(b"x")
    with reading(make):
        report = ingest(str(tmp / "store"), [str(src)], jobs=1)
    assert report.exit_code == 0, report.to_json()
    with Store(tmp / "store") as store:
        top = store.top(nodecount=0)
        traces = store.traces()
        rows = store.sql("SELECT * FROM samples ORDER BY ALL").to_pylist()
        got = {"top": [(r.name, r.flat, r.cum) for r in top.rows], "total": top.total,
               "traces": sorted(zip(traces.sample_stack.tolist(), traces.sample_value.tolist())),
               "rows": rows, "profile": polyprof.dump(store.profile()).split("\n", 2)[2]}
    shutil.rmtree(tmp)
    return got


def _assert_same(plain: dict[str, Any], compact: dict[str, Any], run: str) -> None:
    assert plain.keys() == compact.keys()
    differ = [key for key in plain if plain[key] != compact[key]]
    assert not differ, f"{run}: {len(differ)} consumers differ, first {differ[0]}: {plain[differ[0]]!r:.3000} != {compact[differ[0]]!r:.3000}"


def _columns(p: Profile) -> list[Any]:
    """Every sample column as it is held: dtype, strides, writeable flag and values."""
    s = p.samples
    return [None if col is None else (str(col.dtype), col.strides, col.flags.writeable, col.tolist())
            for col in (s.stack, s.values, s.labelset, s.time, s.pid, s.tid, s.cpu)]


def check_every_consumer(p: Profile, tmp: Path, *, store: bool = False) -> None:
    """Every consumer on ``p`` and on its compact copy, with numpy kernels and with compiled ones:
    all four give the plain form's numpy answers. All consumers of one run read the same two
    sample tables (``copy_with`` shares them), which must come out unchanged: nothing writes
    into a profile's columns."""
    assert is_compact(compact_copy(p)), "the profile has nothing to compact: the test would compare nothing"
    commands = cli_commands(p)
    want: list[dict[str, Any]] = []
    for mode in ("numpy", "compiled"):
        for make in (copy.deepcopy, compact_copy):
            q = make(p)
            held = _columns(q)
            with kernels(mode):
                got = [library_outputs(q.copy_with()), web_outputs(q.copy_with(), base=q.copy_with()),
                       cli_outputs(q.copy_with, commands, tmp / "cli")]
                if store and mode == "numpy":
                    got.append(store_outputs(q.copy_with, tmp / "store"))
            assert _columns(q) == held, f"{mode}, {make.__name__}: a consumer wrote into the sample columns"
            if not want:
                failed = [argv for argv, (code, *_) in got[2].items() if code != 0]
                assert len(failed) <= len(got[2]) // 10, f"the comparison would be of errors: {failed}"
                want = got
            for expected, answer in zip(want, got):
                _assert_same(expected, answer, f"{mode}, {make.__name__}")


# ---------------------------------------------------------------- real profiles

def _uma(tmp: Path) -> Path:
    from test_chromium_support import fixture_bytes

    path = tmp / "windows.uma"
    path.write_bytes(fixture_bytes("windows.sampled.textproto"))
    return path


def _perfetto(tmp: Path) -> Path:
    """A traced_perf-shaped trace (perf samples with pid, tid, cpu and time): the simpleperf
    recording written by our Perfetto writer."""
    path = tmp / "perf.pftrace"
    polyprof.convert(PEER / REAL["simpleperf"], path)
    return path


def _real(name: str, tmp: Path) -> Profile:
    if not PEER.is_dir():
        pytest.skip(f"peer data not found at {PEER} (set POLYPROF_PEER_DATA)")
    path = _uma(tmp) if name == "chromium" else _perfetto(tmp) if name == "perfetto" else PEER / REAL[name]
    if not path.exists():
        pytest.skip(f"peer data not found: {path}")
    return polyprof.read(path)


@pytest.mark.parametrize("name", [*REAL, "perfetto", "chromium"])
def test_real_profiles_read_the_same_compact(name: str, tmp_path: Path) -> None:
    check_every_consumer(_real(name, tmp_path), tmp_path / "out", store=name in ("go-heap", "perfetto"))


# ---------------------------------------------------------------- values at the int32 limits

EDGE = st.sampled_from([I32.max, I32.min, I32.max - 1, I32.min + 1, 0, 1, -1, 2**30])


TYPES = [("samples", "count"), ("cpu", "nanoseconds"), ("wall", "milliseconds"), ("alloc_space", "bytes"), ("t", "count")]


@st.composite
def edge_profiles(draw: st.DrawFn) -> Profile:
    """Profiles whose values all fit int32 but whose sums do not: many samples of 2**31-1,
    negatives (a diff), zeros; a constant pid, varying tid and cpu, times; labels, thread names."""
    b = ProfileBuilder("test")
    width = draw(st.integers(1, 3))
    b.set_sample_types(draw(st.permutations(TYPES))[:width])
    m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "b1d", 15)
    locs = [b.frame(name, f"{name}.c", 10 + i, mapping=m, address=0x1000 + 16 * i)
            for i, name in enumerate(["main", "run", "work", "alloc", "spin"])]
    stacks = [b.stack(draw(st.lists(st.sampled_from(locs), min_size=1, max_size=6))) for _ in range(draw(st.integers(1, 6)))]
    n = draw(st.integers(2, 60))
    values = np.array([[draw(EDGE) for _ in range(width)] for _ in range(n)], np.int64)
    if draw(st.booleans()):
        values[:, 0] = I32.max  # every sum overflows int32
    labels = [[], [Label("worker", str="a")], [Label("worker", str="b"), Label("bytes", num=I32.max, unit="bytes")],
              [Label("thread_name", str="Jit")]]
    timed = draw(st.booleans())
    for i in range(n):
        b.add_sample(draw(st.sampled_from(stacks)), values[i].tolist(), labels=draw(st.sampled_from(labels)),
                     pid=4242, tid=draw(st.sampled_from([7, 8, 4242])), cpu=draw(st.integers(0, 3)),
                     **({"time": 10**18 + draw(st.integers(0, 10**9))} if timed else {}))
    b.meta.duration_nanos = 10**9
    return b.finish()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(edge_profiles())
def test_values_at_the_int32_limits_read_the_same_compact(tmp_path: Path, p: Profile) -> None:
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    check_every_consumer(p, out)


def _counters_over_int32() -> Profile:
    """Perf-like samples on one CPU whose counter (cpu-clock) sums past int32."""
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu-clock", "nanoseconds")])
    stack = b.stack([b.frame("main", "main.c", 1)])
    for i in range(4):
        b.add_sample(stack, [1, I32.max], pid=1, tid=2, cpu=0, time=10**9 + i)
    return b.finish()


def _heap_over_int32() -> Profile:
    """A heap diff (negative in-use values) whose freed bytes, alloc - inuse, pass int32."""
    b = ProfileBuilder("test")
    b.set_sample_types([("alloc_space", "bytes"), ("inuse_space", "bytes")])
    stack = b.stack([b.frame("malloc", "m.c", 1)])
    b.add_sample(stack, [I32.max, -2])
    b.add_sample(stack, [5, 5])
    return b.finish()


@pytest.mark.parametrize("name", ["counters", "heap", "firefox-simpleperf"])
def test_perfetto_writer_reads_the_same_compact(name: str, tmp_path: Path) -> None:
    from polyprof.formats.options import WriteOptions
    from polyprof.formats.perfetto import write

    p = {"counters": _counters_over_int32, "heap": _heap_over_int32}.get(name, lambda: _real(name, tmp_path))()
    written = []
    for q in (copy.deepcopy(p), compact_copy(p)):
        out = io.BytesIO()
        write(q, out, WriteOptions())
        written.append(out.getvalue())
    assert written[0] == written[1]


def test_a_filtered_copy_keeps_a_constant_column_without_memory() -> None:
    from polyprof.analysis import filters

    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    stacks = [b.stack([b.frame(name, "a.c", 1)]) for name in ("main", "work")]
    for i in range(10):
        b.add_sample(stacks[i % 2], [1], pid=4242, tid=7 + i % 3, cpu=0, time=i)
    c = compact_copy(b.finish())
    kept = filters.apply(c, focus="^work$", tid=(7, 8)).profile.samples
    assert kept.pid.strides == (0,) and kept.pid.tolist() == [4242] * len(kept) and len(kept) == 4
    assert kept.tid.tolist() == [8, 7, 8, 7] and kept.cpu.strides == (0,)
