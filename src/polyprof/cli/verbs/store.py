"""polyprof store: ingest many profiles into a Parquet store and query them as one.

The subcommands' flags are defined here; what each does is in
``polyprof.cli.store_commands`` (so ``--help`` imports neither).
"""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "store"
HELP = "a fleet store: ingest thousands of profiles (any format) into Parquet, query them with SQL engines"
EXAMPLES = """\
examples:
  polyprof store ingest fleet/ profiles/ 'more/*.pb.gz' --label env=prod --jobs 2
  polyprof store info fleet/
  polyprof store top fleet/ --where "version = '120' AND labels['channel'] = 'beta'"
  polyprof store top fleet/ --where "process = 'com.example.app'" --thread '^main$' --format json
  polyprof store diff fleet/ --base-where "version = '119'" --where "version = '120'" --normalize total
  polyprof store flame fleet/ --where "labels['tenant'] = '42'" -o tenant42.html
  polyprof store export fleet/ --where "app = 'server'" -o merged.pb.gz     # go tool pprof reads it
  polyprof store sql fleet/ "SELECT app, version, sum(n_samples) FROM profiles GROUP BY ALL"
  polyprof store ls fleet/ --from 2024-05-01 --to 2024-05-02
  polyprof store compact fleet/
The store is a directory of Parquet files; polyprof-store.json lists the live
ones. --where is a SQL predicate on the profiles table: format, time, app,
version, process, platform, sample_type, source, build_ids, labels['KEY'], ...
('polyprof store ls' shows them). Queries run on DuckDB, or on Apache Spark
with --engine spark (pip install 'polyprof[spark]' and a Java runtime).
Exit codes as for the other verbs; ingest exits 2 when any file failed."""

REPORTS = {
    "top": "functions by flat and cumulative weight over the selected profiles",
    "tree": "call tree (callers and callees of every function) over the selected profiles",
    "peek": "callers and callees of the functions matching REGEX over the selected profiles",
    "traces": "every distinct sample (stack, labels, value) of the selected profiles",
    "flame": "flame graph (.svg or .html) of the selected profiles",
}


def _int_set(text: str) -> frozenset[int]:
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--label takes KEY=VALUE, got {text!r}")
    return key, value


def add_store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="the store directory")


def add_engine_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="SQL engine: duckdb (embedded, default) or spark (PySpark; needs Java)")
    g.add_argument("--spark-master", metavar="URL",
                   help="Spark master for --engine spark (default local[2]; e.g. spark://host:7077)")


def add_cohort_flags(p: argparse.ArgumentParser, *, where_required: bool = False) -> None:
    g = p.add_argument_group("selection")
    g.add_argument("--where", metavar="SQL", required=where_required,
                   help="SQL predicate on profiles columns and labels, e.g. "
                        "\"version = '120' AND labels['channel'] = 'beta'\" (default: every profile)")
    g.add_argument("--from", dest="time_from", metavar="TIME",
                   help="only samples at or after TIME (ISO date/time in UTC, or 1714550400s)")
    g.add_argument("--to", dest="time_to", metavar="TIME", help="only samples before TIME")


def _report_flags(p: argparse.ArgumentParser, *, nodecount: int | None = 25) -> None:
    add_store_arg(p)
    add_cohort_flags(p)
    common.add_analysis_flags(p, nodecount=nodecount)
    common.add_filter_flags(p)
    g = p.add_argument_group("sample selection")
    g.add_argument("--pid", type=_int_set, metavar="PID[,PID]", help="keep only these processes")
    g.add_argument("--tid", type=_int_set, metavar="TID[,TID]", help="keep only these threads")
    add_engine_flags(p)


def _output_flags(p: argparse.ArgumentParser, *, exact: bool = True) -> None:
    common.add_output_format(p)
    p.add_argument("-o", "--output", metavar="OUT", help="write the report to OUT (atomically) instead of stdout")
    if exact:
        p.add_argument("--exact", action="store_true",
                       help="print raw values in the sample type's own unit instead of human units")


def add_table_output(p: argparse.ArgumentParser, *, limit: int) -> None:
    """``--format table|csv|json`` and ``--limit N`` of the verbs printing rows (sql, ls)."""
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output (default table)")
    p.add_argument("--limit", type=int, default=limit, metavar="N",
                   help=f"table output: at most N rows (0 = all; default {limit})")


