"""Firefox Profiler processed-format JSON, ``meta.preprocessedProfileVersion`` 70.

The layout follows the format as the Firefox Profiler documents it in
``src/types/profile.ts`` and ``docs-developer/CHANGELOG-formats.md`` at
version 70: string, stack, frame, func, resource, native-symbol, source and
source-location tables shared in ``profile.shared``; the stack table stored
topologically with ``prefixOffset`` (v66); the frame's ``lib`` column (v70).
The profiler upgrades older processed versions, never newer ones, so this
loads in Firefox Profiler releases from version 70 on.

What is written: one thread per (pid, tid), with the samples of that thread
in time order; the weight of each sample is its value in the chosen sample
type (``WriteOptions.sample_index``, default type otherwise): time units as
``tracing-ms`` milliseconds, bytes as ``bytes``, anything else as
``samples`` weights. Every sample is kept, also those whose value is 0
(as Firefox's own simpleperf importer does). One func per (name, file,
library); one frame per location and inline depth (outermost = 0), with
the library-relative address; libraries from mappings (resource type
library). Categories: Other, Native, Java (ART JIT, dex/oat/jar code) and
Kernel, by binary path. Threads known from the reader's extras but without
samples are written empty.

Lost (and reported): other sample types, labels, cpu numbers, mapping
ranges/flags, addresses beyond 2^53 (written as -1). ``WriteOptions.extra``:
``product`` (the name shown at the top of the profiler).
"""

from __future__ import annotations

import json
import os
from typing import Any, BinaryIO

import numpy as np

from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.formats.viewer import (
    callsite_order,
    is_jit,
    is_kernel,
    location_frames,
    samples_with_other_labels,
    split_rows,
    time_order,
    utf8,
    value_column,
)
from polyprof.model.profile import Profile
from polyprof.model.threads import ThreadInfo, listed_threads, sample_threads
from polyprof.model.tree import expand_chains

__all__ = ["GECKO_VERSION", "PROCESSED_VERSION", "to_json", "write"]

PROCESSED_VERSION = 70
GECKO_VERSION = 36  # meta.version the profiler itself writes alongside processed version 70
CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},
    {"name": "Native", "color": "blue", "subcategories": ["Other"]},
    {"name": "Java", "color": "green", "subcategories": ["Other"]},
    {"name": "Kernel", "color": "orange", "subcategories": ["Other"]},
]
_JAVA_SUFFIXES = (".dex", ".vdex", ".oat", ".odex", ".jar", ".apk", ".art")
_TIME_UNITS = {"nanoseconds": 1e-6, "ns": 1e-6, "microseconds": 1e-3, "us": 1e-3,
               "milliseconds": 1.0, "ms": 1.0, "seconds": 1e3, "s": 1e3}
