"""polyprof raw: the profile listed as go tool pprof -raw lists it."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "raw"
HELP = "the samples, locations and mappings as text (like go tool pprof -raw)"
EXAMPLES = """\
examples:
  polyprof raw cpu.pb.gz | less
  polyprof raw heap.pb.gz --focus 'json\\.' -o heap.raw.txt
Samples with equal stacks and labels are shown once, summed; locations and
mappings are numbered as pprof numbers them (in order of first use), so the
text equals go tool pprof's. 'polyprof dump' is polyprof's own, complete
text form of a profile.
  polyprof raw --as-parsed gobench.heap    # as pprof's parser returns it
--as-parsed lists every sample as read (nothing summed, empty stacks kept)
and every location and mapping in table order, with line columns: what
google/pprof's Profile.String() prints after Parse (its testdata goldens)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, exact=False, graph=False)
    p.add_argument("--as-parsed", action="store_true",
                   help="the profile as read, before pprof's merge (pprof's Profile.String() after Parse)")


def run(args: argparse.Namespace, env) -> int:
    from polyprof.analysis.raw import raw
    from polyprof.render.raw import raw_text

    result = raw(common.load(args, env), common.analysis_options(args), as_parsed=args.as_parsed)
    if args.format == "json":
        import dataclasses

        common.emit(env, args, lambda: dataclasses.asdict(result), str)
    else:
        common.write_report(env, args, raw_text(result, columns=args.as_parsed))
    return 0
