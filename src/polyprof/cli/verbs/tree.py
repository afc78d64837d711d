"""polyprof tree: every function with its callers and callees."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "tree"
HELP = "call graph as text: each function with its callers and callees (like go tool pprof -tree)"
EXAMPLES = """\
examples:
  polyprof tree cpu.pb.gz                         # the 80 heaviest functions
  polyprof tree cpu.pb.gz --focus 'http\\.' --nodecount 0 --format json
  polyprof tree heap.pb.gz --sample-index alloc_space --granularity lines
Above each function: its callers, with the weight of the calls and their share
of the function's cum; below it: its callees. Percentages in the function's
own row are of the total before filtering, as in pprof."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount="80, as pprof")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.tree import tree
    from polyprof.render.tree import tree_json, tree_text

    result = tree(common.load(args, env), common.analysis_options(args))
    common.emit(env, args, lambda: tree_json(result), lambda: tree_text(result, exact=args.exact))
    return 0