_MAX_SAFE = 2 ** 53


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` as a processed Firefox profile."""
    report = LossReport("firefox")
    data = to_json(profile, options, report)
    out.write(utf8(json.dumps(data, ensure_ascii=False, separators=(",", ":"))))
    return report


def _category(path: str, has_mapping: bool) -> int:
    if is_kernel(path):
        return 3
    if is_jit(path) or path.endswith(_JAVA_SUFFIXES):
        return 2
    return 1 if has_mapping else 0


class _Tables:
    """The shared tables, filled location by location."""

    def __init__(self, p: Profile, report: LossReport) -> None:
        self.p, self.report = p, report
        self.strings: dict[str, int] = {}
        self.libs: list[dict] = []
        self.lib_of: dict[int, int] = {}
        self.sources: dict[str, int] = {}
        self.funcs: dict[tuple, int] = {}
        self.func_cols: dict[str, list] = {k: [] for k in ("name", "resource", "source", "lineNumber")}
        self.frame_cols: dict[str, list] = {k: [] for k in ("address", "lib", "inlineDepth", "category",
                                                             "func", "line")}
        self.loc_frames: list[list[int]] = [self._location(fr) for fr in location_frames(p)]

    def sid(self, text: str) -> int:
        i = self.strings.get(text)
        if i is None:
            i = self.strings[text] = len(self.strings)
        return i

    def _lib(self, m: int) -> int:
        i = self.lib_of.get(m)
        if i is None:
            ms = self.p.mappings
            path = self.p.strings[ms.filename[m]]
            name = os.path.basename(path) if not path.startswith("[") else path
            i = self.lib_of[m] = len(self.libs)
            self.libs.append({"arch": "", "name": name, "path": path, "debugName": name, "debugPath": path,
                              "breakpadId": self.p.strings[ms.build_id[m]], "codeId": None})
        return i

    def _func(self, name: str, file: str, lib: int, start_line: int) -> int:
        key = (name, file, lib)
        i = self.funcs.get(key)
        if i is None:
            i = self.funcs[key] = len(self.funcs)
            c = self.func_cols
            c["name"].append(self.sid(name))
            c["resource"].append(lib)  # one resource per library, same index
            if file and file not in self.sources:
                self.sources[file] = len(self.sources)
            c["source"].append(self.sources[file] if file else None)
            c["lineNumber"].append(start_line or None)
        return i

    def _location(self, frames) -> list[int]:  # noqa: ANN001
        out = []
        for f in frames:
            lib = self._lib(f.mapping) if f.mapping >= 0 else -1
            path = self.libs[lib]["path"] if lib >= 0 else ""
            addr = -1
            if lib >= 0 and f.address:
                ms = self.p.mappings
                rel = f.address - int(ms.start[f.mapping]) + int(ms.offset[f.mapping])
                addr = rel if 0 <= rel < _MAX_SAFE else -1
                if addr < 0:
                    self.report.add("addresses beyond 2^53 written as -1")
            c = self.frame_cols
            c["address"].append(addr)
            c["lib"].append(lib)
            c["inlineDepth"].append(f.inline_depth)
            c["category"].append(_category(path, lib >= 0))
            c["func"].append(self._func(f.name, f.file, lib, f.start_line))
            c["line"].append(f.line or None)
            out.append(len(c["func"]) - 1)
        return out

    def stack_table(self) -> tuple[dict, np.ndarray]:
        """The topological stack table and the stack index of each callsite's innermost frame.

        Callsites go in depth order, each as one stack per frame of its
        location (outermost first), so parents always come first.
        """
        p = self.p
        counts = np.array([len(f) for f in self.loc_frames], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(counts)))
        flat = np.array([f for fr in self.loc_frames for f in fr], dtype=np.int64)
        order = callsite_order(p)
        loc = p.callsites.location.astype(np.int64)
        k = counts[loc]
        # One stack entry per frame of every callsite, the callsites in ``order``.
        owner, j, above, first = expand_chains(p.callsites.parent.astype(np.int64), k, order)
        leaf = first + k - 1
        n = owner.size
        frame = flat[starts[loc[owner]] + j]
        prefix = np.where(above >= 0, np.arange(n) - above, 0)
        return {"frame": frame.tolist(), "prefixOffset": prefix.tolist(), "length": n}, leaf

    def shared(self, stacks: dict) -> dict:
        n_frames = len(self.frame_cols["func"])
        n_funcs = len(self.funcs)
        frames = dict(self.frame_cols, subcategory=[0] * n_frames, nativeSymbol=[None] * n_frames,
                      innerWindowID=[0] * n_frames, column=[None] * n_frames,
                      originalLocation=[None] * n_frames, length=n_frames)
        funcs = dict(self.func_cols, isJS=[False] * n_funcs, relevantForJS=[False] * n_funcs,
                     columnNumber=[None] * n_funcs, originalLocation=[None] * n_funcs, length=n_funcs)
        n_res = len(self.libs)
        resources = {"length": n_res, "name": [self.sid(lib["name"]) for lib in self.libs],
                     "host": [None] * n_res, "type": [1] * n_res}
        n_src = len(self.sources)
        sources = {"length": n_src, "id": [None] * n_src, "filename": [self.sid(f) for f in self.sources],
                   "startLine": [1] * n_src, "startColumn": [1] * n_src, "sourceMapURL": [None] * n_src,
                   "content": [None] * n_src}
        return {"stackTable": stacks, "frameTable": frames, "funcTable": funcs, "resourceTable": resources,
                "nativeSymbols": {"libIndex": [], "address": [], "name": [], "functionSize": [], "length": 0},
                "sources": sources, "sourceLocationTable": {"source": [], "line": [], "column": [], "length": 0},
                "stringArray": list(self.strings)}


def _weights(unit: str, values: np.ndarray) -> tuple[str, list | None]:
    scale = _TIME_UNITS.get(unit.lower())
    if scale is not None:
        return "tracing-ms", (values * scale).tolist()
    if unit.lower() in ("bytes", "byte"):
        return "bytes", values.tolist()
    return "samples", None if bool(np.all(values == 1)) else values.tolist()


def _empty_markers() -> dict:
    return {"data": [], "name": [], "startTime": [], "endTime": [], "phase": [], "category": [], "length": 0}


def _thread(info: ThreadInfo, tid: Any, samples: dict) -> dict:
    pid = info.pid if info.pid is not None else 0
    out = {"processType": "default", "processStartupTime": 0, "processShutdownTime": None,
           "registerTime": 0, "unregisterTime": None, "pausedRanges": [],
           "name": info.name or (f"Thread {info.tid}" if info.tid is not None else "Samples"),
           "isMainThread": info.tid is not None and info.tid == info.pid,
           "pid": str(pid), "tid": tid, "samples": samples, "markers": _empty_markers()}
    if info.process_name:
        out["processName"] = info.process_name
    return out


def _group_threads(thread_of: np.ndarray, infos: list[ThreadInfo]) -> tuple[np.ndarray, list[tuple[ThreadInfo, Any]]]:
    """Merge ThreadInfos of one (pid, tid); give every thread a unique tid."""
    groups: dict[tuple, int] = {}
    out: list[tuple[ThreadInfo, Any]] = []
    remap = np.zeros(max(len(infos), 1), dtype=np.int64)
    used: set = set()
    for k, t in enumerate(infos):
        key = (t.pid, t.tid) if t.tid is not None else ("name", t.name, t.pid)
        if key not in groups:
            tid: Any = t.tid if t.tid is not None else f"t{len(out)}"
            if tid in used:
                tid = f"{t.tid}@{t.pid}"
            used.add(tid)
            groups[key] = len(out)
            out.append((t, tid))
        remap[k] = groups[key]
    return remap[thread_of] if thread_of.size else thread_of, out


def to_json(p: Profile, options: WriteOptions, report: LossReport | None = None) -> dict:
    """The processed profile as a JSON-ready dict."""
    report = report if report is not None else LossReport("firefox")
    column, values = value_column(p, options.sample_index)
    _report_losses(p, column, report)
    tables = _Tables(p, report)
    stacks, leaf = tables.stack_table()
    thread_of, infos = sample_threads(p)
    thread_of, groups = _group_threads(thread_of, infos)
    known = {tid for _, tid in groups} | {t.tid for t, _ in groups}
    groups += [(t, t.tid) for t in listed_threads(p) if t.tid not in known]
    unit = p.sample_types[column].unit if p.sample_types else "count"
    interval = _interval_ms(p)
    times = p.samples.time
    t0 = int(times.min()) if times is not None and times.size else 0
    threads = []
    for (info, tid), rows in zip(groups, split_rows(thread_of, len(groups), time_order(p))):
        ms = ((times[rows] - t0) / 1e6).tolist() if times is not None else (np.arange(rows.size) * interval).tolist()
        st = p.samples.stack.astype(np.int64)[rows]
        stack = [None if s < 0 else int(leaf[s]) for s in st.tolist()]
        weight_type, weight = _weights(unit, values[rows])
        samples = {"stack": stack, "time": ms, "weight": weight, "weightType": weight_type, "length": len(stack)}
        threads.append(_thread(info, tid, samples))
    return {"meta": _meta(p, options, interval), "libs": tables.libs, "pages": [], "counters": [],
            "shared": tables.shared(stacks), "threads": threads}


def _interval_ms(p: Profile) -> float:
    if p.period_type is not None and p.period > 0:
        scale = _TIME_UNITS.get(p.period_type.unit.lower())
        if scale is not None:
            return p.period * scale
    return 1.0


def _meta(p: Profile, options: WriteOptions, interval: float) -> dict:
    info = p.extras.get("meta_info")
    app = info.get("app_package_name") if isinstance(info, dict) else None
    product = options.extra.get("product") or app or f"{p.source_format or 'profile'} (polyprof)"
    return {"interval": interval, "startTime": p.time_nanos / 1e6, "processType": 0, "product": str(product),
            "stackwalk": 1, "version": GECKO_VERSION, "preprocessedProfileVersion": PROCESSED_VERSION,
            "categories": CATEGORIES, "markerSchema": [], "symbolicated": True,
            "importedFrom": "polyprof"}


def _report_losses(p: Profile, column: int, report: LossReport) -> None:
    for i, vt in enumerate(p.sample_types):
        if i != column:
            report.add(f"sample type {vt} not written (one type per file; choose with --sample-index)")
    s = p.samples
    report.add("samples with labels other than thread names (labels not written)", samples_with_other_labels(p))
    if s.cpu is not None:
        report.add("sample cpu column not written", len(s))
    if len(p.mappings):
        report.add("mapping ranges, offsets and flags not written", len(p.mappings))
