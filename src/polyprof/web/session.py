"""What ``polyprof serve`` holds while it runs: the profiles read once, and caches of work on them.

The inputs are read before the server starts (one per file, or one merged
profile with ``--merge``; ``--base`` adds the profile diffs compare
against). Every answer starts from :meth:`Session.filtered` (the profile
with the filters of the request's Options applied) and, for the flame-graph
views, :meth:`Session.flame` (the complete flame graph of those options,
indexed for slicing). Both, and the analyses' results, are kept in small
least-recently-used caches, so clicking around one view (zoom, search,
hover, expand) never recomputes them; a filter change computes each once,
even when several requests (threads) ask for it at the same time.

With ``--store`` there are no files: each cohort the page asks for (a
``where`` predicate and a ``from``/``to`` window) becomes an input whose
filtered profile is :meth:`polyprof.store.Store.load` (the store reduces,
rebuilds and filters; the same FilterResult as for a file), so every view
and number is the single-file analysis of the cohort.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from polyprof.analysis import filters, label_groups
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.flame import (
    DEFAULT_MIN_FRACTION,
    FlameShape,
    flame_shape,
    flame_tree,
    name_pass,
)
from polyprof.analysis.flameview import FlameIndex
from polyprof.analysis.label_groups import GroupedIndex, grouped_index
from polyprof.analysis.options import Options
from polyprof.analysis.sandwich import SandwichResult, inverted_graph, sandwich
from polyprof.analysis.timeline import TimedSamples, timed_samples
from polyprof.errors import OptionsError
from polyprof.model.merge import align_sample_types
from polyprof.model.profile import Profile, SampleTable
from polyprof.model.threads import sample_threads
from polyprof.web import memory

__all__ = ["Input", "Session"]

T = TypeVar("T")

#: Bytes of arrays the caches of a session hold together (filtered profiles, flame graphs, name
#: trees, results; arrays shared with the inputs not counted), as a share of what the process
#: holds once the inputs are read (its resident size: the inputs' arrays, names and tables).
#: The large benchmark pprof: 309 MB resident, so 231 MB; its landing graph is 126 MB (3.0M
#: nodes, 42 bytes each) and its name tree 37 MB, so the next complete graph lets the landing
#: graph go before it is built (it is remade from the name tree in 0.2 s on "back"). The
#: Perfetto trace: 452 MB resident, 340 MB. The peak is the process's own, the cached values,
#: and the next value with its temporaries: 1.5x `polyprof top` leaves about this much.
CACHE_BUDGET = 0.75

#: Where the resident size cannot be read: the budget as a multiple of the inputs' arrays
#: (the large pprof: 92 MB of arrays, 309 MB resident; the Perfetto trace 262 MB, 452 MB).
CACHE_BUDGET_OF_ARRAYS = 2.5

#: Room made before a filter that remakes the stacks (hide, show, prune_from, label frames) is
#: applied, as a multiple of the inputs' arrays: its copy may remake every callsite (hide on the
#: large benchmark pprof: 100 MB of its own and +250 MB at the peak, from 92 MB of arrays).
REMAKE_GUESS = 2.0

#: The budget's floor (small inputs: every view of a session stays).
MIN_CACHE_BUDGET = 64 * 2**20

#: The budget with ``--store`` (no inputs to measure: cohorts are loaded on request; a cohort
#: with its graph and tables should fit, or each view would load it again).
STORE_CACHE_BUDGET = 2**30

#: Resolution of the inverted graph made from the complete one: the CLI's own default
#: (``flame --inverted``). Finer costs what the data holds: on the benchmark pprof every
#: sample's own reversed path (16M nodes at 0, 9M at 1e-6, 84k at 1e-5).
INVERTED_RESOLUTION = DEFAULT_MIN_FRACTION


def _whole(graph: FlameIndex) -> FlameIndex:
    """The complete graph of a view: ``graph``, or where it holds a group by at a view's
    resolution the complete grouped graph (cached as a graph: what a sandwich or inverted graph
    the grouped view cannot make from its samples is made of)."""
    return graph.complete_index() if isinstance(graph, GroupedIndex) else graph


@dataclass
class Input:
    """One profile the page can show: its name in the picker, the file it came from."""

    name: str
    path: str
    profile: Profile | None  # None for a store cohort: loaded per request (Session.filtered)
    is_base: bool = False
    cohort: Any = None       # a polyprof.store.cohort.Cohort with --store


class _Pool:
    """The memory budget one session's caches share: ``budget`` bytes, summed over every
    value they hold (each weighed by its cache, measured: the bytes of its own arrays). Room
    for a new value is made across the caches, least recently used first (the last use of
    any value of any cache), pinned values last, and values of caches marked ``keep`` never
    (the name trees every build starts from): a flame graph of a filter lets go of a derived
    table or a sandwich before the landing graph. One lock serves every cache of the pool."""

    def __init__(self, budget: float = float("inf")) -> None:
        self.budget = budget
        self.mutex = threading.Lock()
        self.caches: list[_Cache] = []
        self.tick = 0
        self.spare = 0.0  # room one view needs beside its graph and the name trees (a filtered copy)

    def held(self) -> float:
        return sum(w for c in self.caches for _, w, _ in c.items.values())

    def limit(self) -> float:
        """The budget, but never less than one view needs at once: the name trees, a graph as
        big as the pinned one, and :attr:`spare` (where the landing graph alone outweighs the
        budget, each click would let it go and make it again)."""
        kept = sum(w for c in self.caches if c.keep for _, w, _ in c.items.values())
        return max(self.budget, kept + max((c.floor for c in self.caches), default=0) + self.spare)

    def make_room(self, need: float, spare: tuple[_Cache, Hashable] | None = None) -> None:
        """Let values go until ``need`` more bytes fit in the :meth:`limit`, all but ``spare`` (a
        cache and key: the value just made) (under :attr:`mutex`)."""
        limit = self.limit()
        while self.held() + need > limit:
            victims = [(k in c.pinned, tick, c, k) for c in self.caches if not c.keep
                       for k, (_, w, tick) in c.items.items() if w > 0 and not (spare and c is spare[0] and k == spare[1])]
            if not victims:
                return
            _, _, cache, key = min(victims, key=lambda v: (v[0], v[1]))
            cache.drop(key)

    def touch(self) -> int:
        self.tick += 1
        return self.tick


@dataclass
class _Cache:
    """Least-recently-used values, at most ``size`` of them, in a :class:`_Pool` whose byte
    budget (``budget``: a pool of its own) they share with other caches, weighed by
    ``weigh(value)``. Room is made *before* a new value is computed, guessing its weight as
    the last one's (the last made without a ``guess`` of its own): on a huge profile the
    previous graph is let go before the next is built, so memory holds one, not two. Pinned
    values (the landing view) stay while others come and go, and are let go only when the
    budget needs their room, and no guess is below the last pinned value's weight (a
    graph of a filter after a small inverted one weighs about as much as the landing graph);
    ``keep``: the pool never lets this cache's values go (only ``size`` does).

    Thread-safe and single-flight: requests for a value being computed wait for it
    instead of computing it again; different values compute at the same time (a cached
    flame graph answers while a top table is being computed).
    """

    size: int
    budget: float = float("inf")
    weigh: Callable[[Any], float] = field(default=lambda value: 0.0)
    pool: _Pool | None = None
    keep: bool = False
    items: OrderedDict = field(default_factory=OrderedDict)  # key -> (value, weight, last use)
    last: float = 0.0
    floor: float = 0.0  # guesses are at least the last pinned value's weight
    flights: dict = field(default_factory=dict)
    pinned: set = field(default_factory=set)  # let go last, only for the budget (the landing view)
    trim_from: float = 1.0  # weights from which the heap is trimmed after a value is made
    # values too big to keep for later (a filtered copy larger than the input): held by weak
    # reference, so they are shared while a request uses them and let go when it is answered
    weak: Callable[[Any], bool] = field(default=lambda value: False)
    mutex: threading.Lock = field(init=False)  # the pool's

    def __post_init__(self) -> None:
        if self.pool is None:
            self.pool = _Pool(self.budget)
        self.pool.caches.append(self)
        self.mutex = self.pool.mutex

    def get(self, key: Hashable, make: Callable[[], T], *, guess: float | None = None) -> T:
        """The value of ``key``, made by ``make()`` unless cached; ``guess``: its weight, when
        the last value's is no guide (a small graph made from a cached big one)."""
        pool = self.pool
        assert pool is not None
        while True:
            with self.mutex:
                if key in self.items:
                    value, weight, _ = self.items[key]
                    if isinstance(value, weakref.ref):
                        value = value()
                    if value is not None:
                        self.items[key] = (self.items[key][0], weight, pool.touch())
                        self.items.move_to_end(key)
                        return value
                    del self.items[key]  # a big value nobody holds any more: make it again
                flight = self.flights.get(key)
                if flight is None:
                    flight = self.flights[key] = threading.Lock()
                    flight.acquire()
                    break
            with flight:  # computed by another request: wait, then look again
                pass
        try:
            with self.mutex:
                while self.items and len(self.items) >= self.size + len(self.pinned & self.items.keys()):
                    # the least recently used first; a pinned value only when memory needs it
                    self.drop((self._evictable() or list(self.items))[0])
                pool.make_room(max(self.last, self.floor) if guess is None else guess)
            value = make()
            weight = self.weigh(value)
            if weight >= self.trim_from:  # a big value was built: give its temporaries back
                memory.give_back()
            with self.mutex:
                if guess is None:
                    self.last = weight
                if key in self.pinned:  # the landing graph: the next complete graph weighs about as much
                    self.floor = weight
                if self.weak(value):
                    self.items[key] = (weakref.ref(value), 0, pool.touch())
                else:
                    self.items[key] = (value, weight, pool.touch())
                    pool.make_room(0, (self, key))  # bigger than guessed: the others make room
            return value
        finally:
            with self.mutex:
                del self.flights[key]
            flight.release()

    def drop(self, key: Hashable) -> None:
        """Let ``key``'s value go (under :attr:`mutex`; a pinned key stays pinned: made again,
        it is kept as before)."""
        del self.items[key]

    def _evictable(self) -> list[Hashable]:
        return [k for k in self.items if k not in self.pinned]


