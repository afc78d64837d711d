"""Work for the second CPU while a read decodes: kernels loaded ahead, and whether a CPU is spare.

numba loads a kernel's cached machine code on its first call (a few ms each, ~0.1 s for the
first one of a process). A reader that knows which kernels it will call later has them loaded
by :func:`warm_later` on a daemon thread while its own kernels run without the GIL. A pass split
over two threads asks :func:`spare_cpu` first: on a machine whose other work keeps every CPU
busy, the second thread only waits for one and adds the split's own work.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["running_elsewhere", "spare_cpu", "warm_later"]


def warm_later(calls: Callable[[], object], name: str) -> threading.Thread:
    """Run ``calls`` (first calls of compiled kernels on tiny inputs, with the argument types
    the read will pass) on a daemon thread named ``name``. A failure there costs only the time
    it meant to save: the read loads each kernel itself when it calls it."""
    def run() -> None:
        try:
            calls()
        except Exception:  # noqa: BLE001, S110 - see the docstring
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def spare_cpu() -> bool:
    """Whether a second thread would find a CPU: two CPUs or more, and a last-minute load
    average (which counts this process too: a benchmark running alone keeps it near 1) of at
    most CPUs - 0.5; or, as that average lags, of at most CPUs + 0.5 while no other process
    runs now (a benchmark's own two-thread reads just before push it over CPUs - 0.5
    on an otherwise idle machine)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:  # no load average here
        busy = 0.0
    return cpus >= 2 and (busy <= cpus - 0.5 or busy <= cpus + 0.5 and running_elsewhere() <= cpus - 2)


def running_elsewhere() -> int:
    """Threads of other processes running or ready to run at this moment: the kernel's count in
    /proc/loadavg less this process's running threads (a warm-up thread of its own does not
    count); a large number where those are not available."""
    try:
        with open("/proc/loadavg", "rb") as fh:
            running = int(fh.read().split()[3].split(b"/")[0])
        mine = 0
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/stat", "rb") as fh:
                mine += fh.read().rsplit(b")", 1)[1].split()[0] == b"R"
        return running - mine
    except (OSError, IndexError, ValueError):
        return 1 << 30
