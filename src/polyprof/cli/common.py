"""Flags shared by several verbs, defined once, and their translation to options."""

from __future__ import annotations

import argparse

__all__ = ["add_analysis_flags", "add_base_flags", "add_filter_flags", "add_input_flags", "add_output_format",
           "add_report_arguments", "add_report_flags", "add_symbol_flags", "analysis_options", "emit", "error_text",
           "flag_spelling", "load", "load_all", "parse_time_range", "read_options", "read_profile", "symbol_options",
           "warn_unmatched", "write_report"]


def _int_set(text: str) -> frozenset[int]:
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def parse_time_range(text: str) -> tuple[int | None, int | None]:
    """'START:END' with optional units (ns default); either side may be empty."""
    from polyprof.analysis.options import parse_time_range as parse
    from polyprof.errors import OptionsError

    try:
        return parse(text)
    except OptionsError as exc:
        raise argparse.ArgumentTypeError(exc.spelled(flag_spelling)) from None


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
    g.add_argument("--seconds", type=_positive, metavar="N",
                   help="URL inputs: ask the server for an N-second profile (pprof's seconds=N)")
    g.add_argument("--timeout", type=_positive, metavar="S",
                   help="URL inputs: give up after S seconds (default 1.5 x --seconds, else 60)")
    add_symbol_flags(p)


def _positive(text: str) -> int:
    from polyprof.cli.args import count

    value = count(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


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
            "demangle": getattr(args, "demangle", None), **pprof_symbolize(args)}


def add_output_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text for people (default) or json for scripts")


