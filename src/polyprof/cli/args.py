"""Command-line parsing conventions: exit code 6 on bad options, the verb's own usage,
"did you mean", and ``go tool pprof``'s single-dash spellings as aliases.

pprof users type ``-nodecount=5``, ``-sample_index=alloc_space``,
``-inuse_space``, ``-lines``, ``-cum`` or even ``-top FILE``;
:func:`pprof_spellings` rewrites them into polyprof's flags and verbs before
argparse sees them, so every spelling has one meaning and one help text.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence

__all__ = ["BAD_OPTION", "Parser", "count", "parse", "pprof_spellings", "register_alias"]

#: The exit code of a bad option or argument (README's exit-code table).
BAD_OPTION = 6

#: pprof's sample-type shortcuts: flag -> (sample type, mean).
SAMPLE_SHORTCUTS = {
    "inuse_space": ("inuse_space", False), "inuse_objects": ("inuse_objects", False),
    "alloc_space": ("alloc_space", False), "alloc_objects": ("alloc_objects", False),
    "total_delay": ("delay", False), "contentions": ("contentions", False), "mean_delay": ("delay", True),
}
GRANULARITY_FLAGS = ("functions", "filefunctions", "files", "lines", "addresses")

#: pprof's report flags and the verb (plus flags) each becomes; a report taking a
#: regular expression (``-peek=REGEX``) passes it on as the verb's argument.
REPORT_FLAGS: dict[str, tuple[str, ...]] = {
    "top": ("top",), "text": ("top",), "tree": ("tree",), "traces": ("traces",), "peek": ("peek",),
    "tags": ("tags",), "raw": ("raw",), "list": ("list",), "disasm": ("disasm",),
    "dot": ("graph", "--to", "dot"), "svg": ("graph", "--to", "svg"), "png": ("graph", "--to", "png"),
    "pdf": ("graph", "--to", "pdf"),
}
_TAKES_REGEX = ("peek", "list", "disasm")
_SINGLE_DASH = re.compile(r"-(-?)([A-Za-z][A-Za-z0-9_]+)(?:=(.*))?", re.S)

#: Other verbs' flags that pprof spells differently: pprof name -> (verb, polyprof flag).
_ALIASES: dict[str, tuple[str, str]] = {"http": ("serve", "--http")}


def register_alias(pprof_name: str, verb: str, flag: str) -> None:
    """Let a verb claim a pprof flag (``-http=:8080`` -> ``serve --http :8080``)."""
    _ALIASES[pprof_name] = (verb, flag)


def count(text: str) -> int:
    """argparse type of --nodecount and friends: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (all) or more, got {value}")
    return value


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors print this (sub)command's usage, suggest close
    names and exit with :data:`BAD_OPTION` instead of argparse's 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}{self._suggestion(message)}\n")
        raise SystemExit(BAD_OPTION)

    def _suggestion(self, message: str) -> str:
        m = re.search(r"(?:argument (\S+): )?invalid choice: '([^']*)'", message)
        if m:
            named, value = m.group(1) or "", m.group(2)
            own = [a for a in self._actions if named in ("/".join(a.option_strings), a.metavar, a.dest)]
            for a in self._actions:  # a value of another option ("--format dot" for "--to dot")
                if a.option_strings and a not in own and value in (a.choices or ()):
                    return f" (did you mean {a.option_strings[-1]} {value}?)"
            choices = [c for a in (own or self._actions) for c in (a.choices or ()) if isinstance(c, str)]
            close = difflib.get_close_matches(value, choices, n=1)
            return f" (did you mean {close[0]!r}?)" if close else ""
        m = re.search(r"unrecognized arguments: (.*)", message)
        if not m:
            return ""
        hints = []
        for token in m.group(1).split():
            if token.startswith("-"):
                close = difflib.get_close_matches(token.split("=", 1)[0], self._option_string_actions, n=1)
                hints += close
        return f" (did you mean {' / '.join(hints)}?)" if hints else ""

    def verb_parser(self, verb: str | None) -> Parser:
        """The subcommand parser of ``verb`` (self when there is none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
                return action.choices[verb]
        return self


def parse(parser: Parser, argv: Sequence[str], verb: str | None) -> argparse.Namespace:
    """Parse ``argv``; unknown arguments are reported by the verb's own parser."""
    args, extra = parser.parse_known_args(list(argv))
    # A verb may take trailing positionals after its options (symbolize IN -o OUT [SOURCE...]),
    # which argparse cannot match once an option came between; it names them with _trailing.
    trailing = getattr(args, "_trailing", None)
    if extra and trailing is not None and not any(x.startswith("-") for x in extra):
        setattr(args, trailing, [*getattr(args, trailing), *extra])
        extra = []
    if extra:
        parser.verb_parser(verb).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def pprof_spellings(argv: Sequence[str], verbs: Sequence[str]) -> list[str]:
    """``argv`` with pprof's spellings turned into polyprof's (see the module doc).

    A report flag (``-top``, ``-peek=REGEX``, ``-svg`` ...) names the verb when
    ``argv`` starts with none. Everything after ``--`` is left alone.
    """
    argv = list(argv)
    out: list[str] = []
    trailing: list[str] = []
    verb = argv[0] if argv and argv[0] in verbs else None
    head: list[str] = [verb] if verb else []
    rest = argv[1:] if verb else argv
    for i, token in enumerate(rest):
        if token == "--":
            out.extend(rest[i:])
            break
        m = _SINGLE_DASH.fullmatch(token)
        if m is None or (m.group(1) and "_" not in m.group(2)):
            out.append(token)  # polyprof's own --flags, short options, negative numbers, "-"
            continue
        name, value = m.group(2), m.group(3)
        if not verb and name in REPORT_FLAGS:
            verb, head = REPORT_FLAGS[name][0], list(REPORT_FLAGS[name])
            if value is not None and name in _TAKES_REGEX:
                trailing.append(value)  # the regular expression: the verb's last positional argument
            continue
        if name in _ALIASES and verb in (None, _ALIASES[name][0]):
            alias_verb, flag = _ALIASES[name]
            if alias_verb not in verbs:
                raise _Refused(_unavailable(token, alias_verb))
            verb, head = alias_verb, [alias_verb]
            out.extend([flag] + ([value] if value is not None else []))
            continue
        out.extend(_flag(name, value))
    if trailing and "--" in out:
        out.insert(out.index("--"), trailing[0])
    return head + out + ([] if "--" in out else trailing)


