"""polyprof validate: how far a profile can be trusted."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "validate"
HELP = "quality report: lost samples, unwinding failures, truncated stacks, unsymbolized frames, bad references"
EXIT_PROBLEMS = 9
EXAMPLES = f"""\
examples:
  polyprof validate perf.trace
  polyprof validate cpu.pb.gz --format json | jq .problems
  polyprof validate cpu.pb.gz --strict || echo "profile has quality problems"
A file that cannot be read at all fails as every verb does (exit 2-5).
With --strict, exit {EXIT_PROBLEMS} when any problem is found."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, exact=False, graph=False)
    p.add_argument("--strict", action="store_true", help=f"exit {EXIT_PROBLEMS} when a problem is found")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.validate import validate
    from polyprof.render.validate import validate_json, validate_text

    report = validate(common.load(args, env), common.analysis_options(args))
    common.emit(env, args, lambda: validate_json(report), lambda: validate_text(report))
    return EXIT_PROBLEMS if args.strict and report.problems() else 0
