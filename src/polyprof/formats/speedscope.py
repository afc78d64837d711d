"""speedscope JSON (file format of speedscope 1.x, ``$schema`` file-format-schema.json).

One ``sampled`` profile per (sample type, thread), named ``thread (tid N) —
type`` (just the type when the profile knows no threads): each sample with a
non-zero value becomes one stack (frame indexes, root first) with its value
as weight, in time order when the profile has timestamps, else in file
order. Frames are shared: one per function (name, file, start line), as
speedscope's own pprof import keys them; its ``line`` is the line of the
last location in the function (else its start line), as speedscope's
importer shows it. Inlined functions are frames of their own.
The opened profile (``activeProfileIndex``) is the default sample type's
first.

Units: nanoseconds, microseconds, milliseconds, seconds and bytes keep
their name; any other unit is written as ``none``. ``WriteOptions.extra``:
``name`` (the profile group's name; default from the source format).

Lost (and reported): labels, mappings and addresses, per-location line
numbers, timestamps other than their order, cpu numbers.
"""

from __future__ import annotations

import json
from typing import BinaryIO

import numpy as np

from polyprof import __version__
from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.formats.viewer import (
    Frame,
    location_frames,
    samples_with_other_labels,
    split_rows,
    stack_paths,
    time_order,
    utf8,
)
from polyprof.model.profile import Profile
from polyprof.model.threads import sample_threads

__all__ = ["SCHEMA", "UNITS", "write"]

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"nanoseconds": "nanoseconds", "nanosecond": "nanoseconds", "ns": "nanoseconds",
         "microseconds": "microseconds", "us": "microseconds", "milliseconds": "milliseconds",
         "ms": "milliseconds", "seconds": "seconds", "s": "seconds", "bytes": "bytes", "byte": "bytes"}


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Frames:
    """speedscope's shared frame list, keyed per function (or per unknown frame)."""

    def __init__(self, p: Profile) -> None:
        self.items: list[dict] = []
        self.index: dict[tuple, int] = {}
        self.loc_ids: list[list[int]] = [[self._add(f) for f in frames] for frames in location_frames(p)]

    def _add(self, f: Frame) -> int:
        key = (f.name, f.file, f.start_line) if f.function >= 0 else (f.name, f.mapping, f.address)
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.items)
            item: dict = {"name": f.name}
            if f.file:
                item["file"] = f.file
            if f.start_line > 0:
                item["line"] = f.start_line
            self.items.append(item)
        if f.line > 0:
            self.items[i]["line"] = f.line  # the last location's line wins, as in speedscope's importer
        return i


def _stack_texts(p: Profile, loc_ids: list[list[int]], wanted: np.ndarray) -> dict[int, str]:
    """JSON array text (root first, no brackets) of every callsite in ``wanted``."""
    loc_text = [",".join(map(str, ids)) for ids in loc_ids]
    return {c: ",".join([loc_text[loc] for loc in path]) for c, path in stack_paths(p, wanted)}


def _profile_text(name: str, unit: str, stacks: list[str], weights: list[int]) -> str:
    return ('{"type":"sampled","name":' + _dump(name) + ',"unit":' + _dump(unit)
            + ',"startValue":0,"endValue":' + str(sum(abs(w) for w in weights))
            + ',"samples":[' + ",".join(stacks) + '],"weights":[' + ",".join(map(str, weights)) + "]}")


def _profiles(p: Profile, frames: _Frames, report: LossReport) -> tuple[list[str], int | None]:
    """The JSON text of every (sample type, thread) profile, and the index of the default type's first."""
    thread_of, threads = sample_threads(p)
    rows_of = split_rows(thread_of, len(threads), time_order(p))
    stacks = p.samples.stack.astype(np.int64)
    texts = _stack_texts(p, frames.loc_ids, stacks)
    default = p.default_index() if p.sample_types else -1
    profiles: list[str] = []
    active: int | None = None
    for t, vt in enumerate(p.sample_types):
        unit = UNITS.get(vt.unit.lower(), "none")
        if unit == "none" and vt.unit.lower() not in ("count", "samples", ""):
            report.add(f"unit {vt.unit!r} written as 'none'")
        values = p.samples.values[:, t]
        for thread, rows in zip(threads, rows_of):
            rows = rows[values[rows] != 0]
            if not rows.size:
                continue
            if t == default and active is None:
                active = len(profiles)
            known = thread.name is not None or thread.tid is not None
            name = f"{thread.label()} — {vt.type}" if known else vt.type
            st = [("[" + texts[s] + "]") if s >= 0 else "[]" for s in stacks[rows].tolist()]
            profiles.append(_profile_text(name, unit, st, values[rows].tolist()))
    return profiles, active


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` as one speedscope file."""
    p = profile
    report = LossReport("speedscope")
    _report_losses(p, report)
    frames = _Frames(p)
    profiles, active = _profiles(p, frames, report)
    group = options.extra.get("name") or f"{p.source_format or 'profile'} (polyprof)"
    text = ('{"$schema":' + _dump(SCHEMA) + ',"shared":{"frames":' + _dump(frames.items) + '},"profiles":['
            + ",".join(profiles) + '],"name":' + _dump(group) + ',"activeProfileIndex":' + str(active or 0)
            + ',"exporter":' + _dump(f"polyprof@{__version__}") + "}\n")
    out.write(utf8(text))
    return report


def _report_losses(p: Profile, report: LossReport) -> None:
    s = p.samples
    report.add("samples with labels other than thread names (labels not written)", samples_with_other_labels(p))
    if len(p.mappings):
        report.add("mappings not written", len(p.mappings))
    if s.cpu is not None:
        report.add("sample cpu column not written", len(s))
    if s.time is not None:
        report.add("sample timestamps (only their order is kept)", len(s))
