"""Reading Chromium CallStackProfiles into the model.

One :class:`Profile` per CallStackProfile (a UMA log holds several). What is
kept, and where:

- modules -> mappings: file name = the module's resolved basename (or
  ``md5:<hash>`` placeholder), build id = the UMA build id as sent; start,
  limit and offset are 0 because ``Location.address`` is already a module
  offset. A frame of an unknown module is a location without a mapping.
- ``Location.function_name`` (Java frames) -> a function line.
- stacks -> callsites (``frame[0]`` is the leaf).
- samples, in order. CPU profiles: ``samples/count`` (the count, 1 when
  absent) and ``wall/nanoseconds`` (count x sampling period; the sampler
  interrupts a thread whether or not it runs). A profile written by polyprof
  may carry the profile metadata item ``polyprof.time`` (see ``TIME_MODES``):
  then the time column is ``cpu/nanoseconds`` and/or is held in the samples'
  weights, in nanoseconds. Heap profiles (heap trigger,
  or any sample with a weight): ``inuse_objects/count`` (count) and
  ``inuse_space/bytes`` (weight).
- ``sample_time_offset_ms`` -> the time column (ns from the first sample).
- sample labels: metadata replayed into the values active at each sample
  (``name`` or ``name[key]`` = value; names resolved with ``--metadata-names``,
  otherwise ``0x<hash>``), ``continued_work="true"``, ``async_backtrace``
  (JSON list of ``[module, build id, offset(, function)]``, most recent
  first) and, for the deprecated ``Sample`` encoding, ``process_phases``
  (the phases reached so far, comma-separated).
- profile facts -> ``extras``: process, thread, trigger_event, the other
  SampledProfile scalars, profile_time_offset_ms, profile_metadata, the UMA
  log's client/session ids, version, channel and OS; ``profile_labels``
  (process, thread and profile metadata) label samples when profiles merge.

Not read: ChromeOS ``perf_data``/``perf_stat`` (counted in warnings) and the
UMA log's other records (histograms, user actions, ...).

Options: ``metadata_names`` (a names file), ``merge`` (see :mod:`.merging`)
and ``extra["module_names"]`` (a file of module basenames, one per line, to
resolve name hashes beyond the built-in list).
"""

from __future__ import annotations

import json
import mmap
from typing import Any, Union

import numpy as np
from google.protobuf.message import DecodeError

from polyprof.errors import MalformedInputError, UnsupportedFeatureError
from polyprof.formats.chromium import names as N
from polyprof.formats.chromium import schema as S
from polyprof.formats.chromium.columns import (
    StackSamples,
    metadata_states,
    stack_samples,
    stack_table,
)
from polyprof.formats.chromium.spans import Entries, Span, call_stack_spans, entries_in, joined, without_entries
from polyprof.formats.chromium.shape import (
    CALLSTACK,
    HEAD,
    SAMPLED,
    UMA,
    decode_base64,
    detect,
    is_base64,
)
from polyprof.formats.limits import check_int64
from polyprof.formats.options import ReadOptions
from polyprof.formats.source import Source
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import factorize_rows
from polyprof.model.extras import Extras
from polyprof.model.profile import Label, Profile, ValueType
from polyprof.wire.locate import locate
from polyprof.wire.vector import as_buffer, compiled, sized_read

__all__ = ["COMPILED_FROM", "CPU_TYPES", "HEAP_TYPES", "LOG_KEYS", "read"]

#: The input: bytes, or a large file's read-only memory map (``Source.mapped``).
Content = Union[bytes, mmap.mmap]
#: Inputs from which the compiled decode kernels are loaded before the first decode: below it
#: the numpy path (a stack's frames decoded once per distinct byte string) is as quick as the
#: compiled one with numba's loading included (measured on 1.2 and 4.9 MB profiles: 1.3-1.5x
#: quicker by numpy).
COMPILED_FROM = 16 << 20
CPU_TYPES = (("samples", "count"), ("wall", "nanoseconds"))
#: Profile metadata name polyprof's writer uses to say what the time column of a CPU profile is:
#: value -> (time sample type name, the time is in StackSample.weight rather than count x period).
TIME_METADATA = "polyprof.time"
TIME_MODES = {1: ("cpu", False), 2: ("cpu", True), 3: ("wall", True)}
#: Profile metadata item set by polyprof's writer when a frame's function name is written only on
#: the first frame at its (module, address); the reader gives it to the others (``NAMES_SHARED``).
NAMES_METADATA = "polyprof.names"
NAMES_SHARED = 1
HEAP_TYPES = (("inuse_objects", "count"), ("inuse_space", "bytes"))
MS = 1_000_000
HEAP_TRIGGER = S.TRIGGERS.index("PERIODIC_HEAP_COLLECTION")
#: extras that describe the whole input (kept when profiles are merged).
LOG_KEYS = ("container", "client_id", "session_id", "product", "app_version", "channel",
            "os_name", "os_version")
