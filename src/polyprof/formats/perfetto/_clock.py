"""Clock snapshots and the conversion of timestamps to trace time.

Every snapshot lists clocks read at the same moment. A clock converts to
another through a path of snapshots that hold both ends of each hop; on each
hop the latest snapshot at or before the value is used (the first one for
earlier values), as trace processor does. Conversion runs once, at the end
of a read, over numpy arrays, so snapshots written late in a trace still
count. The trace clock is BOOTTIME unless a snapshot names another
``primary_trace_clock``. Values that no snapshot path can convert are left
as they are and counted (a warning says how many).

Clock keys are the builtin id, or ``(sequence, id)`` for the sequence-scoped
ids 64-127.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable

import numpy as np

from polyprof.formats.perfetto._schema import BOOTTIME
from polyprof.model.columns import distinct

__all__ = ["Clocks", "TraceTimes", "wrap64"]


def wrap64(value: int) -> int:
    """A wire uint64 as the int64 trace processor sees (values past 2**63 wrap to negative)."""
    return ((value + (1 << 63)) % (1 << 64)) - (1 << 63)


class Clocks:
    """All snapshots of a trace, and conversions between clocks."""

    def __init__(self) -> None:
        self.trace_clock: Hashable = BOOTTIME
        self._snapshots: list[dict[Hashable, int]] = []
        self._multiplier: dict[Hashable, int] = {}
        self.incremental: set[Hashable] = set()
        self._hops: dict[tuple[Hashable, Hashable], tuple[np.ndarray, np.ndarray]] = {}

    @staticmethod
    def key(clock_id: int, seq: int) -> Hashable:
        return (seq, clock_id) if 64 <= clock_id <= 127 else clock_id

    def multiplier(self, key: Hashable) -> int:
        return self._multiplier.get(key, 1)

    def add_snapshot(self, readings: list[tuple[Hashable, int, int, bool]], primary: int | None) -> None:
        """Record one snapshot: (clock key, raw value, unit multiplier ns or 0, is_incremental)."""
        snap: dict[Hashable, int] = {}
        for key, value, unit, incremental in readings:
            if unit:
                self._multiplier[key] = unit
            if incremental:
                self.incremental.add(key)
            snap[key] = wrap64(value * self.multiplier(key))
        if primary:
            self.trace_clock = primary
        if len(snap) > 1:
            self._snapshots.append(snap)
            self._hops.clear()

    def has_snapshots(self) -> bool:
        return bool(self._snapshots)

    def _path(self, src: Hashable, dst: Hashable) -> list[Hashable] | None:
        graph: dict[Hashable, set[Hashable]] = {}
        for snap in self._snapshots:
            for a in snap:
                graph.setdefault(a, set()).update(b for b in snap if b != a)
        prev: dict[Hashable, Hashable | None] = {src: None}
        todo = deque([src])
        while todo:
            cur = todo.popleft()
            if cur == dst:
                path = [cur]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1]
            for nxt in sorted(graph.get(cur, ()), key=repr):
                if nxt not in prev:
                    prev[nxt] = cur
                    todo.append(nxt)
        return None

    def _hop(self, a: Hashable, b: Hashable) -> tuple[np.ndarray, np.ndarray]:
        pair = self._hops.get((a, b))
        if pair is None:
            rows = sorted((s[a], s[b]) for s in self._snapshots if a in s and b in s)
            pair = self._hops[(a, b)] = (np.array([r[0] for r in rows], dtype=np.int64),
                                         np.array([r[1] for r in rows], dtype=np.int64))
        return pair

    def _convert(self, src: Hashable, dst: Hashable, ns: np.ndarray) -> np.ndarray | None:
        if src == dst:
            return ns
        path = self._path(src, dst) if self._snapshots else None
        if path is None:
            return None
        for a, b in zip(path, path[1:]):
            lo, hi = self._hop(a, b)
            at = np.maximum(np.searchsorted(lo, ns, side="right") - 1, 0)
            ns = ns + (hi[at] - lo[at])
        return ns

    def to_trace(self, key: Hashable, raw: np.ndarray) -> tuple[np.ndarray, bool]:
        """Convert raw values of clock ``key`` to trace time; (values, converted?)."""
        ns = raw.astype(np.int64) * self.multiplier(key)
        out = self._convert(key, self.trace_clock, ns)
        return (ns, False) if out is None else (out, True)

    def to_clock(self, value: int, target: Hashable) -> int | None:
        """Convert one trace-time value to clock ``target`` (e.g. REALTIME), if possible."""
        out = self._convert(self.trace_clock, target, np.array([value], dtype=np.int64))
        return None if out is None else int(out[0])


class TraceTimes:
    """Clock columns of a read: a small index per (clock, sequence) and the conversion of
    timestamp columns to trace time at the end (unconvertible ones counted in ``stats``)."""

    def __init__(self, stats: Counter) -> None:
        self.clocks = Clocks()
        self.stats = stats
        self.keys: list[Hashable | None] = [None]
        self._index: dict[Hashable | None, int] = {None: 0}

    def clock_index(self, clock_id: int, seq: int) -> int:
        key = self.clocks.key(clock_id, seq) if clock_id else None
        idx = self._index.get(key)
        if idx is None:
            idx = self._index[key] = len(self.keys)
            self.keys.append(key)
        return idx

    def trace_times(self, raw: np.ndarray, has: np.ndarray, clock: np.ndarray, in_place: bool = False) -> np.ndarray:
        """Trace time of every value (clock index per value); missing ones take the latest time before.
        ``in_place``: an int64 ``raw`` the caller no longer needs is converted in place (no copy)."""
        out = raw if in_place and raw.dtype == np.int64 else np.array(raw, dtype=np.int64)  # raw may be uint64
        for c in distinct(clock).tolist():
            key = self.keys[c]
            if key is None:
                continue
            sel = (clock == c) & has
            if key in self.clocks.incremental:
                self.stats["timestamps on incremental clocks (kept as deltas)"] += int(sel.sum())
                continue
            out[sel], ok = self.clocks.to_trace(key, raw[sel])
            if not ok and sel.any():
                self.stats[f"timestamps not convertible to trace time (clock {key!r}; kept raw)"] += int(sel.sum())
        if not has.all():
            low = np.iinfo(np.int64).min
            latest = np.maximum.accumulate(np.where(has, out, low))
            out = np.where(has, out, np.where(latest == low, 0, latest))
        return out
