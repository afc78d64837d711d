"""Hypothesis properties of the filters.

- Our vectorized filters give, sample by sample, what a literal transcription
  of pprof's algorithms (profile/filter.go, prune.go: per location, per
  sample, in Python lists) gives on random profiles with inline frames.
- Filters never add weight: the total and every function's cum can only
  shrink (flat may move to a caller when its callee is hidden or pruned).
- Every filtered profile passes the model's validity check.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyprof.analysis import filters
from polyprof.analysis.graph import callsite_weights, node_map, node_weights
from polyprof.analysis.options import Options
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label
from polyprof.model.validate import check

FUNCS = ["main", "run", "alpha", "beta", "gamma", "(anonymous namespace)::f", "g(int)", ""]
FILES = ["a.go", "b.c", ""]
MAPS = ["/bin/app", "/lib/libc.so", ""]
REGEX = st.sampled_from(["a", "^main$", "beta|gamma", "lib", r"\.c$", "run", "amm", "^g", "f", "zzz", "app"])


@st.composite
def profiles(draw):
    """Random profiles with inline lines, lineless frames, labels and non-negative values."""
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    maps = [b.mapping(0x1000 * (i + 1), 0x1000 * (i + 2), 0, f) for i, f in enumerate(MAPS)]
    locs = []
    for i in range(draw(st.integers(1, 9))):
        n_lines = draw(st.sampled_from([0, 1, 1, 1, 2, 3]))
        lines = [(draw(st.sampled_from([b.function(draw(st.sampled_from(FUNCS)), "", draw(st.sampled_from(FILES))),
                                         b.function(draw(st.sampled_from(FUNCS))), -1])), i + k, 0)
                 for k in range(n_lines)]  # -1: a line without a function
        locs.append(b.location(draw(st.sampled_from([-1, *maps])), 0x1000 * (i % 3 + 1) + i, lines))
    for _ in range(draw(st.integers(0, 20))):
        stack = b.stack(draw(st.lists(st.sampled_from(locs), max_size=7)))
        count = draw(st.integers(0, 3))
        labels = draw(st.sampled_from([(), (Label("worker", str="a"),), (Label("worker", str="b"),),
                                       (Label("bytes", num=2048),)]))
        b.add_sample(stack, [count, count * 10], labels=labels)
    return b.finish()


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- reference: pprof's algorithms, literally

def _locations(p):
    """Every location as [mapping file, [(function name, file name), ...innermost first]]."""
    out = []
    for i in range(len(p.locations)):
        m = int(p.locations.mapping[i])
        lines = [_line(p, int(p.lines.function[r])) for r in p.locations.lines_of(i)]
        out.append((p.mapping_file(m) if m >= 0 else None, lines))
    return out


def _line(p, fn: int):
    return (p.function_name(fn), p.strings[p.functions.filename[fn]]) if fn >= 0 else None


def _samples(p):
    return [(p.stack_locations(i) if p.samples.stack[i] >= 0 else [], p.samples.values[i].tolist())
            for i in range(len(p.samples))]


def _line_matches(rx, line):
    return line is not None and bool(rx.search(line[0]) or rx.search(line[1]))


def _reference(p, o: Options):
    """(stack as location contents, values) of every sample pprof keeps."""
    locs = {i: [m, list(lines)] for i, (m, lines) in enumerate(_locations(p))}
    samples = _samples(p)
    rx = {k: re.compile(getattr(o, k)) if getattr(o, k) else None for k in
          ("focus", "ignore", "hide", "show", "show_from", "prune_from")}
    if any(rx[k] for k in ("focus", "ignore", "hide", "show")):
        samples = _ref_by_name(locs, samples, rx)
    if rx["show_from"]:
        samples = _ref_show_from(locs, samples, rx["show_from"])
    if rx["prune_from"]:
        samples = _ref_prune_from(locs, samples, rx["prune_from"])
    return [([(locs[i][0], tuple(locs[i][1])) for i in stack], values) for stack, values in samples]


def _matches_name(rx, loc):
    return any(_line_matches(rx, ln) for ln in loc[1]) or (loc[0] is not None and bool(rx.search(loc[0])))


def _ref_by_name(locs, samples, rx):
    flag, hidden = {}, set()
    for i, loc in locs.items():
        if rx["ignore"] and _matches_name(rx["ignore"], loc):
            flag[i] = False
        elif rx["focus"] is None or _matches_name(rx["focus"], loc):
            flag[i] = True
        if rx["hide"] and _matches_name(rx["hide"], loc):
            mapped = loc[0] is not None and rx["hide"].search(loc[0])
            loc[1] = [] if mapped else [ln for ln in loc[1] if not _line_matches(rx["hide"], ln)]
            if not loc[1]:
                hidden.add(i)
        if rx["show"]:
            if not (loc[0] is not None and rx["show"].search(loc[0])):
                loc[1] = [ln for ln in loc[1] if ln is None or _line_matches(rx["show"], ln)]
            if not loc[1]:
                hidden.add(i)
    out = []
    for stack, values in samples:
        marks = [flag[i] for i in stack if i in flag]
        if False in marks or True not in marks:
            continue
        kept = [i for i in stack if i not in hidden]
        if kept:
            out.append((kept, values))
    return out


def _ref_show_from(locs, samples, rx):
    hit = set()
    for i, loc in locs.items():
        if loc[0] is not None and rx.search(loc[0]):
            hit.add(i)
            continue
        last = max((k for k, ln in enumerate(loc[1]) if _line_matches(rx, ln)), default=-1)
        if last >= 0:
            loc[1] = loc[1][:last + 1]
            hit.add(i)
    out = []
    for stack, values in samples:
        top = max((k for k, i in enumerate(stack) if i in hit), default=-1)
        if top >= 0:
            out.append((stack[:top + 1], values))
    return out


def _ref_prune_from(locs, samples, rx):
    prune = set()
    for i, loc in locs.items():
        for k, ln in enumerate(loc[1]):
            if ln is not None and ln[0] and rx.search(filters._simplify(ln[0])):
                prune.add(i)
                loc[1] = loc[1][k:]
                break
    out = []
    for stack, values in samples:
        first = next((k for k, i in enumerate(stack) if i in prune), None)
        out.append((stack[first:] if first is not None else stack, values))
    return out


def _ours(p):
    q = _locations(p)
    return [([(q[i][0], tuple(q[i][1])) for i in stack], values) for stack, values in _samples(p)]


OPTION_SETS = st.one_of(
    st.builds(lambda r: Options(focus=r), REGEX), st.builds(lambda r: Options(ignore=r), REGEX),
    st.builds(lambda r: Options(hide=r), REGEX), st.builds(lambda r: Options(show=r), REGEX),
    st.builds(lambda r: Options(show_from=r), REGEX), st.builds(lambda r: Options(prune_from=r), REGEX),
    st.builds(lambda a, b, c: Options(focus=a, ignore=b, hide=c), REGEX, REGEX, REGEX),
    st.builds(lambda a, b: Options(show=a, show_from=b), REGEX, REGEX),
    st.builds(lambda a, b, c: Options(hide=a, show_from=b, prune_from=c), REGEX, REGEX, REGEX),
)


@SETTINGS
@given(profiles(), OPTION_SETS)
def test_filters_do_what_pprof_does(p, o):
    result = filters.apply(p, o)
    check(result.profile)
    assert _ours(result.profile) == _reference(p, o)


def _cum_by_name(p, column: int) -> dict[str, int]:
    nodes = node_map(p)
    flat, cum = node_weights(p, nodes, callsite_weights(p, p.samples.values[:, column]))
    out: dict[str, int] = {}
    for n, name in enumerate(nodes.names):
        out[name] = out.get(name, 0) + int(cum[n])
    return out


@SETTINGS
@given(profiles(), OPTION_SETS, st.sampled_from([None, "worker=a", "bytes=1kb:", "b"]))
def test_filters_never_add_weight(p, o, tagfocus):
    o.tagfocus = tagfocus
    result = filters.apply(p, o)
    q = result.profile
    check(q)
    for column in range(len(p.sample_types)):
        assert int(q.samples.values[:, column].sum()) <= int(p.samples.values[:, column].sum())
        before = _cum_by_name(p, column)
        for name, cum in _cum_by_name(q, column).items():
            assert cum <= before.get(name, 0), name
    # every kept sample keeps its values and labels (rows point back at the original)
    assert np.array_equal(q.samples.values, p.samples.values[result.rows])
    assert [q.labelsets[i] for i in q.samples.labelset] == [p.labelsets[i] for i in p.samples.labelset[result.rows]]


@SETTINGS
@given(profiles(), OPTION_SETS, st.sampled_from([None, "worker=a", "bytes=1kb:"]), st.sampled_from([None, {1}, {1, 3}]),
       st.data())
def test_selected_columns_are_taken_from_the_input(p, o, tagfocus, pid, data):
    """The optional columns of a filtered copy (made on first use, by one mask over the input's
    own columns, through any chain of filters) equal the input's at the kept rows."""
    from polyprof.analysis.stacks import selected_from
    from polyprof.web.session import _array_bytes

    n = len(p.samples)
    columns = {"time": np.arange(n, dtype=np.int64) * 7 + 1_000, "pid": np.arange(n, dtype=np.int32) % 4,
               "tid": np.arange(n, dtype=np.int32) % 3 + 10, "cpu": (np.arange(n) % 2).astype(np.int16)}
    present = data.draw(st.sets(st.sampled_from(sorted(columns))))
    p.samples = dataclasses.replace(p.samples, **{k: v for k, v in columns.items() if k in present})
    o.tagfocus = tagfocus
    o.pid = pid if "pid" in present else None
    result = filters.apply(p, o)
    q = result.profile.samples
    assert result.rows.dtype == np.int32
    taken, mask = selected_from(q)
    if mask is not None:  # samples were dropped: the columns wait, their source is the input's own
        assert set(taken) == present and all(taken[k] is getattr(p.samples, k) for k in taken)
        assert np.array_equal(np.flatnonzero(mask), result.rows)
        _array_bytes(result.profile)  # weighing a cached copy makes no column
        assert all(q.is_deferred(k) for k in present)
    for name in ("time", "pid", "tid", "cpu"):  # the copied route: the input's column at the kept rows
        got, source = getattr(q, name), getattr(p.samples, name)
        if source is None:
            assert got is None
        else:
            assert got.dtype == source.dtype and np.array_equal(got, source[result.rows])


@SETTINGS
@given(st.lists(st.booleans(), max_size=40), st.integers(0, 3), st.integers(1, 7))
def test_rows_of_a_table_by_chunks_is_the_mask_index(mask, width, chunk):
    from polyprof.analysis.stacks import _rows_of

    keep = np.array(mask, dtype=bool)
    table = np.arange(len(keep) * width, dtype=np.int64).reshape(len(keep), width)
    got = _rows_of(table, keep, chunk)
    assert got.dtype == table.dtype and got.shape == table[keep].shape and np.array_equal(got, table[keep])
