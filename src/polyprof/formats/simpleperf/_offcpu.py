"""Off-CPU time of a ``--trace-offcpu`` recording, computed as simpleperf's report library does.

In such a recording event 0 is cpu-clock or task-clock and every sample of a
later event (``sched:sched_switch``) marks a thread being switched off the CPU,
with the stack where it blocked. Its off-CPU time runs until the thread's next
record, in file order: its next sample (of any event) or a ContextSwitch
record with ``switch_on`` set. A non-positive gap counts as 1 ns. A switch-off
sample with nothing after it has no end; it gets 0 and is counted.
"""

from __future__ import annotations

import numpy as np

__all__ = ["offcpu_times"]


def offcpu_times(tid: np.ndarray, time: np.ndarray, is_offcpu: np.ndarray,
                 switches: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, int]:
    """Off-CPU nanoseconds per sample, and how many switch-off samples never ended.

    ``switches`` are columns (samples before it, time, tid, switch_on) in file
    order. A switch-off sample ends at its thread's next event: a sample, or
    a switch-on record placed before the sample it precedes.
    """
    n = tid.size
    before, s_time, s_tid, on = (np.asarray(c) for c in switches)
    on_at = np.flatnonzero(on)
    # Events in file order: a switch with k samples before it sorts before sample k.
    place = np.concatenate([2 * np.arange(n, dtype=np.int64) + 1, 2 * before[on_at].astype(np.int64)])
    ev_tid = np.concatenate([tid, s_tid[on_at]]).astype(np.int64)
    ev_time = np.concatenate([time, s_time[on_at].view(np.int64)])
    order = np.lexsort((place, ev_tid))  # stable: equal places keep file order
    nxt = np.full(order.size, -1, dtype=np.int64)
    same = ev_tid[order][1:] == ev_tid[order][:-1]
    nxt[order[:-1][same]] = order[1:][same]
    out = np.zeros(n, dtype=np.int64)
    off = np.flatnonzero(np.asarray(is_offcpu))
    ends = nxt[off]
    closed = ends >= 0
    start, stop = time[off[closed]], ev_time[ends[closed]]
    out[off[closed]] = np.where(start < stop, stop - start, 1)
    return out, int((~closed).sum())
