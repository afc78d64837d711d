"""Checking user SQL before an engine sees it: ``--where`` predicates and ``store sql``.

A ``--where`` predicate is parsed with sqlglot (DuckDB dialect) and accepted
only if every node of it is on an allowlist: columns of ``profiles``
(unqualified), literals, comparisons, AND/OR/NOT, IN lists, BETWEEN,
LIKE/ILIKE, IS NULL, arithmetic, CAST, ``labels['key']`` and a few pure
functions (lower, upper, length, coalesce, regexp_matches, list_contains,
starts_with, ends_with, contains). No statements, no subqueries, no tables,
no other functions: so no DDL, no ``;``, nothing that reads files. The SQL
the engine runs is re-rendered from the checked tree, never pasted.

``store sql`` accepts one read-only query (SELECT / set operations / WITH)
over the store's views; tables must be those views or the query's own CTEs,
and file-reading or environment functions are refused. DuckDB additionally
runs with external access disabled outside the store directory (see
:mod:`polyprof.store.engine`), so a check missed here still cannot read
``/etc/passwd``.
"""

from __future__ import annotations

from typing import Any

from polyprof.errors import MissingDependencyError, OptionsError

__all__ = ["VIEWS", "check_query", "check_where"]

#: Views ``store sql`` may name.
VIEWS = ("profiles", "samples", "callsites", "frames", "functions", "mappings", "labelsets", "stacks", "rollup")

_FUNCTIONS = {"lower", "upper", "length", "coalesce", "regexp_matches", "regexplike", "list_contains",
              "arraycontains", "starts_with", "startswith", "ends_with", "endswith", "contains", "abs"}
_DENIED_FUNCTIONS = ("read_", "glob", "parquet_", "sniff_", "query", "getenv", "current_setting",
                     "duckdb_", "pragma_", "load", "install", "sqlite_", "iceberg_", "delta_", "http",
                     "reflect", "java_method", "input_file", "sys_", "system")


def _sqlglot():  # noqa: ANN202 - imported on use: --help must not load it
    try:
        import sqlglot
    except ImportError:
        raise MissingDependencyError("the store needs sqlglot: pip install 'polyprof[store]'", module="sqlglot",
                                     extra="store") from None
    import logging

    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # refusals are reported by us, in one line
    return sqlglot


def _parse_one(text: str, what: str) -> Any:
    sqlglot = _sqlglot()
    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except sqlglot.errors.SqlglotError as exc:
        first = str(exc).splitlines()[0]
        raise OptionsError(f"{what}: not valid SQL ({first})") from None
    if len(statements) != 1:
        raise OptionsError(f"{what}: give exactly one {'predicate' if what == '--where' else 'query'} "
                           f"(found {len(statements)} statements; ';' is not allowed)")
    return statements[0]


def check_where(text: str, columns: set[str], what: str = "--where") -> str:
    """The predicate ``text`` re-rendered in DuckDB SQL, or OptionsError saying what is refused."""
    from sqlglot import exp

    tree = _parse_one(text, what)
    allowed = (exp.And, exp.Or, exp.Not, exp.Paren, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
               exp.Is, exp.Null, exp.Boolean, exp.Literal, exp.Column, exp.Identifier, exp.Bracket, exp.In,
               exp.Between, exp.Like, exp.ILike, exp.Cast, exp.DataType, exp.Add, exp.Sub, exp.Mul, exp.Div,
               exp.Mod, exp.Neg, exp.DPipe, exp.Tuple, exp.Interval, exp.Var, exp.CurrentTimestamp)
    for node in tree.walk():
        if isinstance(node, exp.Column):
            if node.table:
                raise OptionsError(f"{what}: write column names without a table ({node.sql()!r})")
            if node.name not in columns:
                raise OptionsError(f"{what}: unknown column {node.name!r}; profiles has: "
                                   f"{', '.join(sorted(columns))} (labels['KEY'] for labels)")
        elif isinstance(node, allowed):
            continue
        elif isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else type(node).__name__).lower()
            if name not in _FUNCTIONS:
                raise OptionsError(f"{what}: function {name!r} is not allowed in a selection "
                                   f"(allowed: {', '.join(sorted(_FUNCTIONS))})")
        else:
            raise OptionsError(f"{what}: {_kind(node)} is not allowed; give a predicate on profiles "
                               "columns, e.g. \"version = '120' AND labels['channel'] = 'beta'\"")
    return tree.sql(dialect="duckdb")


def check_query(text: str, views: tuple[str, ...] = VIEWS) -> str:
    """One read-only query over ``views`` re-rendered in DuckDB SQL, or OptionsError."""
    from sqlglot import exp

    tree = _parse_one(text, "store sql")
    if not isinstance(tree, exp.Query):
        raise OptionsError(f"store sql: only queries are allowed (SELECT, WITH, UNION), not {_kind(tree)}")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    for node in tree.walk():
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier) or node.db or node.catalog:
                raise OptionsError(f"store sql: {node.sql(dialect='duckdb')!r} is not a store view; "
                                   f"use {', '.join(views)}")
            if node.name not in views and node.name not in ctes:
                raise OptionsError(f"store sql: unknown table {node.name!r}; the views are {', '.join(views)}")
        elif isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else type(node).__name__).lower()
            if name.startswith(_DENIED_FUNCTIONS) or isinstance(node, (exp.ReadCSV, exp.ReadParquet)):
                raise OptionsError(f"store sql: function {name!r} is not allowed (queries may only read the views)")
        elif isinstance(node, (exp.Command, exp.Pragma, exp.Set, exp.Create, exp.Drop, exp.Insert,
                               exp.Update, exp.Delete, exp.Copy, exp.Into)):
            raise OptionsError(f"store sql: {_kind(node)} is not allowed (read-only queries only)")
    return tree.sql(dialect="duckdb")


def _kind(node: Any) -> str:
    from sqlglot import exp

    if isinstance(node, (exp.Select, exp.Subquery, exp.Query)):
        return "a subquery"
    if isinstance(node, exp.Table):
        return f"a table reference ({node.sql()})"
    return f"{type(node).__name__.upper()} ({node.sql()[:40]})"
