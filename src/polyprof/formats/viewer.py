"""What the viewer writers (folded, speedscope, firefox) share.

- **Frames**: every location expands to one frame per line, outermost
  (physical) function first, so inlined functions stay visible. A frame's
  name is the function name (its system name when the name is empty). A
  location without lines is an *unknown* frame, named from its binary and
  address in one of the :data:`UNKNOWN_STYLES`.
- **Threads**: samples are grouped by thread with
  :mod:`polyprof.model.threads`; :func:`samples_with_other_labels` counts
  the labels a viewer cannot show.
- **Sample values**: one column chosen by ``WriteOptions.sample_index``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from polyprof.model.profile import Profile
from polyprof.model.threads import THREAD_LABELS

__all__ = ["UNKNOWN_STYLES", "Frame", "callsite_order", "is_jit", "is_kernel", "location_frames",
           "samples_with_other_labels", "split_rows", "stack_paths", "time_order", "utf8", "value_column"]

#: How a frame without a symbol is named: ``address`` gives ``libc.so+0x1a2b``
#: (as the Firefox Profiler names them), ``aosp`` gives ``libc.so[+1a2b]``
#: (simpleperf's ``--addrs``), ``unknown`` gives the word ``unknown``.
UNKNOWN_STYLES = ("address", "aosp", "unknown")

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
    lists: tuple[list[int], list[int]] = ([], [])
    for lo in range(0, uniq.size, chunk):
        cur = uniq[lo:lo + chunk].astype(np.int64)
        levels: list[np.ndarray] = []
        while True:
            ok = cur >= 0
            going = int(ok.sum())
            if not going or (going <= _FEW and len(levels) >= _FEW):
                break
            levels.append(np.where(ok, location[np.maximum(cur, 0)], -1))
            cur = np.where(ok, parent[np.maximum(cur, 0)], -1)
        deep = np.flatnonzero(cur >= 0)
        if deep.size and not lists[0]:  # plain lists: a Python walk over numpy scalars is slow
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


def samples_with_other_labels(p: Profile, kept: frozenset[str] = THREAD_LABELS) -> int:
    """Samples carrying a label whose key is not in ``kept`` (for loss reports)."""
    lossy = np.array([any(lab.key not in kept for lab in ls) for ls in p.labelsets], dtype=bool)
    return int(np.count_nonzero(lossy[p.samples.labelset])) if len(p.samples) else 0
