"""Flags shared by several verbs, defined once, and their translation to options."""

from __future__ import annotations

import argparse
import re

__all__ = ["add_analysis_flags", "add_filter_flags", "add_input_flags", "add_output_format", "add_report_arguments",
           "add_symbol_flags", "analysis_options", "emit", "load", "parse_time_range", "read_options", "read_profile",
           "symbol_options", "warn_unmatched"]


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
    g.add_argument("--metadata-names", metavar="FILE",
                   help="Chromium: file of metadata names (one per line) to resolve name hashes")
    g.add_argument("--merge", action="store_true",
                   help="inputs holding several profiles: merge them into one, labelled by origin")
    g.add_argument("--offcpu", choices=("on", "off", "on+off"),
                   help="simpleperf recordings made with --trace-offcpu: which view is the default "
                        "sample type (on-CPU samples, off-CPU time, or both; default on+off)")
    g.add_argument("--module-names", metavar="FILE",
                   help="Chromium: extra module file names (one per line) to resolve module name hashes")
    add_profile_flag(g)
    add_symbol_flags(p)


def add_profile_flag(g) -> None:  # noqa: ANN001 - an argparse group
    """--profile N: the multi-profile rule's selector (polyprof.selection)."""
    g.add_argument("--profile", type=_positive_set, metavar="N[,N]",
                   help="inputs holding several profiles: use profile N as 'polyprof info' numbers them "
                        "(profiles with the same sample types are otherwise merged; of different kinds, "
                        "listed with their selectors)")


def _positive_set(text: str) -> tuple[int, ...]:
    numbers = tuple(sorted(_int_set(text)))
    if not numbers or numbers[0] < 1:
        raise argparse.ArgumentTypeError(f"expected profile numbers from 1 ('polyprof info' lists them), got {text!r}")
    return numbers


#: polyprof.symbolize.DEMANGLE_MODES, spelled here so --help imports nothing heavy (a test checks they agree)
DEMANGLE_MODES = ("simple", "templates", "full", "none")


def add_symbol_flags(p: argparse.ArgumentParser) -> None:
    """--symbols, --debuginfod, --mapping, --offline, --symbolizer, --demangle (polyprof.symbolize)."""
    g = p.add_argument_group("symbolization (search order: polyprof symbolize --help)")
    g.add_argument("--symbols", metavar="PATH", action="append",
                   help="where symbols are: a directory (ELF binaries and debug files found by build id, "
                        ".build-id/ab/cdef.debug trees, files by path, Breakpad <name>/<id>/<name>.sym) or one "
                        "ELF file; repeat for several")
    g.add_argument("--debuginfod", metavar="URL", action="append",
                   help="debuginfod server to fetch debug files from by build id (also $DEBUGINFOD_URLS); "
                        "repeat for several")
    g.add_argument("--mapping", metavar="[PACKAGE=]FILE", action="append", dest="java_mappings",
                   help="R8/ProGuard mapping.txt to deobfuscate Java frames (of PACKAGE only, if given)")
    g.add_argument("--offline", action="store_true",
                   help="no network: debuginfod answers come from the cache only")
    g.add_argument("--symbolizer", choices=("auto", "llvm", "python"), default="auto",
                   help="read DWARF with llvm-symbolizer or in pure Python (default: llvm-symbolizer if on PATH)")
    g.add_argument("--demangle", choices=DEMANGLE_MODES,
                   help="C++/Rust/Swift names: simple (pprof's default: no parameters or templates), "
                        "templates, full, or none (mangled); giving it re-demangles every name")


def symbol_options(args: argparse.Namespace) -> dict:
    """The ReadOptions fields of the symbolization flags."""
    return {"symbols": tuple(getattr(args, "symbols", None) or ()),
            "debuginfod": tuple(getattr(args, "debuginfod", None) or ()),
            "java_mappings": tuple(getattr(args, "java_mappings", None) or ()),
            "offline": bool(getattr(args, "offline", False)),
            "symbolizer": getattr(args, "symbolizer", None) or "auto",
            "demangle": getattr(args, "demangle", None)}


def add_output_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text for people (default) or json for scripts")


def add_analysis_flags(p: argparse.ArgumentParser, *, nodecount: int | None = 25) -> None:
    """--sample-index, --granularity, --noinlines and (unless ``nodecount`` is None) --nodecount."""
    g = p.add_argument_group("analysis")
    g.add_argument("--sample-index", metavar="NAME|N",
                   help="which sample type to report (default: the profile's default type)")
    if nodecount is not None:
        g.add_argument("--nodecount", type=int, default=nodecount, metavar="N",
                       help=f"show at most N nodes (0 = all; default {nodecount})")
    g.add_argument("--granularity", default="functions",
                   choices=("functions", "filefunctions", "files", "lines", "addresses", "modules"),
                   help="what one row stands for (default functions)")
    g.add_argument("--noinlines", action="store_true",
                   help="attribute inlined functions to the function they were inlined into")


