"""polyprof diff: what changed between two profiles (and a CI gate on it)."""

from __future__ import annotations

import argparse
import os

from polyprof.cli import common

NAME = "diff"
HELP = "compare two profiles by function and by stack, absolute or normalised; gate CI on growth"
EXIT_GROWTH = 8
EXAMPLES = f"""\
examples:
  polyprof diff base.pb.gz new.pb.gz                         # raw values, biggest flat change first
  polyprof diff base.pb.gz new.pb.gz --normalize total --by both
  polyprof diff base.trace new.trace --normalize rate         # per second; different sampling rates compare
  polyprof diff base.pb.gz new.pb.gz --normalize total --fail-on-growth 2 --format json > diff.json
  polyprof diff base.pb.gz new.pb.gz --flame diff.html        # flame graph of NEW coloured by change
--normalize: none (raw), total (shares of each profile's total), rate (per
second of duration; counted samples are weighted by their sampling period).
--fail-on-growth PCT: exit with code {EXIT_GROWTH} when any function's share of
the total (flat, or cum with --growth-metric cum) grew by more than PCT
percentage points; the report is printed first."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", help="the profile to compare against (any readable format)")
    p.add_argument("new", help="the profile to compare")
    p.add_argument("--by", choices=("function", "stack", "both"), default="function",
                   help="rows are functions (flat and cum), whole stacks, or both (default function)")
    p.add_argument("--normalize", choices=("none", "total", "rate"), default="none",
                   help="none (default), total (shares) or rate (per second)")
    p.add_argument("--fail-on-growth", type=float, metavar="PCT",
                   help=f"exit {EXIT_GROWTH} if a function's share grew by more than PCT points")
    p.add_argument("--growth-metric", choices=("flat", "cum"), default="flat",
                   help="which share --fail-on-growth watches (default flat)")
    p.add_argument("--flame", metavar="OUT", help="also write a diff flame graph (.svg or .html)")
    p.add_argument("--base-sample-index", metavar="NAME|N",
                   help="the base's sample type, when its name differs from the new one's (--sample-index); "
                        "by default types pair by name, else by unit when each side has one of that unit")
    common.add_analysis_flags(p)
    common.add_filter_flags(p)
    common.add_input_flags(p)
    common.add_output_format(p)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.diff import diff
    from polyprof.render.diff import diff_json, diff_text

    options = common.analysis_options(args)
    base, new = common.load(args, env, args.base), common.load(args, env, args.new)
    result = diff(base, new, options, normalize=args.normalize, stacks=args.by != "function",
                  names=(args.base, args.new))
    for note in result.notes:
        env.note(note)
    grown = result.growth(args.fail_on_growth, args.growth_metric) if args.fail_on_growth is not None else []
    common.emit(env, args, lambda: diff_json(result, nodecount=args.nodecount, by=args.by, growth=grown,
                                             threshold=args.fail_on_growth),
                lambda: diff_text(result, nodecount=args.nodecount, by=args.by))
    if args.flame:
        _write_flame(args, env, base, new, options)
    if grown:
        names = ", ".join(f"{f.name} ({result.share_delta(*_metric(f, args.growth_metric)):+.2f})"
                          for f in grown[:5])
        env.note(f"{len(grown)} function(s) grew by more than {args.fail_on_growth:g} share points "
                 f"({args.growth_metric}): {names}")
        return EXIT_GROWTH
    return 0


def _metric(f, metric: str) -> tuple[int, int]:  # noqa: ANN001
    return (f.base_flat, f.new_flat) if metric == "flat" else (f.base_cum, f.new_cum)


def _write_flame(args: argparse.Namespace, env, base, new, options) -> None:  # noqa: ANN001
    import dataclasses

    from polyprof.analysis.flame import flame_tree
    from polyprof.cli.verbs.flame import KINDS
    from polyprof.formats.output import write_text_atomic
    from polyprof.errors import OptionsError
    from polyprof.analysis.diff import pair_sides
    from polyprof.render.flame import to_html, to_svg

    kind = KINDS.get(os.path.splitext(args.flame)[1].lower())
    if kind is None:
        raise OptionsError(f"--flame: cannot tell the output type from {args.flame!r}; use .svg or .html")
    _, (base, new), index = pair_sides([base, new], options, (args.base, args.new), [])
    tree = flame_tree(new, dataclasses.replace(options, sample_index=index), base=base)
    title = f"{os.path.basename(args.new)} vs {os.path.basename(args.base)}"
    write_text_atomic(args.flame, (to_svg if kind == "svg" else to_html)(tree, title=title))
    env.note(f"wrote {args.flame} ({kind} diff flame graph, {len(tree)} frames)")