def _array_bytes(value: Any, seen: set[int] | None = None) -> int:
    """Bytes of the numpy arrays ``value`` holds (through dataclass fields, attributes, dicts,
    lists and tuples, or its ``held()`` values; an array viewing another counts the other once):
    a cached result's weight."""
    seen = set() if seen is None else seen
    if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float, bool)):
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        base = value.base
        return _array_bytes(base, seen) if isinstance(base, np.ndarray) else value.nbytes
    if isinstance(value, dict):
        parts: Any = value.values()
    elif hasattr(value, "held"):  # a value that says what it holds (not what it is made from)
        parts = value.held()
    elif isinstance(value, (list, tuple)):
        parts = value[:64]  # lists of strings or rows: their arrays, if any, come first
    elif dataclasses.is_dataclass(value):  # a deferred column weighs what it is made from, unmade
        pending = getattr(value, "__dict__", {}).get("_deferred", {})
        parts = [*(getattr(value, f.name) for f in dataclasses.fields(value)
                   if f.name not in pending or f.name in value.__dict__),
                 *(pick for _, pick in pending.values())]
    elif hasattr(value, "__slots__") and not hasattr(value, "__dict__"):
        parts = [getattr(value, name, None) for name in value.__slots__]
    else:
        parts = getattr(value, "__dict__", {}).values()
    return sum(_array_bytes(x, seen) for x in parts)


