"""Samples as a table: a Profile as Arrow (and pandas) columns, vectorized.

``to_arrow(p)`` gives one row per sample:

``stack``
    the leaf callsite id (null for an empty stack), a row of the
    ``callsites`` table (``to_arrow(p, "callsites")``);
``frames``
    with ``stacks="names"``: the stack as frame names, root to leaf, one per
    inline line (``list<dictionary<int32, string>>``);
one int64 column per sample type
    named by the type (``type/unit`` when two types share a name or the
    name is taken); the unit is in the field's metadata;
``time``, ``pid``, ``tid``, ``cpu``
    where the profile has them (time in ns);
one column per label key
    named by the key (``label:<key>`` when that name is taken): string
    labels as ``dictionary<int32, string>``, numeric ones as int64 (unit in
    the field's metadata), a list when some sample has several values for
    the key; null where a sample has none.

The ``callsites`` table has one row per callsite: ``callsite``, ``parent``
(null for roots), ``depth``, ``location``, ``address``, ``module`` (mapping
file), ``function``/``system_name``/``file``/``line`` of the frame's
outermost line, and ``frames`` (its names, outermost first: one per inline
line).

A frame is named by its function (system name when the name is empty), an
unsymbolized one ``<module basename>+0x<address>`` (or ``0x<address>``).
The schema metadata (key ``polyprof``) keeps the profile's sample types,
period, times and comments, so :func:`polyprof.model.table_in.from_arrow`
restores them. Nothing loops over samples in Python: columns are gathered
from the per-labelset and per-location arrays with numpy, and stacks are
expanded one tree level at a time.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Container
from typing import TYPE_CHECKING, Any

import numpy as np

from polyprof.errors import MissingDependencyError, OptionsError
from polyprof.model import tree

if TYPE_CHECKING:  # Profile.to_arrow imports this module: no cycle at run time
    from polyprof.model.profile import Profile

__all__ = ["LABEL_PREFIX", "TABLES", "label_column", "optional_import", "to_arrow", "to_pandas", "value_columns"]

LABEL_PREFIX = "label:"
TABLES = ("samples", "callsites")
META_KEY = b"polyprof"
_EXTRAS = {"pandas": "pandas", "pyarrow": "arrow"}


def optional_import(module: str, feature: str) -> Any:
    """Import an optional dependency, or raise MissingDependencyError naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = _EXTRAS.get(module, module)
        raise MissingDependencyError(
            f"{feature} needs {module}, which is not installed: pip install 'polyprof[{extra}]'",
            module=module, extra=extra) from None


def label_column(key: str, taken: Container[str]) -> str:
    """The column name of label ``key`` next to the columns in ``taken``."""
    return key if key not in taken else LABEL_PREFIX + key


def value_columns(p: Profile) -> list[str]:
    """The column name of every sample type of ``p`` (see the module docstring)."""
    names = [vt.type for vt in p.sample_types]
    taken = {"stack", "frames"} | {c for c in p.samples.OPTIONAL_COLUMNS if getattr(p.samples, c) is not None}
    return [vt.type if names.count(vt.type) == 1 and vt.type not in taken else f"{vt.type}/{vt.unit}"
            for vt in p.sample_types]


def to_pandas(p: Profile, table: str = "samples", *, stacks: str = "id") -> Any:
    """:func:`to_arrow` as a ``pandas.DataFrame`` (dictionary columns become
    categoricals); ``df.attrs["polyprof"]`` keeps the profile metadata."""
    optional_import("pandas", "Profile.to_pandas()")
    t = to_arrow(p, table, stacks=stacks)
    df = t.to_pandas()
    meta = (t.schema.metadata or {}).get(META_KEY)
    if meta:
        df.attrs["polyprof"] = json.loads(meta)
    return df


