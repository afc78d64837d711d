"""polyprof convert: write a profile in another format, reporting what is lost."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "convert"
HELP = "convert a profile to another format (and say what the target cannot hold)"
EXAMPLES = """\
examples:
  polyprof convert trace.perfetto-trace -o heap.pb.gz          # format from the extension
  polyprof convert perf.trace -o out.folded --to folded
  polyprof convert cpu.pb.gz -o - --to folded | flamegraph.pl > cpu.svg
  polyprof convert perf.trace -o out.folded --option thread=name --option jit --option kernel
  polyprof convert cpu.pb.gz -o cpu.uma --to chromium --option chromium_container=uma
writer options (--option KEY[=VALUE], repeatable):
  folded:   thread=auto|name|none, pid, tid, kernel, jit, addrs, unknown_style=STYLE, drop_leaf
  chromium: chromium_container=callstack|sampled|uma
The output is written atomically: on any error no partial file is left.
What the target cannot hold (or holds differently, e.g. a renamed sample type) is
listed on stderr; with --format json that loss report is printed on stdout as
{"target", "lost": {what: count}, "renamed": {"type/unit": "type/unit"}}, or on
stderr when the profile itself goes to stdout (-o -)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="profile file")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file, or - for stdout")
    p.add_argument("--to", metavar="FORMAT",
                   help="output format (default: from OUT's extension; see 'polyprof formats')")
    p.add_argument("--sample-index", metavar="NAME|N",
                   help="for single-value targets (folded...): which sample type to write")
    p.add_argument("--option", action="append", default=[], metavar="KEY[=VALUE]", type=_option,
                   help="a format-specific writer switch (see below); a bare KEY means true")
    common.add_filter_flags(p)
    common.add_input_flags(p)
    common.add_output_format(p)


def _option(text: str) -> tuple[str, str | bool]:
    key, sep, value = text.partition("=")
    if not key:
        raise argparse.ArgumentTypeError(f"expected KEY or KEY=VALUE, got {text!r}")
    return key, (value if sep else True)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import json

    import polyprof
    from polyprof.formats.options import WriteOptions

    profile = common.load(args, env).profile
    with env.status(f"writing {args.output}"):
        report = polyprof.write(profile, args.output, format=args.to,
                                options=WriteOptions(sample_index=args.sample_index, extra=dict(args.option)))
    if args.format == "json":  # the report is the result for scripts: stdout, unless the profile went there
        (env.stderr if args.output == "-" else env.stdout).write(json.dumps(report.to_json()) + "\n")
    else:
        if args.output != "-":
            env.note(f"wrote {args.output} ({report.target}, {len(profile.samples)} samples)")
        for line in report.lines():
            env.note(f"not kept by {report.target}: {line}")
    return 0
