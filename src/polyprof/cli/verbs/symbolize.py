"""polyprof symbolize: turn address frames into functions, files and lines."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "symbolize"
HELP = "symbolize address frames with Breakpad .sym files and write the result"
EXAMPLES = """\
examples:
  polyprof symbolize uma.log --symbols syms/ -o uma.sampled.uma
  polyprof symbolize uma.log --symbols syms/ -o cpu.pb.gz       # and convert to pprof
  polyprof symbolize cpu.pb.gz --symbols syms/ -o cpu.sym.pb.gz --format json
Symbol files are found as DIR/<debug file>/<debug id>/<debug file>.sym (e.g.
libmonochrome.so/C215077FF8866CB110E4AD349CDA3B9B0/libmonochrome.so.sym);
build ids are converted to Breakpad debug ids. Modules without symbols keep
their address frames. Every reading verb also takes --symbols."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="profile file (any readable format)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file, or - for stdout")
    p.add_argument("--to", metavar="FORMAT",
                   help="output format (default: from OUT's extension, else the input's format)")
    common.add_input_flags(p)
    common.add_output_format(p)


def _target_format(args: argparse.Namespace, source_format: str) -> str | None:
    from polyprof.formats import registry

    if args.to:
        return args.to
    spec = registry.by_extension(args.output) if args.output != "-" else None
    return None if spec is not None and spec.can_write else source_format


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import json

    import polyprof
    from polyprof.errors import OptionsError

    if not args.symbols:
        raise OptionsError("symbolize needs --symbols DIR (a Breakpad symbol directory)")
    profile = common.read_profile(args, env)
    with env.status(f"writing {args.output}"):
        report = polyprof.write(profile, args.output, format=_target_format(args, profile.source_format))
    from polyprof.symbolize.apply import coverage

    stats = dict(profile.extras.get("symbolization", {}))
    # several profiles merged on reading: count over the merged tables
    stats["frames"], stats["symbolized"] = coverage(profile)
    stats["share"] = f"{100 * stats['symbolized'] / stats['frames']:.1f}%" if stats["frames"] else "0.0%"
    if args.format == "json":
        env.stderr.write(json.dumps({"symbolization": stats, **report.to_json()}) + "\n")
        return 0
    env.note(f"symbolized {stats.get('symbolized', 0)} of {stats.get('frames', 0)} address frames "
             f"({stats.get('share', '0.0%')}); {stats.get('modules_with_symbols', 0)} of "
             f"{stats.get('modules', 0)} modules had symbols")
    for warning in profile.warnings:
        if warning.startswith("no symbols for"):
            env.note(warning)
    if args.output != "-":
        env.note(f"wrote {args.output} ({report.target})")
    for line in report.lines():
        env.note(f"not kept by {report.target}: {line}")
    return 0
