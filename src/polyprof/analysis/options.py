"""The one options object every front end (CLI flags, web query) fills."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Options"]


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
