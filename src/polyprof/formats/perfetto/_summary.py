"""What a trace holds, over all the profiles read from it (for ``info``).

``polyprof.read`` merges profiles and keeps one profile's extras, so a
front end that wants the whole trace reads every profile
(``polyprof.read_all``) and summarizes them here: processes and threads
with their names, profile kinds with profile and sample counts, and losses
(kernel records lost, skipped samples, unwind errors, heapprofd client
errors) -- plus the reader's warnings.
"""

from __future__ import annotations

from typing import Any

from polyprof.model.profile import Profile

__all__ = ["summarize"]


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        into[k] = into.get(k, 0) + int(v)


def summarize(profiles: list[Profile]) -> dict[str, Any]:
    """A JSON-ready summary of the profiles of one trace."""
    processes: dict[str, str | int | None] = {}
    threads: dict[str, str | None] = {}
    kinds: dict[str, dict[str, int]] = {}
    losses: dict[str, Any] = {}
    lost_by_event: dict[str, dict[str, int]] = {}
    for p in profiles:
        labels = p.extras.profile_labels
        kind = str(labels.get("kind", "?"))
        entry = kinds.setdefault(kind, {"profiles": 0, "samples": 0})
        entry["profiles"] += 1
        entry["samples"] += len(p.samples)
        if "pid" in labels:
            processes.setdefault(str(labels["pid"]), labels.get("process_name"))
        if p.samples.tid is not None:
            for tid, ls in sorted(set(zip(p.samples.tid.tolist(), p.samples.labelset.tolist()))):
                name = next((lb.str for lb in p.labelsets[ls] if lb.key == "thread_name"), None)
                if name or str(tid) not in threads:
                    threads[str(tid)] = name
        if p.extras.kernel_records_lost:  # per event, shared by its profiles
            lost_by_event[str(labels.get("event", "?"))] = p.extras.kernel_records_lost
        _add(losses.setdefault("samples_skipped", {}), p.extras.samples_skipped)
        _add(losses.setdefault("unwind_errors", {}), p.extras.unwind_errors)
        error = p.extras.get("heapprofd", {}).get("client_error")
        if error:
            _add(losses.setdefault("heapprofd_client_errors", {}), {error: 1})
    if lost_by_event:
        losses["kernel_records_lost"] = lost_by_event
    warnings = sorted({w for p in profiles for w in p.warnings})
    return {"processes": processes, "threads": threads, "kinds": kinds,
            "losses": {k: v for k, v in losses.items() if v}, "warnings": warnings}
