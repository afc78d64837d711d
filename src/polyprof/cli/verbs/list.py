"""polyprof list: source lines of the matching functions with their weights."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "list"
HELP = "annotated source of the functions matching REGEX (like go tool pprof -list)"
EXAMPLES = """\
examples:
  polyprof list cpu.pb.gz 'main\\.busyLoop'
  polyprof list cpu.pb.gz 'json\\.' --source-path ~/src/myapp --trim-path /build/
  polyprof -list='pprof\\.Do' heap.pb.gz -alloc_space
Each line shows flat and cum weight ('.' for none). Source files are found
as pprof finds them: absolute paths as they are, relative ones under
--source-path (default: the current directory) and its parents; --trim-path
strips the build machine's prefix first."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, exact=False, graph=False)
    p.add_argument("regex", metavar="REGEX", help="regular expression on function names")
    p.add_argument("--source-path", default="", metavar="DIR[:DIR]",
                   help="where to look for source files (default: the current directory)")
    p.add_argument("--trim-path", default="", metavar="PREFIX[:PREFIX]",
                   help="path prefixes to remove from the profile's file names before looking")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.source import source_listing
    from polyprof.render.source import list_text

    result = source_listing(common.load(args, env), args.regex, common.analysis_options(args),
                            source_path=args.source_path, trim_path=args.trim_path)
    if args.format == "json":
        import dataclasses

        common.emit(env, args, lambda: dataclasses.asdict(result), str)
    else:
        common.write_report(env, args, list_text(result, unit=args.unit))
    return 0
