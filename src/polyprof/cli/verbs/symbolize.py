"""polyprof symbolize: turn address frames into functions, files, lines and inline frames."""

from __future__ import annotations

import argparse

from polyprof.cli import common

NAME = "symbolize"
HELP = "symbolize address frames (ELF/DWARF, debuginfod, Breakpad, R8 mappings) and write the result"
EXAMPLES = """\
examples:
  polyprof symbolize perf.trace -o perf.sym.trace --symbols out/debug/      # simpleperf, stripped binary
  polyprof symbolize heap.pftrace -o heap.pb.gz --debuginfod https://debuginfod.example.org
  polyprof symbolize uma.log -o uma.sampled.uma syms/                        # Breakpad .sym store
  polyprof symbolize app.pftrace -o app.pb.gz --mapping com.example=mapping.txt
  polyprof symbolize cpu.pb.gz -o cpu.sym.pb.gz --format json               # report for scripts

Where symbols are looked for, in this order (the first file with DWARF wins):
  1. --symbols paths and SOURCES: Breakpad <name>/<debug id>/<name>.sym, .build-id/ab/cdef....debug
     trees, DIR/<mapping path>, DIR/<file name>, then any ELF file under DIR with the build id;
  2. $POLYPROF_BINARY_PATH (else $PPROF_BINARY_PATH), searched as go tool pprof does;
  3. the mapping's own path on this machine, and its .gnu_debuglink;
  4. /usr/lib/debug (.build-id tree, <path>.debug, debuglink);
  5. debuginfod: $DEBUGINFOD_URLS and --debuginfod URLs (cached in $XDG_CACHE_HOME/polyprof;
     --offline reads the cache only).
DWARF is read with llvm-symbolizer when it is on PATH, else in pure Python (same answers); inline
frames, files and lines are filled in; names are demangled (--demangle). Stacks and values are
never changed. The report lists, per mapping, where its symbols were found, or which files to
provide. Every reading verb takes the same flags."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="profile file (any readable format)")
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="more symbol directories or files (same as --symbols)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file, or - for stdout")
    p.add_argument("--to", metavar="FORMAT",
                   help="output format (default: from OUT's extension, else the input's format)")
    common.add_input_flags(p)
    common.add_output_format(p)
    p.set_defaults(_trailing="sources")  # SOURCEs may also follow -o OUT (see cli.main)


def _target_format(args: argparse.Namespace, source_format: str) -> str | None:
    from polyprof.formats import registry

    if args.to:
        return args.to
    spec = registry.by_extension(args.output) if args.output != "-" else None
    return None if spec is not None and spec.can_write else source_format


def _combine(reports: list) -> dict:  # noqa: ANN001
    """One report for every profile of the input: per (file, build id), frames summed."""
    rows: dict[tuple[str, str], dict] = {}
    engines: set[str] = set()
    notes: list[str] = []
    for r in reports:
        engines.update(r.engines)
        notes.extend(n for n in r.notes if n not in notes)
        for m in r.mappings:
            row = rows.setdefault((m.file, m.build_id), {**m.to_json(), "frames": 0, "symbolized_before": 0,
                                                         "symbolized_after": 0})
            row["frames"] += m.frames
            row["symbolized_before"] += m.before
            row["symbolized_after"] += m.after
            row["found"] = row["found"] or m.source
    frames = sum(r["frames"] for r in rows.values())
    after = sum(r["symbolized_after"] for r in rows.values())
    return {"frames": frames, "symbolized_before": sum(r["symbolized_before"] for r in rows.values()),
            "symbolized": after, "share": f"{100 * after / frames:.1f}%" if frames else "0.0%",
            "mappings": list(rows.values()), "engines": sorted(engines), "notes": notes}


def _text(report: dict) -> list[str]:
    lines = [f"symbolized {report['symbolized']} of {report['frames']} address frames ({report['share']}; "
             f"{report['symbolized_before']} had names before)"
             + (f" with {', '.join(report['engines'])}" if report["engines"] else "")]
    for m in report["mappings"]:
        ident = f"{m['file']} ({m['build_id']})" if m["build_id"] else m["file"]
        counts = f"{m['symbolized_before']} -> {m['symbolized_after']} of {m['frames']} frames"
        if m["found"]:
            lines.append(f"  found    {ident}: {counts}; {m['found']}")
        elif m["symbolized_after"] < m["frames"]:
            lines.append(f"  missing  {ident}: {counts}; provide one of: {', '.join(m['looked_for'])}")
    lines.extend(f"  note: {n}" for n in report["notes"])
    return lines


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    import dataclasses
    import json

    import polyprof

    reports: list = []
    opts = dataclasses.replace(common.read_options(args), symbolize=True, on_symbolized=reports.append,
                               symbols=tuple(args.symbols or ()) + tuple(args.sources))
    with env.progress(f"reading and symbolizing {args.input}") as progress:
        profile = polyprof.read(args.input, format=args.input_format,
                                options=dataclasses.replace(opts, progress=progress))
    with env.status(f"writing {args.output}"):
        written = polyprof.write(profile, args.output, format=_target_format(args, profile.source_format))
    report = _combine(reports)
    if args.format == "json":
        text = json.dumps({"symbolization": report, **written.to_json()}, indent=1)
        if args.output == "-":
            env.stderr.write(text + "\n")
        else:
            env.out(text)
        return 0
    for line in _text(report):
        env.note(line)
    if args.output != "-":
        env.note(f"wrote {args.output} ({written.target})")
    for line in written.lines():
        env.note(f"not kept by {written.target}: {line}")
    return 0
