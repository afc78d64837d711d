"""polyprof peek: callers and callees of the functions matching a regular expression."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "peek"
HELP = "callers and callees of the functions matching REGEX (like go tool pprof -peek)"
EXAMPLES = """\
examples:
  polyprof peek cpu.pb.gz 'runtime\\.mallocgc$'
  polyprof peek cpu.pb.gz 'json\\.' --focus handler --format json
Every function is ranked (no --nodecount); only the matching ones are printed.
Exits with code 6 when no function matches."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, graph=False)
    p.add_argument("regex", metavar="REGEX", help="regular expression on report names (functions, files...)")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.tree import peek
    from polyprof.errors import OptionsError
    from polyprof.render.tree import tree_json, tree_text

    result = peek(common.load(args, env), args.regex, common.analysis_options(args))
    if not result.selected:
        raise OptionsError(f"peek: no function matches {args.regex!r}")
    common.emit(env, args, lambda: tree_json(result), lambda: tree_text(result, exact=args.exact))
    return 0
