"""``wire.background``: work for a second CPU (kernels loaded ahead, whether a CPU is spare)."""

from __future__ import annotations

import pytest

from polyprof.wire import background


@pytest.mark.parametrize(("cpus", "load", "running", "spare"), [
    (1, 0.0, 0, False),  # one CPU: never
    (2, 1.2, 5, True),  # a quiet last minute
    (2, 1.6, 0, True),  # the average lags (a benchmark's own two-thread reads), no other process runs now
    (2, 1.6, 1, False),  # ... but another one runs now
    (2, 2.6, 0, False),  # a busy last minute
    (8, 7.0, 3, True),
])
def test_a_cpu_is_spare_by_the_load_average_or_by_what_runs_now(monkeypatch, cpus, load, running, spare):
    monkeypatch.setattr(background.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    monkeypatch.setattr(background.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(background, "running_elsewhere", lambda: running)
    assert background.spare_cpu() is spare


def test_running_elsewhere_leaves_this_process_out():
    # (read on Linux, not the sentinel; this process's threads may change state between the two reads)
    assert -8 < background.running_elsewhere() < 1 << 20


def test_warm_later_runs_the_calls_on_a_thread_and_swallows_their_failure():
    ran: list[str] = []
    background.warm_later(lambda: ran.append("warm"), "test-warm").join(timeout=60)

    def fail() -> None:
        ran.append("failed")
        raise RuntimeError("a kernel that would not load")

    thread = background.warm_later(fail, "test-warm")
    thread.join(timeout=60)
    assert ran == ["warm", "failed"] and not thread.is_alive() and thread.name == "test-warm"
