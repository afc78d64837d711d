"""Build a Profile from simpleperf's own text dump of a report-sample file.

``generated/simpleperf*/…dump.txt`` in peer-data is ``simpleperf
report-sample --dump-protobuf-report``: every record and field as simpleperf
itself decoded it. Turning that text into a Profile lets the viewer writers
be checked against AOSP's goldens without depending on polyprof's own
simpleperf reader (the reader has its own tests).

The Profile follows the model conventions: one sample type per event type
(value = event_count in its column, 0 elsewhere), one mapping per File, one
function per (file, symbol), unknown symbols as locations without lines,
tid/pid columns and thread names in ``extras["threads"]``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Profile

__all__ = ["profile_from_dump"]

_TIME_EVENTS = ("cpu-clock", "task-clock")


def _records(path: Path) -> tuple[list[str], list[dict], dict[int, dict], dict[int, dict]]:
    opener = gzip.open if path.suffix == ".gz" else open
    events: list[str] = []
    samples: list[dict] = []
    files: dict[int, dict] = {}
    threads: dict[int, dict] = {}
    cur: dict = {}
    kind = ""
    with opener(path, "rt", encoding="utf-8") as fh:
        for raw in fh:
            if raw and not raw[0].isspace():
                kind = raw.split(":")[0].split()[0]
                cur = {"chain": [], "sym": [], "mangled": [], "event": 0, "count": 0}
                if kind == "sample":
                    samples.append(cur)
                continue
            key, _, value = raw.strip().partition(": ")
            if kind == "meta_info" and key == "event_type":
                events.append(value)
            elif kind == "sample":
                _sample_field(cur, key, value)
            elif kind == "file":
                _file_field(cur, key, value, files)
            elif kind == "thread":
                if key == "thread_id":
                    threads[int(value)] = cur
                cur[key] = value
    return events, samples, files, threads


def _sample_field(cur: dict, key: str, value: str) -> None:
    if key == "event_type_id":
        cur["event"] = int(value)
    elif key == "event_count":
        cur["count"] = int(value)
    elif key == "thread_id":
        cur["tid"] = int(value)
    elif key == "time":
        cur["time"] = int(value)
    elif key == "vaddr_in_file":
        cur["chain"].append([int(value, 16), 0, -1])
    elif key == "file_id":
        cur["chain"][-1][1] = int(value)
    elif key == "symbol_id":
        cur["chain"][-1][2] = int(value)


def _file_field(cur: dict, key: str, value: str, files: dict[int, dict]) -> None:
    if key == "id":
        files[int(value)] = cur
    elif key == "path":
        cur["path"] = value
    elif key == "symbol":
        cur["sym"].append(value)
    elif key == "mangled_symbol":
        cur["mangled"].append(value)


def profile_from_dump(path: Path) -> Profile:
    """The Profile of a ``--dump-protobuf-report`` text file."""
    events, samples, files, threads = _records(path)
    b = ProfileBuilder("simpleperf")
    b.set_sample_types([(e, "nanoseconds" if e in _TIME_EVENTS else "count") for e in events])
    maps = {fid: b.mapping(filename=f.get("path", "")) for fid, f in files.items()}
    for s in samples:
        locs = []
        for addr, fid, sym in s["chain"]:
            f = files[fid]
            lines = ()
            if sym >= 0:
                mangled = f["mangled"][sym] if sym < len(f["mangled"]) else ""
                lines = ((b.function(f["sym"][sym], mangled), 0, 0),)
            locs.append(b.location(maps[fid], addr, lines))
        values = [0] * len(events)
        values[s["event"]] = s["count"]
        t = threads.get(s["tid"], {})
        b.add_sample(b.stack(locs), values, time=s.get("time"), tid=s["tid"],
                     pid=int(t.get("process_id", 0)))
    b.meta.extras["threads"] = {str(tid): {"name": t.get("thread_name", ""), "pid": int(t.get("process_id", 0))}
                                for tid, t in sorted(threads.items())}
    return b.finish()
