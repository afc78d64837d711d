"""polyprof dump: the canonical text dump of a profile."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "dump"
HELP = "print the canonical, stable text dump of a profile"
EXAMPLES = """\
examples:
  polyprof dump cpu.pb.gz | less
  polyprof dump a.pb.gz > a.txt && polyprof dump b.pb.gz > b.txt && diff a.txt b.txt
The dump names frames by function, file and line and never shows internal ids,
so two files with equal dumps hold the same data."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="profile file")
    common.add_filter_flags(p)
    common.add_input_flags(p)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.model.dump import dump_lines

    profile = common.load(args, env).profile
    write = env.stdout.write
    for line in dump_lines(profile):
        write(line + "\n")
    return 0
