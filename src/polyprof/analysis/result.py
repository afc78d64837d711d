"""What every analysis result shares: plain data that becomes records, pandas or Arrow.

A result is a dataclass holding numbers and strings only, never the
:class:`~polyprof.model.profile.Profile` it came from, so it can be kept,
pickled, sent as JSON or compared after the profile is gone. The pieces:

- :class:`Result`, the mixin every result class inherits: ``to_records()``
  (a list of dicts, one per row), ``to_pandas()``, ``to_arrow()`` and a
  short ``repr``. A result names its tables in ``TABLES`` (the first is the
  default) and gives each with ``_columns(table)``: column name -> a
  sequence (list or numpy array) of equal length. By default the one table
  is the fields of ``ROW`` over ``self.rows``; results with several tables
  or columnar storage (tree, diff, flame trees, traces) override it.
- :class:`NodeFields`, the identity of a report node as separate fields
  (display ``name``, ``function``, ``system_name``, ``file``, ``line``,
  ``column``, ``address``, ``module``), inherited by row classes, and
  :func:`node_fields`, which fills them from a node map.
- :class:`ProfileSummary`, the profile facts a report header prints (file,
  build id, comments, doc URL, time, duration), so renderers need no
  profile.
- :func:`optional_import`: pandas and pyarrow are optional extras
  (``polyprof[pandas]``, ``polyprof[arrow]``), imported on first use.

New results (web view, store, more reports) should inherit :class:`Result`
and, for report nodes, :class:`NodeFields`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis.nodes import NodeMap
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile
from polyprof.model.table import optional_import

__all__ = ["NodeFields", "ProfileSummary", "Result", "node_fields", "optional_import", "percent"]


def percent(value: int | float, total: int | float) -> float:
    """``value`` as a percentage of ``total`` (0.0 when the total is 0)."""
    return 100.0 * value / total if total else 0.0


def _plain(value: Any) -> Any:
    """A value as JSON-like Python data (dataclasses become dicts, tuples lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def dataclass_columns(rows: Sequence[Any], row_type: type) -> dict[str, list[Any]]:
    """Column name -> values of ``rows`` (instances of the dataclass ``row_type``)."""
    return {f.name: [getattr(r, f.name) for r in rows] for f in dataclasses.fields(row_type)}


class Result:
    """Mixin of every analysis result: its tables as records, pandas or Arrow.

    A result has one or more tables, named in ``TABLES`` (the first is the
    default of ``to_records``/``to_pandas``/``to_arrow``). By default the one
    table is the fields of ``ROW`` over ``self.rows``; results with other
    tables or columnar storage override :meth:`_columns`. ``_summary()``
    gives the text inside the short ``repr``.
    """

    ROW: ClassVar[type | None] = None
    TABLES: ClassVar[tuple[str, ...]] = ("rows",)

    def _row_objects(self) -> Sequence[Any]:
        return getattr(self, "rows")

    def _columns(self, table: str) -> dict[str, Sequence[Any] | np.ndarray]:
        """Column name -> values (equal lengths) of ``table``. Default: the fields of ``ROW``."""
        if self.ROW is None:
            raise NotImplementedError(f"{type(self).__name__} has no table")
        rows = self._row_objects()
        return {f.name: [getattr(r, f.name) for r in rows] for f in dataclasses.fields(self.ROW)}

    def _table(self, table: str | None) -> dict[str, Sequence[Any] | np.ndarray]:
        name = table or self.TABLES[0]
        if name not in self.TABLES:
            raise OptionsError(f"{type(self).__name__} has no table {name!r}; tables: {', '.join(self.TABLES)}")
        return self._columns(name)

    def to_records(self, table: str | None = None) -> list[dict[str, Any]]:
        """The rows of ``table`` (default: the first of ``TABLES``) as a list of dicts of
        plain Python values (nested rows become dicts, tuples lists)."""
        cols = self._table(table)
        lists = [c.tolist() if isinstance(c, np.ndarray) else [_plain(v) for v in c] for c in cols.values()]
        return [dict(zip(cols, values)) for values in zip(*lists)]

    def to_pandas(self, table: str | None = None) -> Any:
        """``table`` as a ``pandas.DataFrame`` (needs the ``polyprof[pandas]`` extra)."""
        pd = optional_import("pandas", f"{type(self).__name__}.to_pandas()")
        cols = self._table(table)
        return pd.DataFrame({k: v if isinstance(v, np.ndarray) else [_plain(x) for x in v] for k, v in cols.items()},
                            columns=list(cols))

    def to_arrow(self, table: str | None = None) -> Any:
        """``table`` as a ``pyarrow.Table`` (needs the ``polyprof[arrow]`` extra)."""
        pa = optional_import("pyarrow", f"{type(self).__name__}.to_arrow()")
        cols = self._table(table)
        return pa.table({k: pa.array(v if isinstance(v, np.ndarray) else [_plain(x) for x in v])
                         for k, v in cols.items()})

    def _summary(self) -> str:
        return f"{len(self._row_objects())} rows"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._summary()})"


