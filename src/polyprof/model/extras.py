"""``Profile.extras``: per-format facts with no column, and the declared ones code relies on.

``extras`` stays a JSON-compatible dict (``info`` shows it, ``dump`` prints it,
writers carry over what their format holds), but the keys that code in
other modules depends on are declared here once, as typed properties:

=====================  =====================================================
``profile_labels``     what tells profiles of one input apart (process, heap,
                       event, dump time, ...); ``read`` labels merged samples
                       with them and picks the latest of cumulative dumps
``threads``            the reader's thread table: tid, pid, name (also
                       threads without samples)
``process_names``      pid -> process name
``lost_situation``     samples kept and lost by the recorder (simpleperf)
``kernel_records_lost``  records the kernel dropped, per CPU (Perfetto)
``lost_samples``       samples the recorder lost (a plain count)
``samples_skipped``,   samples per reason the recorder skipped or could not
``unwind_errors``,     unwind (Perfetto; simpleperf)
``unwinding_failures``
``truncated_stacks``   samples whose stack the recorder cut
=====================  =====================================================

Readers set them with ``p.extras.threads = ...``; everything else reads
them through the properties, never by string key. What is stored is plain
JSON (lists and dicts), so dumps and ``info --format json`` show the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = ["Extras", "LostSituation", "ThreadRecord"]


class ThreadRecord(NamedTuple):
    """One thread of a reader's thread table."""

    tid: int
    pid: int | None
    name: str | None


class LostSituation(NamedTuple):
    """Samples a recorder kept and lost (simpleperf's LostSituation record)."""

    sample_count: int
    lost_count: int


class _Counts:
    """A declared table of counts per reason or CPU (str -> int), stored sorted by key."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, extras: Extras, owner: type | None = None) -> dict[str, int]:
        return _counts(extras.get(self.key))

    def __set__(self, extras: Extras, counts: dict[str, int]) -> None:
        extras[self.key] = dict(sorted(counts.items()))


class Extras(dict[str, Any]):
    """A dict of format facts whose relied-upon keys are typed properties (see the module docstring)."""

    kernel_records_lost = _Counts()  #: records the kernel dropped, per CPU (Perfetto)
    samples_skipped = _Counts()      #: samples the recorder kept without unwinding, per reason (Perfetto)
    unwinding_failures = _Counts()   #: simpleperf's unwinding errors, per error (kept under its own key)

    @property
    def profile_labels(self) -> dict[str, str | int]:
        return dict(self.get("profile_labels") or {})

    @profile_labels.setter
    def profile_labels(self, labels: dict[str, str | int]) -> None:
        self["profile_labels"] = dict(labels)

    @property
    def threads(self) -> list[ThreadRecord]:
        """The thread table, from ``threads`` ([tid, pid, name] rows, or tid ->
        {"name", "pid"}) and ``thread_names`` (tid -> name; it wins for names)."""
        out: dict[int, ThreadRecord] = {}
        raw = self.get("threads")
        rows: list[tuple[Any, Any, Any]] = []
        if isinstance(raw, dict):
            rows = [(k, v.get("pid"), v.get("name") or v.get("thread_name")) if isinstance(v, dict) else (k, None, v)
                    for k, v in raw.items()]
        elif isinstance(raw, list):
            rows = [(t.get("tid"), t.get("pid"), t.get("name") or t.get("thread_name")) if isinstance(t, dict)
                    else (t[0], t[1], t[2])
                    for t in raw if isinstance(t, dict) or (isinstance(t, (list, tuple)) and len(t) >= 3)]
        for tid, pid, name in rows:
            if (t := _as_int(tid)) is not None:
                out[t] = ThreadRecord(t, _as_int(pid), _as_str(name))
        names = self.get("thread_names")
        for key, value in (names.items() if isinstance(names, dict) else ()):
            if (t := _as_int(key)) is not None and _as_str(value):
                out[t] = ThreadRecord(t, out[t].pid if t in out else None, _as_str(value))
        return list(out.values())

    @threads.setter
    def threads(self, records: Iterable[ThreadRecord]) -> None:
        self["threads"] = [[t.tid, t.pid, t.name] for t in records]

    @property
    def process_names(self) -> dict[int, str]:
        raw = self.get("process_names")
        return ({pid: str(v) for k, v in raw.items() if (pid := _as_int(k)) is not None}
                if isinstance(raw, dict) else {})

    @property
    def lost_situation(self) -> LostSituation | None:
        raw = self.get("lost_situation")
        if not isinstance(raw, dict):
            return None
        return LostSituation(int(raw.get("sample_count", 0)), int(raw.get("lost_count", 0)))

    @lost_situation.setter
    def lost_situation(self, value: LostSituation) -> None:
        self["lost_situation"] = value._asdict()

    @property
    def lost_samples(self) -> int | None:
        return _as_int(self.get("lost_samples"))

    @property
    def truncated_stacks(self) -> int | None:
        return _as_int(self.get("truncated_stacks"))

    @property
    def unwind_errors(self) -> dict[str, int]:
        """Samples per unwinding error (``unwind_errors``, else simpleperf's ``unwinding_failures``)."""
        return _counts(self.get("unwind_errors")) or _counts(self.get("unwinding_failures"))

    @unwind_errors.setter
    def unwind_errors(self, counts: dict[str, int]) -> None:
        self["unwind_errors"] = dict(sorted(counts.items()))


def _counts(raw: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted(raw.items())} if isinstance(raw, dict) else {}


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _as_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None