# SampledProfile scalar fields kept under their own names (enums by name).
_SCALARS = ("ms_after_boot", "ms_after_login", "suspend_duration_ms", "ms_after_resume",
            "num_tabs_restored", "ms_after_restore", "psi_cpu_last_10s_pct", "psi_cpu_last_60s_pct",
            "cpu_speed_limit_percent")
_ENUMS = (("trigger_event", S.TRIGGERS), ("process", S.PROCESSES), ("thread", S.THREADS),
          ("lacros_channel", S.CHANNELS), ("thermal_state", S.THERMAL_STATES))


class _Context:
    """What every profile of one input shares: name dictionaries, warnings."""

    def __init__(self, options: ReadOptions) -> None:
        extra_modules = options.extra.get("module_names")
        modules = N.load_names(extra_modules).values() if extra_modules else ()
        self.module_names = N.module_names(modules)
        self.metadata_names = N.load_names(options.metadata_names) if options.metadata_names else {}
        self.bad_utf8 = 0
        self.buf = as_buffer(b"")
        self.spans: list[Span | None] = []
        self.found: list[tuple[Entries, Entries] | None] = []
        self.cut: list[bool] = []

    def find_spans(self, kind: str, data: Content) -> None:
        """Where every CallStackProfile of ``data`` and its entries lie (see :mod:`.spans`), when
        the compiled kernels read: numpy walks a profile's million top-level fields at 8 MB/s,
        slower than joining upb's entries (a 1.2 MB profile: 0.15 s more)."""
        if compiled():
            self.buf = np.frombuffer(data, dtype=np.uint8)
            self.spans = call_stack_spans(kind, self.buf)
            self.found = [entries_in(self.buf, span, None, None) for span in self.spans]

    def parse(self, kind: str, data: Content) -> Any:
        """``data`` parsed by upb (stacks and samples kept as bytes), without the entries found
        in it when there are (:func:`.spans.without_entries`; ``cut`` says whose)."""
        shrunk = without_entries(kind, data, self.buf, self.spans, self.found) if self.spans else None
        if shrunk is not None:
            msg = S.messages(True)[kind]()
            try:
                msg.ParseFromString(shrunk[0])
                self.cut = shrunk[1]
                return msg
            except DecodeError:
                pass  # named on the whole input below
        self.cut = []
        return _parse(kind, bytes(data), lazy=True)

    def entries(self, index: int, csp: Any) -> tuple[Entries, Entries] | None:
        """The stack table and samples of the CallStackProfile ``csp`` of SampledProfile ``index``
        found in the input; None: upb's lists (not found, or not as upb lists them)."""
        got = self.found[index] if index < len(self.found) else None
        if got is None or index < len(self.cut) and self.cut[index]:
            return got
        return got if (got[0][1].size, got[1][1].size) == (len(csp.stack), len(csp.stack_sample)) else None

    def text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.bad_utf8 += 1
            return raw.decode("utf-8", errors="replace")


def _parse(kind: str, data: bytes, lazy: bool = False) -> Any:
    msg = S.messages(lazy)[kind]()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        found = locate(data, msg.DESCRIPTOR)
        if found is not None:
            raise MalformedInputError(f"not a valid {kind} message: {found.message}", offset=found.offset) from None
        raise MalformedInputError(f"not a valid {kind} message ({exc})") from None
    return msg