def add_analysis_flags(p: argparse.ArgumentParser, *, nodecount: int | str | None = 25) -> None:
    """--sample-index, --granularity, --noinlines and --nodecount: an int ``nodecount`` is its
    default, a string describes pprof's per-report default (the flag stays unset), None
    means the report ignores it."""
    from polyprof.cli.args import count

    g = p.add_argument_group("analysis")
    g.add_argument("--sample-index", metavar="NAME|N",
                   help="which sample type to report (default: the profile's default type); pprof's "
                        "-inuse_space, -alloc_objects, -total_delay, -contentions... are shortcuts for it")
    if nodecount is None:  # accepted everywhere, as pprof accepts it
        g.add_argument("--nodecount", type=count, default=None, metavar="N",
                       help="no effect on this report (accepted as pprof accepts it)")
    else:
        default = nodecount if isinstance(nodecount, int) else None
        g.add_argument("--nodecount", type=count, default=default, metavar="N",
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
    g.add_argument("--tagshow", metavar="REGEX", help="keep only the labels whose key matches REGEX")
    g.add_argument("--taghide", metavar="REGEX", help="remove the labels whose key matches REGEX")
    g.add_argument("--thread", metavar="REGEX", help="keep samples of threads whose name matches REGEX")


INPUTS_HELP = ("profile files (any readable format; gzip is fine), '-' for standard input, or http(s) "
               "URLs such as http://host:6060/debug/pprof/heap; several are merged")


def add_report_arguments(p: argparse.ArgumentParser, *, nodecount: int | str | None = 25, exact: bool = True,
                         graph: bool = True) -> None:
    """What a report verb takes: its inputs, analysis flags, report shaping (pprof's
    fractions only if ``graph``), filters, input selection, --base/--diff-base, --format,
    -o and (if ``exact``) --exact."""
    p.add_argument("input", nargs="+", metavar="INPUT", help=INPUTS_HELP)
    add_analysis_flags(p, nodecount=nodecount)
    add_report_flags(p, graph=graph)
    add_filter_flags(p)
    add_input_flags(p)
    add_base_flags(p)
    add_output_format(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    if exact:
        p.add_argument("--exact", action="store_true",
                       help="print raw values in the sample type's own unit instead of human units")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.005, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def add_report_flags(p: argparse.ArgumentParser, *, graph: bool = True) -> None:
    """How a report is shaped, with go tool pprof's names and defaults (the node and
    edge fractions act only on reports drawn from its call graph: ``graph``)."""
    g = p.add_argument_group("report (go tool pprof's flags of the same names)")
    idle = "" if graph else " (no effect on this report; accepted as pprof accepts it)"
    g.add_argument("--nodefraction", type=_fraction, default=0.005, metavar="F",
                   help="hide nodes whose cum is below F x total (default 0.005; 0 shows every node)" + idle)
    g.add_argument("--edgefraction", type=_fraction, default=0.001, metavar="F",
                   help="hide calls whose weight is below F x total (default 0.001)" + idle)
    g.add_argument("--cum", action="store_true", help="sort by cumulative instead of flat weight")
    g.add_argument("--unit", default="minimum", metavar="UNIT",
                   help="print values in UNIT (ms, s, MB...), 'auto' (each value its own) or "
                        "'minimum' (one unit per table, the default)")
    g.add_argument("--mean", action="store_true",
                   help="average values per sample: divide by the sample count (the first sample type)")
    g.add_argument("--relative-percentages", action="store_true",
                   help="percentages of the total after filtering (default: before, as pprof)")
    g.add_argument("--tagroot", metavar="KEY[,KEY]",
                   help="add the values of these labels as frames at the root of every stack")
    g.add_argument("--tagleaf", metavar="KEY[,KEY]",
                   help="add the values of these labels as frames at the leaf of every stack")
    g.add_argument("--symbolize", default="", type=_symbolize, metavar="MODE",
                   help="pprof's -symbolize: 'none' shows function names exactly as stored (no C++/Rust "
                        "name clean-up); local, remote, force and demangle=MODE are accepted")


_SYMBOLIZE = ("", "none", "no", "local", "fastlocal", "remote", "force")
_DEMANGLE = ("none", "full", "templates", "default")


def _symbolize(text: str) -> str:
    """pprof's -symbolize value: options joined by ':' (local, remote, none, force, demangle=X)."""
    for part in text.lower().split(":"):
        if part not in _SYMBOLIZE and part.removeprefix("demangle=") not in _DEMANGLE:
            raise argparse.ArgumentTypeError(
                f"unknown option {part!r}; use [local|fastlocal|remote|none][:force][:demangle=none|full|"
                "templates|default], as pprof")
    return text.lower()


def _symbolize_options(args: argparse.Namespace, env) -> str:  # noqa: ANN001
    """What --symbolize means for the report: 'none' (names as stored) or '' (pprof's default
    clean-up). Its reading half (``demangle=MODE``, ``none``) is in :func:`pprof_symbolize`."""
    mode = getattr(args, "symbolize", "") or ""
    return "none" if any(x in ("none", "no") for x in mode.split(":")) else ""


def pprof_symbolize(args: argparse.Namespace) -> dict:
    """The ReadOptions that pprof's ``-symbolize=`` spelling asks for: ``none`` reads names as
    stored (no symbolization, no demangling); ``demangle=MODE`` is ``--demangle MODE`` unless
    that flag is given too."""
    parts = (getattr(args, "symbolize", "") or "").split(":")
    out: dict = {}
    demangle = next((x.removeprefix("demangle=") for x in parts if x.startswith("demangle=")), None)
    if demangle not in (None, "default") and getattr(args, "demangle", None) is None:
        out["demangle"] = demangle
    if any(x in ("none", "no") for x in parts):
        out["symbolize"] = False
    return out


def add_base_flags(p: argparse.ArgumentParser) -> None:
    """--base/--diff-base: profiles subtracted from the input (go tool pprof's meaning)."""
    g = p.add_argument_group("comparison (go tool pprof -base / -diff_base)")
    g.add_argument("--base", action="append", dest="base_profiles", metavar="FILE",
                   help="subtract this profile (its values negated and merged in); repeatable")
    g.add_argument("--diff-base", action="append", dest="diff_base_profiles", metavar="FILE",
                   help="like --base, with percentages of the base's total (pprof -diff_base)")


def emit(env, args: argparse.Namespace, to_json, to_text) -> None:  # noqa: ANN001
    """Print a result: ``to_json()`` indented with --format json, else ``to_text()``."""
    import json

    if args.format == "json":
        write_report(env, args, json.dumps(to_json(), indent=1))
    else:
        write_report(env, args, to_text().rstrip("\n"))


def read_options(args: argparse.Namespace):  # noqa: ANN201 - lazy import keeps --help fast
    from polyprof.formats.options import ReadOptions

    extra = {key: getattr(args, key) for key in ("offcpu", "module_names") if getattr(args, key, None)}
    return ReadOptions(pid=getattr(args, "pid", None), tid=getattr(args, "tid", None),
                       heap=getattr(args, "heap", None), time_range=getattr(args, "time_range", None),
                       metadata_names=getattr(args, "metadata_names", None),
                       merge=getattr(args, "merge", False), profiles=getattr(args, "profile", None),
                       extra=extra, **symbol_options(args))


def analysis_options(args: argparse.Namespace, env=None):  # noqa: ANN001, ANN201
    from polyprof.analysis.options import Options

    names = ("sample_index", "base_sample_index", "nodecount", "granularity", "noinlines", "focus", "ignore", "hide", "show",
             "show_from", "prune_from", "tagfocus", "tagignore", "pid", "tid", "thread", "time_range",
             "nodefraction", "edgefraction", "cum", "unit", "mean", "relative_percentages", "tagshow", "taghide",
             "tagroot", "tagleaf", "symbolize")
    fields = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if "symbolize" in fields:
        fields["symbolize"] = _symbolize_options(args, env)
    return Options(**fields)


def _specs(args: argparse.Namespace, path: str | list[str] | None) -> list[str]:
    specs = path if path is not None else args.input
    return [specs] if isinstance(specs, str) else list(specs)


def read_profile(args: argparse.Namespace, env, path: str | list[str] | None = None):  # noqa: ANN001, ANN201
    """Read the verb's inputs with the shared flags (files, '-', URLs; several merged;
    --base/--diff-base subtracted), showing progress on a TTY."""
    import dataclasses

    from polyprof.cli.inputs import read_inputs

    return read_inputs(args, env, _specs(args, path), dataclasses.replace(read_options(args), note=env.note))


def load(args: argparse.Namespace, env, path: str | list[str] | None = None):  # noqa: ANN001, ANN201
    """Read the verb's inputs and apply the filters of its flags; warn on stderr for each
    filter that matched nothing. Returns a FilterResult (``.profile`` is the filtered one).

    ``--time-range`` is applied here, not by the reader, so "relative to the profile
    start" means the same for every format (see polyprof.analysis.filters).
    """
    from polyprof.analysis import filters

    result = filters.apply(_read_unfiltered(args, env, path), analysis_options(args, env))
    warn_unmatched(result, env)
    return result


def load_for_top(args: argparse.Namespace, env):  # noqa: ANN001, ANN201
    """:func:`load` for ``top``, whose numbers are sums over each sample's path: a ``--hide`` or
    ``--prune-from`` is taken as a :class:`~polyprof.analysis.reshape_view.ReshapeView` (each
    sample moved to the input's callsite its remade stack would end at; the web view's route),
    so the stacks are not remade (the large benchmark pprof: 2.0 s and 613 MB for ``top --hide``
    before); the same table. Where the view does not apply, :func:`load`'s FilterResult."""
    from polyprof.analysis import filters
    from polyprof.analysis.reshape_view import ReshapeView, top_source

    profile = _read_unfiltered(args, env, None)
    src = top_source(analysis_options(args, env), lambda o: filters.apply(profile, o))
    warn_unmatched(src.result if isinstance(src, ReshapeView) else src, env)
    return src


def _read_unfiltered(args: argparse.Namespace, env, path: str | list[str] | None):  # noqa: ANN001, ANN202
    """The verb's inputs read (``--time-range`` left to the filters)."""
    import dataclasses

    from polyprof.cli.inputs import read_inputs

    opts = dataclasses.replace(read_options(args), time_range=None, note=env.note)
    return read_inputs(args, env, _specs(args, path), opts)


def load_all(args: argparse.Namespace, env, path: str | None = None) -> list:  # noqa: ANN001
    """Like :func:`load`, but every profile of the input separately (no merging), as
    :class:`polyprof.selection.Choice` holding the filtered profile; only those
    ``--profile`` names when it is given. An input without profiles is an error."""
    import dataclasses

    import polyprof
    from polyprof.analysis import filters
    from polyprof.selection import choices, pick

    path = path or _specs(args, None)[0]
    with env.progress(f"reading {path}") as progress:
        opts = dataclasses.replace(read_options(args), time_range=None, progress=progress)
        profiles = polyprof.read_all(path, format=getattr(args, "input_format", None), options=opts)
    listed = pick(choices(profiles), args.profile or range(1, len(profiles) + 1), path)
    results = [filters.apply(c.profile, analysis_options(args, env)) for c in listed]
    for result in results[:1]:
        warn_unmatched(result, env)
    return [dataclasses.replace(c, profile=r.profile) for c, r in zip(listed, results)]


def write_report(env, args: argparse.Namespace, text: str) -> None:  # noqa: ANN001
    """Print a text report, or write it atomically to ``-o FILE``."""
    output = getattr(args, "output", None)
    if not output or output == "-":
        env.out(text)
        return
    from polyprof.formats.output import write_text_atomic

    write_text_atomic(output, text if text.endswith("\n") or not text else text + "\n")
    env.note(f"wrote {output}")


def warn_unmatched(result, env) -> None:  # noqa: ANN001
    for name in result.unmatched():
        env.note(f"warning: --{name.replace('_', '-')} matched nothing")


#: Library option names whose command-line flag has another name.
_FLAG_OF = {"format": "to", "profiles": "profile"}


def flag_spelling(name: str, switch: bool = False, value: str | None = None) -> str:  # noqa: ARG001
    """The command-line flag of library option ``name`` (``time_range`` -> ``--time-range``),
    with ``value`` after it when given (``--pid 7``)."""
    flag = "--" + _FLAG_OF.get(name, name).replace("_", "-")
    return flag if value is None else f"{flag} {value}"


def error_text(exc: Exception) -> str:
    """The one line the command line prints for ``exc``: option names spelled as flags."""
    from polyprof.errors import OptionsError

    return exc.spelled(flag_spelling) if isinstance(exc, OptionsError) else str(exc)
