"""Giving freed heap memory back to the system (glibc; elsewhere a no-op).

Decoding a large input allocates and frees many arrays of a few MB; glibc
keeps such freed blocks in its heap (only blocks above its adaptive mmap
threshold, at most 32 MB, go back at once), so a process's resident size
after a read carries tens of MB of holes into the analysis that follows,
whose own large arrays are mapped fresh. One ``malloc_trim`` after the read
returns them (measured on a 700k-sample pprof profile: about 70 MB less at
peak, a few ms). Making every large allocation an mmap instead
(:func:`map_large_blocks`) saves as much but costs page faults on every
array: about 0.5 s of system time on the same profile, so only a
long-lived process that builds and frees large arrays again and again
(``polyprof serve``) does it. Neither changes any result.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

__all__ = ["map_large_blocks", "release_free_memory"]

M_MMAP_THRESHOLD = -3

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


def release_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``); elsewhere nothing."""
    lib = _glibc()
    if lib:
        lib.malloc_trim(0)


def map_large_blocks(threshold: int) -> None:
    """Map blocks of ``threshold`` bytes and more at a fixed threshold (glibc's would grow), so
    freeing them returns them to the system at once."""
    lib = _glibc()
    if lib:
        lib.mallopt(M_MMAP_THRESHOLD, threshold)
