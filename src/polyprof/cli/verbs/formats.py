"""polyprof formats: the formats polyprof reads and writes."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "formats"
HELP = "list the formats polyprof reads and writes"
EXAMPLES = """\
examples:
  polyprof formats
  polyprof formats --format json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_output_format(p)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import json

    from polyprof.formats import registry

    specs = registry.available()
    if args.format == "json":
        env.out(json.dumps([{"name": f.name, "read": f.can_read, "write": f.can_write,
                             "extensions": list(f.extensions), "help": f.help} for f in specs], indent=1))
        return 0
    env.out(f"{'format':<11} {'read':<5} {'write':<6} {'extensions':<34} description")
    for f in specs:
        env.out(f"{f.name:<11} {'yes' if f.can_read else '-':<5} {'yes' if f.can_write else '-':<6} "
                f"{' '.join(f.extensions):<34} {f.help}")
    return 0
