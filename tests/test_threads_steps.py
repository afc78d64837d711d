"""The thread of every sample and the timeline's timed samples, as computed step by step with
few sample-long temporaries (the web view's start-up), against plain formulas: random sample
tables with and without pid/tid columns, thread labels and times, and real Perfetto and
simpleperf peer files."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import peer_files

import polyprof
from polyprof.analysis import filters, tags, timeline
from polyprof.analysis.options import resolve
from polyprof.model import threads
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile
from polyprof.model.threads import ThreadInfo, sample_threads

PEERS = (peer_files("google__perfetto/diff_tests_binary/**/*.pftrace")
         + [p for p in peer_files("jbeich__platform_system_extras/**/*") + peer_files("generated/**/*")
            if p.is_file() and p.suffix in (".trace", ".proto_data", ".data")])


def reference_threads(p: Profile) -> tuple[list[int], list[tuple]]:
    """The thread of each sample by a dict of (pid, tid, name) rows in first-appearance order."""
    s = p.samples
    names, ls_pids, ls_tids = threads._labelset_columns(p)
    ls = s.labelset.tolist()
    pids = s.pid.tolist() if s.pid is not None else [int(ls_pids[i]) for i in ls]
    tids = s.tid.tolist() if s.tid is not None else [int(ls_tids[i]) for i in ls]
    seen: dict[tuple, int] = {}
    of = [seen.setdefault((pid, tid, names[i]), len(seen)) for pid, tid, i in zip(pids, tids, ls)]
    table = {t.tid: t for t in p.extras.threads}
    out = []
    for pid, tid, name in seen:
        pid, tid = (None if pid < 0 else pid), (None if tid < 0 else tid)
        listed = table.get(tid) if tid is not None else None
        pid = pid if pid is not None else (listed.pid if listed else None)
        name = name or (listed.name if listed else None)
        out.append((name, pid, tid, p.extras.process_names.get(pid) if pid is not None else None))
    return of, out or [(None, None, None, None)]


def reference_timed(fr: filters.FilterResult, of: np.ndarray, rank: np.ndarray) -> tuple:
    """(origin, starts, times, running, untimed): timed samples sorted by (group, time), stable."""
    _, values, _, _ = fr.column(resolve(None).sample_index)
    values = values.astype(np.int64)
    times, present = tags.sample_numbers(fr.profile, "time")
    otimes, opresent = tags.sample_numbers(fr.original, "time")
    origin = filters.time_origin(fr.original, otimes[opresent])
    rel, grp = times[present] - origin, rank[of[present]]
    order = np.lexsort((rel, grp))
    starts = np.concatenate(([0], np.cumsum(np.bincount(grp, minlength=rank.size))))
    return (origin, starts, rel[order], np.concatenate(([0], np.cumsum(values[present][order]))),
            int(values[~present].sum()))


def check(p: Profile) -> None:
    of, infos = sample_threads(p)
    want_of, want_infos = reference_threads(p)
    assert of.dtype == np.int32 and of.tolist() == want_of  # (int32: half the memory per sample)
    assert [(t.name, t.pid, t.tid, t.process_name) for t in infos] == want_infos
    if not p.sample_types:
        return
    fr = filters.apply(p, None)
    for group in timeline.GROUPS:
        got = timeline.timed_samples(fr, group=group, threads=(of, infos))
        gof, rows = timeline._groups((of, infos), group)
        _, values, _, _ = fr.column(resolve(None).sample_index)
        weight = [int(values[gof == g].sum()) for g in range(len(rows))]
        count = [int((gof == g).sum()) for g in range(len(rows))]
        order = sorted(range(len(rows)), key=lambda g: (-abs(weight[g]), -count[g], g))  # heaviest first
        assert [(r.weight, r.samples) for r in got.threads] == [(weight[g], count[g]) for g in order]
        rank = np.argsort(np.array(order, dtype=np.int64)) if rows else np.zeros(0, np.int64)
        times, present = tags.sample_numbers(p, "time")
        if times is None or not present.any():
            assert got.times.size == 0
            continue
        origin, starts, rel, running, untimed = reference_timed(fr, gof, rank)
        assert (got.origin, got.untimed) == (origin, untimed)
        for a, b in ((got.starts, starts), (got.times, rel), (got.running, running)):
            assert a.dtype == np.int64 and np.array_equal(a, b)


def random_profile(rng: random.Random, *, columns: bool, labels: bool, times: str) -> Profile:
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    stacks = [b.stack([b.frame(f"f{i}")]) for i in range(3)]
    sets = [[Label("thread_name", str=rng.choice(["ui", "worker", "io"]))] if rng.random() < 0.6 else []
            for _ in range(rng.randint(1, 6))]
    if labels:  # numeric pid/tid labels, sometimes absent
        sets = [s + [Label("tid", num=rng.randint(1, 4))] * (rng.random() < 0.8)
                + [Label("pid", num=rng.randint(1, 2))] * (rng.random() < 0.8) for s in sets]
    clock = 1_000
    for _ in range(rng.randint(1, 400)):
        clock += rng.randint(-50, 100) if times == "shuffled" else rng.randint(0, 100)
        time_of = clock if times in ("sorted", "shuffled") else None
        chosen = rng.choice(sets)
        if times == "label" and rng.random() < 0.8:
            chosen = chosen + [Label("time", num=clock)]
        b.add_sample(rng.choice(stacks), [rng.randint(-3, 9)], labels=chosen, time=time_of,
                     pid=rng.randint(0, 3) if columns else None, tid=rng.randint(0, 5) if columns else None)
    b.meta.extras.threads = [polyprof.model.extras.ThreadRecord(2, 1, "listed")]
    b.meta.extras["process_names"] = {"1": "app"}
    return b.finish()


@pytest.mark.parametrize("step", [3, 1 << 19])
@pytest.mark.parametrize("columns", [False, True])
@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("times", ["none", "sorted", "shuffled", "label"])
def test_random_tables(monkeypatch, step, columns, labels, times):
    monkeypatch.setattr(threads, "_STEP", step)  # many steps: threads first seen in later ones
    rng = random.Random(f"{step}{columns}{labels}{times}")
    for _ in range(10):
        check(random_profile(rng, columns=columns, labels=labels, times=times))


def test_no_samples():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    of, infos = sample_threads(b.finish())
    assert of.size == 0 and infos == [ThreadInfo(None, None, None)]


def test_peer_files(monkeypatch):
    if not PEERS:
        pytest.skip("peer data not found (set POLYPROF_PEER_DATA)")
    monkeypatch.setattr(threads, "_STEP", 5)
    checked = with_threads = 0
    for path in PEERS:
        try:
            profiles = polyprof.read_all(path)
        except polyprof.PolyprofError:
            continue  # empty and other-format files among the peers' test data
        for p in profiles:
            check(p)
            checked += 1
            with_threads += len(sample_threads(p)[1]) > 1
    assert checked > 50 and with_threads > 5, (checked, with_threads)


@pytest.mark.parametrize("groups", [1, 3, 64, 65])
@pytest.mark.parametrize("n", [0, 1, 10, 5000])
def test_stable_order_is_argsort(monkeypatch, groups, n):
    """The timeline's grouping of rows (int32, a block at a time, for few groups) is the stable argsort."""
    monkeypatch.setattr(timeline, "_BLOCK", 7)  # blocks that split every group's rows
    rng = np.random.default_rng(n * 100 + groups)
    grp = rng.integers(0, groups, n).astype(np.int16)
    got = timeline._stable_order(grp, np.bincount(grp, minlength=groups))
    assert got.tolist() == np.argsort(grp, kind="stable").tolist()
    assert got.dtype == (np.int32 if groups <= timeline._FEW_GROUPS else np.int64)
