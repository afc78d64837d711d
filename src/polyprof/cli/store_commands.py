"""What each ``polyprof store`` subcommand does (flags: ``polyprof.cli.verbs.store``).

The analyses come from the store's library API (``polyprof.store.open``),
which returns the single-file result objects; they are printed by the same
renderers as ``polyprof top/tree/peek/traces/flame/diff``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from polyprof.cli import common
from polyprof.errors import OptionsError

__all__ = ["run"]

EXIT_GROWTH = 8


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    handler = _COMMANDS[args.store_command]
    if args.store_command in ("ingest", "compact"):
        return handler(args, env)
    import polyprof.store

    with polyprof.store.open(args.store, engine=getattr(args, "engine", "duckdb"),
                             spark_master=getattr(args, "spark_master", None)) as store:
        return handler(args, env, store)


# ---------------------------------------------------------------- output

def _emit(env, args: argparse.Namespace, to_json: Callable[[], Any], to_text: Callable[[], str]) -> None:  # noqa: ANN001
    from polyprof.cli.tables import json_default

    text = json.dumps(to_json(), indent=1, default=json_default) if args.format == "json" else to_text().rstrip("\n")
    out = getattr(args, "output", None)
    if out and out != "-":
        from polyprof.formats.output import write_text_atomic

        write_text_atomic(out, text + "\n")
        env.note(f"wrote {out}")
    else:
        env.out(text)


def _options(args: argparse.Namespace):  # noqa: ANN202
    return common.analysis_options(args)


def _cohort(args: argparse.Namespace) -> dict[str, Any]:
    return {"where": args.where, "time_from": args.time_from, "time_to": args.time_to}


def _warn_unmatched(env, result: Any) -> None:  # noqa: ANN001
    for name in getattr(result, "unmatched", lambda: [])():
        env.note(f"warning: --{name.replace('_', '-')} matched nothing")


# ---------------------------------------------------------------- reports

def _top(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.analysis.top import top
    from polyprof.render.top import top_json, top_text

    fr = store.load(**_cohort(args), options=_options(args))
    _warn_unmatched(env, fr)
    result = top(fr, _options(args))
    _emit(env, args, lambda: top_json(result), lambda: top_text(result, exact=args.exact))
    return 0


def _tree(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.analysis.tree import peek, tree
    from polyprof.render.tree import tree_json, tree_text

    fr = store.load(**_cohort(args), options=_options(args))
    _warn_unmatched(env, fr)
    if args.store_command == "peek":
        result = peek(fr, args.regex, _options(args))
        if not result.selected:
            raise OptionsError(f"peek: no function matches {args.regex!r}")
    else:
        result = tree(fr, _options(args))
    _emit(env, args, lambda: tree_json(result), lambda: tree_text(result, exact=args.exact))
    return 0


def _traces(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.render.traces import traces_json, traces_lines

    result = store.traces(_options(args), **_cohort(args))
    _emit(env, args, lambda: traces_json(result), lambda: "\n".join(traces_lines(result)))
    return 0


def _flame(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.cli.verbs.flame import KINDS
    from polyprof.formats.output import write_text_atomic
    from polyprof.render.flame import to_html, to_svg

    kind = KINDS.get(os.path.splitext(args.output)[1].lower())
    if kind is None:
        raise OptionsError(f"cannot tell the output type from {args.output!r}; use .svg or .html")
    with env.status("reducing and laying out the flame graph"):
        tree = store.flame(_options(args), base_where=args.base_where, max_nodes=args.max_nodes, **_cohort(args))
    title = args.title or f"{os.path.basename(os.path.normpath(args.store))}: {args.where or 'all profiles'}"
    write_text_atomic(args.output, (to_svg if kind == "svg" else to_html)(tree, title=title))
    env.note(f"wrote {args.output} ({kind}, {len(tree)} frames)")
    return 0


def _diff(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.render.diff import diff_json, diff_text

    result = store.diff(args.base_where, args.where, _options(args), normalize=args.normalize,
                        stacks=args.by != "function", time_from=args.time_from, time_to=args.time_to)
    grown = result.growth(args.fail_on_growth, args.growth_metric) if args.fail_on_growth is not None else []
    _emit(env, args, lambda: diff_json(result, nodecount=args.nodecount, by=args.by, growth=grown,
                                       threshold=args.fail_on_growth),
          lambda: diff_text(result, nodecount=args.nodecount, by=args.by))
    if grown:
        env.note(f"{len(grown)} function(s) grew by more than {args.fail_on_growth:g} share points "
                 f"({args.growth_metric}): {', '.join(f.name for f in grown[:5])}")
        return EXIT_GROWTH
    return 0


# ---------------------------------------------------------------- data

def _export(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    with env.status(f"exporting {args.output}"):
        profile = store.profile(**_cohort(args))
        import polyprof

        report = polyprof.write(profile, args.output, format=args.output_format)
    if args.output != "-":
        env.note(f"exported {len(profile.samples)} samples ({', '.join(map(str, profile.sample_types))}) "
                 f"to {args.output} ({report.target})")
    for line in report.lines():
        env.note(f"not kept by {report.target}: {line}")
    return 0


def _table(env, args: argparse.Namespace, table: Any, limit: int) -> None:  # noqa: ANN001
    from polyprof.cli.tables import arrow_csv, arrow_text, json_default

    if args.format == "json":
        env.out(json.dumps(table.to_pylist(), indent=1, default=json_default))
    elif args.format == "csv":
        env.out(arrow_csv(table))
    else:
        env.out(arrow_text(table, limit))


def _sql(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    _table(env, args, store.sql(args.query), args.limit)
    return 0


def _ls(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.store.info import LS_COLUMNS

    _table(env, args, store.profiles(**_cohort(args), columns=LS_COLUMNS), args.limit)
    return 0


def _info(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    from polyprof.cli.tables import info_text

    info = store.info()
    _emit(env, args, info.to_json, lambda: info_text(info))
    return 0


def _rm(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    n = store.rm(args.where)
    _emit(env, args, lambda: {"removed_profile_rows": n}, lambda: f"removed {n} profile row(s)")
    return 0


def _symbolize(args: argparse.Namespace, env, store) -> int:  # noqa: ANN001
    result = store.symbolize(args.symbols)
    _emit(env, args, lambda: result,
          lambda: f"symbolized {result['symbolized']} of {result['frames']} address-only frame(s)"
          + _missing_line(result.get("missing", [])))
    return 0


def _missing_line(missing: list[dict]) -> str:
    """'; no symbols for N module(s): a (build id), ...' naming what to add to the symbol directory."""
    if not missing:
        return ""
    named = [f"{m['file']} ({m['build_id']})" if m["build_id"] else m["file"] for m in missing[:5]]
    return f"; no symbols for {len(missing)} module(s): {', '.join(named)}" + (", ..." if len(missing) > 5 else "")


def _compact(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.store.maintain import compact

    with env.status(f"compacting {args.store}"):
        r = compact(args.store)
    _emit(env, args, r.to_json, lambda: f"{r.files_before} -> {r.files_after} files, "
                                        f"{r.bytes_before / 2**20:.1f} -> {r.bytes_after / 2**20:.1f} MiB")
    return 0


# ---------------------------------------------------------------- ingest

def _ingest(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import polyprof.store

    bar = _IngestProgress(env) if env.interactive and args.format != "json" else None
    try:
        report = polyprof.store.ingest(args.store, args.paths, labels=dict(args.label), jobs=args.jobs,
                                       strict=args.strict, progress=bar.update if bar else None,
                                       on_failure=lambda path, reason: _failed(env, bar, reason))
    finally:
        if bar is not None:
            bar.clear()
    if args.format == "json":
        env.out(json.dumps(report.to_json(), indent=1))
    else:
        rate = report.samples / report.seconds if report.seconds else 0.0
        env.note(f"ingested {report.ingested} file(s), {report.profiles} profile(s), {report.samples} samples "
                 f"in {report.seconds:.1f}s ({_per_second(rate)} samples/s); {len(report.skipped)} already "
                 f"in the store, {len(report.failed)} failed"
                 + ("" if report.published or not report.failed else "; nothing was published"))
    return report.exit_code


def _per_second(rate: float) -> str:
    """1.23M, 45.6k or 789: a rate people read at a glance."""
    return f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:.1f}k" if rate >= 1e3 else f"{rate:.0f}"


def _failed(env, bar, reason: str) -> None:  # noqa: ANN001
    if bar is not None:
        bar.clear()
    env.note(f"skipped {reason}")


class _IngestProgress:
    """``ingesting [####....] 120/400 files  31 files/s  1.2M samples/s`` on a terminal."""

    def __init__(self, env) -> None:  # noqa: ANN001
        self.env, self.start, self.last = env, time.monotonic(), 0.0

    def update(self, report: Any, total: int) -> None:
        now = time.monotonic()
        done = report.ingested + len(report.failed)
        if now - self.last < 0.1 and done < total:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        filled = int(20 * done / total) if total else 20
        line = (f"\ringesting [{'#' * filled}{'.' * (20 - filled)}] {done}/{total} files  "
                f"{done / elapsed:.0f} files/s  {_per_second(report.samples / elapsed)} samples/s"
                + (f"  {len(report.failed)} failed" if report.failed else ""))
        self.env.stderr.write(line)
        self.env.stderr.flush()

    def clear(self) -> None:
        self.env.stderr.write("\r" + " " * 100 + "\r")
        self.env.stderr.flush()


_COMMANDS: dict[str, Callable[..., int]] = {
    "ingest": _ingest, "compact": _compact, "top": _top, "tree": _tree, "peek": _tree, "traces": _traces,
    "flame": _flame, "diff": _diff, "export": _export, "sql": _sql, "ls": _ls, "info": _info, "rm": _rm,
    "symbolize": _symbolize,
}
