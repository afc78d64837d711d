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


def offcpu_times(sample_tid: list[int], sample_time: list[int], is_offcpu: list[bool],
                 switches: list[tuple[int, int, int, bool]]) -> tuple[np.ndarray, int]:
    """Off-CPU nanoseconds per sample, and how many switch-off samples never ended.

    ``switches`` are (samples before it, time, tid, switch_on) in file order.
    """
    n = len(sample_tid)
    out = np.zeros(n, dtype=np.int64)
    pending: dict[int, int] = {}

    def close(tid: int, time: int) -> None:
        p = pending.pop(tid, None)
        if p is not None:
            start = sample_time[p]
            out[p] = time - start if start < time else 1

    k = 0
    for i in range(n + 1):
        while k < len(switches) and switches[k][0] <= i:
            _, time, tid, on = switches[k]
            if on:
                close(tid, time)
            k += 1
        if i == n:
            break
        tid = sample_tid[i]
        close(tid, sample_time[i])
        if is_offcpu[i]:
            pending[tid] = i
    return out, len(pending)