def _flag(name: str, value: str | None) -> list[str]:
    if name in SAMPLE_SHORTCUTS and value is None:
        vtype, mean = SAMPLE_SHORTCUTS[name]
        return [f"--sample-index={vtype}"] + (["--mean"] if mean else [])
    if name in GRANULARITY_FLAGS and value is None:
        return [f"--granularity={name}"]
    if name == "flat" and value is None:
        return []  # pprof's default sort
    flag = "--" + name.replace("_", "-")
    if value is None:
        return [flag]
    if value.lower() in ("true", "false"):  # Go's boolean flag syntax
        return [flag] if value.lower() == "true" else []
    return [f"{flag}={value}"]


def _unavailable(token: str, verb: str) -> Exception:
    """The error for a pprof spelling whose polyprof verb is not installed."""
    from polyprof.errors import OptionsError

    flag = token.split("=", 1)[0]
    return OptionsError(f"{flag}: pprof's {flag} is 'polyprof {verb}' here, and this version of "
                        f"polyprof has no '{verb}' verb yet; use 'polyprof top|tree|flame FILE' "
                        "(flame -o page.html gives an interactive page)")


class _Refused(SystemExit):
    """Raised by :func:`pprof_spellings` when a spelling maps to a missing verb."""

    def __init__(self, error: Exception) -> None:
        super().__init__(BAD_OPTION)
        self.error = error
