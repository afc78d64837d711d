"""Entry point: parse the verb and its flags, run it, map errors to one line.

Verbs live in ``polyprof.cli.verbs`` (one module each, discovered by name),
so adding a verb is adding a module. Nothing heavy is imported until a verb
runs: ``polyprof --help`` loads neither numpy nor protobuf.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING

from polyprof import __version__
from polyprof.cli.env import Env

if TYPE_CHECKING:  # imported on use: --help stays fast
    from polyprof.cli.args import Parser

__all__ = ["build_parser", "main"]

# The order verbs are listed in --help; verbs not named here follow alphabetically.
_ORDER = ("info", "top", "tree", "traces", "peek", "tags", "raw", "list", "disasm", "graph", "flame", "serve",
          "diff", "merge", "convert", "dump", "validate", "symbolize", "formats")

DESCRIPTION = """\
polyprof reads pprof, Perfetto, simpleperf and Chromium CallStackProfile files,
analyses them and converts between them and the viewers people use.
The input format is detected from the content (gzip is undone automatically)."""

EPILOG = """\
start here:
  polyprof info cpu.pb.gz                 what is in the file
  polyprof top cpu.pb.gz                  where the time (or memory) goes
  polyprof convert in.trace -o out.pb.gz  to pprof, folded, speedscope, ...
  polyprof VERB --help                    flags and examples of one verb

exit codes: 0 ok, 1 other error (or an internal error: please report it;
POLYPROF_DEBUG=1 shows its traceback), 2 unreadable input, 3 unknown format,
4 malformed input, 5 unsupported feature, 6 bad option, 7 cannot write output,
8 diff --fail-on-growth threshold passed, 9 validate --strict found problems,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM); an interrupted write leaves
no partial or temporary file."""


def _verb_names() -> list[str]:
    import polyprof.cli.verbs as package

    names = [m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")]
    return sorted(names, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))


def _verbs(only: str | None = None) -> list[ModuleType]:
    names = [only] if only else _verb_names()
    return [importlib.import_module(f"polyprof.cli.verbs.{n}") for n in names]


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


def build_parser(only: str | None = None) -> Parser:
    """The argument parser; ``only`` builds just that verb (what a run needs)."""
    from polyprof.cli.args import Parser

    parser = Parser(prog="polyprof", description=DESCRIPTION, epilog=EPILOG, formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"polyprof {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", title="verbs")
    for module in _verbs(only):
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP[0].upper() + module.HELP[1:] + ".",
                           epilog=getattr(module, "EXAMPLES", None), formatter_class=_Formatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    """Run polyprof with ``argv``; returns the exit code (documented in --help)."""
    env = env or Env()
    argv = sys.argv[1:] if argv is None else argv
    from polyprof.cli import args as cli_args

    try:
        argv = cli_args.pprof_spellings(argv, _verb_names())  # -nodecount=5, -inuse_space, -top ...
        verb = argv[0] if argv and argv[0] in _verb_names() else None
        parser = build_parser(verb)
        args = cli_args.parse(parser, argv, verb)
    except SystemExit as exc:  # argparse already printed usage or help (or a refused spelling)
        if getattr(exc, "error", None) is not None:
            env.stderr.write(f"polyprof: error: {exc.error}\n")  # type: ignore[attr-defined]
        return int(exc.code or 0)
    if not getattr(args, "_run", None):
        parser.print_help(env.stdout)
        return 0
    from polyprof.errors import PolyprofError

    try:
        with _signals_and_warnings(env):
            return int(args._run(args, env) or 0)
    except _Terminated:
        env.stderr.write("polyprof: terminated\n")
        return 143
    except PolyprofError as exc:
        from polyprof.cli.common import error_text

        env.stderr.write(f"polyprof: error: {error_text(exc)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        env.stderr.write("polyprof: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except MemoryError:
        env.stderr.write("polyprof: error: out of memory (try --pid/--time-range to read less)\n")
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug of ours: one line, traceback on request
        return _internal_error(exc, env)


class _Terminated(BaseException):
    """SIGTERM, raised as an exception so that cleanups (temporary output files) run."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


@contextmanager
def _signals_and_warnings(env: Env) -> Iterator[None]:
    """While a verb runs: SIGTERM is handled as Ctrl-C is (an exception, so nothing is
    left half-written), and polyprof's warnings print as one "polyprof: warning:" line."""
    import signal
    import warnings

    from polyprof.errors import PolyprofWarning

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
        if issubclass(category, PolyprofWarning):
            env.stderr.write(f"polyprof: warning: {message}\n")
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _internal_error(exc: Exception, env: Env) -> int:
    """Report an unexpected exception as polyprof's own bug (POLYPROF_DEBUG=1: the traceback)."""
    import os
    import traceback

    if os.environ.get("POLYPROF_DEBUG", "") not in ("", "0"):
        traceback.print_exception(exc, file=env.stderr)
    text = str(exc).splitlines()[0] if str(exc) else ""
    env.stderr.write(f"polyprof: internal error, please report: {type(exc).__name__}: {text} "
                     "(POLYPROF_DEBUG=1 shows the traceback)\n")
    return 1


def entry() -> None:
    sys.exit(main())