def _selected_bytes(s: SampleTable) -> int:
    """What a filtered copy that keeps every sample of ``s`` holds (:func:`stacks.take_samples`)."""
    return sum(getattr(s, name).nbytes for name in ("stack", "values", "labelset")) + 5 * len(s)


#: The options a filtered profile depends on: the filters, and the label frames pprof adds first.
FILTER_FIELDS = (*filters.FILTERS, "tagroot", "tagleaf", "unit")


def _filter_key(o: Options) -> tuple:
    return tuple(repr(getattr(o, name)) for name in FILTER_FIELDS)


def _view_key(o: Options) -> str:
    return repr(dataclasses.replace(o, nodecount=0))


class Session:
    """The read inputs and the cached filtered profiles and flame graphs."""

    def __init__(self, inputs: list[Input], *, defaults: dict[str, str] | None = None, cache: int = 2,
                 store: Any = None, budget: float | None = None) -> None:
        """``cache``: filtered profiles and flame graphs kept (each, and the pinned landing
        graph); ``budget``: bytes every cached value may hold together (default:
        :data:`CACHE_BUDGET` of the process's resident size, measured now: made once the
        inputs are read)."""
        if not inputs and store is None:
            raise OptionsError("nothing to serve: no profiles were read")
        self.inputs = inputs
        self.store = store  # a polyprof.store.Store (--store): inputs are cohorts, made on request
        self._cohorts: dict[tuple, int] = {}
        self._store_lock = threading.Lock()  # one engine connection: one query at a time
        self.defaults = defaults or {}  # the page's starting state (the command line's analysis flags)
        self._input_arrays: set[int] = set()  # ids of the inputs' arrays and tables (shared by filtered copies)
        self._input_bytes = sum(_array_bytes(x.profile, self._input_arrays) for x in inputs)
        # a filtered copy that selects samples holds at most the input's stacks, values and labels
        # (its optional columns are made on first use), a mask and its rows in the input (int32)
        self._sample_bytes = [_selected_bytes(x.profile.samples) if x.profile is not None else 0 for x in inputs]
        if budget is None:
            held = memory.resident() if inputs else None
            budget = (STORE_CACHE_BUDGET if not inputs else CACHE_BUDGET * held if held
                      else CACHE_BUDGET_OF_ARRAYS * self._input_bytes)
            budget = max(MIN_CACHE_BUDGET, budget)
        self._pool = _Pool(budget)
        self._pool.spare = max(self._sample_bytes, default=0)
        # every value weighs the bytes of its own arrays: a filtered copy shares the input's
        # columns, and the unfiltered profile is the input itself (free)
        self._filtered = _Cache(cache + 1, pool=self._pool, weigh=lambda fr: self._own_bytes(fr.profile),
                                weak=self._oversized)
        self._flames = _Cache(cache + 1, pool=self._pool, weigh=self._own_bytes)
        self._shapes = _Cache(2, pool=self._pool, weigh=self._own_bytes, keep=True)
        self._results = _Cache(16, pool=self._pool, weigh=self._own_bytes, trim_from=16 * 2**20)

    def _oversized(self, fr: FilterResult) -> bool:
        """A filtered copy that remade the stacks and whose own arrays (not shared with the
        inputs) weigh more than half the inputs (hide on the large pprof: 100 MB of its own,
        3.9M callsites, from a 92 MB input). The answers made from it are cached; the copy is
        kept only while a request holds it."""
        if not self._input_bytes or fr.profile.callsites is fr.original.callsites:
            return False  # store cohorts (the store's answers), or filters that only select samples
        return 2 * self._own_bytes(fr.profile) > self._input_bytes

    def _own_bytes(self, value: Any) -> int:
        """Bytes of the arrays of ``value`` that are not the inputs' own: what caching it holds."""
        return _array_bytes(value, set(self._input_arrays))

    @property
    def base(self) -> int | None:
        """Index of the ``--base`` input, if any."""
        return next((i for i, x in enumerate(self.inputs) if x.is_base), None)

    def input(self, index: int, name: str = "p") -> Input:
        if not 0 <= index < len(self.inputs):
            raise OptionsError(f"no input {{{name}}}={index}; inputs are 0..{len(self.inputs) - 1}", options=(name,))
        return self.inputs[index]

    def default_new(self) -> int:
        """The input a view shows when the request names none: the first that is not the base."""
        return next((i for i, x in enumerate(self.inputs) if not x.is_base), 0)

    def cohort(self, where: str, time_from: str, time_to: str, *, is_base: bool = False) -> int:
        """The input index of a store cohort (made on first use; the store checks ``where``)."""
        from polyprof.store.cohort import Cohort

        key = (where.strip(), time_from.strip(), time_to.strip(), is_base)
        with self._store_lock:
            if key not in self._cohorts:
                cohort = Cohort(key[0] or None, key[1] or None, key[2] or None)
                cohort.window()  # a bad time is an OptionsError now, not in a view
                self._cohorts[key] = len(self.inputs)
                self.inputs.append(Input(cohort.describe(), self.store.path, None, is_base, cohort))
            return self._cohorts[key]

    def store_call(self, work: Callable[[Any], T]) -> T:
        """``work(store)`` with the store's engine to itself."""
        with self._store_lock:
            return work(self.store)

    def profile(self, index: int) -> Profile:
        """Input ``index``'s profile (a store cohort's: unfiltered, its default sample type)."""
        x = self.input(index)
        return x.profile if x.profile is not None else self.filtered(index, Options()).profile

    def filtered(self, index: int, o: Options, *, labels: bool = False) -> FilterResult:
        """Input ``index`` with the filters of ``o`` applied (cached). A store cohort reduces its
        samples by stack alone unless a filter needs labels, or ``labels`` (the labels view) asks."""
        x = self.input(index)
        if x.cohort is not None:  # the store selects the sample type too
            key = (index, _filter_key(o), repr(o.sample_index), labels)
            return self._filtered.get(key, lambda: self._load(x.cohort, o, labels))
        profile = x.profile
        assert profile is not None
        # room for the copy: what a copy of the stacks costs, or at most every sample (none: the input)
        remakes = any(getattr(o, name) for name in ("hide", *filters.REMAKE_STACKS))
        selects = any(getattr(o, name) for name in filters.FILTERS)
        guess = REMAKE_GUESS * self._input_bytes if remakes else self._sample_bytes[index] if selects else 0
        return self._filtered.get((index, _filter_key(o)), lambda: filters.apply(profile, o), guess=guess)

    def _load(self, cohort: Any, o: Options, labels: bool) -> FilterResult:
        from polyprof.store.query import load

        keys = ("labelset_id",) + (("pid", "tid") if o.pid or o.tid else ()) if labels else None
        return self.store_call(lambda store: load(store.engine, store.dicts, cohort, o, keys=keys))

    def pair(self, new: int, base: int, o: Options) -> tuple[FilterResult, FilterResult]:
        """(base, new) filtered, with one set of sample types (units converted, as ``diff`` does)."""
        b, n = self.filtered(base, o), self.filtered(new, o)
        aligned = align_sample_types([b.profile, n.profile], [self.input(base, "b").name, self.input(new).name])
        return dataclasses.replace(b, profile=aligned[0]), dataclasses.replace(n, profile=aligned[1])

    def flame(self, index: int, o: Options, *, base: int | None = None, inverted: bool = False,
              pin: bool = False) -> FlameIndex:
        """The complete flame graph of input ``index`` (coloured against ``base``), indexed (cached;
        ``pin`` keeps it while the budget allows: the landing view, which back buttons return to)."""
        key = (index, base, inverted, _view_key(o))
        if pin:
            self._flames.pinned.add(key)
        if inverted and base is None:  # made from the (cached) normal graph, at a view's resolution
            graph = self.flame(index, o)
            return self._flames.get(key, lambda: self._inverted(index, o, graph), guess=0)
        return self._flames.get(key, lambda: self._flame_index(index, o, base, inverted, key))

    def _flame_index(self, index: int, o: Options, base: int | None, inverted: bool, key: Hashable) -> FlameIndex:
        if base is None and not inverted and (made := self._grouped_index(index, o, key)) is not None:
            return made
        return FlameIndex(self._flame_tree(index, o, base, inverted))

    def _inverted(self, index: int, o: Options, graph: FlameIndex) -> FlameIndex:
        """The inverted graph at :data:`INVERTED_RESOLUTION`: from the cached graph (compiled),
        else (no numba, negative weights) built from the samples at the same resolution."""
        if isinstance(graph, GroupedIndex):  # a group by: from its samples, not its complete graph
            made = graph.inverted(INVERTED_RESOLUTION)
            if made is not None:
                return FlameIndex(made)
        # the compiled kernels for a small graph of many samples: the other route is a walk of
        # the samples (a group by's label frames on every sample of a 6.5M-sample trace: +110 MB)
        profile = self.input(index).profile
        work = len(profile.samples) if profile is not None else 0
        made = inverted_graph(_whole(graph), min_fraction=INVERTED_RESOLUTION, work=work)
        if made is None:
            made = flame_tree(self.filtered(index, o), o, max_nodes=0, min_fraction=INVERTED_RESOLUTION, inverted=True)
        return FlameIndex(made)

    def _flame_tree(self, index: int, o: Options, base: int | None, inverted: bool) -> Any:
        extra: dict[str, Any] = {"inverted": True} if inverted else {}
        if base is None and not inverted and (made := self._hidden_flame(index, o)) is not None:
            return made
        if base is None:
            filtered = self.filtered(index, o)
            shape = None if inverted else self.shape(index, o, filtered.profile)
            return flame_tree(filtered, o, max_nodes=0, min_fraction=0, shape=shape, **extra)
        old, new = self.pair(index, base, o)
        if inverted:
            return flame_tree(new, o, base=old, max_nodes=0, min_fraction=0, **extra)
        return flame_tree(new, o, base=old, max_nodes=0, min_fraction=0, shape=self.shape(index, o, new.profile),
                          base_shape=self.shape(base, o, old.profile))  # each side's cached name tree

    def _hidden_flame(self, index: int, o: Options) -> Any:
        """The flame graph of a ``hide`` or ``prune_from`` filter made from the input's cached name
        tree and the cached samples of its other filters (:func:`~polyprof.analysis.flame.name_pass`),
        or None where that does not apply."""
        profile = self.input(index).profile
        kind = filters.name_tree_filter(o)
        if profile is None or kind is None:
            return None
        selected = self.filtered(index, filters.without(o, kind))
        hid = name_pass(profile, o, self.shape(index, o, selected.profile), selected)
        if hid is None:
            return None
        return flame_tree(hid[0], o, max_nodes=0, min_fraction=0, shape=hid[1])

    def _grouped_index(self, index: int, o: Options, key: Hashable) -> FlameIndex | None:
        """The flame graph grouped by one label key (the labels panel's group by) made from the
        input's cached name tree (:func:`~polyprof.analysis.label_groups.grouped_index`: a large
        one at a view's resolution, each value's subtree and the complete graph made on request,
        cached here), or None where that does not apply (then the label frames are added to the
        callsites)."""
        profile = self.input(index).profile
        if profile is None or not label_groups.applies(o):
            return None
        made = grouped_index(profile, o, self.shape(index, o, profile))
        if isinstance(made, GroupedIndex):
            made.parts = lambda g, make: self._results.get(("group", key, g), make)
            made.whole = lambda make: self._flames.get((*key, "whole"), make)  # type: ignore[misc]
        return made

    def shape(self, index: int, o: Options, filtered: Profile) -> FlameShape | None:
        """The name tree of input ``index``'s flame graphs at ``o``'s granularity (cached), when
        ``filtered`` (its profile filtered by ``o``) kept the input's callsites: filters that only
        select samples then cost a sum over the samples, not a walk over the callsites."""
        profile = self.input(index).profile
        if profile is None or filtered.callsites is not profile.callsites:
            return None  # a store cohort, or a filter remade the stacks: of no use (flame_tree checks all)
        return self._shapes.get((index, o.granularity, o.noinlines), lambda: flame_shape(profile, o))  # None: small (numpy)

    def sandwich(self, index: int, o: Options, name: str, min_fraction: float,
                 max_nodes: int = 0) -> tuple[SandwichResult, FlameIndex, FlameIndex]:
        """Callers and callees of ``name`` in the flame graph of ``o``, each indexed for slicing
        (cached). At ``min_fraction`` 0 the callers are made as far as a slice of ``max_nodes``
        reaches (``sandwich(max_nodes=)``: the complete callers of a function called from
        everywhere can be several times the graph)."""
        graph = self.flame(index, o)
        cut = max_nodes if min_fraction <= 0 else 0

        def make() -> tuple[SandwichResult, FlameIndex, FlameIndex]:
            # a group by: from its samples, not its complete graph (the same result)
            found = graph.sandwich(name, min_fraction=min_fraction, max_nodes=cut) if isinstance(
                graph, GroupedIndex) else None
            if found is None:
                found = sandwich(_whole(graph), name, min_fraction=min_fraction, max_nodes=cut)
            return found, FlameIndex(found.callers, found.callers_complete), FlameIndex(found.callees)

        return self._results.get(("sandwich", index, _view_key(o), name, min_fraction, cut), make)

    def threads(self, index: int, o: Options) -> tuple[Any, list[Any]]:
        """The thread of every sample of input ``index`` filtered by ``o``, and the threads
        (:func:`~polyprof.model.threads.sample_threads`; cached: every binning of the timeline
        and its thread/process grouping start from it)."""
        return self._results.get(("threads", index, _filter_key(o), repr(o.sample_index)),
                                 lambda: sample_threads(self.filtered(index, o).profile))

    def timed(self, index: int, o: Options, group: str) -> TimedSamples:
        """Input ``index``'s samples filtered by ``o``, grouped by ``group`` and sorted by time
        (cached: the timeline of any number of bins is then a binary search per group)."""
        return self._results.get(("timed", index, _filter_key(o), repr(o.sample_index), group),
                                 lambda: timed_samples(self.filtered(index, o), o, group=group,
                                                       threads=self.threads(index, o)))

    def result(self, kind: str, index: int, o: Options, make: Callable[[], T], *extra: Hashable) -> T:
        """An analysis result of input ``index`` for ``o`` (cached: results are plain data)."""
        return self._results.get((kind, index, repr(o), *extra), make)
