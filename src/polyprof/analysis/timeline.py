"""``timeline``: weight over time per thread or process, and the threads with their totals.

Threads are found as the filters and the viewer writers find them
(:func:`polyprof.model.threads.sample_threads`: pid/tid columns or labels,
thread names from labels or the readers' tables). Sample times are the
``time`` column or a numeric ``time`` label, relative to the same origin as
the ``time_range`` filter (:func:`polyprof.analysis.filters.time_origin`
over the profile *before* filtering), so a window read off the timeline is
exactly the ``time_range`` that selects it.

The time axis, from the first to the last sample, is cut into ``bins``
equal bins (half-open, like ``time_range``); each row of ``counts`` is one
thread's (or process's) weight per bin. Samples without a time are counted
in the thread table but not on the axis. Lost: nothing is summed twice; a
profile without times has ``has_time`` False and no bins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters, tags
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import sum_by
from polyprof.analysis.options import Options, resolve
from polyprof.analysis.result import Result, percent
from polyprof.errors import OptionsError
from polyprof.model.threads import ThreadInfo, sample_threads
from polyprof.model.profile import Profile, ValueType

__all__ = ["GROUPS", "ThreadRow", "TimedSamples", "TimelineResult", "timed_samples", "timeline"]

GROUPS = ("thread", "process")


@dataclass(frozen=True)
class ThreadRow:
    """One thread (or process): identity as the profile gives it (None = not said),
    its number of sample rows, summed weight and share of the total before filtering."""

    pid: int | None
    tid: int | None
    thread: str | None
    process: str | None
    samples: int
    weight: int
    percent: float = 0.0

    @property
    def label(self) -> str:
        """``name (pid P, tid T)``-style text."""
        name = self.thread if self.tid is not None or self.thread else (self.process or "")
        ids = ", ".join(f"{k} {v}" for k, v in (("pid", self.pid), ("tid", self.tid)) if v is not None)
        return (f"{name or 'all samples'} ({ids})" if ids else name or "all samples").strip()


@dataclass(repr=False)
class TimelineResult(Result):
    """Threads (``threads`` table) and their weight per time bin (``bins`` table:
    one row per group and bin with ``row``, ``bin``, ``start`` (relative ns) and
    ``weight``; empty bins left out)."""

    ROW: ClassVar[type] = ThreadRow
    TABLES: ClassVar[tuple[str, ...]] = ("threads", "bins")

    sample_type: ValueType
    group: str                 # "thread" or "process"
    total: int                 # before filtering
    threads: list[ThreadRow]   # by weight, largest first
    has_time: bool = False
    origin: int = 0            # absolute ns of relative time 0
    start: int = 0             # relative ns of the first bin's left edge
    bin_nanos: int = 0
    counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))  # (threads, bins)
    untimed: int = 0           # weight of samples without a time

    def _row_objects(self) -> list[ThreadRow]:
        return self.threads

    def _columns(self, table: str) -> dict[str, Any]:
        if table == "threads":
            return super()._columns(table)
        row, col = np.nonzero(self.counts)
        return {"row": row, "bin": col, "start": self.start + col * self.bin_nanos, "weight": self.counts[row, col]}

    @property
    def end(self) -> int:
        """Relative ns just after the last bin."""
        return self.start + self.bin_nanos * self.counts.shape[1]

    def _summary(self) -> str:
        axis = f", {self.counts.shape[1]} bins of {self.bin_nanos}ns" if self.has_time else ", no times"
        return f"{self.sample_type}, {len(self.threads)} {self.group}s{axis}"


@dataclass
class TimedSamples:
    """One filtered profile's samples as every binning of its timeline needs them: the group
    table, and the timed samples sorted by (group, time) with their running weight, so a
    binning is a binary search per group and bin edge (a server answers any ``bins`` at once)."""

    sample_type: ValueType
    group: str
    total: int
    threads: list[ThreadRow]   # by weight, largest first
    untimed: int = 0
    origin: int = 0            # absolute ns of relative time 0
    times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # relative ns, by (group, time)
    running: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # weight before each, and all
    starts: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # each group's first, and the end

    def binned(self, bins: int) -> TimelineResult:
        """The timeline in ``bins`` equal bins from the first to the last timed sample."""
        result = TimelineResult(self.sample_type, self.group, self.total, list(self.threads))
        if not self.times.size:
            return result
        first, last = int(self.times.min()), int(self.times.max())
        width = max(-(-(last - first + 1) // bins), 1)
        n_bins = (last - first) // width + 1
        edges = first + width * np.arange(n_bins + 1, dtype=np.int64)  # bin b: [edges[b], edges[b + 1])
        counts = np.zeros((len(self.threads), n_bins), dtype=np.int64)
        for g in range(len(self.threads)):
            lo, hi = int(self.starts[g]), int(self.starts[g + 1])
            if hi > lo:
                counts[g] = np.diff(self.running[lo + np.searchsorted(self.times[lo:hi], edges)])
        result.has_time, result.origin, result.start, result.bin_nanos = True, self.origin, first, width
        result.counts, result.untimed = counts, self.untimed
        return result


#: Samples gathered per step into the running weights (and grouped per step by _stable_order).
_BLOCK = 1 << 20
#: Groups up to which _stable_order groups the rows itself (one pass over the rows per group).
_FEW_GROUPS = 64


def _stable_order(grp: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``np.argsort(grp, kind="stable")`` (``counts``: the rows of each group), as int32 row
    numbers when the groups are few: a block of rows at a time, each group's rows put after
    the ones before them (argsort's int64 answer was 52 MB for 6.5M samples)."""
    if counts.size > _FEW_GROUPS or grp.size >= 2**31:
        return np.argsort(grp, kind="stable")
    out = np.empty(grp.size, dtype=np.int32)
    at = np.concatenate(([0], np.cumsum(counts)[:-1]))  # where each group's next row goes
    groups = np.flatnonzero(counts).tolist()
    for lo in range(0, grp.size, _BLOCK):
        block = grp[lo:lo + _BLOCK]
        for g in groups:
            rows = np.flatnonzero(block == g)
            out[at[g]:at[g] + rows.size] = rows + lo
            at[g] += rows.size
    return out


