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
    p.add_argument("input", help="profile file (any readable format; gzip is fine)")
    common.add_analysis_flags(p)
    common.add_input_flags(p)
    common.add_output_format(p)
    p.add_argument("--exact", action="store_true",
                   help="print raw values in the sample type's own unit instead of human units")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import json

    from polyprof.analysis.top import top
    from polyprof.render.top import top_json, top_text

    profile = common.read_profile(args, env)
    result = top(profile, common.analysis_options(args))
    if args.format == "json":
        env.out(json.dumps(top_json(result), indent=1))
    else:
        env.out(top_text(result, exact=args.exact).rstrip("\n"))
    return 0
