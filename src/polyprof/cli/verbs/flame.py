"""polyprof flame: a flame graph as static SVG or self-contained interactive HTML."""

from __future__ import annotations

import argparse
import os

from polyprof.cli import common

NAME = "flame"
HELP = "flame graph as SVG (static) or HTML (interactive, one self-contained file)"
EXAMPLES = """\
examples:
  polyprof flame cpu.pb.gz -o cpu.html                  # zoom, search, flame/icicle, tooltips
  polyprof flame perf.trace -o perf.svg --sample-index cpu-clock
  polyprof flame heap.pb.gz -o heap.svg --granularity lines --title "heap, by line"
  polyprof flame trace.pftrace -o t.html --thread RenderThread --hide '^libc'
The file type follows the extension of -o (.svg, .html, .htm) or --to. In the
page: click a frame to zoom (Esc resets), type a regexp to highlight matches
and see their share, 'callers' inverts the stacks; the view is kept in the URL
(#q=..&zoom=N&view=icicle&tree=callers). When most weight is self weight of
one function spread over many paths, polyprof suggests --inverted.
On huge profiles only the widest frames are kept (--max-nodes); the graph says
how many were left out. The output is written atomically."""

KINDS = {".svg": "svg", ".html": "html", ".htm": "html"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="+", metavar="INPUT", help=common.INPUTS_HELP)
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output .svg or .html file, or - for stdout")
    p.add_argument("--to", choices=("svg", "html"), help="output type (default: from OUT's extension)")
    p.add_argument("--title", help="title shown above the graph (default: the input's file name)")
    p.add_argument("--max-nodes", type=int, default=None, metavar="N",
                   help="keep at most N frames, the widest first (default 30000; 0 = all)")
    p.add_argument("--inverted", action="store_true",
                   help="turn the stacks around: functions with self weight at the root, their callers "
                        "beyond (a hot leaf reached through many paths becomes one wide frame); the HTML "
                        "page toggles both ways with its 'callers' button")
    common.add_analysis_flags(p, nodecount=None)
    common.add_filter_flags(p)
    common.add_input_flags(p)
    common.add_base_flags(p)


def _kind(args: argparse.Namespace) -> str:
    from polyprof.errors import OptionsError

    if args.to:
        return args.to
    kind = KINDS.get(os.path.splitext(args.output)[1].lower())
    if kind is None:
        raise OptionsError(f"cannot tell the output type from {args.output!r}; use .svg or .html, or pass --to")
    return kind


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis import filters
    from polyprof.analysis.flame import DEFAULT_MAX_NODES, flame_tree
    from polyprof.render.flame import to_html, to_svg

    kind = _kind(args)
    loaded = common.load(args, env)  # the profile, filtered by the shared filter flags
    max_nodes = DEFAULT_MAX_NODES if args.max_nodes is None else args.max_nodes
    options = common.analysis_options(args)
    with env.status("laying out the flame graph"):
        # a hide or prune_from filter's graph is taken from the read profile's name tree where it can be
        tree = flame_tree(loaded.original if filters.name_tree_filter(options) and not args.inverted else loaded,
                          options, max_nodes=max_nodes, inverted=args.inverted)
        # the page can switch between both: lay out the other one too
        other = flame_tree(loaded, options, max_nodes=max_nodes, inverted=not args.inverted) \
            if kind == "html" else None
    if other is not None and other.hint:
        tree.hint = other.hint if not tree.inverted else ""
    if tree.hint:
        env.note("hint: " + tree.hint)
    title = args.title or os.path.basename(args.input[0])
    text = to_svg(tree, title=title) if kind == "svg" else to_html(tree, title=title, other=other)
    if args.output == "-":
        env.out(text)
        return 0
    from polyprof.formats.output import write_text_atomic

    write_text_atomic(args.output, text)
    env.note(f"wrote {args.output} ({kind}, {len(tree)} frames"
             + (f", {tree.dropped} narrow frames left out" if tree.dropped else "") + ")")
    return 0