@dataclass(frozen=True, kw_only=True)
class NodeFields:
    """The identity of a report node, field by field.

    ``name`` is what pprof prints (the fields below joined at the chosen
    granularity). ``function`` is the function's reported name and
    ``system_name`` its system (mangled) name; ``file`` the source file;
    ``line``/``column`` the source position (lines and addresses
    granularities, else 0); ``address`` the instruction address (addresses
    granularity, else 0); ``module`` the binary (mapping file) of the node's
    first location. Fields a granularity merges over are empty, except
    ``file``, ``system_name`` and ``module``, which come from the node's
    first function and location.
    """

    name: str
    function: str = ""
    system_name: str = ""
    file: str = ""
    line: int = 0
    column: int = 0
    address: int = 0
    module: str = ""


def node_fields(p: Profile, nodes: NodeMap, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """``NodeFields`` keyword arguments for report nodes ``ids`` of node map ``nodes``."""
    strs = p.strings
    fns = p.functions
    maps = p.mappings
    out: dict[int, dict[str, Any]] = {}
    for n in ids:
        info = nodes.infos[n]
        fn = int(nodes.functions[n]) if nodes.functions is not None else -1
        m = int(nodes.mappings[n]) if nodes.mappings is not None else -1
        out[n] = {
            "name": nodes.names[n],
            "function": info.name,
            "system_name": strs[fns.system_name[fn]] if fn >= 0 else "",
            "file": info.file or (os.path.normpath(strs[fns.filename[fn]]) if fn >= 0 and fns.filename[fn] else ""),
            "line": info.lineno,
            "column": info.column,
            "address": info.address,
            "module": strs[maps.filename[m]] if m >= 0 else info.objfile,
        }
    return out


@dataclass(frozen=True)
class ProfileSummary:
    """The facts about a profile a report header shows (pprof's File/Type/Time lines)."""

    source_format: str = ""
    file: str = ""          # main binary: the first mapping's file
    build_id: str = ""
    comments: tuple[str, ...] = ()
    doc_url: str = ""
    time_nanos: int = 0
    duration_nanos: int = 0
    merged_from: tuple[str, ...] = ()  # the profiles merged into this one (polyprof.selection)

    @classmethod
    def of(cls, p: Profile) -> ProfileSummary:
        """The summary of profile ``p``."""
        has = len(p.mappings) > 0
        merged = p.extras.get("merged_from")
        return cls(p.source_format, p.strings[p.mappings.filename[0]] if has else "",
                   p.strings[p.mappings.build_id[0]] if has else "", tuple(p.comments), p.doc_url,
                   p.time_nanos, p.duration_nanos,
                   tuple(map(str, merged)) if isinstance(merged, list) else ())
