"""Reading report-sample files into the columnar model (see the package docstring)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import MalformedInputError, OptionsError
from polyprof.formats.limits import Limits, over_limit
from polyprof.formats.options import ReadOptions
from polyprof.formats.simpleperf._framing import records
from polyprof.formats.simpleperf._layout import Layout, event_type
from polyprof.formats.simpleperf._offcpu import offcpu_times
from polyprof.formats.simpleperf._schema import ERROR_CODES, EXECUTION_TYPES, OFFCPU_VIEWS, record_class
from polyprof.model.builder import ProfileBuilder
from polyprof.model.extras import LostSituation, ThreadRecord
from polyprof.model.profile import MAPPING_HAS_FUNCTIONS, Label, Profile
from polyprof.wire.locate import locate

__all__ = ["read_bytes"]

_PAYLOADS = ("sample", "lost", "file", "thread", "meta_info", "context_switch")


@dataclass
class _Records:
    """Everything in the file, sorted by kind; samples keep their file order."""

    samples: list[Any] = field(default_factory=list)
    switches: list[tuple[int, int, int, bool]] = field(default_factory=list)
    files: dict[int, Any] = field(default_factory=dict)
    threads: dict[int, Any] = field(default_factory=dict)
    meta: Any = None
    lost: list[Any] = field(default_factory=list)
    odd: Counter = field(default_factory=Counter)


class _Text:
    """Decodes wire strings, counting the ones that are not UTF-8."""

    def __init__(self) -> None:
        self.bad = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.bad += 1
            return raw.decode("utf-8", errors="replace")


def read_bytes(data: bytes, options: ReadOptions) -> Profile:
    warnings: list[str] = []
    recs = _collect(data, warnings)
    text = _Text()
    b = ProfileBuilder("simpleperf")
    p = b.meta
    p.warnings = warnings
    layout = _layout(recs, text, p, options.limits)
    options.limits.check_values("sample values", len(recs.samples), len(layout.types), len(data))
    b.set_sample_types(layout.types)
    p.default_sample_type = _default_type(layout, options)
    threads = _threads(recs, text, p)
    frames = _Frames(b, recs, text)
    stacks = frames.stacks(recs.samples)
    values = _values(recs, layout, p)
    labelsets = _labelsets(b, recs.samples, threads, p)
    tids = [s.thread_id for s in recs.samples]
    cols: dict[str, np.ndarray | None] = {
        "time": np.array([s.time for s in recs.samples], dtype=np.uint64).view(np.int64),
        "tid": np.array(tids, dtype=np.int64),
        "pid": (np.array([threads.get(t, (0, None))[0] for t in tids], dtype=np.int64)
                if recs.threads else None)}
    if len(recs.samples):
        b.add_samples_bulk(stacks, values, labelsets, **cols)
    frames.report(p)
    _lost(recs, p)
    if text.bad:
        warnings.append(f"{text.bad} string(s) were not valid UTF-8 and were decoded with replacement characters")
    return b.finish(check=False)


# ---------------------------------------------------------------- records

def _collect(data: bytes, warnings: list[str]) -> _Records:
    cls = record_class()
    out = _Records()
    for index, (offset, body) in enumerate(records(data, warnings)):
        try:
            rec = cls.FromString(body)
        except DecodeError as exc:
            found = locate(body, cls.DESCRIPTOR, base=offset + 4)
            why = f": {found.message}" if found is not None else f" ({exc})"
            raise MalformedInputError(f"record {index + 1} is not a valid Record message{why}",
                                      offset=found.offset if found is not None else offset) from None
        present = [name for name in _PAYLOADS if rec.HasField(name)]
        if not present:
            out.odd["record(s) of an unknown kind were skipped"] += 1
        elif len(present) > 1:
            out.odd["record(s) held several payloads (a oneof); all were read"] += 1
        for name in present:
            _dispatch(out, name, getattr(rec, name), offset)
    warnings.extend(f"{n} {what}" for what, n in sorted(out.odd.items()))
    return out


def _dispatch(out: _Records, name: str, msg: Any, offset: int) -> None:
    if name == "sample":
        out.samples.append(msg)
    elif name == "context_switch":
        out.switches.append((len(out.samples), msg.time, msg.thread_id, msg.switch_on))
    elif name == "file":
        if msg.id in out.files:
            raise MalformedInputError(f"two File records have id {msg.id}", offset=offset)
        out.files[msg.id] = msg
    elif name == "thread":
        if msg.thread_id in out.threads:
            out.odd["extra Thread record(s) for an already described thread; the last one was used"] += 1
        out.threads[msg.thread_id] = msg
    elif name == "meta_info":
        if out.meta is not None:
            out.odd["extra MetaInfo record(s) ignored; the first one was used"] += 1
        else:
            out.meta = msg
    else:
        out.lost.append(msg)


# ---------------------------------------------------------------- metadata

def _layout(recs: _Records, text: _Text, p: Profile, limits: Limits) -> Layout:
    meta = recs.meta
    events = [text(e) for e in meta.event_type] if meta is not None else []
    if meta is not None:
        p.extras["meta_info"] = _meta_dict(meta, events, text)
    used = max((s.event_type_id for s in recs.samples), default=-1)
    if used >= len(events) + limits.event_types:  # each unnamed id below `used` becomes two columns
        at = next(i for i, s in enumerate(recs.samples) if s.event_type_id == used)
        raise over_limit(f"sample {at + 1}: event_type_id", used, len(events) + limits.event_types - 1,
                         "POLYPROF_MAX_EVENT_TYPES",
                         why=f" (MetaInfo names {len(events)} event type(s); at most "
                             f"{limits.event_types} more may be unnamed)")
    if used >= len(events):
        names = f"MetaInfo names {len(events)} event type(s)" if meta is not None else "there is no MetaInfo record"
        p.warnings.append(f"samples use event type ids up to {used} but {names}; "
                          "unnamed event types are called event<N>")
        events += [f"event{i}" for i in range(len(events), used + 1)]
    offcpu = bool(meta is not None and meta.trace_offcpu)
    if recs.switches and not offcpu:
        p.warnings.append(f"{len(recs.switches)} ContextSwitch record(s) ignored: MetaInfo.trace_offcpu is not set")
    if offcpu and (not events or event_type(events[0]).unit != "nanoseconds"):
        p.warnings.append("trace_offcpu is set but the first event is not cpu-clock/task-clock; "
                          "no off-CPU columns were made")
        offcpu = False
    return Layout(tuple(events), offcpu)


def _meta_dict(meta: Any, events: list[str], text: _Text) -> dict[str, Any]:
    out: dict[str, Any] = {"event_type": events}
    for key in ("app_package_name", "app_type", "android_sdk_version", "android_build_type"):
        if meta.HasField(key):
            out[key] = text(getattr(meta, key))
    if meta.HasField("trace_offcpu"):
        out["trace_offcpu"] = bool(meta.trace_offcpu)
    return out


def _default_type(layout: Layout, options: ReadOptions) -> str:
    view = options.extra.get("offcpu")
    if view is not None and view not in OFFCPU_VIEWS:
        raise OptionsError(f"offcpu must be one of {', '.join(OFFCPU_VIEWS)}, not {view!r}")
    if view in ("off", "on+off") and not layout.offcpu:
        raise OptionsError(f"offcpu={view!r}: this recording has no off-CPU data "
                           "(it was not recorded with --trace-offcpu)")
    if not layout.events:
        return "samples"
    if layout.offcpu and view != "on":
        return layout.types[-1 if view != "off" else -2].type
    return event_type(layout.events[0]).type


def _threads(recs: _Records, text: _Text, p: Profile) -> dict[int, tuple[int, str | None]]:
    out: dict[int, tuple[int, str | None]] = {}
    listed = []
    for tid, t in recs.threads.items():
        name = text(t.thread_name) if t.HasField("thread_name") else None
        out[tid] = (t.process_id, name)
        listed.append(ThreadRecord(tid, t.process_id, name))
    if listed:
        p.extras.threads = listed
    missing = {s.thread_id for s in recs.samples} - set(out)
    if missing and recs.threads:
        n = sum(1 for s in recs.samples if s.thread_id in missing)
        p.warnings.append(f"{n} sample(s) of {len(missing)} thread(s) have no Thread record (no pid or name)")
    return out


def _lost(recs: _Records, p: Profile) -> None:
    if not recs.lost:
        return
    if len(recs.lost) > 1:
        p.warnings.append(f"{len(recs.lost)} LostSituation records; their counts were added")
    kept = sum(r.sample_count for r in recs.lost)
    lost = sum(r.lost_count for r in recs.lost)
    p.extras.lost_situation = LostSituation(kept, lost)
    p.extras["lost_ratio"] = round(lost / (kept + lost), 6) if kept + lost else 0.0


# ---------------------------------------------------------------- samples

def _values(recs: _Records, layout: Layout, p: Profile) -> np.ndarray:
    n = len(recs.samples)
    values = np.zeros((n, len(layout.types)), dtype=np.int64)
    if not n:
        return values
    event = np.array([s.event_type_id for s in recs.samples], dtype=np.int64)
    count = np.array([s.event_count for s in recs.samples], dtype=np.uint64).view(np.int64)
    rows = np.arange(n)
    values[:, 0] = 1
    sample_cols = np.array([layout.sample_column(e) for e in range(len(layout.events))], dtype=np.int64)
    count_cols = np.array([layout.count_column(e) for e in range(len(layout.events))], dtype=np.int64)
    values[rows, sample_cols[event]] = 1
    values[rows, count_cols[event]] = count
    if layout.offcpu:
        off, open_ = offcpu_times([s.thread_id for s in recs.samples], [s.time for s in recs.samples],
                                  (event > 0).tolist(), recs.switches)
        col = layout.offcpu_column
        values[:, col] = off
        values[:, col + 1] = np.where(event == 0, count, off)
        p.extras["offcpu"] = {"switch_off_samples": int((event > 0).sum()), "without_end": open_}
        if recs.switches:
            p.warnings.append(f"{len(recs.switches)} ContextSwitch record(s) were used for the off-cpu "
                              "column and are not kept as such")
    return values


def _labelsets(b: ProfileBuilder, samples: list[Any], threads: dict[int, tuple[int, str | None]],
               p: Profile) -> np.ndarray:
    out = np.zeros(len(samples), dtype=np.int32)
    cache: dict[tuple, int] = {}
    failures: Counter = Counter()
    for i, s in enumerate(samples):
        name = threads.get(s.thread_id, (0, None))[1]
        unwind: tuple = ()
        if s.HasField("unwinding_result"):
            unwind = _unwind_labels(s.unwinding_result)
            code = unwind[0].str if unwind and unwind[0].key == "unwinding_error" else None
            if code not in (None, "ERROR_NONE"):
                failures[code] += 1
        key = (name, unwind)
        ls = cache.get(key)
        if ls is None:
            labels = ((Label("thread_name", str=name),) if name is not None else ()) + unwind
            ls = cache[key] = b.labelset(labels) if labels else 0
        out[i] = ls
    if failures:
        p.extras.unwinding_failures = failures
    return out


def _unwind_labels(u: Any) -> tuple[Label, ...]:
    labels = []
    if u.HasField("error_code"):
        code = u.error_code
        labels.append(Label("unwinding_error", str=ERROR_CODES[code] if code < len(ERROR_CODES) else f"ERROR_{code}"))
    if u.HasField("raw_error_code"):
        labels.append(Label("unwinding_raw_error", num=u.raw_error_code))
    if u.HasField("error_addr"):
        labels.append(Label("unwinding_error_addr", num=int(np.uint64(u.error_addr).view(np.int64))))
    return tuple(labels)


class _Frames:
    """Turns callchain entries into locations, interning (file, symbol, address)."""

    def __init__(self, b: ProfileBuilder, recs: _Records, text: _Text) -> None:
        self.b = b
        self.files: dict[int, tuple[int, list[int]]] = {}
        self.paths: dict[int, str] = {}
        self.raw_files = recs.files
        self.text = text
        self.missing_files: set[int] = set()
        self.entries = 0
        self.unsymbolized = 0
        self.exec_types: dict[tuple[str, int], int] = {}
        self.mixed = 0
        self.symbolized = {f.path for f in recs.files.values() if len(f.symbol)}  # raw bytes
        for fid in sorted(recs.files):
            self._file(fid)

    def _file(self, fid: int) -> tuple[int, list[int]]:
        got = self.files.get(fid)
        if got is not None:
            return got
        f = self.raw_files.get(fid)
        if f is None:
            self.missing_files.add(fid)
            path, names, mangled, symbolized = "", [], [], False
        else:
            symbolized = f.path in self.symbolized
            path = self.text(f.path)
            names = [self.text(s) for s in f.symbol]
            mangled = [self.text(s) for s in f.mangled_symbol]
        # One mapping per path (simpleperf may write several Files with one path).
        mapping = self.b.mapping(filename=path, flags=MAPPING_HAS_FUNCTIONS if symbolized else 0)
        fns = [self.b.function(name, mangled[i] if i < len(mangled) else "") for i, name in enumerate(names)]
        self.paths[fid] = path
        got = self.files[fid] = (mapping, fns)
        return got

    def stacks(self, samples: list[Any]) -> np.ndarray:
        locs: dict[tuple[int, int, int], int] = {}
        flat: list[int] = []
        offsets = [0]
        types: Counter = Counter()
        for index, s in enumerate(samples):
            for e in s.callchain:
                key = (e.file_id, e.symbol_id, e.vaddr_in_file)
                loc = locs.get(key)
                if loc is None:
                    loc = locs[key] = self._location(*key, index)
                flat.append(loc)
                types[(e.file_id, e.vaddr_in_file, e.execution_type)] += 1
                if e.symbol_id < 0:
                    self.unsymbolized += 1
            offsets.append(len(flat))
        self.entries = len(flat)
        self._exec_types(types)
        return self.b.stacks_from_csr(np.array(flat, dtype=np.int64), np.array(offsets, dtype=np.int64))

    def _location(self, fid: int, sid: int, vaddr: int, index: int) -> int:
        mapping, fns = self._file(fid)
        if sid < -1 or (sid >= len(fns) and fid not in self.missing_files):
            raise MalformedInputError(f"sample {index + 1} refers to symbol {sid} of file {fid}, "
                                      f"which has {len(fns)} symbol(s)")
        lines = [(fns[sid], 0, 0)] if 0 <= sid < len(fns) else []
        return self.b.location(mapping, vaddr, lines)

    def _exec_types(self, types: Counter) -> None:
        """Keep one execution type per (file path, address): the model has no per-entry kind."""
        if not any(t for (_, _, t) in types):
            return
        by_frame: dict[tuple[str, int], Counter] = {}
        for (fid, vaddr, t), n in types.items():
            by_frame.setdefault((self.paths[fid], vaddr), Counter())[t] += n
        for key, counts in by_frame.items():
            best = min(counts, key=lambda t: (-counts[t], t))
            self.mixed += sum(counts.values()) - counts[best]
            if best:
                self.exec_types[key] = best

    def report(self, p: Profile) -> None:
        if self.entries:
            share = round(self.unsymbolized / self.entries, 6)
            p.extras["unsymbolized_frames"] = {"frames": self.entries, "without_symbol": self.unsymbolized,
                                               "share": share}
        if self.missing_files:
            p.warnings.append(f"frames refer to file id(s) {sorted(self.missing_files)} that have no File "
                              "record; they are shown as addresses in an unnamed file")
        if self.exec_types:
            table: dict[str, dict[str, list[str]]] = {}
            for (path, vaddr), t in sorted(self.exec_types.items()):
                name = EXECUTION_TYPES[t] if t < len(EXECUTION_TYPES) else f"execution_type_{t}"
                table.setdefault(path, {}).setdefault(name, []).append(f"0x{vaddr:x}")
            p.extras["frame_execution_types"] = table
        if self.mixed:
            p.warnings.append(f"{self.mixed} callchain entries have another execution type than most entries "
                              "at the same address; the model keeps one type per frame (the most common)")