def read(source: Source, options: ReadOptions) -> list[Profile]:
    """Every CallStackProfile in ``source`` (see the module docstring)."""
    data: Content = source.mapped(COMPILED_FROM) or source.data(COMPILED_FROM)  # a large file: mapped, not copied
    with sized_read(len(data), COMPILED_FROM):
        profiles = _read(data, options)
    source.unchanged(data)
    return profiles


def _read(data: Content, options: ReadOptions) -> list[Profile]:
    # Which message: decided on the head, as the sniffer decided (and cached) it; upb then
    # parses the whole input as that message.
    kind = detect(data[:HEAD])
    if kind is None and is_base64(data[:HEAD]):
        try:
            data = decode_base64(bytes(data))
        except ValueError as exc:
            raise MalformedInputError(f"invalid base64 text ({exc})") from None
        kind = detect(data[:HEAD])
    if kind is None:
        kind = detect(bytes(data), evidence=False)  # e.g. a profile without samples
    if kind is None:
        raise MalformedInputError("not a Chromium CallStackProfile, SampledProfile or "
                                  "ChromeUserMetricsExtension (nor base64 text of one)")
    ctx = _Context(options)
    ctx.find_spans(kind, data)
    msg = ctx.parse(kind, data)  # stacks and samples stay bytes (or left out): decoded as columns
    try:
        if kind == UMA:
            profiles = _from_log(msg, ctx)
        elif kind == SAMPLED:
            profiles = _from_sampled_list([msg], ctx, {"container": SAMPLED})
        else:
            profiles = [_CallStack(msg, ctx, {"container": CALLSTACK}, index=0).build()]
    except MalformedInputError:
        _parse(kind, bytes(data))  # a stack or sample upb rejects: its message, as before
        raise
    if ctx.bad_utf8 and profiles:
        profiles[0].warnings.append(f"{ctx.bad_utf8} build id(s) or function name(s) were not valid "
                                    "UTF-8 and were decoded with replacement characters")
    if options.merge and len(profiles) > 1:
        from polyprof.formats.chromium.merging import merge_profiles
        profiles = merge_profiles(profiles)
    return profiles


def _from_log(log: Any, ctx: _Context) -> list[Profile]:
    extras: dict[str, Any] = {"container": UMA}
    if log.HasField("client_id"):
        extras["client_id"] = f"0x{log.client_id:016x}"
    for name in ("session_id", "product"):
        if log.HasField(name):
            extras[name] = getattr(log, name)
    if log.HasField("system_profile"):
        sp = log.system_profile
        if sp.HasField("app_version"):
            extras["app_version"] = ctx.text(sp.app_version)
        if sp.HasField("channel"):
            extras["channel"] = S.enum_name(S.CHANNELS, sp.channel)
        for name in ("name", "version"):
            if sp.os.HasField(name):
                extras[f"os_{name}"] = ctx.text(getattr(sp.os, name))
    return _from_sampled_list(list(log.sampled_profile), ctx, extras)


def _from_sampled_list(items: list, ctx: _Context, log_extras: dict[str, Any]) -> list[Profile]:
    profiles: list[Profile] = []
    skipped = 0
    for index, sp in enumerate(items):
        if not sp.HasField("call_stack_profile"):
            skipped += 1
            continue
        extras = dict(log_extras)
        extras.update(_sampled_extras(sp, ctx))
        reader = _CallStack(sp.call_stack_profile, ctx, extras,
                            heap=sp.trigger_event == HEAP_TRIGGER, index=index)
        profile = reader.build()
        if sp.HasField("perf_data") or sp.HasField("perf_stat"):
            profile.warnings.append("ChromeOS perf_data/perf_stat in this SampledProfile was not read")
        profiles.append(profile)
    if skipped and not profiles:
        raise UnsupportedFeatureError(
            f"holds {skipped} SampledProfile(s) without call stacks (ChromeOS perf data), "
            "which polyprof does not read")
    if skipped:
        profiles[0].warnings.append(f"skipped {skipped} SampledProfile(s) without call stacks "
                                    "(ChromeOS perf data is not read)")
    return profiles


