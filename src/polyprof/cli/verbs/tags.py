"""polyprof tags: every label key and value with the weight of the samples carrying it."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "tags"
HELP = "label keys and values with their share of the weight (like go tool pprof -tags)"
EXAMPLES = """\
examples:
  polyprof tags cpu.pb.gz                         # every key, its values and their shares
  polyprof tags heap.pb.gz -alloc_space           # allocation sizes ('bytes') by allocated space
  polyprof tags cpu.pb.gz --taghide profile_id --format json
Numeric labels are shown in their unit (1kB, 10ms); a sample adds its weight
once per value it carries, so a key's total can exceed the profile's."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, exact=False, graph=False)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.tags_report import tag_report
    from polyprof.render.tags import tags_json, tags_text

    result = tag_report(common.load(args, env), common.analysis_options(args))
    if args.format == "json":
        common.emit(env, args, lambda: tags_json(result), str)
    elif result.rows or (args.output and args.output != "-"):  # pprof ends it with an empty line
        common.write_report(env, args, tags_text(result) if result.rows else "")
    return 0