def to_arrow(p: Profile, table: str = "samples", *, stacks: str = "id") -> Any:
    """``p``'s samples (or callsites) as a ``pyarrow.Table`` (see the module docstring).

    ``stacks``: ``"id"`` (the ``stack`` column only), ``"names"`` (``frames``
    only) or ``"both"``.
    """
    pa = optional_import("pyarrow", "Profile.to_arrow()")
    if table not in TABLES:
        raise OptionsError(f"no table {table!r}; tables: {', '.join(TABLES)}")
    if stacks not in ("id", "names", "both"):
        raise OptionsError(f"stacks must be 'id', 'names' or 'both', not {stacks!r}")
    if table == "callsites":
        return _callsites(pa, p)
    fields, arrays = [], []

    def add(name: str, array: Any, meta: dict[str, str] | None = None) -> None:
        fields.append(pa.field(name, array.type, metadata=meta))
        arrays.append(array)

    s = p.samples
    if stacks in ("id", "both"):
        add("stack", pa.array(s.stack.astype(np.int32), mask=s.stack < 0))
    if stacks in ("names", "both"):
        names, loc_start, loc_frames = _frame_names(p)
        add("frames", _paths(pa, p, s.stack, names, loc_start, loc_frames))
    values = s.values.astype(np.int64, copy=False)
    for i, (name, vt) in enumerate(zip(value_columns(p), p.sample_types)):
        add(name, pa.array(values[:, i]), {"unit": vt.unit, "type": vt.type})
    for name in s.OPTIONAL_COLUMNS:
        col = getattr(s, name)
        if col is not None:
            add(name, pa.array(col.astype(np.int64, copy=False)))
    taken = {f.name for f in fields}
    label_keys = _label_columns(pa, p, taken)
    for name, array, meta in label_keys:
        add(name, array, meta)
    schema = pa.schema(fields, metadata={META_KEY: json.dumps(_metadata(p, label_keys)).encode()})
    return pa.Table.from_arrays(arrays, schema=schema)


def _metadata(p: Profile, labels: list) -> dict[str, Any]:
    return {
        "source_format": p.source_format,
        "sample_types": [[vt.type, vt.unit] for vt in p.sample_types],
        "value_columns": value_columns(p),
        "default_sample_type": p.default_sample_type,
        "period_type": list(p.period_type) if p.period_type else None,
        "period": p.period,
        "time_nanos": p.time_nanos,
        "duration_nanos": p.duration_nanos,
        "comments": list(p.comments),
        "labels": {name: meta["key"] for name, _, meta in labels},
    }


# ---------------------------------------------------------------- labels

def _label_columns(pa: Any, p: Profile, taken: set[str]) -> list[tuple[str, Any, dict[str, str]]]:
    """(column name, array, field metadata) of every label key, gathered per sample
    from per-labelset arrays."""
    per_key: dict[str, list[list[Any]]] = {}
    units: dict[str, str] = {}
    sets = p.labelsets
    for row, labels in enumerate(sets):
        for lab in labels:
            cells = per_key.setdefault(lab.key, [[] for _ in sets])
            cells[row].append(lab.str if lab.str is not None else lab.num)
            if lab.str is None and lab.unit:
                units.setdefault(lab.key, lab.unit)
    which = p.samples.labelset
    out = []
    for key, cells in per_key.items():
        name = label_column(key, taken)
        taken.add(name)
        meta = {"key": key, **({"unit": units[key]} if key in units else {})}
        out.append((name, _label_array(pa, cells, which), meta))
    return out


def _label_array(pa: Any, cells: list[list[Any]], which: np.ndarray) -> Any:
    """One label key's column: ``cells[labelset]`` holds its values in that set."""
    numeric = all(isinstance(v, int) for c in cells for v in c)
    if any(len(c) > 1 for c in cells):  # several values per sample: a list column
        per_set = pa.array([c if numeric else [str(v) for v in c] for c in cells])
        return per_set.take(pa.array(which))
    present = np.array([bool(c) for c in cells], dtype=bool)
    mask = ~present[which]
    if numeric:
        nums = np.array([c[0] if c else 0 for c in cells], dtype=np.int64)
        return pa.array(nums[which], mask=mask)
    texts = [str(c[0]) if c else "" for c in cells]
    dictionary, codes = np.unique(np.array(texts, dtype=object), return_inverse=True)
    indices = pa.array(codes.reshape(-1).astype(np.int32)[which], mask=mask)
    return pa.DictionaryArray.from_arrays(indices, pa.array(dictionary.tolist(), pa.string()))


