"""The one builder every reader uses to make a :class:`Profile`.

Identity keys (the answer to "are these two the same?"), also used by merge:

- string: its text;
- function: (name, system_name, filename, start_line);
- mapping: (start, limit, offset, filename, build_id, flags);
- location: (mapping, address, folded, lines) where lines is the tuple of
  (function, line, column), innermost first;
- callsite: (parent callsite, location);
- label set: the tuple of labels in order.

Samples are never merged by the builder: every ``add_sample`` is one row, in
order, so a read -> write -> read round trip keeps sample order.

Two ways in: per-item calls (``function``, ``location``, ``stack``,
``add_sample``) for readers that walk records, and bulk calls
(``add_locations_bulk``, ``stacks_from_csr``, ``add_samples_bulk``) that take
numpy columns for the fast pprof path. Bulk locations are appended without
de-duplication (wire ids already make them unique).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from polyprof.model.bulk_stacks import intern_stacks
from polyprof.model.compact import compact_samples, narrow_column
from polyprof.model.profile import (
    CallsiteTable,
    FunctionTable,
    Label,
    LineTable,
    LocationTable,
    MappingTable,
    Profile,
    SampleTable,
    ValueType,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["ProfileBuilder"]

LineSpec = tuple[int, int, int]  # (function row or -1, line, column)


class ProfileBuilder:
    """Interns strings, functions, mappings, locations, callsites and labels."""

    def __init__(self, source_format: str = "", *, compact: bool = False) -> None:
        self.profile = Profile(source_format=source_format)
        #: keep the samples in compact form (:mod:`polyprof.model.compact`): int32 values as
        #: given, constant optional columns without memory per sample
        self.compact = compact
        self._strings: dict[str, int] = {"": 0}
        self._str_list: list[str] = [""]
        self._functions: dict[tuple, int] | None = {}
        self._fn_cols: list[list[int]] = [[], [], [], []]
        self._mappings: dict[tuple, int] = {}
        self._map_cols: list[list[int]] = [[], [], [], [], [], []]
        self._locations: dict[tuple, int] = {}
        self._loc_mapping: list[int] = []
        self._loc_address: list[int] = []
        self._loc_folded: list[bool] = []
        self._loc_line_start: list[int] = [0]
        self._line_cols: list[list[int]] = [[], [], []]
        self._loc_chunks: list[tuple] = []  # bulk location chunks, appended at the end
        self._callsites: dict[tuple[int, int], int] | None = {}
        self._cs_parent: list[int] = []
        self._cs_location: list[int] = []
        self._cs_arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._cs_depth: np.ndarray | None = None  # known depths of _cs_arrays, if any
        self._labelsets: dict[tuple[Label, ...], int] = {(): 0}
        self._labelset_list: list[tuple[Label, ...]] = [()]
        self._deferred_labels: Callable[[], np.ndarray] | None = None
        self._cs_size: np.ndarray | None = None  # subtree sizes when callsites are in pre-order
        self._samples: dict[str, list] = {k: [] for k in ("stack", "values", "labelset", *SampleTable.OPTIONAL_COLUMNS)}
        self._sample_chunks: list[_SampleChunk] = []
        self._has: set[str] = set()

    # ---- metadata -------------------------------------------------------

    def set_sample_types(self, types: Iterable[tuple[str, str] | ValueType]) -> None:
        self.profile.sample_types = [ValueType(*t) for t in types]

    @property
    def meta(self) -> Profile:
        """The profile under construction, for its metadata fields."""
        return self.profile

    # ---- tables -----------------------------------------------------------

    def string(self, text: str) -> int:
        sid = self._strings.get(text)
        if sid is None:
            sid = self._strings[text] = len(self._str_list)
            self._str_list.append(text)
        return sid

    def function(self, name: str, system_name: str = "", filename: str = "",
                 start_line: int = 0) -> int:
        key = (name, system_name, filename, start_line)
        if self._functions is None:  # bulk rows were added: index them now
            strs, cols = self._str_list, self._fn_cols
            self._functions = {(strs[a], strs[b], strs[c], d): i
                               for i, (a, b, c, d) in enumerate(zip(*cols))}
        fid = self._functions.get(key)
        if fid is None:
            fid = self._functions[key] = len(self._fn_cols[0])
            for col, v in zip(self._fn_cols, (self.string(name), self.string(system_name),
                                              self.string(filename), start_line)):
                col.append(v)
        return fid

    def functions_bulk(self, name: np.ndarray, system_name: np.ndarray, filename: np.ndarray,
                       start_line: np.ndarray) -> np.ndarray:
        """Intern many functions given as model string ids; returns the row of each.

        Equal functions (same identity key) get one row. When the table is
        still empty this is vectorized; otherwise it falls back to per-item.
        """
        cols = [np.asarray(c, dtype=np.int64) for c in (name, system_name, filename, start_line)]
        if self._fn_cols[0]:
            strs = self._str_list
            return np.array([self.function(strs[a], strs[b], strs[c], d)
                             for a, b, c, d in zip(*(c.tolist() for c in cols))], dtype=np.int64)
        if not cols[0].size:
            return np.zeros(0, dtype=np.int64)
        stacked = np.stack(cols, axis=1)
        uniq, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # rows in order of first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        for col, values in zip(self._fn_cols, uniq[order].T.tolist()):
            col.extend(values)
        self._functions = None  # indexed lazily if per-item calls follow
        return rank[inverse.reshape(-1)]

    def mapping(self, start: int = 0, limit: int = 0, offset: int = 0, filename: str = "",
                build_id: str = "", flags: int = 0) -> int:
        key = (start, limit, offset, filename, build_id, flags)
        mid = self._mappings.get(key)
        if mid is None:
            mid = self._mappings[key] = len(self._map_cols[0])
            for col, v in zip(self._map_cols, (start, limit, offset, self.string(filename),
                                               self.string(build_id), flags)):
                col.append(v)
        return mid

    def location(self, mapping: int = -1, address: int = 0, lines: Sequence[LineSpec] = (),
                 folded: bool = False) -> int:
        """Intern a location. ``lines`` run innermost inlined function first."""
        if self._loc_chunks:
            raise RuntimeError("per-item locations cannot follow bulk locations")
        lines = tuple((int(f), int(ln), int(c)) for f, ln, c in lines)
        key = (mapping, address, folded, lines)
        lid = self._locations.get(key)
        if lid is None:
            lid = self._locations[key] = len(self._loc_mapping)
            self._loc_mapping.append(mapping)
            self._loc_address.append(address)
            self._loc_folded.append(folded)
            for f, ln, c in lines:
                self._line_cols[0].append(f)
                self._line_cols[1].append(ln)
                self._line_cols[2].append(c)
            self._loc_line_start.append(len(self._line_cols[0]))
        return lid

    def frame(self, name: str, filename: str = "", line: int = 0, *, mapping: int = -1,
              address: int = 0, system_name: str = "", start_line: int = 0) -> int:
        """Shortcut: a location with one line of a function named ``name``."""
        fn = self.function(name, system_name, filename, start_line) if name or filename else -1
        lines = ((fn, line, 0),) if fn >= 0 else ()
        return self.location(mapping, address, lines)

    def add_locations_bulk(self, mapping: np.ndarray, address: np.ndarray, folded: np.ndarray,
                           line_counts: np.ndarray, line_function: np.ndarray,
                           line_line: np.ndarray, line_column: np.ndarray) -> int:
        """Append locations column-wise; returns the row of the first one."""
        first = len(self._loc_mapping) + sum(len(c[0]) for c in self._loc_chunks)
        self._loc_chunks.append((mapping, address, folded, line_counts, line_function,
                                 line_line, line_column))
        return first

    # ---- stacks -----------------------------------------------------------

    def callsite(self, parent: int, location: int) -> int:
        index = self._callsites if self._callsites is not None else self._rebuild_callsite_index()
        key = (parent, location)
        cs = index.get(key)
        if cs is None:
            cs = index[key] = len(self._cs_parent)
            self._cs_parent.append(parent)
            self._cs_location.append(location)
        return cs

    def stack(self, locations_leaf_first: Sequence[int]) -> int:
        """Intern a stack given leaf first (pprof order); returns its leaf callsite."""
        node = -1
        for loc in reversed(locations_leaf_first):
            node = self.callsite(node, loc)
        return node

    def stack_root_first(self, locations_root_first: Iterable[int]) -> int:
        node = -1
        for loc in locations_root_first:
            node = self.callsite(node, loc)
        return node

    def stacks_from_csr(self, flat: np.ndarray, offsets: np.ndarray, *,
                        leaf_first: bool = True, distinct: bool = False) -> np.ndarray:
        """Intern many stacks at once; returns the leaf callsite of each.

        ``flat[offsets[i]:offsets[i+1]]`` are the locations of stack ``i``.
        Works one depth level at a time over all stacks (vectorized), so the
        cost is a sort per level rather than a dict lookup per frame; the
        callsites come numbered in pre-order (see :mod:`polyprof.model.bulk_stacks`).
        ``distinct``: the stacks hardly repeat (a format's table of stacks), so they are not
        first grouped by content (the result is the same either way).
        """
        flat = np.asarray(flat)
        if flat.dtype.kind not in "iu":
            flat = flat.astype(np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        n = len(offsets) - 1
        if n == 0 or len(flat) == 0:
            return np.full(n, -1, dtype=np.int32)
        if len(self._flush_callsites_to_arrays()[0]):
            return self._stacks_into_existing(flat, offsets, leaf_first)
        built = intern_stacks(flat, offsets, leaf_first, distinct)
        return self.take_callsites(built.leaf, built.parent, built.location, built.depth, built.size)

    def take_callsites(self, leaf: np.ndarray, parent: np.ndarray, location: np.ndarray, depth: np.ndarray,
                       size: np.ndarray) -> np.ndarray:
        """Callsites made elsewhere in :meth:`stacks_from_csr`'s numbering (pre-order, with their
        depths and subtree sizes), for a builder without callsites yet; returns ``leaf``."""
        if len(self._flush_callsites_to_arrays()[0]):
            raise ValueError("take_callsites needs a builder without callsites")
        self._cs_arrays = (parent, location)
        self._cs_depth = depth
        self._cs_size = size
        self._callsites = None  # rebuilt lazily if per-item calls follow
        return leaf

    def _stacks_into_existing(self, flat: np.ndarray, offsets: np.ndarray, leaf_first: bool) -> np.ndarray:
        """Slow path when callsites already exist: intern stack by stack."""
        out = np.empty(len(offsets) - 1, dtype=np.int32)
        flat_list = flat.tolist()
        for i in range(len(offsets) - 1):
            locs = flat_list[offsets[i]:offsets[i + 1]]
            out[i] = self.stack(locs) if leaf_first else self.stack_root_first(locs)
        return out

    def _flush_callsites_to_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All callsites as (parent, location) arrays (per-item ones appended)."""
        if self._cs_arrays is None:
            self._cs_arrays = (np.array(self._cs_parent, dtype=np.int32),
                               np.array(self._cs_location, dtype=np.int32))
        elif self._cs_parent:
            self._cs_arrays = (np.concatenate([self._cs_arrays[0], np.array(self._cs_parent, dtype=np.int32)]),
                               np.concatenate([self._cs_arrays[1], np.array(self._cs_location, dtype=np.int32)]))
        self._cs_parent, self._cs_location = [], []
        self._callsites = None
        return self._cs_arrays

    def _rebuild_callsite_index(self) -> dict[tuple[int, int], int]:
        if self._cs_arrays is not None:
            self._cs_parent = self._cs_arrays[0].tolist() + self._cs_parent
            self._cs_location = self._cs_arrays[1].tolist() + self._cs_location
            self._cs_arrays = None
        self._callsites = {(p, loc): i for i, (p, loc) in enumerate(zip(self._cs_parent, self._cs_location))}
        return self._callsites

    # ---- samples ----------------------------------------------------------

    def labelset(self, labels: Sequence[Label]) -> int:
        labels = tuple(labels)
        ls = self._labelsets.get(labels)
        if ls is None:
            ls = self._labelsets[labels] = len(self._labelset_list)
            self._labelset_list.append(labels)
        return ls

    def add_sample(self, stack: int, values: Sequence[int], *, labels: Sequence[Label] = (),
                   time: int | None = None, pid: int | None = None, tid: int | None = None,
                   cpu: int | None = None) -> None:
        s = self._samples
        s["stack"].append(stack)
        s["values"].append(values)
        s["labelset"].append(self.labelset(labels) if labels else 0)
        for name, v in (("time", time), ("pid", pid), ("tid", tid), ("cpu", cpu)):
            if v is not None:
                self._has.add(name)
            s[name].append(v)

    def add_samples_bulk(self, stack: ArrayLike, values: ArrayLike,
                         labelset: ArrayLike | None = None, **optional: ArrayLike | None) -> None:
        """Append many samples column-wise (``optional``: time, pid, tid, cpu)."""
        self._flush_samples()
        stacks = np.asarray(stack, dtype=np.int32)
        n = len(stacks)
        vals = np.asarray(values)
        if not (self.compact and vals.dtype == np.int32):
            vals = vals.astype(np.int64, copy=False)
        chunk = _SampleChunk(stacks, vals.reshape(n, len(self.profile.sample_types)),
                             np.zeros(n, dtype=np.int32) if labelset is None
                             else np.asarray(labelset, dtype=np.int32))
        for name in SampleTable.OPTIONAL_COLUMNS:
            col = optional.get(name)
            if col is not None:
                self._has.add(name)
                col = np.asarray(col)
                compact = self.compact and name != "time" and col.dtype.kind in "iu"
                chunk.optional[name] = narrow_column(col) if compact else sample_column(name, col)
        self._sample_chunks.append(chunk)

    def _flush_samples(self) -> None:
        s = self._samples
        n = len(s["stack"])
        if not n:
            return
        width = len(self.profile.sample_types)
        chunk = _SampleChunk(np.array(s["stack"], dtype=np.int32),
                             np.array(s["values"], dtype=np.int64).reshape(n, width),
                             np.array(s["labelset"], dtype=np.int32))
        for name in SampleTable.OPTIONAL_COLUMNS:
            if name in self._has and any(v is not None for v in s[name]):
                chunk.optional[name] = sample_column(name, [0 if v is None else v for v in s[name]])
        self._sample_chunks.append(chunk)
        self._samples = {k: [] for k in s}

    def defer_labels(self, make: Callable[[], np.ndarray]) -> None:
        """Decode labels only when first used: ``make()`` interns the label
        sets with :meth:`labelset` and returns the labelset row of every
        sample (see :meth:`Profile.defer_labels`)."""
        self._deferred_labels = make

    # ---- finish -----------------------------------------------------------

    def finish(self, *, check: bool = True) -> Profile:
        """Return the finished profile (validated unless ``check`` is False)."""
        p = self.profile
        p.strings = self._str_list
        f = self._fn_cols
        p.functions = FunctionTable(np.array(f[0], np.int32), np.array(f[1], np.int32),
                                    np.array(f[2], np.int32), np.array(f[3], np.int64))
        m = self._map_cols
        p.mappings = MappingTable(np.array(m[0], np.uint64), np.array(m[1], np.uint64),
                                  np.array(m[2], np.uint64), np.array(m[3], np.int32),
                                  np.array(m[4], np.int32), np.array(m[5], np.uint8))
        self._finish_locations(p)
        depth = self._cs_depth
        p.callsites = CallsiteTable(*self._flush_callsites_to_arrays())
        if depth is not None and len(depth) == len(p.callsites):
            p.callsites._depth = depth
        if self._cs_size is not None and len(self._cs_size) == len(p.callsites):
            p.callsites._size = self._cs_size  # built in pre-order by stacks_from_csr alone
        p.labelsets = self._labelset_list
        self._finish_samples(p)
        if self._deferred_labels is not None:
            p.defer_labels(self._deferred_labels)
        if check:
            from polyprof.model.validate import check as check_profile
            check_profile(p)
        return p

    def _finish_locations(self, p: Profile) -> None:
        mapping = [np.array(self._loc_mapping, np.int32)]
        address = [np.array(self._loc_address, np.uint64)]
        folded = [np.array(self._loc_folded, np.bool_)]
        counts = [np.diff(np.array(self._loc_line_start, np.int64))]
        lf = [np.array(self._line_cols[0], np.int32)]
        ll = [np.array(self._line_cols[1], np.int64)]
        lc = [np.array(self._line_cols[2], np.int64)]
        for cm, ca, cf, cn, clf, cll, clc in self._loc_chunks:
            mapping.append(np.asarray(cm, np.int32))
            address.append(np.asarray(ca, np.uint64))
            folded.append(np.asarray(cf, np.bool_))
            counts.append(np.asarray(cn, np.int64))
            lf.append(np.asarray(clf, np.int32))
            ll.append(np.asarray(cll, np.int64))
            lc.append(np.asarray(clc, np.int64))
        line_start = np.zeros(sum(len(c) for c in counts) + 1, dtype=np.int64)
        np.cumsum(np.concatenate(counts), out=line_start[1:])
        p.locations = LocationTable(np.concatenate(mapping), np.concatenate(address),
                                    np.concatenate(folded), line_start)
        p.lines = LineTable(np.concatenate(lf), np.concatenate(ll), np.concatenate(lc))

    def _finish_samples(self, p: Profile) -> None:
        self._flush_samples()
        width = len(p.sample_types)
        chunks = self._sample_chunks
        if not chunks:
            p.samples = SampleTable(values=np.zeros((0, width), dtype=np.int64))
            return
        table = SampleTable(
            stack=_concat([c.stack for c in chunks]),
            values=_concat([c.values.reshape(len(c.stack), width) for c in chunks]),
            labelset=_concat([c.labelset for c in chunks]),
        )
        for name in SampleTable.OPTIONAL_COLUMNS:
            if name in self._has:
                parts = [c.optional.get(name) for c in chunks]
                dtype = np.result_type(*[c for c in parts if c is not None])
                setattr(table, name, _concat([np.zeros(len(c.stack), dtype) if part is None else part
                                              for c, part in zip(chunks, parts)]))
        self._sample_chunks = []  # the table owns the columns now
        p.samples = compact_samples(table) if self.compact else table


