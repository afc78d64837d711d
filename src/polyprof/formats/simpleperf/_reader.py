"""Reading report-sample files into the columnar model (see the package docstring)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from polyprof.errors import MalformedInputError, OptionsError
from polyprof.formats.limits import Limits, over_limit
from polyprof.formats.options import ReadOptions
from polyprof.formats.simpleperf._layout import Layout, event_type
from polyprof.formats.simpleperf._offcpu import offcpu_times
from polyprof.formats.simpleperf._records import Records, Samples, collect
from polyprof.formats.simpleperf._schema import ERROR_CODES, EXECUTION_TYPES, OFFCPU_VIEWS
from polyprof.formats.span_bytes import decoded
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import factorize_rows, unique_inverse
from polyprof.model.extras import LostSituation, ThreadRecord
from polyprof.model.profile import MAPPING_HAS_FUNCTIONS, Label, Profile

__all__ = ["read_bytes"]


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

    def many(self, raws: Any) -> list[str]:
        """Every string of a repeated field, decoded in one call when none holds a NUL (a
        File's thousands of symbols)."""
        fast = decoded(list(raws))
        return fast if fast is not None else [self(r) for r in raws]


def read_bytes(data: bytes, options: ReadOptions) -> Profile:
    warnings: list[str] = []
    recs = collect(data, warnings)
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
    tids = recs.samples.tid
    cols: dict[str, np.ndarray | None] = {
        "time": recs.samples.time.view(np.int64), "tid": tids,
        "pid": _by_tid(tids, {t: pid for t, (pid, _) in threads.items()}, 0) if recs.threads else None}
    if len(recs.samples):
        b.add_samples_bulk(stacks, values, labelsets, **cols)
    frames.report(p)
    _lost(recs, p)
    if text.bad:
        warnings.append(f"{text.bad} string(s) were not valid UTF-8 and were decoded with replacement characters")
    return b.finish(check=False)


# ---------------------------------------------------------------- metadata

def _layout(recs: Records, text: _Text, p: Profile, limits: Limits) -> Layout:
    meta = recs.meta
    events = [text(e) for e in meta.event_type] if meta is not None else []
    if meta is not None:
        p.extras["meta_info"] = _meta_dict(meta, events, text)
    used = int(recs.samples.event_type.max()) if len(recs.samples) else -1
    if used >= len(events) + limits.event_types:  # each unnamed id below `used` becomes two columns
        at = int(np.argmax(recs.samples.event_type == used))
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
    if recs.switches[0].size and not offcpu:
        p.warnings.append(f"{recs.switches[0].size} ContextSwitch record(s) ignored: MetaInfo.trace_offcpu is not set")
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


def _threads(recs: Records, text: _Text, p: Profile) -> dict[int, tuple[int, str | None]]:
    out: dict[int, tuple[int, str | None]] = {}
    listed = []
    for tid, t in recs.threads.items():
        name = text(t.thread_name) if t.HasField("thread_name") else None
        out[tid] = (t.process_id, name)
        listed.append(ThreadRecord(tid, t.process_id, name))
    if listed:
        p.extras.threads = listed
    if recs.threads:
        unknown = ~np.isin(recs.samples.tid, np.array(list(out), dtype=np.int64))
        if unknown.any():
            n, threads = int(unknown.sum()), np.unique(recs.samples.tid[unknown]).size
            p.warnings.append(f"{n} sample(s) of {threads} thread(s) have no Thread record (no pid or name)")
    return out


def _lost(recs: Records, p: Profile) -> None:
    if not recs.lost:
        return
    if len(recs.lost) > 1:
        p.warnings.append(f"{len(recs.lost)} LostSituation records; their counts were added")
    kept = sum(r.sample_count for r in recs.lost)
    lost = sum(r.lost_count for r in recs.lost)
    p.extras.lost_situation = LostSituation(kept, lost)
    p.extras["lost_ratio"] = round(lost / (kept + lost), 6) if kept + lost else 0.0


# ---------------------------------------------------------------- samples

def _by_tid(tids: np.ndarray, table: dict[int, Any], default: Any) -> np.ndarray:
    """``table[tid]`` for every tid (``default`` when absent), as a code per distinct tid."""
    uniq, inverse = np.unique(tids, return_inverse=True)
    return np.array([table.get(t, default) for t in uniq.tolist()])[inverse.reshape(-1)]


def _values(recs: Records, layout: Layout, p: Profile) -> np.ndarray:
    s = recs.samples
    n = len(s)
    values = np.zeros((n, len(layout.types)), dtype=np.int64)
    if not n:
        return values
    event = s.event_type
    count = s.event_count.view(np.int64)
    rows = np.arange(n)
    values[:, 0] = 1
    sample_cols = np.array([layout.sample_column(e) for e in range(len(layout.events))], dtype=np.int64)
    count_cols = np.array([layout.count_column(e) for e in range(len(layout.events))], dtype=np.int64)
    values[rows, sample_cols[event]] = 1
    values[rows, count_cols[event]] = count
    if layout.offcpu:
        off, open_ = offcpu_times(s.tid, s.time.view(np.int64), event > 0, recs.switches)
        col = layout.offcpu_column
        values[:, col] = off
        values[:, col + 1] = np.where(event == 0, count, off)
        p.extras["offcpu"] = {"switch_off_samples": int((event > 0).sum()), "without_end": open_}
        if recs.switches[0].size:
            p.warnings.append(f"{recs.switches[0].size} ContextSwitch record(s) were used for the off-cpu "
                              "column and are not kept as such")
    return values


def _labelsets(b: ProfileBuilder, s: Samples, threads: dict[int, tuple[int, str | None]],
               p: Profile) -> np.ndarray:
    """Label set of every sample: thread name and unwinding result, one set per distinct combination."""
    u = s.unwind
    names = {t: name for t, (_, name) in threads.items() if name is not None}
    if not names and not u["has"].any():  # every sample the empty label set
        return np.zeros(len(s), dtype=np.int32)
    keys = [s.tid if names else np.zeros(len(s), dtype=np.int64), u["has"], u["has_code"], u["code"],
            u["has_raw"], u["raw"], u["has_addr"], u["addr"].view(np.int64)]
    combo, first = factorize_rows(keys)
    model = []
    for tid, has, has_code, code, has_raw, raw, has_addr, addr in zip(*(k[first].tolist() for k in keys)):
        unwind: tuple[Label, ...] = ()
        if has:
            unwind = _unwind_labels(has_code, code, has_raw, raw, has_addr, addr)
        name = names.get(tid)
        labels = ((Label("thread_name", str=name),) if name is not None else ()) + unwind
        model.append(b.labelset(labels) if labels else 0)
    failed = u["has"] & u["has_code"] & (u["code"] != 0)
    if failed.any():
        codes, counts = np.unique(u["code"][failed], return_counts=True)
        p.extras.unwinding_failures = dict(sorted((_error_name(c), int(n)) for c, n in
                                                     zip(codes.tolist(), counts.tolist())))
    return np.array(model, dtype=np.int32)[combo] if len(s) else np.zeros(0, dtype=np.int32)


def _error_name(code: int) -> str:
    return ERROR_CODES[code] if code < len(ERROR_CODES) else f"ERROR_{code}"


def _unwind_labels(has_code: bool, code: int, has_raw: bool, raw: int, has_addr: bool,
                   addr: int) -> tuple[Label, ...]:
    labels = []
    if has_code:
        labels.append(Label("unwinding_error", str=_error_name(code)))
    if has_raw:
        labels.append(Label("unwinding_raw_error", num=raw))
    if has_addr:
        labels.append(Label("unwinding_error_addr", num=addr))
    return tuple(labels)


class _Frames:
    """Turns callchain entries into locations, interning (file, symbol, address)."""

    def __init__(self, b: ProfileBuilder, recs: Records, text: _Text) -> None:
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
        self._intern_files(sorted(recs.files))

    def _intern_files(self, fids: list[int]) -> None:
        """The mapping and functions of every File: strings interned in the order that one
        ``function()`` call per symbol would intern them, the functions in one bulk call (the
        same rows; 23k symbols take 0.1 s less)."""
        string = self.b.string
        ids: list[int] = []
        mappings, counts = [], []
        for fid in fids:
            f = self.raw_files[fid]
            path = self.text(f.path)
            names, mangled = self.text.many(f.symbol), self.text.many(f.mangled_symbol)
            mangled += [""] * (len(names) - len(mangled))
            # One mapping per path (simpleperf may write several Files with one path).
            mappings.append(self.b.mapping(filename=path,
                                           flags=MAPPING_HAS_FUNCTIONS if f.path in self.symbolized else 0))
            for name, system in zip(names, mangled):
                ids += (string(name), string(system))
            counts.append(len(names))
            self.paths[fid] = path
        pairs = np.array(ids, dtype=np.int64).reshape(-1, 2)
        zeros = np.zeros(len(pairs), dtype=np.int64)
        rows = self.b.functions_bulk(pairs[:, 0], pairs[:, 1], zeros, zeros).tolist() if len(pairs) else []
        at = 0
        for fid, mapping, n in zip(fids, mappings, counts):
            self.files[fid] = (mapping, rows[at:at + n])
            at += n

    def _file(self, fid: int) -> tuple[int, list[int]]:
        """The (mapping, functions) of file ``fid``; a file without a File record: an unnamed
        mapping, no functions."""
        got = self.files.get(fid)
        if got is None:
            self.missing_files.add(fid)
            got = self.files[fid] = (self.b.mapping(filename="", flags=0), [])
            self.paths[fid] = ""
        return got

    def stacks(self, s: Samples) -> np.ndarray:
        """Leaf callsite of every sample: locations interned by (file, symbol, address), all at once.

        Entries come grouped by their raw (vaddr, file, symbol, execution type); they are
        grouped by (file, address, symbol) on those few distinct rows, and everything else
        works on these. Only the distinct callchains' entries are listed (when the compiled walk
        grouped the samples by callchain): their stacks are interned, and each sample takes its
        callchain's leaf."""
        raw, rows4 = factorize_rows([s.file_id, s.vaddr.view(np.int64), s.symbol_id], in_order=True)
        rows = s.first[rows4]  # the first listed entry of each
        fid_u, vaddr_u, sid = s.file_id[rows4], s.vaddr[rows4], s.symbol_id[rows4]
        fids, fi = unique_inverse(fid_u)
        known = [self._file(f) for f in fids.tolist()]  # one step per file
        mapping = np.array([m for m, _ in known], dtype=np.int64)[fi]
        nsym = np.array([len(fns) for _, fns in known], dtype=np.int64)
        missing = np.array([f in self.missing_files for f in fids.tolist()], dtype=bool)
        fn_start = np.cumsum(nsym) - nsym
        fn_table = np.array([f for _, fns in known for f in fns], dtype=np.int64)
        bad = (sid < -1) | ((sid >= nsym[fi]) & ~missing[fi])
        if bad.any():  # rows are in order of first sight: the first bad row holds the first bad entry
            k = int(np.argmax(bad))
            index = s.sample_of(int(rows[k]))
            raise MalformedInputError(f"sample {index + 1} refers to symbol {int(sid[k])} of file {int(fids[fi[k]])}, "
                                      f"which has {int(nsym[fi[k]])} symbol(s)")
        has_fn = (sid >= 0) & (sid < nsym[fi])
        fn = np.where(has_fn, fn_table[np.where(has_fn, fn_start[fi] + sid, 0)] if fn_table.size else -1, -1)
        loc, first = factorize_rows([mapping, vaddr_u.view(np.int64), fn])
        has = has_fn[first]
        row0 = self.b.add_locations_bulk(mapping[first], vaddr_u[first], np.zeros(first.size, dtype=bool),
                                         has.astype(np.int64), fn[first][has], np.zeros(int(has.sum()), np.int64),
                                         np.zeros(int(has.sum()), np.int64))
        uses = np.bincount(s.entry_row, weights=s.group_size, minlength=s.first.size).astype(np.int64)
        self.entries = s.entries
        self.unsymbolized = int(uses[s.symbol_id < 0].sum())
        if s.exec_type.any():
            self._exec_types(s.file_id, s.vaddr, s.exec_type, uses)
        top = row0 + (int(loc.max()) if loc.size else 0)
        by_group = (row0 + loc).astype(np.min_scalar_type(top))[raw][s.entry_row]
        flat = by_group[s.entry]  # one gather per listed entry
        if s.chain_of is None:
            return self.b.stacks_from_csr(flat, s.offsets)
        return self.b.stacks_from_csr(flat, s.offsets, distinct=True)[s.chain_of]

    def _exec_types(self, fid: np.ndarray, vaddr: np.ndarray, kind: np.ndarray, uses: np.ndarray) -> None:
        """Keep one execution type per (file path, address): the model has no per-entry kind.
        The rows are the distinct entries, ``uses`` how many callchain entries each stands for."""
        group, first = factorize_rows([fid, vaddr.view(np.int64), kind])
        counts = np.bincount(group, weights=uses).astype(np.int64)
        by_frame: dict[tuple[str, int], Counter] = {}
        for f, v, t, n in zip(fid[first].tolist(), vaddr[first].tolist(), kind[first].tolist(), counts.tolist()):
            by_frame.setdefault((self.paths[f], v), Counter())[t] += n  # one step per distinct frame kind
        for key, kinds in by_frame.items():
            best = min(kinds, key=lambda t: (-kinds[t], t))
            self.mixed += sum(kinds.values()) - kinds[best]
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
