"""The one options object every front end (CLI flags, web query) fills."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, fields, replace
from typing import Any

from polyprof.errors import OptionsError

__all__ = ["Options", "parse_time_range", "resolve"]


@dataclass
class Options:
    """What an analysis should compute. Flag names follow ``go tool pprof``.

    ``nodecount``: rows to show (0 = all; None = the report's pprof default:
    every row for ``top``, 80 for ``tree`` and ``graph``). ``granularity``:
    functions, filefunctions, files, lines, addresses or modules. The filter
    fields hold regular expressions (pprof semantics) or selections; empty
    means "no filter". The report fields after ``time_range`` are described
    where they are declared.
    """

    sample_index: str | int | None = None
    #: diff: the base profile's sample type when its name differs from the new one's (default: paired)
    base_sample_index: str | int | None = None
    nodecount: int | None = None
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
    # ---- report shaping, as go tool pprof's flags of the same names
    #: drop nodes whose |cum| is below this fraction of the shown total (pprof's default)
    nodefraction: float = 0.005
    #: drop edges whose |weight| is below this fraction of the shown total (pprof's default)
    edgefraction: float = 0.001
    #: sort rows by cumulative instead of flat weight (pprof's -cum)
    cum: bool = False
    #: unit of printed values: "minimum" (one unit per table), "auto" (each value
    #: its own), or a unit such as "ms", "MB"
    unit: str = "minimum"
    #: report each value divided by the sample count (sample type 0), as pprof's -mean
    mean: bool = False
    #: percentages of the total after filtering instead of before
    relative_percentages: bool = False
    #: keep only / drop labels whose key matches (pprof's -tagshow / -taghide)
    tagshow: str | None = None
    taghide: str | None = None
    #: comma-separated label keys turned into pseudo-frames at the root / the leaf
    tagroot: str | None = None
    tagleaf: str | None = None
    #: "none" shows names exactly as stored (pprof's -symbolize=none: no name clean-up)
    symbolize: str = ""

    def count_for(self, report: str) -> int:
        """``nodecount`` for ``report`` (0 = all), pprof's default when unset."""
        if self.nodecount is not None:
            return self.nodecount
        return 0 if report == "top" else 80


_FIELDS = frozenset(f.name for f in fields(Options))
_TIME_UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}


def _time(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)(ns|us|ms|s)?", text)
    if not m:
        raise OptionsError(f"bad time {text!r} in {{time_range}}: use a number with ns, us, ms or s (default ns)",
                           options=("time_range",))
    return int(float(m.group(1)) * _TIME_UNITS[m.group(2) or "ns"])


def parse_time_range(text: str) -> tuple[int | None, int | None]:
    """``START:END`` with optional units (ns default; ``1.5s:2s``, ``:500ms``) as a
    ``time_range`` pair; either side may be empty. Bad text raises OptionsError."""
    if ":" not in text:
        raise OptionsError("{time_range} takes START:END, e.g. 1.5s:2s or :500ms", options=("time_range",))
    start, end = text.split(":", 1)
    return _time(start), _time(end)


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
