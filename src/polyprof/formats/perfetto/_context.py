"""What the packet collectors may use of a read (instead of the whole reader)."""

from __future__ import annotations

from dataclasses import dataclass

from polyprof.formats.options import ReadOptions
from polyprof.formats.perfetto._catalog import Catalog
from polyprof.formats.perfetto._clock import TraceTimes
from polyprof.formats.perfetto._sequence import Resolver, Stats

__all__ = ["Context"]


@dataclass
class Context:
    """The read options, the warning counts, the trace-wide catalog with its iid resolver,
    and the clocks (timestamp columns become trace time at the end)."""

    options: ReadOptions
    stats: Stats
    catalog: Catalog
    resolver: Resolver
    times: TraceTimes

    @classmethod
    def new(cls, options: ReadOptions) -> "Context":
        stats, catalog = Stats(), Catalog()
        return cls(options, stats, catalog, Resolver(catalog, stats), TraceTimes(stats))