@dataclass
class _SampleChunk:
    """Samples added together: columns, and the optional ones present (time, pid, tid, cpu)."""

    stack: np.ndarray
    values: np.ndarray
    labelset: np.ndarray
    optional: dict[str, np.ndarray] = field(default_factory=dict)


#: The narrowest type each optional sample column is kept in when its values fit (else int64):
#: pids and tids are below 2**22 on Linux, cpus below 2**15; times need 64 bits.
_NARROW: dict[str, type[np.signedinteger]] = {"pid": np.int32, "tid": np.int32, "cpu": np.int16}


def sample_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The type optional sample column ``name`` is kept in when its values are of ``dtype``
    (a reader filling the column in place allocates it so, and the builder takes it uncopied)."""
    narrow = _NARROW.get(name)
    return np.dtype(narrow if narrow is not None and np.can_cast(dtype, narrow) else np.int64)


def sample_column(name: str, col: ArrayLike) -> np.ndarray:
    """Optional sample column ``name`` (time, pid, tid, cpu) in the type the profile keeps it:
    pid/tid int32 and cpu int16 when every value fits (no copy when already so), else int64.
    Consumers read them with ``astype(np.int64)`` where they compute on them."""
    arr = np.asarray(col)
    narrow = _NARROW.get(name)
    if narrow is not None and arr.dtype.kind in "iu":
        if sample_dtype(name, arr.dtype) == narrow:
            return arr.astype(narrow, copy=False)
        info = np.iinfo(narrow)
        if not arr.size or (info.min <= int(arr.min()) and int(arr.max()) <= info.max):
            return arr.astype(narrow)
    return arr.astype(np.int64, copy=False)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    """One array from ``parts``, without a copy when there is only one."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
