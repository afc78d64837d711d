"""The one options object every front end (CLI flags, web query) fills."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields, replace
from typing import Any

from polyprof.errors import OptionsError

__all__ = ["Options", "resolve"]


@dataclass
class Options:
    """What an analysis should compute. Flag names follow ``go tool pprof``.

    ``nodecount``: rows to show (0 = all). ``granularity``: functions,
    filefunctions, files, lines, addresses or modules. The filter fields hold
    regular expressions (pprof semantics) or selections; empty means "no
    filter".
    """

    sample_index: str | int | None = None
    #: diff: the base profile's sample type when its name differs from the new one's (default: paired)
    base_sample_index: str | int | None = None
    nodecount: int = 25
    granularity: str = "functions"
    noinlines: bool = False
    focus: str | None = None
    ignore: str | None = None
    hide: str | None = None
    show: str | None = None
    show_from: str | None = None
    prune_from: str | None = None
    tagfocus: str | None = None
    tagignore: str | None = None
    pid: frozenset[int] | None = None
    tid: frozenset[int] | None = None
    thread: str | None = None
    time_range: tuple[int | None, int | None] | None = None


_FIELDS = frozenset(f.name for f in fields(Options))


def resolve(options: Options | None = None, /, **overrides: Any) -> Options:
    """``options`` (default ``Options()``) with keyword ``overrides``.

    Every analysis takes ``(profile, options=None, **overrides)``, so
    ``top(p, nodecount=10, focus="sha256")`` works. Unknown names raise
    OptionsError listing the valid ones; ``pid``/``tid`` accept an int or
    any iterable of ints, ``time_range`` any pair.
    """
    if options is not None and not isinstance(options, Options):
        raise OptionsError(f"options must be an Options, not {type(options).__name__}")
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        guess = difflib.get_close_matches(unknown[0], _FIELDS, n=1)
        hint = f" (did you mean {guess[0]}?)" if guess else ""
        raise OptionsError(f"unknown option(s) {', '.join(unknown)}{hint}; options are: {', '.join(sorted(_FIELDS))}")
    if not overrides:
        return options or Options()
    for name in ("pid", "tid"):
        value = overrides.get(name)
        if value is not None and not isinstance(value, frozenset):
            overrides[name] = frozenset([int(value)] if isinstance(value, int) else (int(v) for v in value))
    if overrides.get("time_range") is not None:
        overrides["time_range"] = tuple(overrides["time_range"])
    return replace(options or Options(), **overrides)