def timed_samples(src: Profile | FilterResult, options: Options | None = None, *, group: str = "thread",
                  threads: tuple[np.ndarray, list[ThreadInfo]] | None = None, **overrides: Any) -> TimedSamples:
    """The samples of ``src`` (filters of ``options`` applied) grouped by ``group`` and sorted
    by time: what :func:`timeline` bins. ``threads`` is
    :func:`~polyprof.model.threads.sample_threads` of the filtered profile when the caller has
    it already."""
    if group not in GROUPS:
        raise OptionsError(f"unknown timeline group {{group}}={group!r}; choose from {', '.join(GROUPS)}",
                           options=("group",))
    o = resolve(options, **overrides)
    fr = filters.prepare(src, o)
    p = fr.profile
    _, values, vt, total = fr.column(o.sample_index)
    of, rows = _groups(threads or sample_threads(p), group)
    samples = np.bincount(of, minlength=len(rows)) if of.size else np.zeros(len(rows), np.int64)
    weight = sum_by(of, values, len(rows))
    order = sorted(range(len(rows)), key=lambda i: (-abs(int(weight[i])), -int(samples[i]), i))
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = np.arange(len(rows))
    table = [ThreadRow(*rows[i], samples=int(samples[i]), weight=int(weight[i]),
                       percent=percent(int(weight[i]), total)) for i in order]
    out = TimedSamples(vt, group, total, table, starts=np.zeros(len(rows) + 1, np.int64))
    times, present = tags.sample_numbers(p, "time")
    if times is None or present is None or not present.any():
        return out
    # Millions of samples: each step below keeps at most a few sample-long arrays alive (the
    # server's start-up peak is this warm-up), and none when every sample has a time.
    everywhere = bool(present.all())
    origin_times, origin_present = (times, present) if fr.original is p else tags.sample_numbers(fr.original, "time")
    assert origin_times is not None and origin_present is not None  # the original has every sample
    out.origin = filters.time_origin(fr.original, origin_times if origin_present.all() else
                                     origin_times[origin_present])
    del origin_times, origin_present
    timed = None if everywhere else np.flatnonzero(present)
    grp = rank.astype(np.int16 if len(rows) < 2**15 else np.int64)  # narrow: a radix sort, a small copy
    grp = grp[of] if timed is None else grp[of[timed]]
    counts = np.bincount(grp, minlength=len(rows))
    by_group = _stable_order(grp, counts)
    out.starts = np.concatenate(([0], np.cumsum(counts)))
    at = by_group if timed is None else timed[by_group]  # the sample of each position
    out.times = times[at]
    out.times -= out.origin
    falls = np.flatnonzero(out.times[1:] < out.times[:-1]) + 1
    if not np.isin(falls, out.starts).all():  # a thread's samples out of time order: sort by time too
        del at, by_group
        rel = (times if timed is None else times[timed]) - out.origin
        by_group = np.lexsort((rel, grp))
        out.times = rel[by_group]
        del rel
        at = by_group if timed is None else timed[by_group]
    del by_group, grp
    out.running = np.empty(at.size + 1, dtype=np.int64)
    out.running[0] = 0
    for lo in range(0, at.size, _BLOCK):  # widened a block at a time (compact int32 values: no int64 copy)
        out.running[1 + lo:1 + lo + _BLOCK] = values[at[lo:lo + _BLOCK]]
    np.cumsum(out.running[1:], out=out.running[1:])
    out.untimed = 0 if timed is None else int(values[~present].sum())
    return out


def timeline(src: Profile | FilterResult, options: Options | None = None, *, bins: int = 300,
             group: str = "thread", threads: tuple[np.ndarray, list[ThreadInfo]] | None = None,
             samples: TimedSamples | None = None, **overrides: Any) -> TimelineResult:
    """Weight per ``group`` (thread or process) over ``bins`` time bins, filters of
    ``options`` applied (pass ``time_range=None`` for the whole axis with a window
    drawn over it). Keywords override fields of ``options``. ``samples`` is
    :func:`timed_samples` of the same arguments when the caller keeps it (a server binning
    one profile several ways); ``threads`` as for it."""
    if not 1 <= bins <= 100_000:
        raise OptionsError(f"{{bins}}={bins}: choose between 1 and 100000", options=("bins",))
    found = samples or timed_samples(src, options, group=group, threads=threads, **overrides)
    return found.binned(bins)


def _groups(found: tuple[np.ndarray, list[ThreadInfo]],
            group: str) -> tuple[np.ndarray, list[tuple[int | None, int | None, str | None, str | None]]]:
    """(group of every sample, (pid, tid, thread name, process name) of every group), from the
    samples' threads ``found``."""
    of, threads = found
    if group == "thread":
        return of, [(t.pid, t.tid, t.name, t.process_name) for t in threads]
    keys: dict[int | None, int] = {}
    proc = np.array([keys.setdefault(t.pid, len(keys)) for t in threads], dtype=np.int64)
    names: dict[int | None, str | None] = {}
    for t in threads:
        names.setdefault(t.pid, t.process_name)
        names[t.pid] = names[t.pid] or t.process_name
    return (proc[of] if of.size else of), [(pid, None, None, names[pid]) for pid in keys]
