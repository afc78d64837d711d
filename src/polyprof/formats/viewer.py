"""What the viewer writers (folded, speedscope, firefox) share.

- **Frames**: every location expands to one frame per line, outermost
  (physical) function first, so inlined functions stay visible. A frame's
  name is the function name (its system name when the name is empty). A
  location without lines is an *unknown* frame, named from its binary and
  address in one of the :data:`UNKNOWN_STYLES`.
- **Threads**: which thread each sample ran on, from the ``pid``/``tid``
  columns, labels named ``thread_name``/``thread``/``comm`` (and numeric
  ``pid``/``tid`` labels), and the conventions readers use in
  ``Profile.extras``: ``threads`` (``{tid: {"name", "pid"}}`` or
  ``{tid: name}`` or a list of ``{"tid", "pid", "name"}``), ``thread_names``
  (``{tid: name}``) and ``process_names`` (``{pid: name}``).
- **Sample values**: one column chosen by ``WriteOptions.sample_index``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from polyprof.model.profile import Profile

__all__ = ["THREAD_LABELS", "UNKNOWN_STYLES", "Frame", "ThreadInfo", "callsite_order", "is_jit", "is_kernel",
           "listed_threads", "location_frames", "sample_threads", "samples_with_other_labels", "split_rows", "stack_paths",
           "time_order", "utf8", "value_column"]

#: How a frame without a symbol is named: ``address`` gives ``libc.so+0x1a2b``
#: (as the Firefox Profiler names them), ``aosp`` gives ``libc.so[+1a2b]``
#: (simpleperf's ``--addrs``), ``unknown`` gives the word ``unknown``.
UNKNOWN_STYLES = ("address", "aosp", "unknown")

_NAME_LABELS = ("thread_name", "thread", "comm")
_SURROGATE = re.compile("[\ud800-\udfff]")


class Frame(NamedTuple):
    """One frame of a location (one inline level)."""

    name: str
    file: str
    line: int
    start_line: int
    function: int       # row in the functions table, -1 when unknown
    mapping: int        # row in the mappings table, -1 when none
    address: int
    inline_depth: int   # 0 = the physical (outermost) function


def utf8(text: str) -> bytes:
    """``text`` as valid UTF-8: lone surrogates (from names that were never text) become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


def value_column(p: Profile, sample_index: str | int | None) -> tuple[int, np.ndarray]:
    """(column index, int64 values) of the chosen sample type."""
    if not p.sample_types:
        return 0, np.zeros(len(p.samples), dtype=np.int64)
    i = p.sample_index(sample_index)
    return i, p.samples.values[:, i].astype(np.int64, copy=False)


def is_kernel(path: str) -> bool:
    """True for kernel code (``[kernel.kallsyms]``, ``*.ko`` modules)."""
    return "kallsyms" in path or path.endswith(".ko")


def is_jit(path: str) -> bool:
    """True for Android ART JIT code."""
    return path == "[JIT app cache]"


def unknown_name(path: str, address: int, style: str) -> str:
    if style == "unknown":
        return "unknown"
    base = os.path.basename(path) if path and not path.startswith("[") else path
    if style == "aosp":
        return f"{base}[+{address:x}]"
    if not base and not address:
        return "<unknown>"
    return f"{base}+0x{address:x}" if base else f"0x{address:x}"


def location_frames(p: Profile, unknown_style: str = "address") -> list[tuple[Frame, ...]]:
    """Frames of every location, outermost first."""
    strs = p.strings
    f = p.functions
    names = [strs[n] or strs[s] for n, s in zip(f.name.tolist(), f.system_name.tolist())]
    files = [strs[i] for i in f.filename.tolist()]
    starts = f.start_line.tolist()
    paths = [strs[i] for i in p.mappings.filename.tolist()]
    lf, ll = p.lines.function.tolist(), p.lines.line.tolist()
    bounds = p.locations.line_start.tolist()
    out: list[tuple[Frame, ...]] = []
    for loc, (m, addr) in enumerate(zip(p.locations.mapping.tolist(), p.locations.address.tolist())):
        rows = range(bounds[loc + 1] - 1, bounds[loc] - 1, -1)  # outermost line is stored last
        frames = []
        for depth, r in enumerate(rows):
            fn = lf[r]
            if fn >= 0 and names[fn]:
                frames.append(Frame(names[fn], files[fn], ll[r], starts[fn], fn, m, addr, depth))
            else:
                name = unknown_name(paths[m] if m >= 0 else "", addr, unknown_style)
                frames.append(Frame(name, files[fn] if fn >= 0 else "", ll[r], 0, -1, m, addr, depth))
        if not frames:
            frames.append(Frame(unknown_name(paths[m] if m >= 0 else "", addr, unknown_style),
                                "", 0, 0, -1, m, addr, 0))
        out.append(tuple(frames))
    return out


