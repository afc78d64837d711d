"""traced_perf ``PerfSample`` packets: decoded many at a time, built into one profile per (event, pid).

Kept per sample: time (trace clock, ns), pid, tid and cpu columns (each only
when the trace sets it), the stack, and labels ``cpu_mode``, ``unwind_error``
(the stack is kept as far as it was unwound), ``sample_skipped`` (the
counter part of a skipped sample is still valid; its stack is empty) and
``thread_name`` when the trace names the thread. Sample types are
``samples/count`` (1 per sample, the default, as ``traceconv profile``), then
the timebase event and each follower event, whose running counts
(``timebase_count``, ``follower_counts``) become per-sample deltas per
(sequence, cpu). A counter that goes backwards restarts from its value (a
warning counts it).

Not samples, counted in the profile's extras: ``kernel_records_lost`` (per
cpu) and producer events (``profiler_events``); also per profile
``samples_skipped`` and ``unwind_errors`` by reason. The event configuration
is in ``perf_event`` (name, unit, frequency or period, followers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from polyprof.formats.perfetto import _schema as S
from polyprof.formats.perfetto._sequence import text
from polyprof.model.columns import distinct, factorize_rows, unique_inverse
from polyprof.model.compact import compact_values, constant_column, is_constant_view, narrow_column
from polyprof.model.memory import release_free_memory
from polyprof.model.profile import Label
from polyprof.model.units import split_unit
from polyprof.wire import vector as V

if TYPE_CHECKING:
    from polyprof.formats.perfetto._context import Context

__all__ = ["PerfCollector", "PerfConfig"]


SAMPLES = ("samples", "count")


@dataclass(frozen=True)
class PerfConfig:
    """The sampling configuration of a sequence (from ``perf_sample_defaults``)."""

    timebase: tuple[str, str]
    followers: tuple[tuple[str, str], ...] = ()
    interval: tuple[str, int] = ("", 0)  # ("frequency" | "period" | "poll_period_ms", value)
    legacy: bool = False  # no defaults: trace processor assumes cpu-clock

    def explicit_samples(self) -> int | None:
        """Value column (1 = timebase, 2.. = followers) of an event named ``samples`` counting samples.

        polyprof writes the sample count of profiles whose rows stand for
        several samples as such an event; it then replaces the one-per-sample
        column instead of adding a second ``samples`` column.
        """
        events = [self.timebase, *self.followers]
        return events.index(SAMPLES) + 1 if SAMPLES in events else None

    def columns(self) -> list[int]:
        """Value columns in sample-type order: the sample count, the timebase, the followers."""
        explicit = self.explicit_samples()
        rest = [c for c in range(1, 2 + len(self.followers)) if c != explicit]
        return [explicit if explicit is not None else 0, *rest]

    def sample_types(self) -> list[tuple[str, str]]:
        events = [self.timebase, *self.followers]
        types = [SAMPLES] + [events[c - 1] for c in self.columns()[1:]]
        seen: set[str] = set()
        out = []
        for name, unit in types:
            base, k = name, 2
            while name in seen:
                name, k = f"{base}#{k}", k + 1
            seen.add(name)
            out.append((name, unit))
        return out

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"timebase": self.timebase[0], "unit": self.timebase[1]}
        if self.interval[0]:
            d[self.interval[0]] = self.interval[1]
        if self.followers:
            d["followers"] = [name for name, _ in self.followers]
        if self.legacy:
            d["legacy_defaults"] = True
        return d


def _event_name(ev: Any, stats: Any, counter_field: str = "counter") -> tuple[str, str]:
    """(name, unit) of a Timebase or FollowerEvent, named as trace processor names it."""
    unit = "count"
    if ev.HasField(counter_field):
        name, unit = S.PERF_COUNTERS.get(getattr(ev, counter_field), ("unknown", "count"))
    elif ev.HasField("tracepoint"):
        name = text(ev.tracepoint.name, stats)
    elif ev.HasField("raw_event"):
        r = ev.raw_event
        name = f"raw.0x{r.type:x}.0x{r.config:x}.0x{r.config1:x}.0x{r.config2:x}"
    else:  # no event: the kernel default, per-cpu timer
        name, unit = S.PERF_COUNTERS[1]
    if ev.name:  # a name given by the producer; polyprof's writer appends "(unit)" when the counter has none
        name, named_unit = split_unit(text(ev.name, stats))
        unit = named_unit or unit
    mods = "".join(S.EVENT_MODIFIERS.get(m, "") for m in ev.modifiers)
    return (f"{name}:{mods}" if mods else name), unit


def config_of(defaults: Any, stats: Any) -> PerfConfig:
    if defaults is None or not defaults.HasField("perf_sample_defaults"):
        return PerfConfig(S.PERF_COUNTERS[1], legacy=True)
    psd = defaults.perf_sample_defaults
    tb = psd.timebase
    interval = ("", 0)
    for name in ("frequency", "period", "poll_period_ms"):
        if tb.HasField(name):
            interval = (name, getattr(tb, name))
    followers = tuple(_event_name(f, stats) for f in psd.followers)
    return PerfConfig(_event_name(tb, stats), followers, interval)


_SCALARS = {"cpu": 1, "pid": 2, "tid": 3, "iid": 4, "mode": 5, "tb": 6, "unwind": 16, "lost": 17, "skip": 18}


def _dense(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Ragged per-row values (row-major) as an (n, max count) array padded with 0."""
    n = counts.size
    out = np.zeros((n, int(counts.max()) if n else 0), dtype=np.uint64)
    offsets = np.cumsum(counts) - counts
    for j in range(out.shape[1]):
        rows = counts > j
        out[rows, j] = values[offsets[rows] + j]
    return out


