"""polyprof graph: the call graph as Graphviz DOT, or drawn as SVG/PNG/PDF."""

from __future__ import annotations

import argparse
import os

from polyprof.cli import common

NAME = "graph"
HELP = "call graph as Graphviz DOT, or SVG/PNG/PDF drawn by 'dot' (like go tool pprof -dot/-svg)"
EXAMPLES = """\
examples:
  polyprof graph cpu.pb.gz -o cpu.dot            # DOT text (no Graphviz needed)
  polyprof graph cpu.pb.gz -o cpu.svg            # drawn by Graphviz's dot
  polyprof graph heap.pb.gz -alloc_space --focus json -o heap.pdf
  polyprof -svg cpu.pb.gz > cpu.svg              # pprof's spelling
Boxes are functions (size: flat weight; colour: cum weight), arrows are calls
(width: weight; dotted: the call passes through hidden functions). Nodes and
calls are trimmed as pprof trims them (--nodecount 80, --nodefraction 0.005,
--edgefraction 0.001); label boxes show the heaviest labels of a function."""

KINDS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png", ".pdf": "pdf"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_report_arguments(p, nodecount="80, as pprof", exact=False)
    p.add_argument("--to", choices=("dot", "svg", "png", "pdf"),
                   help="output type (default: from -o's extension, else dot)")


def _kind(args: argparse.Namespace) -> str:
    if args.to:
        return args.to
    if args.output and args.output != "-":
        return KINDS.get(os.path.splitext(args.output)[1].lower(), "dot")
    return "dot"


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.callgraph import call_graph
    from polyprof.errors import OptionsError
    from polyprof.render.dot import dot_text, render_image

    kind = _kind(args)
    to_stdout = not args.output or args.output == "-"
    if kind != "dot" and to_stdout and env.stdout.isatty():
        raise OptionsError(f"{kind} is binary: write it to a file with -o graph.{kind} or redirect stdout")
    result = call_graph(common.load(args, env), common.analysis_options(args))
    if args.format == "json":
        import dataclasses

        common.emit(env, args, lambda: {k: v for k, v in dataclasses.asdict(result).items() if k != "summary"}, str)
        return 0
    title = os.path.basename(result.summary.file) if result.summary is not None else ""
    text = dot_text(result, title=title)
    if kind == "dot":
        common.write_report(env, args, text)
        return 0
    data = render_image(text, kind)
    if to_stdout:
        env.binary_stdout().write(data)
        return 0
    from polyprof.formats.output import atomic_output

    with atomic_output(args.output) as fh:
        fh.write(data)
    env.note(f"wrote {args.output} ({kind}, {len(result.nodes)} nodes, {len(result.edges)} calls)")
    return 0
