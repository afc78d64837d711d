"""Compiling the web view's later kernels while the first page loads (``polyprof serve``).

numba compiles a kernel the first time it is called with a given set of
argument types, and caches the machine code beside the module: the very
first ``serve`` after an install spent seconds on the first sandwich, the
first filter or the inverted graph (4.8 s for the benchmark pprof's first
sandwich, 0.55 s later). :func:`start` calls those kernels once on a tiny
tree, with the argument types the views pass (a flame graph's int32 parents
and name ids, int64 weights), in a background thread started when the server
listens: the user reads the landing page meanwhile. Later runs only load the
cached code there (tens of milliseconds, off the start-up's path). Nothing
is loaded for inputs small enough to stay on the numpy kernels.
"""

from __future__ import annotations

import threading

import numpy as np

from polyprof.model import tree

__all__ = ["compile_kernels", "start"]


def compile_kernels() -> bool:
    """Call every tree kernel a view reaches after the landing page once on a tiny tree, so
    that numba compiles (or loads) it now; False when the compiled kernels are not loaded
    (small inputs, no numba, ``POLYPROF_KERNELS=numpy``)."""
    fast = tree.compiled(tree.COMPILED_WHEN_LOADED)  # None unless a large input loaded them
    if fast is None:
        return False
    parent = np.array([-1, 0, 1, 0], np.int32)  # a flame graph: int32 parents and name ids
    name = np.array([0, 1, 2, 2], np.int32)
    weight = np.array([0, 1, 2, 3], np.int64)
    keep = np.array([True, True, False, True])
    fast.reversed_paths(parent, name, np.array([2, 3], np.int64), weight[2:], 1)  # sandwich, inverted
    fast.path_sums(parent, weight)  # filters (a profile's int32 callsite parents)
    fast.preorder_layout(parent, [weight])  # a filtered graph on the cached name tree
    fast.preorder_keep(parent, keep)
    fast.compact(weight.copy(), keep)
    return True


def start() -> threading.Thread:
    """:func:`compile_kernels` in a daemon thread (started); a failure there only costs the
    compile time it meant to save, so it is not reported."""
    def run() -> None:
        try:
            compile_kernels()
        except Exception:  # noqa: BLE001, S110 - the views compile on their own when called
            pass

    thread = threading.Thread(target=run, name="polyprof-warm-kernels", daemon=True)
    thread.start()
    return thread