# ---------------------------------------------------------------- frames and stacks

def _frame_names(p: Profile) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, loc_start, loc_frames): the distinct frame names, and per location
    (CSR) the name id of each of its frames, outermost first."""
    loc, strs, fns = p.locations, p.strings, p.functions
    counts = np.diff(loc.line_start)
    per_loc = np.maximum(counts, 1)
    loc_start = np.zeros(len(loc) + 1, dtype=np.int64)
    np.cumsum(per_loc, out=loc_start[1:])
    entry_loc = tree.segment_owner(per_loc)
    k = tree.segment_positions(per_loc)
    # lines run innermost first; frames outermost first
    row = loc.line_start[entry_loc] + counts[entry_loc] - 1 - k
    has_line = counts[entry_loc] > 0
    fn = np.where(has_line, p.lines.function[np.where(has_line, row, 0)] if len(p.lines) else -1, -1)
    fn_text = np.where(fns.name != 0, fns.name, fns.system_name).astype(np.int64)
    text = np.where(fn >= 0, fn_text[np.maximum(fn, 0)] if len(fns) else 0, -1)
    unknown = np.nonzero(text <= 0)[0]
    extra = [_unknown_name(p, int(entry_loc[e])) for e in unknown.tolist()]
    ids = text.copy()
    ids[unknown] = len(strs) + np.arange(unknown.size)
    used, code = np.unique(ids, return_inverse=True)
    table = strs + extra if extra else strs
    names = [table[i] for i in used.tolist()]
    return names, loc_start, code.reshape(-1).astype(np.int32)


def _unknown_name(p: Profile, loc: int) -> str:
    m = int(p.locations.mapping[loc])
    address = int(p.locations.address[loc])
    module = os.path.basename(p.strings[p.mappings.filename[m]]) if m >= 0 else ""
    return f"{module}+0x{address:x}" if module else f"0x{address:x}"


def _paths(pa: Any, p: Profile, leaves: np.ndarray, names: list[str], loc_start: np.ndarray,
           loc_frames: np.ndarray) -> Any:
    """The frames of every stack ``leaves[i]``, root to leaf, as a list<dictionary> array.

    Each stack's frames are laid out at computed offsets and written from the
    leaf upwards, one level per step for all stacks at once, over a tree with
    one node per frame (:func:`_frame_tree`). A node's parent and frame are
    packed into one int64 so that each step makes one random gather.
    """
    parent, frame, depth = _frame_tree(p, loc_start, loc_frames)
    root = parent.size - 1  # the sentinel: its own parent
    cur = np.where(leaves >= 0, leaves, root).astype(np.int64)  # a callsite's node is its innermost frame
    lengths = np.where(leaves >= 0, depth[np.maximum(leaves, 0)] + 1 if depth.size else 0, 0)
    offsets = np.zeros(cur.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.zeros(int(offsets[-1]) + 1, dtype=np.int32)  # the last slot takes writes of finished rows
    packed = (parent.astype(np.int64) << 32) | frame.astype(np.int64)
    pos = offsets[1:] - 1
    for _ in range(int(depth.max(initial=-1)) + 1):
        step = packed[cur]
        np.copyto(pos, flat.size - 1, where=cur == root)
        flat[pos] = step & 0xFFFFFFFF
        cur = step >> 32
        pos -= 1
    values = pa.DictionaryArray.from_arrays(pa.array(flat[:-1]), pa.array(names, pa.string()))
    big = offsets[-1] >= 2**31
    return (pa.LargeListArray if big else pa.ListArray).from_arrays(
        pa.array(offsets.astype(np.int64 if big else np.int32)), values)


def _frame_tree(p: Profile, loc_start: np.ndarray, loc_frames: np.ndarray) -> tuple[np.ndarray, ...]:
    """The callsite tree with one node per frame: (parent, frame name id) of every node,
    and the depth (frames above, root = 0) of each callsite's node.

    Node ``c`` is callsite ``c``'s innermost frame; a callsite whose location
    has k > 1 frames (inlining, rare) gets k - 1 more nodes for the outer ones,
    numbered after the callsites. The last node is a root sentinel, its own parent.
    """
    cs = p.callsites
    n = len(cs)
    loc = cs.location.astype(np.int64)
    count = np.diff(loc_start)[loc] if n else np.zeros(0, np.int64)
    extra = count - 1
    first = n + np.cumsum(extra) - extra  # node of each callsite's outermost extra frame
    total = n + int(extra.sum())
    up = np.where(cs.parent >= 0, cs.parent, total).astype(np.int64)  # innermost node of the parent
    parent = np.empty(total + 1, dtype=np.int64)
    parent[:n] = np.where(extra > 0, first + extra - 1, up)
    parent[total] = total
    frame = np.zeros(total + 1, dtype=np.int64)
    frame[:n] = loc_frames[loc_start[loc] + count - 1] if n else 0
    owner = np.flatnonzero(extra)
    if owner.size:  # the outer frames of inlined locations
        k = extra[owner]
        j = tree.segment_positions(k)
        who = owner[tree.segment_owner(k)]
        nodes = first[who] + j
        parent[nodes] = np.where(j > 0, nodes - 1, up[who])
        frame[nodes] = loc_frames[loc_start[loc[who]] + j]
    depth = cs.depth().astype(np.int64) + (cs.path_sums(extra) if owner.size else 0)
    return parent, frame, depth


def _callsites(pa: Any, p: Profile) -> Any:
    """The callsites table (see the module docstring)."""
    cs, loc, strs = p.callsites, p.locations, p.strings
    names, loc_start, loc_frames = _frame_names(p)
    frames_of_loc = pa.ListArray.from_arrays(
        pa.array(loc_start.astype(np.int32)),
        pa.DictionaryArray.from_arrays(pa.array(loc_frames), pa.array(names, pa.string())))
    where = cs.location.astype(np.int64)
    counts = np.diff(loc.line_start)
    outer = loc.line_start[1:] - 1  # the outermost line of each location
    fn = np.where(counts > 0, p.lines.function[np.maximum(outer, 0)] if len(p.lines) else -1, -1)
    line = np.where(counts > 0, p.lines.line[np.maximum(outer, 0)] if len(p.lines) else 0, 0)
    f = p.functions

    def text(ids: np.ndarray, present: np.ndarray) -> Any:
        uniq, code = np.unique(np.where(present, ids, 0), return_inverse=True)
        return pa.DictionaryArray.from_arrays(pa.array(code.reshape(-1).astype(np.int32)[where]),
                                              pa.array([strs[i] for i in uniq.tolist()], pa.string()))

    has_fn = fn >= 0
    safe = np.maximum(fn, 0)
    m = loc.mapping.astype(np.int64)
    return pa.table({
        "callsite": pa.array(np.arange(len(cs), dtype=np.int32)),
        "parent": pa.array(cs.parent.astype(np.int32), mask=cs.parent < 0),
        "depth": pa.array(cs.depth().astype(np.int32)),
        "location": pa.array(where.astype(np.int32)),
        "address": pa.array(loc.address[where]),
        "module": text(p.mappings.filename[np.maximum(m, 0)] if len(p.mappings) else np.zeros(len(loc), int),
                       m >= 0),
        "function": text(f.name[safe] if len(f) else np.zeros(len(loc), int), has_fn),
        "system_name": text(f.system_name[safe] if len(f) else np.zeros(len(loc), int), has_fn),
        "file": text(f.filename[safe] if len(f) else np.zeros(len(loc), int), has_fn),
        "line": pa.array(line[where].astype(np.int64)),
        "frames": frames_of_loc.take(pa.array(where)),
    })
