"""polyprof info: what a profile file holds."""

from __future__ import annotations

import argparse
import json

from polyprof.cli import common

NAME = "info"
HELP = "summarise a profile: format, sample types, totals, sizes, time, losses, warnings"
EXAMPLES = """\
examples:
  polyprof info cpu.pb.gz
  polyprof info trace.perfetto-trace --format json | jq .extras
  polyprof info trace.perfetto-trace --profile 2       # one profile of a trace holding several
An input holding several profiles is listed profile by profile, numbered for
--profile N, each with the selectors that pick it; analyses merge those with
the same sample types.
The page is for people: totals in units, sample times relative to the start,
long lists counted. --format json has every value in full."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="profile file, '-' for standard input, or an http(s) URL")
    common.add_filter_flags(p)
    common.add_input_flags(p)
    common.add_output_format(p)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.info import info
    from polyprof.render.info import profile_heading
    from polyprof.selection import Choice

    if args.merge:
        listed = [Choice(1, common.load(args, env).profile)]
    else:  # an input holding several profiles is described profile by profile, numbered for --profile
        listed = common.load_all(args, env)
    summaries = [info(c.profile).as_dict() for c in listed]
    if len(summaries) > 1:
        for c, s in zip(listed, summaries):
            s["profile"], s["selectors"] = c.number, c.spelled_selectors(common.flag_spelling)
    if args.format == "json":
        body = summaries[0] if len(summaries) == 1 else {"profiles": summaries, "count": len(summaries)}
        env.out(json.dumps(body, indent=1, sort_keys=True))
    elif len(summaries) == 1:
        env.out(render(summaries[0]).rstrip("\n"))
    else:
        env.out(f"{args.input} holds {len(summaries)} profiles; analyses merge those with the same sample "
                "types, or pick with the selectors shown (--merge combines different kinds):")
        for c, s in zip(listed, summaries):
            labels = c.profile.extras.profile_labels
            env.out(f"\n[{c.number}] {profile_heading(labels, c.number)}")
            env.out(f"select with {' or '.join(c.spelled_selectors(common.flag_spelling))}")
            env.out(render(s).rstrip("\n"))
    return 0


def render(s: dict) -> str:
    """The human page of one summary (see polyprof.render.info)."""
    from polyprof.render.info import info_text

    return info_text(s)
