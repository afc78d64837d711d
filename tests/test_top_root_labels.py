"""``top`` grouped by a root label (the web view's group by): the table made from the
profile without label frames plus one row per label value (top_root_labels) is the
table of the label-framed profile, exactly, wherever it is given; the API's
``/api/top?tagroot=`` answer is ``polyprof top --tagroot --format json``'s.
"""

from __future__ import annotations

import dataclasses

import pytest
from helpers import PEER, REPO
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_web_api import KINDS, _plain
from web_support import app, cli_json, get, input_path

import polyprof
from polyprof.analysis import filters
from polyprof.analysis.options import Options
from polyprof.analysis.top import top, top_root_labels
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile

FUNCS = ["main", "run", "alpha", "beta", "2kB", "a", ""]
LABELS = [(), (Label("worker", str="a"),), (Label("worker", str="b"),), (Label("worker", str="main"),),
          (Label("bytes", num=2048, unit="bytes"),), (Label("bytes", num=0, unit="bytes"),),
          (Label("bytes", num=4096, unit="bytes"), Label("worker", str="a")),
          (Label("worker", str="a"), Label("worker", str="b"))]


def _both(p: Profile, o: Options) -> tuple[tuple | None, tuple]:
    """(the derived table and tagroot's match, or None) and (the framed table, its unmatched filters)."""
    plain = filters.apply(p, filters.without(o, "tagroot"))
    framed = filters.apply(p, o)
    return top_root_labels(plain, o), (top(framed, o), framed.unmatched(), plain.unmatched())


def _check(p: Profile, o: Options) -> bool:
    got, (want, unmatched, plain_unmatched) = _both(p, o)
    if got is None:
        return False
    table, hit = got
    assert table == want
    assert ([] if hit else ["tagroot"]) + plain_unmatched == unmatched
    return True


@st.composite
def profiles(draw):
    """Random profiles: inline lines, recursion, empty stacks, numeric and string labels,
    samples without the key, values of either sign."""
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("space", "bytes")])
    m = b.mapping(0x1000, 0x9000, 0, "/bin/app")
    locs = []
    for i in range(draw(st.integers(1, 7))):
        n = draw(st.sampled_from([1, 1, 1, 2, 3]))
        lines = [(b.function(draw(st.sampled_from(FUNCS)), "", "a.go"), i + k, 0) for k in range(n)]
        locs.append(b.location(m, 0x1000 + 16 * i, lines))
    for _ in range(draw(st.integers(0, 25))):
        stack = draw(st.lists(st.sampled_from(locs), max_size=6, min_size=draw(st.sampled_from([0, 1, 1, 1]))))
        count = draw(st.integers(-2 if draw(st.booleans()) else 0, 4))
        b.add_sample(b.stack(stack), [count, count * 512], labels=draw(st.sampled_from(LABELS)),
                     time=draw(st.integers(0, 10)) * 1_000_000)
    return b.finish()


OPTIONS = st.fixed_dictionaries({}, optional={
    "cum": st.booleans(), "sample_index": st.sampled_from(["samples", "space"]), "noinlines": st.booleans(),
    "edgefraction": st.sampled_from([0.0, 0.001, 0.3]), "tagfocus": st.sampled_from(["worker=a", "bytes=2kB"]),
    "tagignore": st.sampled_from(["worker=b"]), "time_range": st.sampled_from([(2_000_000, 7_000_000)]),
    "focus": st.sampled_from(["alpha", "2kB", "a"]), "hide": st.sampled_from(["run", "2kB"]),
    "unit": st.sampled_from(["minimum", "kB"]), "nodefraction": st.sampled_from([0.0, 0.1]),
    "nodecount": st.sampled_from([0, 2]), "granularity": st.sampled_from(["functions", "lines"]),
    "relative_percentages": st.booleans(), "tagleaf": st.sampled_from(["worker"])})


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=profiles(), key=st.sampled_from(["bytes", "worker", "nothere"]), extra=OPTIONS)
def test_the_derived_table_is_the_framed_table(p: Profile, key: str, extra: dict) -> None:
    """Wherever top_root_labels answers, its table (rows, order, percentages, counts,
    header) and tagroot's match are those of top over the label-framed profile."""
    if not len(p.samples):
        extra.pop("time_range", None)  # (no samples: no timestamps to select by)
    o = Options(**{"nodecount": 0, "nodefraction": 0.0, **extra}, tagroot=key)
    event("derived" if _check(p, o) else "framed")


def test_it_answers_where_the_page_asks() -> None:
    """The page's group by (nodecount=0, nodefraction=0, one key) is derived, not framed, on
    a label-carrying profile; a name filter, a second key or trimming are framed."""
    p = polyprof.read(REPO / "examples" / "demo.pb.gz")
    key = next(lab.key for ls in p.labelsets for lab in ls)
    page = Options(nodecount=0, nodefraction=0.0, tagroot=key)
    assert _check(p, page)
    assert _check(p, dataclasses.replace(page, cum=True))
    for other in ({"focus": "main"}, {"tagroot": f"{key},x"}, {"nodecount": 5}, {"nodefraction": 0.005},
                  {"tagleaf": key}, {"granularity": "lines"}):
        assert _both(p, dataclasses.replace(page, **other))[0] is None, other


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_group_by_table_is_the_command_line_s(kind: str, tmp_path, cli) -> None:
    """/api/top with the page's group-by parameters answers what the CLI prints, on real
    files of every format, for every label key they hold (sorted by flat and by cum)."""
    path = input_path(kind, tmp_path)
    p = polyprof.read(path)
    keys = sorted({lab.key for ls in p.labelsets for lab in ls})[:3]
    a = app(path)
    for key in keys or ["nothere"]:
        for extra, flags in (("", []), ("&cum=1", ["--cum"])):
            answer = get(a, f"/api/top?nodecount=0&nodefraction=0&tagroot={key}{extra}")
            want = cli_json(cli, "top", path, "--nodecount", "0", "--nodefraction", "0", "--tagroot", key, *flags)
            assert _plain(answer) == want, (kind, key)
            assert _check(p, Options(nodecount=0, nodefraction=0.0, tagroot=key, cum=bool(flags))) or not keys


GO_HEAP = PEER / "grafana__pyroscope" / "pkg" / "og" / "convert" / "pprof" / "testdata" / "heap.pb.gz"


def test_a_real_go_heap_profile_is_derived() -> None:
    """A real Go heap profile (a ``bytes`` label on every sample, as on the benchmark's Go
    allocs profiles, the web view's case): the derived route answers, and exactly."""
    if not GO_HEAP.exists():
        pytest.skip(f"peer data not found: {GO_HEAP}")
    p = polyprof.read(GO_HEAP)
    assert _check(p, Options(nodecount=0, nodefraction=0.0, tagroot="bytes"))
    assert _check(p, Options(nodecount=0, nodefraction=0.0, tagroot="bytes", tagfocus="bytes=4kB:"))
    assert _check(p, Options(nodecount=0, nodefraction=0.0, tagroot="bytes", cum=True, sample_index="inuse_space"))
