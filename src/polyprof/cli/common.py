"""Flags shared by several verbs, defined once, and their translation to options."""

from __future__ import annotations

import argparse
import re

__all__ = ["add_analysis_flags", "add_input_flags", "add_output_format", "analysis_options",
           "parse_time_range", "read_options", "read_profile"]


def _int_set(text: str) -> frozenset[int]:
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


_TIME_UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}


def _time(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)(ns|us|ms|s)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad time {text!r}: use a number with ns, us, ms or s (default ns)")
    return int(float(m.group(1)) * _TIME_UNITS[m.group(2) or "ns"])


def parse_time_range(text: str) -> tuple[int | None, int | None]:
    """'START:END' with optional units (ns default); either side may be empty."""
    if ":" not in text:
        raise argparse.ArgumentTypeError("--time-range takes START:END, e.g. 1.5s:2s or :500ms")
    start, end = text.split(":", 1)
    return _time(start), _time(end)


def add_input_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input selection")
    g.add_argument("--input-format", metavar="FMT",
                   help="read as FMT instead of detecting the format from the content")
    g.add_argument("--pid", type=_int_set, metavar="PID[,PID]", help="keep only these processes")
    g.add_argument("--tid", type=_int_set, metavar="TID[,TID]", help="keep only these threads")
    g.add_argument("--heap", metavar="NAME", help="heap profiles: keep only this heap (e.g. libc.malloc)")
    g.add_argument("--time-range", type=parse_time_range, metavar="START:END",
                   help="keep samples in this time window, relative to the profile start "
                        "(units ns, us, ms, s; e.g. 1s:2.5s or :500ms)")
    g.add_argument("--symbols", metavar="DIR", help="Breakpad symbol directory (<name>/<id>/<name>.sym)")
    g.add_argument("--metadata-names", metavar="FILE",
                   help="Chromium: file of metadata names (one per line) to resolve name hashes")
    g.add_argument("--merge", action="store_true",
                   help="inputs holding several profiles: merge them into one, labelled by origin")


def add_output_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text for people (default) or json for scripts")


def add_analysis_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("analysis")
    g.add_argument("--sample-index", metavar="NAME|N",
                   help="which sample type to report (default: the profile's default type)")
    g.add_argument("--nodecount", type=int, default=25, metavar="N",
                   help="show at most N rows (0 = all; default 25)")
    g.add_argument("--granularity", default="functions",
                   choices=("functions", "filefunctions", "files", "lines", "addresses", "modules"),
                   help="what one row stands for (default functions)")
    g.add_argument("--noinlines", action="store_true",
                   help="attribute inlined functions to the function they were inlined into")


def read_options(args: argparse.Namespace):  # noqa: ANN201 - lazy import keeps --help fast
    from polyprof.formats.options import ReadOptions

    return ReadOptions(pid=getattr(args, "pid", None), tid=getattr(args, "tid", None),
                       heap=getattr(args, "heap", None), time_range=getattr(args, "time_range", None),
                       metadata_names=getattr(args, "metadata_names", None),
                       symbols=getattr(args, "symbols", None), merge=getattr(args, "merge", False))


def analysis_options(args: argparse.Namespace):  # noqa: ANN201
    from polyprof.analysis.options import Options

    names = ("sample_index", "nodecount", "granularity", "noinlines", "focus", "ignore", "hide", "show",
             "show_from", "prune_from", "tagfocus", "tagignore", "pid", "tid", "thread", "time_range")
    return Options(**{n: getattr(args, n) for n in names if getattr(args, n, None) is not None})


def read_profile(args: argparse.Namespace, env, path: str | None = None):  # noqa: ANN001, ANN201
    """Read the verb's input with the shared flags, showing a status line on a TTY."""
    import polyprof

    path = path or args.input
    with env.status(f"reading {path}"):
        return polyprof.read(path, format=getattr(args, "input_format", None), options=read_options(args))
