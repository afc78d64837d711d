"""The store handle: ``polyprof.store.open(path)`` and the operations on it.

Every analysis method takes a cohort (``where``: a SQL predicate on
``profiles``; ``time_from``/``time_to``: an absolute window) and the same
:class:`~polyprof.analysis.options.Options` as the single-file analyses
(``options=`` or Options fields as keywords), and returns the very result
object of the single-file analysis, computed by it on the cohort's reduced
profile (see :mod:`polyprof.store.query`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from polyprof.analysis.options import Options
from polyprof.store.cohort import Cohort
from polyprof.store.engine import Engine, open_engine
from polyprof.store.fold import Dictionaries
from polyprof.store.layout import Manifest, negative_values_possible
from polyprof.store.views import define_views

__all__ = ["Store", "open"]


def _options(options: Options | None, kw: dict[str, Any]) -> Options:
    o = options or Options()
    return dataclasses.replace(o, **kw) if kw else o


class Store:
    """A fleet store opened for queries (and maintenance). Use as a context manager or close()."""

    def __init__(self, path: str | os.PathLike[str], *, engine: str = "duckdb",
                 spark_master: str | None = None) -> None:
        self.path = os.fspath(path)
        self.manifest = Manifest.load(self.path)
        self.engine_name, self._master = engine, spark_master
        self._engine: Engine | None = None
        self._dicts: Dictionaries | None = None
        self._generation = -1

    def __repr__(self) -> str:
        return f"<polyprof Store {self.path!r} engine={self.engine_name} generation={self.manifest.generation}>"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # ---- engine --------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The engine, with views over the current manifest (re-read when a writer published)."""
        current = Manifest.load(self.path)
        if self._engine is None:
            self._engine = open_engine(self.path, self.engine_name, self._master)
        if current.generation != self._generation:
            self.manifest = current
            self._engine.attach(current)
            define_views(self._engine)
            self._dicts = Dictionaries(self._engine, negative_values_possible(current.paths("samples")))
            self._generation = current.generation
        return self._engine

    @property
    def dicts(self) -> Dictionaries:
        engine = self.engine
        assert self._dicts is not None and self._dicts.engine is engine
        return self._dicts

    def load(self, where: str | None = None, *, time_from: Any = None, time_to: Any = None,
             options: Options | None = None, **kw: Any):  # noqa: ANN201
        """The cohort as a FilterResult (filtered reduced profile), what every analysis takes."""
        from polyprof.store.query import load

        engine = self.engine
        return load(engine, self.dicts, Cohort(where, time_from, time_to), _options(options, kw))

    # ---- analyses (the single-file result objects) ----------------------------

    def top(self, options: Options | None = None, *, where: str | None = None, time_from: Any = None,
            time_to: Any = None, **kw: Any):  # noqa: ANN201
        """``polyprof top`` over the cohort: a TopResult."""
        from polyprof.analysis.top import top

        o = _options(options, kw)
        return top(self.load(where, time_from=time_from, time_to=time_to, options=o), _analysis(o))

    def tree(self, options: Options | None = None, *, where: str | None = None, time_from: Any = None,
             time_to: Any = None, **kw: Any):  # noqa: ANN201
        """``polyprof tree`` over the cohort: a TreeResult."""
        from polyprof.analysis.tree import tree

        o = _options(options, kw)
        return tree(self.load(where, time_from=time_from, time_to=time_to, options=o), _analysis(o))

    def peek(self, regex: str, options: Options | None = None, *, where: str | None = None,
             time_from: Any = None, time_to: Any = None, **kw: Any):  # noqa: ANN201
        """``polyprof peek REGEX`` over the cohort: a TreeResult."""
        from polyprof.analysis.tree import peek

        o = _options(options, kw)
        return peek(self.load(where, time_from=time_from, time_to=time_to, options=o), regex, _analysis(o))

    def traces(self, options: Options | None = None, *, where: str | None = None, time_from: Any = None,
               time_to: Any = None, **kw: Any):  # noqa: ANN201
        """``polyprof traces`` over the cohort: a TracesResult (equal samples of the cohort summed)."""
        from polyprof.analysis.traces import traces
        from polyprof.store.query import TRACE_KEYS, load

        o = _options(options, kw)
        engine = self.engine
        fr = load(engine, self.dicts, Cohort(where, time_from, time_to), o, keys=TRACE_KEYS)
        return traces(fr, _analysis(o))

    def flame(self, options: Options | None = None, *, where: str | None = None, base_where: str | None = None,
              time_from: Any = None, time_to: Any = None, max_nodes: int | None = None, **kw: Any):  # noqa: ANN201
        """The flame graph of the cohort (a FlameTree); ``base_where`` adds a diff base."""
        from polyprof.analysis.flame import DEFAULT_MAX_NODES, flame_tree

        o = _options(options, kw)
        if base_where is not None:
            self._prefetch_pair(base_where, where, time_from, time_to, o)
        new = self.load(where, time_from=time_from, time_to=time_to, options=o)
        base = None
        if base_where is not None:
            base = self.load(base_where, time_from=time_from, time_to=time_to,
                             options=dataclasses.replace(o, sample_index=new.profile.sample_types[0].type))
        return flame_tree(new, _analysis(o), base=base,
                          max_nodes=DEFAULT_MAX_NODES if max_nodes is None else max_nodes)

    def diff(self, base_where: str | None, where: str | None, options: Options | None = None, *,
             normalize: str = "none", stacks: bool = True, time_from: Any = None, time_to: Any = None,
             **kw: Any):  # noqa: ANN201
        """``polyprof diff`` of two cohorts (same sample type): a DiffResult."""
        from polyprof.analysis.diff import diff

        o = _options(options, kw)
        self._prefetch_pair(base_where, where, time_from, time_to, o)
        new = self.load(where, time_from=time_from, time_to=time_to, options=o)
        base = self.load(base_where, time_from=time_from, time_to=time_to,
                         options=dataclasses.replace(o, sample_index=new.profile.sample_types[0].type))
        return diff(base, new, _analysis(o), normalize=normalize, stacks=stacks)

    def _prefetch_pair(self, base_where: str | None, where: str | None, time_from: Any, time_to: Any,
                       o: Options) -> None:
        """Both sides of a diff reduced in one scan of the samples."""
        from polyprof.store.query import prefetch_pair

        engine = self.engine
        prefetch_pair(engine, self.dicts, (Cohort(base_where, time_from, time_to), Cohort(where, time_from, time_to)),
                      o)

    # ---- whole profiles, SQL, facts --------------------------------------------

    def profile(self, where: str | None = None, *, time_from: Any = None, time_to: Any = None):  # noqa: ANN201
        """The cohort merged into one Profile with every sample type (what ``export`` writes)."""
        from polyprof.store.query import merged_profile

        engine = self.engine
        return merged_profile(engine, self.dicts, Cohort(where, time_from, time_to))

    def export(self, output: str, where: str | None = None, *, format: str | None = None,
               time_from: Any = None, time_to: Any = None):  # noqa: ANN201
        """Write the merged cohort to ``output`` (any writable format); returns the LossReport."""
        from polyprof.api import write

        return write(self.profile(where, time_from=time_from, time_to=time_to), output, format=format)

    def sql(self, text: str):  # noqa: ANN201
        """Run one read-only query over the views; an Arrow table."""
        from polyprof.store.views import run_sql

        return run_sql(self.engine, text)

    def profiles(self, where: str | None = None, *, time_from: Any = None, time_to: Any = None,
                 columns: tuple[str, ...] | None = None):  # noqa: ANN201
        """The ``profiles`` rows of a cohort (all sample types), newest first: an Arrow table."""
        from polyprof.store.info import list_profiles

        return list_profiles(self.engine, Cohort(where, time_from, time_to), columns)

    def info(self):  # noqa: ANN201
        """Counts, size, time span, formats, sample types and top labels: a StoreInfo."""
        from polyprof.store.info import store_info

        return store_info(self.engine, self.manifest)

    def facets(self, max_values: int = 50):  # noqa: ANN201
        """What a cohort picker offers: columns' distinct values, label keys/values, time span."""
        from polyprof.store.info import facets

        return facets(self.engine, max_values)

    # ---- maintenance -------------------------------------------------------------

    def compact(self):  # noqa: ANN201
        """Merge small files, drop unreferenced dictionary rows; answers stay identical."""
        from polyprof.store.maintain import compact

        return compact(self.path)

    def rm(self, where: str):  # noqa: ANN201
        """Remove the profiles matching ``where`` (and their samples)."""
        from polyprof.store.maintain import remove

        return remove(self, where)

    def symbolize(self, symbols: str):  # noqa: ANN201
        """Fill names of address-only frames from a symbol directory; ids are kept."""
        from polyprof.store.maintain import symbolize

        return symbolize(self, symbols)


def _analysis(o: Options) -> Options:
    return dataclasses.replace(o, sample_index=None)


def open(path: str | os.PathLike[str], *, engine: str = "duckdb", spark_master: str | None = None) -> Store:  # noqa: A001
    """Open the store at ``path`` for queries (``engine``: duckdb, or spark with ``spark_master``)."""
    return Store(path, engine=engine, spark_master=spark_master)