def _sampled_extras(sp: Any, ctx: _Context) -> Extras:
    out = Extras()
    for name, table in _ENUMS:
        if sp.HasField(name):
            out[name] = S.enum_name(table, getattr(sp, name))
    for name in _SCALARS:
        if sp.HasField(name):
            out[name] = getattr(sp, name)
    if sp.HasField("lacros_version"):
        out["lacros_version"] = ctx.text(sp.lacros_version)
    for name in ("cpu_max_frequency_mhz", "lacros_pids"):
        if len(getattr(sp, name)):
            out[name] = list(getattr(sp, name))
    for name, table in (("process_types", S.PROCESSES), ("thread_types", S.THREADS)):
        entries = getattr(sp, name)
        if len(entries):
            out[name] = {str(e.key): S.enum_name(table, e.value) for e in entries}
    labels = {k: out[k] for k in ("process", "thread") if k in out}
    if labels:
        out.profile_labels = labels
    return out


class _Metadata:
    """Replays delta-encoded metadata into the items active at each sample."""

    def __init__(self, hashes: list[int], names: dict[int, str]) -> None:
        self.texts = [names.get(h) or N.hash_text(h) for h in hashes]
        self.unresolved: set[str] = set()
        self.hashes = hashes
        self.names = names
        self.active: dict[tuple[int, int | None], int] = {}

    def key_text(self, item: Any) -> tuple[int, int | None]:
        index = item.name_hash_index
        if not 0 <= index < len(self.texts):
            raise MalformedInputError(f"metadata item refers to name hash {index}, but the profile "
                                      f"has {len(self.texts)}")
        return index, (item.key if item.HasField("key") else None)

    def note(self, ident: tuple[int, int | None]) -> None:
        """Remember an unresolved name that reaches a label or the profile metadata."""
        if self.hashes[ident[0]] not in self.names:
            self.unresolved.add(self.texts[ident[0]])

    def label_key(self, ident: tuple[int, int | None]) -> str:
        text = self.texts[ident[0]]
        return text if ident[1] is None else f"{text}[{ident[1]}]"