def callsite_order(p: Profile) -> np.ndarray:
    """Callsites sorted so that every parent comes before its children."""
    return np.argsort(p.callsites.depth(), kind="stable")


def time_order(p: Profile) -> np.ndarray:
    """Sample rows in time order (file order when the profile has no timestamps)."""
    if p.samples.time is None:
        return np.arange(len(p.samples))
    return np.argsort(p.samples.time, kind="stable")


def split_rows(group: np.ndarray, n: int, order: np.ndarray) -> list[np.ndarray]:
    """Rows of each group 0..n-1 (``group`` per sample), each in the order of ``order``."""
    by = order[np.argsort(group[order], kind="stable")]
    bounds = np.searchsorted(group[by], np.arange(n + 1))
    return [by[bounds[k]:bounds[k + 1]] for k in range(n)]


_FEW = 64  # stacks still going below which a level-wide numpy step costs more than a Python walk


def stack_paths(p: Profile, wanted: np.ndarray, chunk: int = 16384) -> Iterator[tuple[int, list[int]]]:
    """(callsite, its locations root first) for every distinct callsite in ``wanted`` (-1 ignored).

    Walks all wanted stacks up together, one level per numpy step, a chunk
    at a time; once only a few very deep stacks are still going (a
    million-frame recursion), those are finished by a plain walk up their
    parents. The work is proportional to the stacks' total length, never to
    the whole callsite tree.
    """
    parent, location = p.callsites.parent, p.callsites.location
    uniq = np.unique(wanted[wanted >= 0])
    lists = None
    for lo in range(0, uniq.size, chunk):
        cur = uniq[lo:lo + chunk].astype(np.int64)
        levels = []
        while True:
            ok = cur >= 0
            going = int(ok.sum())
            if not going or (going <= _FEW and len(levels) >= _FEW):
                break
            levels.append(np.where(ok, location[np.maximum(cur, 0)], -1))
            cur = np.where(ok, parent[np.maximum(cur, 0)], -1)
        deep = np.flatnonzero(cur >= 0)
        if deep.size and lists is None:  # plain lists: a Python walk over numpy scalars is slow
            lists = parent.tolist(), location.tolist()
        tails = {int(i): _walk_up(*lists, int(cur[i])) for i in deep} if deep.size else {}
        rows = np.stack(levels[::-1], axis=1).tolist() if levels else [[] for _ in range(cur.size)]
        for i, (c, row) in enumerate(zip(uniq[lo:lo + chunk].tolist(), rows)):
            path = [x for x in row if x >= 0]
            yield c, (tails[i] + path) if i in tails else path


def _walk_up(parent: list[int], location: list[int], c: int) -> list[int]:
    """Locations from callsite ``c`` up to the root, root first."""
    out = []
    while c >= 0:
        out.append(location[c])
        c = parent[c]
    out.reverse()
    return out


# ---------------------------------------------------------------- threads

@dataclass(frozen=True)
class ThreadInfo:
    """A thread as viewers show it; fields are None when the profile does not say."""

    name: str | None
    pid: int | None
    tid: int | None
    process_name: str | None = None

    def label(self) -> str:
        """``name (tid N)``-style text for profile names."""
        parts = [self.name or ("thread" if self.tid is not None else "all samples")]
        if self.tid is not None:
            parts.append(f"(tid {self.tid})")
        return " ".join(parts)


