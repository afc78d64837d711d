"""Filters on small hand-made profiles: selections (pid, tid, thread, time), label filters,
what they report as matched, and their errors (one clear OptionsError line)."""

from __future__ import annotations

import numpy as np
import pytest

from polyprof.analysis import filters
from polyprof.analysis.options import Options
from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label
from polyprof.model.validate import check

SEC = 1_000_000_000


def _profile(*, columns: bool = True, names: str = "labels", time_nanos: int = 0):
    """Four samples: (main, work) on tid 11 'ui' and (main, idle) on tid 12 'worker', one second apart."""
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    b.meta.time_nanos = time_nanos
    main, work, idle = (b.frame(n, "m.c", 1) for n in ("main", "work", "idle"))
    rows = [(work, 11, "ui", 100), (idle, 12, "worker", 10), (work, 11, "ui", 100), (idle, 12, "worker", 10)]
    for i, (leaf, tid, name, v) in enumerate(rows):
        labels = [Label("thread_name", str=name)] if names == "labels" else []
        if not columns:
            labels += [Label("tid", num=tid), Label("time", num=5 * SEC + i * SEC, unit="nanoseconds")]
        kw = dict(time=5 * SEC + i * SEC, pid=7, tid=tid) if columns else {}
        b.add_sample(b.stack([leaf, main]), [v], labels=labels, **kw)
    if names == "extras":
        b.meta.extras["thread_names"] = {"11": "ui", "12": "worker"}
    return b.finish()


def _values(result) -> list[int]:
    return result.profile.samples.values[:, 0].tolist()


def test_no_filter_returns_the_same_profile():
    p = _profile()
    r = filters.apply(p, Options())
    assert r.profile is p and r.matched == {} and r.active == []
    assert r.total(0) == 220


def test_tid_pid_and_thread_select_samples():
    p = _profile()
    assert _values(filters.apply(p, Options(tid=frozenset({12})))) == [10, 10]
    assert _values(filters.apply(p, Options(pid=frozenset({7}), thread="^u"))) == [100, 100]
    r = filters.apply(p, Options(pid=frozenset({8})))
    assert _values(r) == [] and r.unmatched() == ["pid"]


def test_thread_names_come_from_labels_or_from_the_readers_table():
    assert _values(filters.apply(_profile(names="extras"), Options(thread="work"))) == [10, 10]
    with pytest.raises(OptionsError, match="cannot select thread='.*': this profile has no thread names"):
        filters.apply(_profile(names="none"), Options(thread="x"))


def test_columns_fall_back_to_numeric_labels():
    p = _profile(columns=False)
    assert _values(filters.apply(p, Options(tid=frozenset({11})))) == [100, 100]
    assert _values(filters.apply(p, Options(time_range=(SEC, 3 * SEC)))) == [10, 100]


def test_time_range_is_relative_to_the_first_sample_or_to_time_nanos():
    p = _profile()
    # no time_nanos: 0 is the first sample (5 s); the end is excluded
    assert _values(filters.apply(p, Options(time_range=(None, SEC)))) == [100]
    assert _values(filters.apply(p, Options(time_range=(None, SEC + 1)))) == [100, 10]
    assert _values(filters.apply(p, Options(time_range=(2 * SEC, None)))) == [100, 10]
    # time_nanos before the samples: it is the origin
    q = _profile(time_nanos=4 * SEC)
    assert _values(filters.apply(q, Options(time_range=(0, 2 * SEC)))) == [100]
    assert filters.time_origin(q, q.samples.time) == 4 * SEC


def test_selection_errors_are_one_clear_line():
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    b.add_sample(b.stack([b.frame("f")]), [1])
    p = b.finish()
    with pytest.raises(OptionsError, match="cannot select by time_range: the samples of this profile have no timestamps"):
        filters.apply(p, Options(time_range=(0, 10)))
    with pytest.raises(OptionsError, match="cannot select pid=.*: the samples of this profile carry no pid"):
        filters.apply(p, Options(pid=frozenset({1})))
    with pytest.raises(OptionsError, match=r"bad regular expression show_from='\(\('"):
        filters.apply(p, Options(show_from="(("))
    with pytest.raises(OptionsError, match="bad regular expression in tagfocus="):
        filters.apply(p, Options(tagfocus="k=[a"))