class _CallStack:
    """Builds one Profile from one CallStackProfile message."""

    def __init__(self, csp: Any, ctx: _Context, extras: dict[str, Any], *, heap: bool = False,
                 index: int = 0) -> None:
        self.csp = csp
        self.ctx = ctx
        self.b = ProfileBuilder("chromium")
        self.time_mode = _marker(csp, TIME_METADATA)
        self.time_mode = self.time_mode if self.time_mode in TIME_MODES else 0
        # The entries in the input (no bytes object per stack and sample), else upb's lists.
        self.entries = ctx.entries(index, csp)
        self.samples = stack_samples(self.entries[1] if self.entries else joined(list(csp.stack_sample)))
        self.n_stacks = self.entries[0][1].size if self.entries else len(csp.stack)
        self.heap = (heap or bool(self.samples.has_weight.any())) and not self.time_mode
        self.b.meta.extras.update(extras)
        self.module_text = [self._module_text(m) for m in csp.module_id]
        self.modules = [self.b.mapping(0, 0, 0, name, build_id, 0) for name, build_id in self.module_text]
        self._locs: dict[tuple, int] = {}

    def _module_text(self, m: Any) -> list[str]:
        """[file name, build id] of a ModuleIdentifier."""
        build_id = self.ctx.text(m.build_id) if m.HasField("build_id") else ""
        name = ""
        if m.HasField("name_md5_prefix"):
            h = m.name_md5_prefix
            name = self.ctx.module_names.get(h) or N.module_placeholder(h)
        return [name, build_id]

    def location(self, loc: Any) -> int:
        """The location of a Location message (deprecated samples)."""
        has_module = loc.HasField("module_id_index")
        index = loc.module_id_index
        key = (has_module, index, loc.address, loc.function_name)
        row = self._locs.get(key)
        if row is None:
            mapping = -1
            if has_module:
                if not 0 <= index < len(self.modules):
                    raise MalformedInputError(f"a frame refers to module {index}, but the profile "
                                              f"has {len(self.modules)}")
                mapping = self.modules[index]
            lines: tuple[tuple[int, int, int], ...] = ()
            if loc.function_name:
                lines = ((self.b.function(self.ctx.text(loc.function_name)), 0, 0),)
            row = self._locs[key] = self.b.location(mapping, loc.address, lines)
        return row

    def _frame_json(self, loc: Any) -> list:
        if loc.HasField("module_id_index"):
            if not 0 <= loc.module_id_index < len(self.modules):
                raise MalformedInputError(f"an async backtrace refers to module {loc.module_id_index}, "
                                          f"but the profile has {len(self.modules)}")
            frame: list = [*self.module_text[loc.module_id_index], loc.address]
        else:
            frame = ["", "", loc.address]
        if loc.function_name:
            frame.append(self.ctx.text(loc.function_name))
        return frame

    def build(self) -> Profile:
        csp, b = self.csp, self.b
        b.set_sample_types(HEAP_TYPES if self.heap else self._cpu_types())
        self._meta()
        names = _Metadata(list(csp.metadata_name_hash), self.ctx.metadata_names)
        self._profile_metadata(names)
        if len(csp.DEPRECATED_sample):
            self._deprecated_samples()
            if len(self.samples):
                b.meta.warnings.append("profile holds both the deprecated Sample and the StackSample "
                                       "encodings; both were read, deprecated samples first")
        self._stack_samples(names)
        if names.unresolved:
            b.meta.extras["unresolved_metadata_names"] = sorted(names.unresolved)
        return b.finish()

    def _meta(self) -> None:
        csp, p = self.csp, self.b.meta
        p.duration_nanos = csp.profile_duration_ms * MS
        if self.heap:
            if csp.sampling_period_ms:
                p.extras["sampling_period_ms"] = csp.sampling_period_ms
            p.default_sample_type = "inuse_space"
        else:
            p.period_type = ValueType(*self._cpu_types()[1])
            p.period = csp.sampling_period_ms * MS
            if not csp.HasField("sampling_period_ms") and len(self.samples) + len(csp.DEPRECATED_sample):
                p.warnings.append("no sampling period: wall time is unknown (0)")
        if csp.HasField("profile_time_offset_ms"):
            p.extras["profile_time_offset_ms"] = csp.profile_time_offset_ms

    def _profile_metadata(self, names: _Metadata) -> None:
        if not len(self.csp.profile_metadata):
            return
        items: dict[str, int | None] = {}
        marker, names_marker = _marker_index(self.csp, TIME_METADATA), _marker_index(self.csp, NAMES_METADATA)
        for item in self.csp.profile_metadata:
            if item.name_hash_index == marker and self.time_mode or item.name_hash_index == names_marker:
                continue  # polyprof's own markers: read into the sample types and frame names
            ident = names.key_text(item)
            names.note(ident)
            items[names.label_key(ident)] = item.value if item.HasField("value") else None
        if not items:
            return
        p = self.b.meta
        p.extras["profile_metadata"] = items
        p.extras.profile_labels = {**p.extras.profile_labels, **{k: v for k, v in items.items() if v is not None}}

    def _cpu_types(self) -> tuple[tuple[str, str], tuple[str, str]]:
        name = TIME_MODES[self.time_mode][0] if self.time_mode in TIME_MODES else CPU_TYPES[1][0]
        return CPU_TYPES[0], (name, "nanoseconds")

    def _values(self, count: int, weight: int, where: str = "a sample") -> tuple[int, int]:
        if self.heap or TIME_MODES.get(self.time_mode, ("", False))[1]:
            return count, weight
        period = self.b.meta.period
        check_int64(f"{where}: count {count} x sampling period {period} ns", count * period)
        return count, count * period

    def _check_periods(self, count: np.ndarray) -> None:
        """Every stack sample's count x period fits the model's 64-bit values (one check per extreme)."""
        for i in (int(np.argmax(count)), int(np.argmin(count))):
            self._values(int(count[i]), 1, f"stack sample {i}")


    def _stack_samples(self, names: _Metadata) -> None:
        csp, b, s = self.csp, self.b, self.samples
        if not self.n_stacks and not len(s):
            return
        stacks: Entries = self.entries[0] if self.entries else joined(list(csp.stack))
        leaf = stack_table(b, stacks, self.modules, self.ctx,
                           _marker(csp, NAMES_METADATA) == NAMES_SHARED)
        backtraces = [json.dumps([self._frame_json(loc) for loc in bt.location], separators=(",", ":"),
                                 ensure_ascii=False) for bt in csp.async_backtrace]
        self._check(s, leaf.size, len(names.texts), len(backtraces))
        state, states = metadata_states(s.items, len(s))
        meta_labels = []
        for active in states:  # one step per distinct metadata state
            idents = [(name, key) for name, key, _ in active]
            for ident in idents:
                names.note(ident)
            meta_labels.append(sorted((Label(names.label_key(i), num=v) for i, (_, _, v) in zip(idents, active)),
                                      key=lambda lb: lb.key))
        backtrace = np.where(s.has_backtrace, s.backtrace, -1)
        combo, first = factorize_rows([state, s.continued.astype(np.int64), backtrace])
        sets = []
        for st, cont, bt in zip(state[first].tolist(), s.continued[first].tolist(), backtrace[first].tolist()):
            labels = list(meta_labels[st])
            if cont:
                labels.append(Label("continued_work", str="true"))
            if bt >= 0:
                labels.append(Label("async_backtrace", str=backtraces[bt]))
            sets.append(b.labelset(labels) if labels else 0)
        count = np.where(s.has_count, s.count, 1)
        weight = np.where(s.has_weight, s.weight, 1)
        in_weight = self.heap or TIME_MODES.get(self.time_mode, ("", False))[1]
        if not in_weight and len(s):
            self._check_periods(count)
        values = np.stack([count, weight if in_weight else count * b.meta.period], axis=1)
        time = s.time * MS if s.has_time.any() else None
        b.add_samples_bulk(leaf[s.stack], values, np.array(sets, dtype=np.int32)[combo] if len(s) else None,
                           time=time)

    @staticmethod
    def _check(s: StackSamples, n_stacks: int, n_names: int, n_backtraces: int) -> None:
        """The first sample referring to what does not exist (stack, metadata name, backtrace)."""
        owner, name = s.items[0], s.items[1]
        bad = [np.flatnonzero((s.stack < 0) | (s.stack >= n_stacks)),
               owner[(name < 0) | (name >= n_names)],
               np.flatnonzero(s.has_backtrace & ((s.backtrace < 0) | (s.backtrace >= n_backtraces)))]
        first = min((int(b[0]), k) for k, b in enumerate(bad) if b.size) if any(b.size for b in bad) else None
        if first is None:
            return
        i, k = first
        if k == 0:
            raise MalformedInputError(f"stack sample {i} refers to stack {int(s.stack[i])}, but the "
                                      f"profile has {n_stacks}")
        if k == 1:
            index = int(name[np.argmax((owner == i) & ((name < 0) | (name >= n_names)))])
            raise MalformedInputError(f"metadata item refers to name hash {index}, but the profile has {n_names}")
        raise MalformedInputError(f"stack sample {i} refers to async backtrace {int(s.backtrace[i])}, but the "
                                  f"profile has {n_backtraces}")

    def _deprecated_samples(self) -> None:
        b = self.b
        phases: list[str] = []
        no_count = 0
        for i, s in enumerate(self.csp.DEPRECATED_sample):
            stack = b.stack([self.location(f) for f in s.frame])
            for ph in s.process_phase:
                name = S.enum_name(S.PROCESS_PHASES, ph)
                if name not in phases:
                    phases.append(name)
            labels = [Label("process_phases", str=",".join(phases))] if phases else []
            if not s.HasField("count"):
                no_count += 1
            count = s.count if s.HasField("count") else 1
            b.add_sample(stack, self._values(count, 1, f"deprecated sample {i}"), labels=labels)
        if no_count:
            b.meta.warnings.append(f"{no_count} deprecated Sample(s) had no count; taken as 1")


def _marker_index(csp: Any, name: str) -> int | None:
    """Index of polyprof's metadata name ``name`` in the profile's metadata name table."""
    h = N.hash_metric_name(name.encode())
    table = list(csp.metadata_name_hash)
    return table.index(h) if h in table else None


def _marker(csp: Any, name: str) -> int:
    """The value of polyprof's profile metadata item ``name`` (0 when absent)."""
    index = _marker_index(csp, name)
    for item in csp.profile_metadata if index is not None else ():
        if item.name_hash_index == index and item.HasField("value"):
            return int(item.value)
    return 0