def columns_generic(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
    """PerfSample columns of the payloads ``buf[starts:ends]``, with the general field walker."""
    n = starts.size
    f = V.walk_fields(buf, starts, ends)
    c: dict[str, np.ndarray] = {}
    for name, number in _SCALARS.items():
        c[name] = V.scalar_column(f, number, n)
        present = np.zeros(n, dtype=bool)
        present[f.msg[(f.field == number) & (f.wire != V.LEN)]] = True
        c[f"has_{name}"] = present
    fvals, fcounts = V.repeated_varints(buf, f.select(7), n)
    c["followers"], c["fcount"] = _dense(fvals, fcounts), fcounts
    ev = f.select(19, V.LEN)
    c["producer"] = np.zeros(n, dtype=bool)
    c["producer"][ev.msg] = True
    c["reason"] = np.zeros(n, dtype=np.int64)
    if len(ev):
        inner = V.walk_fields(buf, ev.start, ev.start + ev.length)
        c["reason"][ev.msg] = V.scalar_column(inner, 1, len(ev)).astype(np.int64)
    return c


def columns_flat(inner: dict[int, tuple[np.ndarray, np.ndarray]], followers: tuple[np.ndarray, np.ndarray],
                 rows: np.ndarray) -> dict[str, np.ndarray]:
    """The same columns from the fast decoder (:mod:`._flat`), for packets ``rows``."""
    n = rows.size
    zero = np.zeros(n, dtype=np.uint64)
    absent = np.zeros(n, dtype=bool)
    c: dict[str, np.ndarray] = {}
    fvals, fcounts = followers
    every = n == fcounts.size  # every packet of the chunk (``rows`` is then 0..n-1): no gathers
    for name, number in _SCALARS.items():
        present, values = inner.get(number, (None, None))
        c[name] = zero if values is None else values if every else values[rows]
        # A copy either way: batches keep these, never a view of the decoder's wider table.
        c[f"has_{name}"] = absent if present is None else np.array(present) if every else present[rows]
    offsets = np.cumsum(fcounts) - fcounts
    counts = fcounts if every else fcounts[rows]
    width = int(counts.max()) if n else 0
    dense = np.zeros((n, width), dtype=np.uint64)
    for j in range(width):
        has = counts > j
        dense[has, j] = fvals[offsets[rows[has]] + j]
    c["followers"], c["fcount"] = dense, counts
    c["producer"] = absent
    c["reason"] = np.zeros(n, dtype=np.int64)
    return c


def merge_columns(parts: list[tuple[np.ndarray, dict[str, np.ndarray]]]) -> tuple[np.ndarray, dict]:
    """Concatenate column sets given with their packet numbers, in packet order."""
    parts = [p for p in parts if p[0].size]
    if len(parts) == 1:
        return parts[0]
    order_of = np.concatenate([p[0] for p in parts])
    order = np.argsort(order_of, kind="stable")
    width = max(p[1]["followers"].shape[1] for p in parts)
    out = {}
    for key in parts[0][1]:
        if key == "followers":
            col = np.concatenate([np.pad(p[1][key], ((0, 0), (0, width - p[1][key].shape[1]))) for p in parts])
        else:
            col = np.concatenate([p[1][key] for p in parts])
        out[key] = col[order]
    return order_of[order], out


def _deltas(keys: np.ndarray, values: np.ndarray, present: np.ndarray, prev: dict[int, int],
            stats: Any) -> np.ndarray:
    """Per-row increase of running counters, per key, in row order (state carried in ``prev``).

    By the compiled twin (:mod:`._perf_compiled`) once the wire kernels are compiled; same answers."""
    if V.compiled():
        from polyprof.formats.perfetto._perf_compiled import deltas_compiled

        out, backs = deltas_compiled(keys, values, present, prev)
        if backs:
            stats["perf counters that went backwards (restarted from their value)"] += backs
        return out
    return _deltas_numpy(keys, values, present, prev, stats)


def _deltas_numpy(keys: np.ndarray, values: np.ndarray, present: np.ndarray, prev: dict[int, int],
                  stats: Any) -> np.ndarray:
    out = np.zeros(keys.size, dtype=np.int64)
    idx = np.nonzero(present)[0]
    if not idx.size:
        return out
    uniq, code = unique_inverse(keys[idx])  # few keys (sequence, cpu): a radix sort of their codes
    order = np.argsort(code.astype(np.int16) if uniq.size <= 32767 else code, kind="stable")
    rows = idx[order]
    k = keys[rows]
    v = values[rows].view(np.int64)
    first = np.ones(k.size, dtype=bool)
    first[1:] = k[1:] != k[:-1]
    d = np.empty(k.size, dtype=np.int64)
    d[1:] = v[1:] - v[:-1]
    starts = np.nonzero(first)[0]
    lasts = np.append(starts[1:] - 1, k.size - 1)
    # int64 arithmetic that wraps, as the rows after each key's first do (no OverflowError on hostile counters)
    d[starts] = v[starts] - np.array([prev.get(key, 0) for key in k[starts].tolist()], dtype=np.int64)
    for key, last in zip(k[starts].tolist(), lasts.tolist()):
        prev[key] = int(v[last])
    back = d < 0
    if back.any():
        stats["perf counters that went backwards (restarted from their value)"] += int(back.sum())
        d[back] = v[back]
    out[rows] = d
    return out


class PerfCollector:
    """Accumulates decoded PerfSamples as numpy batches; builds the perf profiles at the end."""

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self.configs: list[PerfConfig] = []
        self._config_index: dict[PerfConfig, int] = {}
        self.batches: list[dict[str, np.ndarray]] = []
        self._prev: dict[int, dict[int, int]] = {}
        self.lost: dict[int, dict[int, int]] = {}  # config -> cpu -> kernel records lost
        self.events: dict[int, dict[str, int]] = {}  # config -> producer event -> count
        self._pending = self._folded = 0

    def config(self, defaults: Any) -> int:
        cfg = config_of(defaults, self.ctx.stats)
        idx = self._config_index.get(cfg)
        if idx is None:
            idx = self._config_index[cfg] = len(self.configs)
            self.configs.append(cfg)
        return idx

    def add(self, c: dict[str, np.ndarray], pk: dict[str, np.ndarray],
            resolve: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
        """Add decoded PerfSample columns ``c`` (see ``columns_generic``) of packets described by ``pk``.

        ``pk`` holds per packet: seq, config, gen, ts, has_ts, clock;
        ``resolve(gens, iids)`` gives the catalog stack of callstack iids.
        """
        n = c["cpu"].size
        lost = np.where(c["has_lost"], c["lost"], np.uint64(0))
        not_sample = (lost > 0) | c["producer"]
        if not_sample.any():
            self._non_samples(pk["config"], c, lost)
        keep = ~not_sample
        cpu = c["cpu"].astype(np.int64)
        stack = np.full(n, -1, dtype=np.int32)
        with_stack = c["has_iid"] & keep
        if with_stack.any():
            stack[with_stack] = resolve(pk["gen"][with_stack], c["iid"][with_stack])
        # Full detail: no sample-count column (1 each), ``columns`` puts it back. Compact dtypes: the
        # batches are what memory holds for a big trace.
        values = self._values(c, pk, cpu, keep, counted=bool(self.ctx.options.extra.get("aggregate")))
        batch = {"config": narrow_column(pk["config"]), "ts": pk["ts"], "has_ts": pk["has_ts"],
                 "clock": narrow_column(pk["clock"]), "pid": narrow_column(c["pid"]),
                 "tid": narrow_column(c["tid"]), "cpu": narrow_column(cpu),
                 "has_pid": c["has_pid"], "has_tid": c["has_tid"], "has_cpu": c["has_cpu"],
                 "stack": stack, "mode": narrow_column(c["mode"]),
                 "unwind": narrow_column(np.where(c["has_unwind"], c["unwind"].astype(np.int64), -1)),
                 "skip": narrow_column(np.where(c["has_skip"], c["skip"].astype(np.int64), -1)), "values": values}
        if not keep.all():
            batch = {k: v[keep] for k, v in batch.items()}
        if not self.ctx.options.extra.get("aggregate"):  # full detail reads only whether any has one
            batch.update({k: np.array([batch[k].any()]) for k in ("has_pid", "has_tid", "has_cpu")})
            # what a big trace's memory holds until the build: a column of one value (the pid of a
            # one-process recording, the config, the clock, the enums) costs nothing per sample
            batch.update({k: constant_column(batch[k]) for k in _CONSTANT_KEYS})
            batch["values"] = compact_values(batch["values"])
        if self.ctx.options.extra.get("aggregate"):
            self.batches.append(batch)
            self._pending += int(keep.sum())
            if self._pending > max(1 << 18, 2 * self._folded):
                self._fold()
        else:
            self.batches.append(batch)

    _KEYS = ("config", "pid", "tid", "cpu", "has_pid", "has_tid", "has_cpu", "stack", "mode", "unwind", "skip")

    def _fold(self) -> None:
        """Aggregate mode: sum equal samples as they arrive, so memory follows distinct samples."""
        parts = self.batches
        width = max(b["values"].shape[1] for b in parts)
        cols = {k: np.concatenate([b[k] for b in parts]) for k in self._KEYS}
        values = np.concatenate([np.pad(b["values"], ((0, 0), (0, width - b["values"].shape[1]))) for b in parts])
        keys = [cols[k].astype(np.int64) for k in self._KEYS]
        inverse, first = factorize_rows(keys, in_order=True)
        uniq = np.stack([k[first] for k in keys], axis=1)
        summed = np.zeros((uniq.shape[0], width), dtype=np.int64)
        np.add.at(summed, inverse, values)
        out = {k: uniq[:, j].astype(cols[k].dtype) for j, k in enumerate(self._KEYS)}
        m = uniq.shape[0]
        out.update(values=summed, ts=np.zeros(m, np.int64), has_ts=np.zeros(m, bool), clock=np.zeros(m, np.int16))
        self.batches = [out]
        self._folded, self._pending = m, 0

    def _values(self, c: dict[str, np.ndarray], pk: dict[str, np.ndarray], cpu: np.ndarray,
                keep: np.ndarray, counted: bool) -> np.ndarray:
        n = cpu.size
        fcounts, followers = c["fcount"], c["followers"]
        width = max([len(self.configs[k].followers) for k in distinct(pk["config"]).tolist() if k >= 0] + [0])
        if fcounts.size and int(fcounts.max()) > width:
            self.ctx.stats["perf follower counts beyond the configured followers (ignored)"] += int(
                (fcounts > width).sum())
        first = int(counted)
        values = np.zeros((n, first + 1 + width), dtype=np.int64)
        if counted:
            values[:, 0] = 1
        key = (pk["seq"].astype(np.int64) << 32) | (cpu & 0xFFFFFFFF)
        values[:, first] = _deltas(key, c["tb"], c["has_tb"] & keep, self._prev.setdefault(-1, {}),
                                   self.ctx.stats)
        for j in range(min(width, followers.shape[1])):
            present = (fcounts > j) & keep
            values[:, first + 1 + j] = _deltas(key, followers[:, j], present, self._prev.setdefault(j, {}),
                                               self.ctx.stats)
        return values

    def _non_samples(self, config: np.ndarray, c: dict[str, np.ndarray], lost: np.ndarray) -> None:
        for i in np.nonzero(lost > 0)[0].tolist():
            per_cpu = self.lost.setdefault(int(config[i]), {})
            cpu = int(c["cpu"][i])
            per_cpu[cpu] = per_cpu.get(cpu, 0) + int(lost[i])
        for i in np.nonzero(c["producer"])[0].tolist():
            name = "guardrail_stop" if c["reason"][i] == 1 else "stop_unknown"
            counts = self.events.setdefault(int(config[i]), {})
            counts[name] = counts.get(name, 0) + 1

    # ---------------------------------------------------------------- finish

    def columns(self) -> dict[str, np.ndarray] | None:
        """All batches as one set of columns, times converted to trace time."""
        if self.ctx.options.extra.get("aggregate") and self._pending:
            self._fold()
        if not self.batches:
            return None
        batches, self.batches = self.batches, []
        counted = not self.ctx.options.extra.get("aggregate")  # the batches lack the sample count
        cols: dict[str, np.ndarray] = {}
        for key in list(batches[0]):
            dtype = np.result_type(*[b[key] for b in batches])  # (pid/tid/cpu: the narrowest type, which the
            # compact profile keeps: it takes the column uncopied)
            cols[key] = _fill(batches, key, np.int64 if key == "ts" else dtype, counted and key == "values")
            release_free_memory()  # the parts just copied sit in glibc's heap: give them back before the next
        cols["time"] = self.ctx.times.trace_times(cols.pop("ts"), cols["has_ts"], cols.pop("clock"), in_place=True)
        cols["has_ts"] = np.array([cols["has_ts"].any()])  # from here on only whether any sample has one
        return cols

    def labels(self, cols: dict[str, np.ndarray],
               tid_names: dict[int, str]) -> tuple[np.ndarray, list[tuple[Label, ...]]]:
        """A label-combination id per sample and the label tuple of each id (thread names by tid)."""
        tids = cols["tid"] if tid_names else np.zeros(cols["tid"].size, np.int64)
        keys = [cols["mode"], cols["unwind"], cols["skip"], tids]
        coded = _small_rows(keys)
        if coded is not None:
            inverse, uniq = coded
        else:
            inverse, first = factorize_rows(keys)
            uniq = np.stack([k[first] for k in keys], axis=1)
        sets = []
        for mode, unwind, skip, tid in uniq.tolist():
            labels = []
            if 0 < mode < len(S.CPU_MODES):
                labels.append(Label("cpu_mode", str=S.CPU_MODES[mode]))
            elif mode:
                labels.append(Label("cpu_mode", str=f"mode_{mode}"))
            if unwind >= 0:
                labels.append(Label("unwind_error", str=_enum(S.UNWIND_ERRORS, unwind)))
            if skip >= 0:
                labels.append(Label("sample_skipped", str=_enum(S.SKIP_REASONS, skip)))
            name = tid_names.get(tid) if tid_names else None
            if name is not None:
                labels.append(Label("thread_name", str=name))
            sets.append(tuple(labels))
        return inverse, sets


#: batch columns kept as a stride-0 view when every row of the batch holds one value (the ones
#: the build reads without writing into them: not the times, stacks or values)
_CONSTANT_KEYS = ("config", "has_ts", "clock", "pid", "tid", "cpu", "mode", "unwind", "skip")

_BLOCK = 1 << 20


def remap_in_place(table: np.ndarray, col: np.ndarray) -> np.ndarray:
    """``table[col]`` written over ``col`` a block at a time (``np.take(out=)`` would buffer the
    whole output and widen the indices to intp: two more columns at the peak)."""
    for at in range(0, col.size, _BLOCK):
        part = col[at:at + _BLOCK]
        part[...] = table[part]
    return col


def _small_rows(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """``factorize_rows(keys)`` as (int32 id per row, distinct rows in sorted order) for columns of
    small ranges (cpu modes, enums, tids): one mixed-radix code per row and a presence table, no
    int64 column per row. None when the codes would not fit a table about the rows' size."""
    n = keys[0].size
    lows = [int(k.min()) if n else 0 for k in keys]
    spans = [int(k.max()) - low + 1 if n else 1 for k, low in zip(keys, lows)]
    total = int(np.prod(spans, dtype=object))
    if total > max(n, 1 << 16):
        return None
    code = np.zeros(n, dtype=np.int32)
    for at in range(0, n, _BLOCK):  # a block at a time: no int32 temporary per row
        part = code[at:at + _BLOCK]
        for k, low, span in zip(keys, lows, spans):
            part *= span
            part += np.subtract(k[at:at + _BLOCK], low, dtype=np.int32)  # most significant first
    present = np.zeros(total, dtype=bool)
    present[code] = True
    rank = np.cumsum(present, dtype=np.int32) - 1
    uniq_codes = np.flatnonzero(present)
    ids = remap_in_place(rank, code)
    digits = []
    for low, span in zip(reversed(lows), reversed(spans)):
        digits.append(uniq_codes % span + low)
        uniq_codes = uniq_codes // span
    return ids, np.stack(digits[::-1], axis=1).astype(np.int64)


_TRIM_EVERY = 32 << 20


def _fill(batches: list[dict[str, np.ndarray]], key: str, dtype: Any, counted: bool) -> np.ndarray:
    """Column ``key`` of all batches in one array of ``dtype``, each part freed once copied
    (the peak holds one column twice at most). ``counted``: values get the sample count, 1, first."""
    n = sum(b[key].shape[0] for b in batches)
    if key == "values":
        width = max(b[key].shape[1] for b in batches) + int(counted)
        narrow = all(b[key].dtype == np.int32 for b in batches)  # every value fits: the profile keeps int32
        out = np.zeros((n, width), dtype=np.int32 if narrow else np.int64)  # untouched pages: filled as the parts go
    else:
        firsts = [b[key][:1] for b in batches if b[key].size] if key in _CONSTANT_KEYS else []
        if firsts and all(b[key].size < 2 or is_constant_view(b[key]) for b in batches):
            one = distinct(np.concatenate(firsts))
            if one.size == 1:  # one value in every row: no memory per row
                for b in batches:
                    del b[key]
                return np.broadcast_to(one.astype(dtype), (n,))
        out = np.empty(n, dtype=dtype)
    at = freed = 0
    for b in batches:
        part = b.pop(key)
        if key == "values":
            out[at:at + part.shape[0], int(counted):int(counted) + part.shape[1]] = part
            if counted:
                out[at:at + part.shape[0], 0] = 1
        else:
            out[at:at + part.size] = part
        at += part.shape[0]
        freed += part.nbytes
        del part
        if freed >= _TRIM_EVERY:  # the parts copied sit in glibc's heap: give them back as we go
            release_free_memory()
            freed = 0
    return out


def _enum(names: tuple[str, ...], value: int) -> str:
    return names[value] if 0 <= value < len(names) else f"value_{value}"