def _extras_threads(p: Profile) -> tuple[dict[int, tuple[str | None, int | None]], dict[int, str]]:
    """tid -> (name, pid) and pid -> process name, from the readers' extras conventions."""
    threads: dict[int, tuple[str | None, int | None]] = {}
    raw: Any = p.extras.get("threads")
    items: list[tuple[Any, Any]] = []
    if isinstance(raw, dict):
        items = list(raw.items())
    elif isinstance(raw, list):  # [{"tid", "pid", "name"}] or [[tid, pid, name]]
        items = [(t.get("tid"), t) if isinstance(t, dict) else (t[0], {"pid": t[1], "name": t[2]})
                 for t in raw if isinstance(t, dict) or (isinstance(t, (list, tuple)) and len(t) >= 3)]
    for key, value in items:
        tid = _as_int(key)
        if tid is None:
            continue
        if isinstance(value, dict):
            threads[tid] = (_as_str(value.get("name") or value.get("thread_name")), _as_int(value.get("pid")))
        else:
            threads[tid] = (_as_str(value), None)
    names = p.extras.get("thread_names")
    if isinstance(names, dict):
        for key, value in names.items():
            tid = _as_int(key)
            if tid is not None and _as_str(value):
                threads[tid] = (_as_str(value), threads.get(tid, (None, None))[1])
    processes = {}
    pnames = p.extras.get("process_names")
    if isinstance(pnames, dict):
        processes = {pid: str(v) for k, v in pnames.items() if (pid := _as_int(k)) is not None}
    return threads, processes


THREAD_LABELS = frozenset(_NAME_LABELS) | {"pid", "tid"}


def samples_with_other_labels(p: Profile, kept: frozenset[str] = THREAD_LABELS) -> int:
    """Samples carrying a label whose key is not in ``kept`` (for loss reports)."""
    lossy = np.array([any(lab.key not in kept for lab in ls) for ls in p.labelsets], dtype=bool)
    return int(np.count_nonzero(lossy[p.samples.labelset])) if len(p.samples) else 0


def listed_threads(p: Profile) -> list[ThreadInfo]:
    """Every thread the reader listed in ``extras`` (also those without samples)."""
    threads, processes = _extras_threads(p)
    return [ThreadInfo(name, pid, tid, processes.get(pid) if pid is not None else None)
            for tid, (name, pid) in threads.items()]


def _as_int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _as_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _labelset_columns(p: Profile) -> tuple[list[str | None], np.ndarray, np.ndarray]:
    """Per labelset: thread name, numeric pid and tid labels (-1 when absent)."""
    names: list[str | None] = []
    pids = np.full(len(p.labelsets), -1, dtype=np.int64)
    tids = np.full(len(p.labelsets), -1, dtype=np.int64)
    for i, labels in enumerate(p.labelsets):
        name = None
        for lab in labels:
            if lab.key in _NAME_LABELS and lab.str and name is None:
                name = lab.str
            elif lab.key == "pid" and lab.num is not None:
                pids[i] = lab.num
            elif lab.key == "tid" and lab.num is not None:
                tids[i] = lab.num
        names.append(name)
    return names, pids, tids


def sample_threads(p: Profile) -> tuple[np.ndarray, list[ThreadInfo]]:
    """(thread index of every sample, the threads), ordered by first appearance.

    A profile without any thread information gives one ThreadInfo whose
    fields are all None.
    """
    s = p.samples
    n = len(s)
    ls_names, ls_pids, ls_tids = _labelset_columns(p)
    ls = s.labelset.astype(np.int64)
    pid = s.pid.astype(np.int64) if s.pid is not None else ls_pids[ls]
    tid = s.tid.astype(np.int64) if s.tid is not None else ls_tids[ls]
    name_ids = {nm: i for i, nm in enumerate(dict.fromkeys(x for x in ls_names if x))}
    ls_name_id = np.array([name_ids.get(x, -1) if x else -1 for x in ls_names], dtype=np.int64)
    name_col = ls_name_id[ls] if n else np.zeros(0, np.int64)
    rows = np.stack([pid, tid, name_col], axis=1) if n else np.zeros((0, 3), np.int64)
    uniq, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # first-appearance order
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    inverse = rank[inverse.reshape(-1)]
    extras, processes = _extras_threads(p)
    id_names = list(name_ids)
    infos = []
    for u in uniq[order].tolist():
        upid, utid, uname = (None if u[0] < 0 else u[0]), (None if u[1] < 0 else u[1]), u[2]
        ename, epid = extras.get(utid, (None, None)) if utid is not None else (None, None)
        upid = upid if upid is not None else epid
        name = id_names[uname] if uname >= 0 else ename
        infos.append(ThreadInfo(name, upid, utid, processes.get(upid) if upid is not None else None))
    if not infos:
        infos = [ThreadInfo(None, None, None)]
        inverse = np.zeros(n, dtype=np.int64)
    return inverse.astype(np.int64), infos
