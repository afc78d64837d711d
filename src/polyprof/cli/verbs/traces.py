"""polyprof traces: every sample with its stack, value and labels."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "traces"
HELP = "every sample's stack, value and labels (like go tool pprof -traces)"
EXAMPLES = """\
examples:
  polyprof traces cpu.pb.gz | less
  polyprof traces cpu.pb.gz --tagfocus worker=a --focus leaf
  polyprof traces trace.perfetto-trace --tid 1234 --format json
Stacks are printed leaf first. Samples with the same stack and labels are
shown once with their values summed, as go tool pprof does."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, exact=False, graph=False)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import json

    from polyprof.analysis.traces import traces
    from polyprof.render.traces import traces_json, traces_lines

    result = traces(common.load(args, env), common.analysis_options(args))
    if args.format == "json":
        common.write_report(env, args, json.dumps(traces_json(result), indent=1))
    elif args.output and args.output != "-":
        common.write_report(env, args, "\n".join(traces_lines(result)))
    else:  # streamed: profiles can have many samples
        write = env.stdout.write
        for line in traces_lines(result):
            write(line + "\n")
    return 0
