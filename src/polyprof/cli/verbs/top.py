"""polyprof top: the functions with the most flat (self) weight."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "top"
HELP = "functions by flat and cumulative weight (like go tool pprof -top)"
EXAMPLES = """\
examples:
  polyprof top cpu.pb.gz                      # default sample type, 25 rows
  polyprof top heap.pb.gz --sample-index alloc_space --nodecount 0
  polyprof top trace.perfetto-trace --pid 1234 --format json
columns: flat = weight of samples whose leaf is the function; cum = weight of
samples with the function anywhere on the stack (recursion counted once)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount="all rows left by --nodefraction, as pprof")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.top import top
    from polyprof.render.top import top_json, top_text

    result = top(common.load_for_top(args, env), common.analysis_options(args))
    common.emit(env, args, lambda: top_json(result), lambda: top_text(result, exact=args.exact))
    return 0
