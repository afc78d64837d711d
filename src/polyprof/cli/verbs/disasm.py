"""polyprof disasm: machine instructions of the matching functions with their weights."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "disasm"
HELP = "annotated disassembly of the functions matching REGEX (like go tool pprof -disasm; needs objdump)"
EXAMPLES = """\
examples:
  polyprof disasm cpu.pb.gz 'main\\.spin$'
  polyprof -disasm='crc32' cpu.pb.gz
The profile's binaries must be on this machine at the paths the profile
records; binutils' nm and objdump (Debian package binutils) do the reading.
Each instruction shows flat and cum weight ('.' for none) and, where it
changes, the function and source line it comes from."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount=None, exact=False, graph=False)
    p.add_argument("regex", metavar="REGEX", help="regular expression on symbol names")


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.disasm import disassembly
    from polyprof.render.disasm import disasm_text

    result = disassembly(common.load(args, env), args.regex, common.analysis_options(args))
    if args.format == "json":
        import dataclasses

        common.emit(env, args, lambda: dataclasses.asdict(result), str)
    else:
        common.write_report(env, args, disasm_text(result, unit=args.unit))
    return 0