def add_filter_flags(p: argparse.ArgumentParser) -> None:
    """The sample and frame filters (go tool pprof names and meanings); --pid/--tid/--time-range
    are input flags (add_input_flags)."""
    g = p.add_argument_group("filters (regular expressions on function, file and binary names)")
    g.add_argument("--focus", metavar="REGEX", help="keep samples with a frame matching REGEX")
    g.add_argument("--ignore", metavar="REGEX", help="drop samples with a frame matching REGEX")
    g.add_argument("--hide", metavar="REGEX", help="remove frames matching REGEX from stacks")
    g.add_argument("--show", metavar="REGEX", help="keep only frames matching REGEX in stacks")
    g.add_argument("--show-from", metavar="REGEX",
                   help="cut stacks above (callers of) the outermost frame matching REGEX")
    g.add_argument("--prune-from", metavar="REGEX",
                   help="cut stacks below (callees of) the frame matching REGEX")
    g.add_argument("--tagfocus", metavar="[KEY=]REGEX|RANGE",
                   help="keep samples whose labels match: 'worker=a', 'bytes=1kb:', ':64mb', '4kb:1mb'")
    g.add_argument("--tagignore", metavar="[KEY=]REGEX|RANGE", help="drop samples whose labels match")
    g.add_argument("--thread", metavar="REGEX", help="keep samples of threads whose name matches REGEX")


def add_report_arguments(p: argparse.ArgumentParser, *, nodecount: int | None = 25, exact: bool = True) -> None:
    """What a report verb takes: the input file, analysis flags, filters, input selection,
    --format and (if ``exact``) --exact."""
    p.add_argument("input", help="profile file (any readable format; gzip is fine)")
    add_analysis_flags(p, nodecount=nodecount)
    add_filter_flags(p)
    add_input_flags(p)
    add_output_format(p)
    if exact:
        p.add_argument("--exact", action="store_true",
                       help="print raw values in the sample type's own unit instead of human units")


def emit(env, args: argparse.Namespace, to_json, to_text) -> None:  # noqa: ANN001
    """Print a result: ``to_json()`` indented with --format json, else ``to_text()``."""
    import json

    if args.format == "json":
        env.out(json.dumps(to_json(), indent=1))
    else:
        env.out(to_text().rstrip("\n"))


def read_options(args: argparse.Namespace):  # noqa: ANN201 - lazy import keeps --help fast
    from polyprof.formats.options import ReadOptions

    extra = {key: getattr(args, key) for key in ("offcpu", "module_names") if getattr(args, key, None)}
    return ReadOptions(pid=getattr(args, "pid", None), tid=getattr(args, "tid", None),
                       heap=getattr(args, "heap", None), time_range=getattr(args, "time_range", None),
                       metadata_names=getattr(args, "metadata_names", None),
                       merge=getattr(args, "merge", False), profiles=getattr(args, "profile", None),
                       extra=extra, **symbol_options(args))


def analysis_options(args: argparse.Namespace):  # noqa: ANN201
    from polyprof.analysis.options import Options

    names = ("sample_index", "base_sample_index", "nodecount", "granularity", "noinlines", "focus", "ignore", "hide", "show",
             "show_from", "prune_from", "tagfocus", "tagignore", "pid", "tid", "thread", "time_range")
    return Options(**{n: getattr(args, n) for n in names if getattr(args, n, None) is not None})


def read_profile(args: argparse.Namespace, env, path: str | None = None):  # noqa: ANN001, ANN201
    """Read the verb's input with the shared flags, showing progress on a TTY."""
    import dataclasses

    import polyprof

    path = path or args.input
    with env.progress(f"reading {path}") as progress:
        opts = dataclasses.replace(read_options(args), progress=progress, note=env.note)
        return polyprof.read(path, format=getattr(args, "input_format", None), options=opts)


def load(args: argparse.Namespace, env, path: str | None = None):  # noqa: ANN001, ANN201
    """Read the verb's input and apply the filters of its flags; warn on stderr for each
    filter that matched nothing. Returns a FilterResult (``.profile`` is the filtered one).

    ``--time-range`` is applied here, not by the reader, so "relative to the profile
    start" means the same for every format (see polyprof.analysis.filters).
    """
    import dataclasses

    import polyprof
    from polyprof.analysis import filters

    path = path or args.input
    with env.progress(f"reading {path}") as progress:
        opts = dataclasses.replace(read_options(args), time_range=None, progress=progress, note=env.note)
        profile = polyprof.read(path, format=getattr(args, "input_format", None), options=opts)
    result = filters.apply(profile, analysis_options(args))
    warn_unmatched(result, env)
    return result


def load_all(args: argparse.Namespace, env, path: str | None = None) -> list:  # noqa: ANN001
    """Like :func:`load`, but every profile of the input separately (no merging), as
    :class:`polyprof.selection.Choice` holding the filtered profile; only those
    ``--profile`` names when it is given. An input without profiles is an error."""
    import dataclasses

    import polyprof
    from polyprof.analysis import filters
    from polyprof.selection import choices, pick

    path = path or args.input
    with env.progress(f"reading {path}") as progress:
        opts = dataclasses.replace(read_options(args), time_range=None, progress=progress)
        profiles = polyprof.read_all(path, format=getattr(args, "input_format", None), options=opts)
    listed = pick(choices(profiles), args.profile or range(1, len(profiles) + 1), path)
    results = [filters.apply(c.profile, analysis_options(args)) for c in listed]
    for result in results[:1]:
        warn_unmatched(result, env)
    return [dataclasses.replace(c, profile=r.profile) for c, r in zip(listed, results)]


def warn_unmatched(result, env) -> None:  # noqa: ANN001
    for name in result.unmatched():
        env.note(f"warning: --{name.replace('_', '-')} matched nothing")