def test_label_filters_follow_pprof_syntax():
    b = ProfileBuilder("test")
    b.set_sample_types([("alloc", "bytes")])
    s = b.stack([b.frame("f")])
    for size, who in ((512, "a"), (2048, "b"), (1 << 20, "a")):
        b.add_sample(s, [size], labels=[Label("bytes", num=size), Label("who", str=who), Label("n", num=size // 512)])
    p = b.finish()

    def kept(expr: str, *, ignore: bool = False) -> list[int]:
        return _values(filters.apply(p, Options(**{"tagignore" if ignore else "tagfocus": expr})))

    assert kept("bytes=1kb:") == [2048, 1 << 20]
    assert kept("bytes=:2kb") == [512, 2048]
    assert kept("bytes=1kb:1mb") == [2048, 1 << 20]
    assert kept("2kb") == [2048]
    assert kept("bytes=2048") == []            # as in pprof: no unit never equals a value in bytes
    assert kept("2048") == [1 << 20]           # no key: any numeric label (here n=2048)
    assert kept("n=4") == [2048]               # a label without unit compares as a plain number
    assert kept("who=a") == [512, 1 << 20]
    assert kept("who:b") == [2048]             # no key: regex on "key:value"
    assert kept("who:a,bytes") == []           # every regex must match a string label
    assert kept("who=a", ignore=True) == [2048]
    r = filters.apply(p, Options(tagfocus="who=z"))
    assert r.unmatched() == ["tagfocus"] and r.active == ["tagfocus=who=z"]


def test_hidden_frames_merge_equal_stacks_and_keep_the_tree_valid():
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    main, a, x = b.frame("main"), b.frame("a"), b.frame("x")
    b.add_sample(b.stack([a, main]), [1])
    b.add_sample(b.stack([a, x, main]), [2])
    p = b.finish()
    q = filters.apply(p, Options(hide="^x$")).profile
    check(q)
    assert len(set(q.samples.stack.tolist())) == 1  # main -> a, twice: one callsite
    assert q.stack_locations(1) == p.stack_locations(0)


def test_rows_point_back_to_the_original_samples():
    p = _profile()
    r = filters.apply(p, Options(focus="idle", time_range=(SEC, None)))
    assert r.rows.tolist() == [1, 3]
    assert np.array_equal(r.profile.samples.values, p.samples.values[r.rows])


def test_cli_warns_once_per_filter_that_matched_nothing(cli, peer):
    path = peer / "generated/go_runtime_pprof/cpu.pb.gz"
    r = cli("top", path, "--focus", "nomatch", "--tagignore", "worker=zzz", "--hide", "spin")
    assert r.code == 0
    assert r.err.splitlines() == ["polyprof: warning: --focus matched nothing",
                                  "polyprof: warning: --tagignore matched nothing"]
    assert "Showing nodes accounting for 0, 0% of 500ms total" in r.out


@pytest.mark.parametrize("argv,message", [
    (["--focus", "("], "polyprof: error: bad regular expression --focus='('"),
    (["--time-range", "0:1s"], "polyprof: error: cannot select by --time-range: the samples of this profile have no timestamps"),
    (["--tagfocus", "w=("], "polyprof: error: bad regular expression in --tagfocus='w=('"),
])
def test_cli_bad_filters_exit_6_with_one_line(cli, peer, argv, message):
    for verb in ("top", "tree", "traces", "info", "dump"):
        r = cli(verb, peer / "generated/go_runtime_pprof/cpu.pb.gz", *argv)
        assert r.code == 6 and r.out == "", verb
        assert len(r.err.splitlines()) == 1 and r.err.startswith(message), verb