def _add_reports(sub: argparse._SubParsersAction) -> None:
    for name, text in REPORTS.items():
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _report_flags(p, nodecount=25 if name in ("top", "tree") else None)
        if name == "peek":
            p.add_argument("regex", metavar="REGEX", help="regular expression on report names")
        if name == "flame":
            p.add_argument("-o", "--output", required=True, metavar="OUT", help="output .svg or .html file")
            p.add_argument("--title", help="title above the graph (default: the selection)")
            p.add_argument("--max-nodes", type=int, default=None, metavar="N",
                           help="keep at most N frames, the widest first (default 30000; 0 = all)")
            p.add_argument("--base-where", metavar="SQL", help="also colour by change against this selection")
        else:
            _output_flags(p, exact=name not in ("traces",))
    p = sub.add_parser("diff", help="compare two selections of the store (like polyprof diff)")
    _report_flags(p)
    p.add_argument("--base-where", metavar="SQL", required=True, help="the selection to compare against")
    p.add_argument("--by", choices=("function", "stack", "both"), default="function",
                   help="rows are functions, whole stacks, or both (default function)")
    p.add_argument("--normalize", choices=("none", "total", "rate"), default="none",
                   help="none (default), total (shares of each selection) or rate (per profiled second)")
    p.add_argument("--fail-on-growth", type=float, metavar="PCT",
                   help="exit 8 if a function's share grew by more than PCT points")
    p.add_argument("--growth-metric", choices=("flat", "cum"), default="flat",
                   help="which share --fail-on-growth watches (default flat)")
    _output_flags(p, exact=False)


def _add_management(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="add profile files (any format; files, directories, globs) to a store",
                       description="Add profile files to STORE (created if needed). Atomic: an interrupted "
                                   "ingest leaves the store as it was. Files already in the store are skipped.")
    add_store_arg(p)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, directories (recursive) or glob patterns")
    p.add_argument("--label", type=_label, action="append", default=[], metavar="KEY=VALUE",
                   help="label every ingested profile (repeatable; app=, version=, process=, platform= "
                        "also set those columns)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="parallel reader processes (default 1)")
    p.add_argument("--strict", action="store_true", help="stop at the first unreadable file; publish nothing")
    common.add_output_format(p)
    p = sub.add_parser("export", help="the selected profiles merged into one file (any writable format)")
    add_store_arg(p)
    add_cohort_flags(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file (format from its extension)")
    p.add_argument("--output-format", metavar="FORMAT", help="output format (default: from OUT's extension)")
    add_engine_flags(p)
    p = sub.add_parser("sql", help="run one read-only SQL query (DuckDB dialect) over the store's views")
    add_store_arg(p)
    p.add_argument("query", metavar="QUERY", help="SELECT over profiles, samples, callsites, frames, functions, "
                                                  "mappings, labelsets, stacks, rollup")
    add_table_output(p, limit=1000)
    add_engine_flags(p)
    p = sub.add_parser("info", help="counts, size, time span, formats, sample types and top labels")
    add_store_arg(p)
    common.add_output_format(p)
    add_engine_flags(p)
    p = sub.add_parser("ls", help="list the profiles of a selection, newest first")
    add_store_arg(p)
    add_cohort_flags(p)
    add_table_output(p, limit=100)
    add_engine_flags(p)
    p = sub.add_parser("compact", help="merge small files and drop unused dictionary rows (answers unchanged)")
    add_store_arg(p)
    common.add_output_format(p)
    p = sub.add_parser("symbolize", help="fill function names of address-only frames from a symbol directory")
    add_store_arg(p)
    p.add_argument("--symbols", required=True, metavar="DIR", help="where symbols are: binaries and debug files (by build id, .build-id trees), "
                   "Breakpad .sym stores, R8/ProGuard mappings (see 'polyprof symbolize --help')")
    common.add_output_format(p)
    p = sub.add_parser("rm", help="remove the profiles a --where predicate selects")
    add_store_arg(p)
    p.add_argument("--where", required=True, metavar="SQL", help="SQL predicate on profiles (see ls)")
    common.add_output_format(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="store_command", metavar="COMMAND", title="commands")
    sub.required = True
    _add_management(sub)
    _add_reports(sub)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.cli import store_commands

    return store_commands.run(args, env)
