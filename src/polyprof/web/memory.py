"""Giving freed memory back to the system while ``polyprof serve`` runs (glibc; elsewhere a no-op).

A served profile is analysed again and again: each filter change builds a
flame graph of millions of nodes from arrays of tens of megabytes and frees
most of them. glibc's allocator raises its mmap threshold each time such a
block is freed (up to 32 MB), so later blocks of that size come from the
heap, and the freed heap is kept by the process: the server's resident size
grew by the size of every build's temporaries (the large benchmark pprof:
+750 MB after one flame graph, of which 230 MB were the graph). :func:`tune`
fixes the threshold (large arrays are mapped and unmapped, so freeing them
returns them at once) and :func:`give_back` trims what the heap holds free
after a big computation. Both are :mod:`polyprof.model.memory`'s; neither
changes any result. :func:`resident` measures what the process holds (the web
session's cache budget is a share of it, taken once the inputs are read).
"""

from __future__ import annotations

import os

from polyprof.model.memory import map_large_blocks, release_free_memory

__all__ = ["give_back", "resident", "tune"]

THRESHOLD = 256 * 1024  # blocks this big and bigger are mapped: numpy arrays of more than 32k numbers


def tune() -> None:
    """Map large blocks at a fixed threshold, so freeing them returns them to the system."""
    map_large_blocks(THRESHOLD)


#: Return the heap's free pages to the system (after reading, after a big computation).
give_back = release_free_memory


def resident() -> int | None:
    """The process's resident size in bytes (``/proc/self/statm``), after giving the heap's free
    pages back; None where it cannot be read."""
    give_back()
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
