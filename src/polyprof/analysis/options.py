"""The one options object every front end (CLI flags, web query) fills."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Options"]


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
