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
after a big computation. Neither changes any result.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

__all__ = ["give_back", "tune"]

M_MMAP_THRESHOLD = -3
THRESHOLD = 256 * 1024  # blocks this big and bigger are mapped: numpy arrays of more than 32k numbers

_libc: Any = None


def _glibc() -> Any:
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL("libc.so.6")
                if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim"):
                    _libc = lib
            except OSError:  # not glibc (musl): its allocator returns memory on its own terms
                pass
    return _libc


def tune() -> None:
    """Map large blocks at a fixed threshold, so freeing them returns them to the system."""
    lib = _glibc()
    if lib:
        lib.mallopt(M_MMAP_THRESHOLD, THRESHOLD)


def give_back() -> None:
    """Return the heap's free pages to the system (after reading, after a big computation)."""
    lib = _glibc()
    if lib:
        lib.malloc_trim(0)
