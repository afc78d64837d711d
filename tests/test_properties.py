"""Hypothesis properties of the model, the pprof writer and merge."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyprof
from polyprof.analysis.options import Options
from polyprof.analysis.top import top
from polyprof.formats import pprof
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.merge import merge
from polyprof.model.profile import Label
from polyprof.model.validate import check

NAMES = st.text(min_size=0, max_size=12)  # any unicode, including empty and control characters
LABELS = st.lists(st.one_of(
    st.builds(lambda k, v: Label(k, str=v), st.sampled_from(["thread", "span"]), st.text(min_size=1, max_size=6)),
    st.builds(lambda k, n: Label(k, num=n, unit="bytes"), st.sampled_from(["bytes", "size"]),
              st.integers(-2**40, 2**40))), max_size=3)


@st.composite
def profiles(draw):
    """Random profiles: shared functions, inline frames, labels, negative values."""
    b = ProfileBuilder("test")
    width = draw(st.integers(1, 3))
    b.set_sample_types([(f"t{i}", draw(st.sampled_from(["count", "bytes", "nanoseconds"]))) for i in range(width)])
    names = draw(st.lists(NAMES, min_size=1, max_size=8))
    mapping = b.mapping(0x1000, 0x9000, 0, draw(NAMES), draw(NAMES), draw(st.integers(0, 15)))
    locs = []
    for i in range(draw(st.integers(1, 10))):
        lines = [(b.function(draw(st.sampled_from(names)), "", "f.c", 0), draw(st.integers(0, 500)), 0)
                 for _ in range(draw(st.integers(0, 3)))]
        locs.append(b.location(draw(st.sampled_from([-1, mapping])), 0x1000 + i, lines))
    for _ in range(draw(st.integers(0, 25))):
        stack = b.stack(draw(st.lists(st.sampled_from(locs), max_size=8)))
        values = draw(st.lists(st.integers(-10**12, 10**12), min_size=width, max_size=width))
        b.add_sample(stack, values, labels=draw(LABELS))
    return b.finish()


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(profiles())
def test_totals_and_dump_survive_pprof_write_read(p):
    check(p)
    out = io.BytesIO()
    pprof.write(p, out, polyprof.WriteOptions())
    q = polyprof.read(out.getvalue())
    check(q)
    assert q.totals() == p.totals()
    assert dump(q).split("\n", 2)[2] == dump(p).split("\n", 2)[2]  # all but the format line


@SETTINGS
@given(profiles())
def test_merge_with_itself_doubles_every_total(p):
    doubled = merge([p, p])
    check(doubled)
    assert doubled.totals() == [2 * t for t in p.totals()]
    assert len(doubled.samples) == 2 * len(p.samples)
    t1, t2 = top(p, Options(nodecount=0)), top(doubled, Options(nodecount=0))
    assert [(r.name, 2 * r.flat, 2 * r.cum) for r in t1.rows] == \
        [(r.name, r.flat, r.cum) for r in t2.rows] or sorted((r.name, 2 * r.flat, 2 * r.cum) for r in t1.rows) == \
        sorted((r.name, r.flat, r.cum) for r in t2.rows)


@SETTINGS
@given(profiles())
def test_top_flat_sums_to_the_total_of_non_empty_stacks(p):
    r = top(p, Options(nodecount=0, nodefraction=0))
    has_stack = p.samples.stack >= 0
    index = p.default_index()
    assert sum(row.flat for row in r.rows) == int(p.samples.values[has_stack, index].sum())
    for row in r.rows:  # cum >= flat for non-negative data, and never beyond the total of |values|
        assert abs(row.cum) <= int(np.abs(p.samples.values[:, index]).sum())


def test_merge_keeps_agreed_extras_and_every_differing_value():
    def one(extras):
        b = ProfileBuilder("test")
        b.set_sample_types([("samples", "count")])
        b.add_sample(b.stack([b.frame("f")]), [1])
        b.meta.extras.update(extras)
        return b.finish()

    merged = merge([one({"app": "x", "lost": 1}), one({"app": "x", "lost": 3}), one({"app": "x"})])
    assert merged.extras == {"app": "x", "merged_extras": {"lost": [1, 3, None]}}


@SETTINGS
@given(st.lists(st.lists(st.integers(0, 5), max_size=12), max_size=40), st.booleans())
def test_bulk_stack_interning_numbers_callsites_in_pre_order(stacks, leaf_first):
    from polyprof.model.profile import CallsiteTable

    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    locs = [b.location(-1, 0x1000 + i, []) for i in range(6)]
    flat = np.array([locs[x] for s in stacks for x in s], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum([len(s) for s in stacks]))).astype(np.int64)
    leaves = b.stacks_from_csr(flat, offsets, leaf_first=leaf_first)
    b.add_samples_bulk(leaves, np.ones((len(stacks), 1), dtype=np.int64))
    p = b.finish()
    cs = p.callsites
    # The same stacks, frame by frame.
    expected = [list(reversed(s)) if leaf_first else list(s) for s in stacks]
    assert [list(reversed(cs.path(int(c)))) if c >= 0 else [] for c in leaves] == \
        [[locs[x] for x in s] for s in expected]
    # Pre-order: every subtree is an id range, and a generic Euler tour of the
    # same tree (no pre-order promise) hands out exactly these positions.
    size = cs.preorder_size()
    if not len(cs):
        return
    assert size is not None
    plain = CallsiteTable(cs.parent.copy(), cs.location.copy())
    assert plain.preorder_size() is None
    tin, tout = plain.euler()
    assert tin.tolist() == list(range(len(cs))) and (tout - tin + 1).tolist() == size.tolist()
    values = np.arange(len(cs), dtype=np.int64) * 3 - 7
    assert cs.subtree_sums(values).tolist() == plain.subtree_sums(values).tolist()
    assert plain.depth().tolist() == cs.depth().tolist()
