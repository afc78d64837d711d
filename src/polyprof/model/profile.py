"""The columnar profile model every reader fills and every writer drains.

A :class:`Profile` is a set of struct-of-arrays tables (numpy arrays, one per
column) plus metadata. Row numbers are the model's own ids; they never match
wire ids. All string columns hold indexes into ``Profile.strings`` (index 0 is
always ``""``).

Tables and their columns:

``functions``  name, system_name, filename (string ids), start_line
``mappings``   start, limit, offset (uint64), filename, build_id (string ids),
               flags (bit set of ``MAPPING_HAS_*``)
``locations``  mapping (-1 = none), address (uint64), folded (bool),
               line_start (offsets into ``lines``; ``len + 1`` entries)
``lines``      function (-1 = none), line, column. A location's lines run
               innermost inlined function first, physical function last.
``callsites``  parent (-1 = root), location. A stack is its leaf callsite;
               identical prefixes are shared, so flame-graph nodes *are*
               callsites.
``samples``    stack (-1 = empty stack), values (n x len(sample_types)),
               optional time (ns), pid, tid, cpu columns (None when absent),
               labelset (row of ``Profile.labelsets``; 0 = no labels).

A reader may *defer* the label columns (``samples.labelset`` and
``Profile.labelsets``) with :meth:`Profile.defer_labels`: they are then
decoded on first access, so a query that never looks at labels (``top``)
never pays for them. Reading either attribute, copying or pickling the
profile resolves them; nothing else changes for callers.

Build profiles with :class:`polyprof.model.builder.ProfileBuilder`; check them
with :func:`polyprof.model.validate.check`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from polyprof.model import tree
from polyprof.model.bulk_stacks import stack_kernels
from polyprof.model.extras import Extras

__all__ = [
    "CallsiteTable",
    "FunctionTable",
    "Label",
    "LineTable",
    "LocationTable",
    "MAPPING_HAS_FILENAMES",
    "MAPPING_HAS_FUNCTIONS",
    "MAPPING_HAS_INLINE_FRAMES",
    "MAPPING_HAS_LINE_NUMBERS",
    "MappingTable",
    "Profile",
    "SampleTable",
    "ValueType",
]

MAPPING_HAS_FUNCTIONS = 1
MAPPING_HAS_FILENAMES = 2
MAPPING_HAS_LINE_NUMBERS = 4
MAPPING_HAS_INLINE_FRAMES = 8

I32 = np.int32
I64 = np.int64
U64 = np.uint64


class ValueType(NamedTuple):
    """What a column of sample values measures, e.g. ``("cpu", "nanoseconds")``."""

    type: str
    unit: str

    def __str__(self) -> str:
        return f"{self.type}/{self.unit}"


class Label(NamedTuple):
    """One sample label. Exactly one of ``str``/``num`` is meaningful.

    ``unit`` qualifies ``num`` (pprof ``num_unit``); it is "" when unknown.
    """

    # ``str`` is pprof's name for the field; inside this class body it hides
    # the builtin, hence ``builtins.str`` in the annotations.
    key: builtins.str
    str: builtins.str | None = None
    num: int | None = None
    unit: builtins.str = ""


def _empty(dtype: Any) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


class _TableRepr:
    """A short repr for a table: its class, row count and column names (never the data,
    which can be millions of rows, and never forcing a deferred column)."""

    def __repr__(self) -> str:
        names = [f for f in getattr(self, "__dataclass_fields__", {}) if not f.startswith("_")]
        shown = [f for f in names if self.__dict__.get(f, 0) is not None]
        return f"{type(self).__name__}({len(self)} rows: {', '.join(shown)})"  # type: ignore[arg-type]


@dataclass(repr=False)
class FunctionTable(_TableRepr):
    name: np.ndarray = field(default_factory=lambda: _empty(I32))
    system_name: np.ndarray = field(default_factory=lambda: _empty(I32))
    filename: np.ndarray = field(default_factory=lambda: _empty(I32))
    start_line: np.ndarray = field(default_factory=lambda: _empty(I64))

    def __len__(self) -> int:
        return len(self.name)


@dataclass(repr=False)
class MappingTable(_TableRepr):
    start: np.ndarray = field(default_factory=lambda: _empty(U64))
    limit: np.ndarray = field(default_factory=lambda: _empty(U64))
    offset: np.ndarray = field(default_factory=lambda: _empty(U64))
    filename: np.ndarray = field(default_factory=lambda: _empty(I32))
    build_id: np.ndarray = field(default_factory=lambda: _empty(I32))
    flags: np.ndarray = field(default_factory=lambda: _empty(np.uint8))

    def __len__(self) -> int:
        return len(self.start)


@dataclass(repr=False)
class LineTable(_TableRepr):
    function: np.ndarray = field(default_factory=lambda: _empty(I32))
    line: np.ndarray = field(default_factory=lambda: _empty(I64))
    column: np.ndarray = field(default_factory=lambda: _empty(I64))

    def __len__(self) -> int:
        return len(self.function)


@dataclass(repr=False)
class LocationTable(_TableRepr):
    mapping: np.ndarray = field(default_factory=lambda: _empty(I32))
    address: np.ndarray = field(default_factory=lambda: _empty(U64))
    folded: np.ndarray = field(default_factory=lambda: _empty(np.bool_))
    line_start: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=I64))

    def __len__(self) -> int:
        return len(self.mapping)

    def lines_of(self, loc: int) -> range:
        """Row numbers in the lines table of location ``loc``."""
        return range(int(self.line_start[loc]), int(self.line_start[loc + 1]))


@dataclass(repr=False)
class CallsiteTable(_TableRepr):
    """The callsite tree: ``parent`` (-1 = root) and ``location`` of every callsite.

    Parents precede their children. Derived facts (depth, levels, subtree
    sums, Euler intervals) come from :mod:`polyprof.model.tree` and are cached
    here: tables are never changed after they are built.
    """

    parent: np.ndarray = field(default_factory=lambda: _empty(I32))
    location: np.ndarray = field(default_factory=lambda: _empty(I32))
    #: Derived, cached: depth of every callsite (set by the builder or on first use).
    _depth: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: Set by the builder when ids are the pre-order of the tree: subtree sizes.
    _size: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _levels: tuple[int, list[tree.Level]] | None = field(default=None, init=False, repr=False, compare=False)
    _euler: tuple[np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.parent)

    def preorder_size(self) -> np.ndarray | None:
        """Subtree sizes when callsite ids are in pre-order (every subtree is
        the id range ``[c, c + size[c])``), else None."""
        size = self._size
        return size if size is not None and len(size) == len(self.parent) else None

    def depth(self) -> np.ndarray:
        """Depth of every callsite (roots have depth 0). Cached: tables are immutable."""
        if self._depth is None or len(self._depth) != len(self.parent):
            self._depth = (tree.path_sums(self.parent, np.ones(len(self.parent), dtype=np.int64)) - 1).astype(I32)
        return self._depth

    def levels(self) -> list[tree.Level]:
        """Callsites grouped by depth, roots first, siblings contiguous (cached)."""
        if self._levels is None or self._levels[0] != len(self.parent):
            self._levels = (len(self.parent), tree.tree_levels(self.parent, self.depth()))
        return self._levels[1]

    def subtree_sums(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` (one per callsite, or n x k) over every callsite's subtree, in int64."""
        size = self.preorder_size()
        if size is None:
            return tree.subtree_sums(values, self.levels())
        n = len(self)
        fast = stack_kernels(n) if np.ndim(values) == 1 else None
        if fast is not None:
            return fast.subtree_sums(values, self.parent)
        # Subtrees are id ranges: differences of one running sum (in place where numpy allows:
        # millions of callsites make every temporary tens of MB).
        running = np.zeros((n + 1,) + np.shape(values)[1:], dtype=np.int64)
        np.cumsum(values, axis=0, dtype=np.int64, out=running[1:])
        end = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        np.add(end, size, out=end, casting="unsafe")  # one past each subtree's last id
        out = running[end]
        del end
        out -= running[:-1]
        return out

    def path_sums(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` over every callsite and its ancestors, in int64."""
        size = self.preorder_size()
        if size is None:
            return tree.path_sums(self.parent, values)
        return tree.preorder_path_sums(values, size)

    def euler(self) -> tuple[np.ndarray, np.ndarray]:
        """Pre-order entry position and last descendant's position of every
        callsite (:func:`polyprof.model.tree.euler`); cached."""
        if self._euler is None or len(self._euler[0]) != len(self):
            size = self.preorder_size()
            if size is not None:
                tin = np.arange(len(self), dtype=np.int64)
                self._euler = (tin, tin + size - 1)
            else:
                self._euler = tree.euler(self.levels(), len(self))
        return self._euler

    def path(self, node: int) -> list[int]:
        """Locations of the stack ending at ``node``, leaf first."""
        out = []
        location, parent = self.location, self.parent
        while node >= 0:  # .item(): a Python int without a numpy scalar (deep stacks walk millions)
            out.append(location.item(node))
            node = parent.item(node)
        return out


class _Once:
    """A computation run at most once, when first needed."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make: Callable[[], Any] | None = make
        self._value: Any = None

    def get(self) -> Any:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value


class _Deferrable:
    """Attributes a reader may leave to be computed on first access.

    A deferred attribute is absent from the instance ``__dict__``, so normal
    lookup fails and ``__getattr__`` computes it, stores it and returns it;
    later reads are plain attribute reads.
    """

    def _defer(self, name: str, once: _Once, pick: Callable[[Any], Any]) -> None:
        self.__dict__.pop(name, None)
        self.__dict__.setdefault("_deferred", {})[name] = (once, pick)

    def is_deferred(self, name: str) -> bool:
        """True while ``name`` has not been computed yet."""
        return name not in self.__dict__ and name in self.__dict__.get("_deferred", {})

    def __getattr__(self, name: str) -> Any:
        pending = self.__dict__.get("_deferred", {})
        if name not in pending:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        once, pick = pending[name]
        value = pick(once.get())
        setattr(self, name, value)
        return value

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles hold resolved values
        for name in list(self.__dict__.get("_deferred", {})):
            getattr(self, name)
        return {k: v for k, v in self.__dict__.items() if k != "_deferred"}


@dataclass(repr=False)
class SampleTable(_TableRepr, _Deferrable):
    stack: np.ndarray = field(default_factory=lambda: _empty(I32))
    values: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=I64))
    labelset: np.ndarray = field(default_factory=lambda: _empty(I32))
    # (no class attribute: a filtered copy defers these, see polyprof.analysis.stacks.take_samples)
    time: np.ndarray | None = field(default_factory=lambda: None)
    pid: np.ndarray | None = field(default_factory=lambda: None)
    tid: np.ndarray | None = field(default_factory=lambda: None)
    cpu: np.ndarray | None = field(default_factory=lambda: None)

    def __len__(self) -> int:
        return len(self.stack)

    OPTIONAL_COLUMNS = ("time", "pid", "tid", "cpu")


@dataclass(repr=False)
class Profile(_Deferrable):
    """A stack-sampling profile in columnar form (see the module docstring)."""

    sample_types: list[ValueType] = field(default_factory=list)
    default_sample_type: str = ""
    period_type: ValueType | None = None
    period: int = 0
    time_nanos: int = 0
    duration_nanos: int = 0
    comments: list[str] = field(default_factory=list)
    drop_frames: str = ""
    keep_frames: str = ""
    doc_url: str = ""
    source_format: str = ""
    #: Per-format facts a reader keeps that have no column (lost samples,
    #: process names, ...). JSON-compatible values only; the keys other code
    #: relies on are typed properties (:class:`polyprof.model.extras.Extras`).
    extras: Extras = field(default_factory=Extras)
    #: Problems the reader tolerated (shown by ``info``).
    warnings: list[str] = field(default_factory=list)

    strings: list[str] = field(default_factory=lambda: [""])
    functions: FunctionTable = field(default_factory=FunctionTable)
    mappings: MappingTable = field(default_factory=MappingTable)
    locations: LocationTable = field(default_factory=LocationTable)
    lines: LineTable = field(default_factory=LineTable)
    callsites: CallsiteTable = field(default_factory=CallsiteTable)
    samples: SampleTable = field(default_factory=SampleTable)
    labelsets: list[tuple[Label, ...]] = field(default_factory=lambda: [()])

    def __post_init__(self) -> None:
        self.extras = Extras(self.extras)  # its own copy, typed even when a plain dict was given

    def copy_with(self, **changes: Any) -> Profile:
        """A new profile sharing this one's tables (tables are never changed in
        place), with its own comments, extras and warnings, and ``changes`` applied."""
        return dataclasses.replace(self, comments=list(self.comments), warnings=list(self.warnings), **changes)

    def defer_labels(self, make: Callable[[], np.ndarray]) -> None:
        """Leave the labels to be decoded on first use.

        ``make()`` must return the labelset column (one row per sample) and
        may append new label sets to the current ``labelsets`` list, which
        it receives through the reader's builder.
        """
        sets = self.labelsets
        once = _Once(lambda: (np.asarray(make(), dtype=I32), sets))
        self._defer("labelsets", once, lambda r: r[1])
        self.samples._defer("labelset", once, lambda r: r[0])

    def __repr__(self) -> str:
        """A one-line summary (the tables can hold millions of rows)."""
        default = self.default_index() if self.sample_types else -1
        types = ", ".join(f"{vt}{'*' if i == default else ''}" for i, vt in enumerate(self.sample_types))
        cols = [name for name in SampleTable.OPTIONAL_COLUMNS if getattr(self.samples, name) is not None]
        extra = f", columns {'/'.join(cols)}" if cols else ""
        seconds = f", {self.duration_nanos / 1e9:g}s" if self.duration_nanos else ""
        return (f"Profile({self.source_format or '?'}, {len(self.samples)} samples of [{types}]{extra}, "
                f"{len(self.callsites)} callsites, {len(self.locations)} locations, "
                f"{len(self.functions)} functions{seconds})")

    def to_arrow(self, table: str = "samples", *, stacks: str = "id") -> Any:
        """One row per sample as a ``pyarrow.Table`` (or the ``"callsites"`` table):
        every value column, time/pid/tid/cpu, labels as columns, the stack as a
        callsite id and/or (``stacks="names"``/``"both"``) as frame names root to
        leaf. See :mod:`polyprof.model.table`; needs ``polyprof[arrow]``."""
        from polyprof.model.table import to_arrow

        return to_arrow(self, table, stacks=stacks)

    def to_pandas(self, table: str = "samples", *, stacks: str = "id") -> Any:
        """:meth:`to_arrow` as a ``pandas.DataFrame`` (needs ``polyprof[pandas]``
        and ``polyprof[arrow]``)."""
        from polyprof.model.table import to_pandas

        return to_pandas(self, table, stacks=stacks)

    # ---- small conveniences (views computed on demand, never storage) ----

    def string(self, sid: int) -> str:
        return self.strings[sid]

    def function_name(self, fn: int) -> str:
        return self.strings[self.functions.name[fn]] if fn >= 0 else ""

    def mapping_file(self, m: int) -> str:
        return self.strings[self.mappings.filename[m]] if m >= 0 else ""

    def default_index(self) -> int:
        """Index of the preferred sample type, chosen as pprof does.

        ``default_sample_type`` when it names a type, else the last one.
        """
        if self.default_sample_type:
            for i, vt in enumerate(self.sample_types):
                if vt.type == self.default_sample_type:
                    return i
        return max(len(self.sample_types) - 1, 0)

    def sample_index(self, spec: str | int | None) -> int:
        """Resolve ``sample_index`` (a type name or a number) to a column."""
        from polyprof.errors import OptionsError

        if spec is None or spec == "":
            return self.default_index()
        if isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()):
            i = int(spec)
            if 0 <= i < len(self.sample_types):
                return i
        else:
            for i, vt in enumerate(self.sample_types):
                if vt.type == spec:
                    return i
        names = ", ".join(vt.type for vt in self.sample_types) or "none"
        raise OptionsError(f"unknown sample type {{sample_index}}={spec!r}; this profile has: {names}",
                           options=("sample_index",))

    def totals(self) -> list[int]:
        """Sum of every sample-value column."""
        if self.samples.values.size == 0:
            return [0] * len(self.sample_types)
        return [int(x) for x in self.samples.values.sum(axis=0)]

    def stack_locations(self, sample: int) -> list[int]:
        """Locations of sample ``sample``, leaf first."""
        return self.callsites.path(int(self.samples.stack[sample]))
