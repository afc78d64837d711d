"""polyprof merge: several profiles (any formats) into one."""

from __future__ import annotations

import argparse
import os

from polyprof.cli import common

NAME = "merge"
HELP = "merge profiles of any formats into one (units converted where they can be)"
EXAMPLES = """\
examples:
  polyprof merge a.pb.gz b.pb.gz c.pb.gz -o all.pb.gz
  polyprof merge run1.trace run2.trace -o both.pb.gz --label-inputs run
  polyprof merge cpu-us.pb.gz cpu-ns.pb.gz -o cpu.pb.gz --format json
Sample types must be of the same kinds; units of one family are converted to
the finest one (cpu/microseconds + cpu/nanoseconds -> nanoseconds), as
go tool pprof does. Every sample is kept; filters apply to every input.
The output is written atomically."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="profile files (any readable formats)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file, or - for stdout")
    p.add_argument("--to", metavar="FORMAT",
                   help="output format (default: from OUT's extension; see 'polyprof formats')")
    p.add_argument("--label-inputs", metavar="KEY",
                   help="label every sample with KEY=<input file name> so the inputs stay distinguishable")
    common.add_filter_flags(p)
    common.add_input_flags(p)
    common.add_output_format(p)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import json

    import polyprof
    from polyprof.model.merge import align_sample_types, merge
    from polyprof.model.profile import Label

    profiles = [common.load(args, env, path).profile for path in args.inputs]
    labels = [[Label(args.label_inputs, str=os.path.basename(path))] for path in args.inputs] \
        if args.label_inputs else None
    notes: list[str] = []
    merged = merge(align_sample_types(profiles, args.inputs, notes), labels)
    for note in dict.fromkeys(notes):
        env.note(note)
    with env.status(f"writing {args.output}"):
        report = polyprof.write(merged, args.output, format=args.to)
    if args.format == "json":
        summary = {"output": args.output, "format": report.target, "inputs": args.inputs,
                   "samples": len(merged.samples),
                   "sample_types": [{"type": vt.type, "unit": vt.unit, "total": t}
                                    for vt, t in zip(merged.sample_types, merged.totals())],
                   "not_kept": report.to_json()}
        text = json.dumps(summary, indent=1)
        if args.output == "-":
            env.stderr.write(text + "\n")  # stdout holds the profile itself
        else:
            env.out(text)
        return 0
    if args.output != "-":
        env.note(f"merged {len(profiles)} profiles into {args.output} ({report.target}, "
                 f"{len(merged.samples)} samples)")
    for line in report.lines():
        env.note(f"not kept by {report.target}: {line}")
    return 0
