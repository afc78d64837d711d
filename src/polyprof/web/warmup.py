"""Compiling the web view's later kernels while the first page loads (``polyprof serve``).

numba compiles a kernel the first time it is called with a given set of
argument types, and caches the machine code beside the module: the very
first ``serve`` after an install spent seconds on the first sandwich, the
first filter or the inverted graph (4.8 s for the benchmark pprof's first
sandwich, 0.55 s later). :func:`start` calls those kernels once on a tiny
tree, with the argument types the views pass (a flame graph's int32 parents
and name ids, int64 weights), in a background thread started once the inputs
are read: it compiles while the landing graph is built and the user reads
the landing page. When numba's cache already holds these kernels (every
later run) it does nothing: loading them there competed with the landing
build for the interpreter (0.5-0.8 s of start-up on a loaded machine), and
each view loads its own in milliseconds. Nothing is loaded for inputs small
enough to stay on the numpy kernels (the landing graph's own rule:
:func:`polyprof.model.tree.compiled`).
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

import numpy as np

from polyprof.analysis import label_groups
from polyprof.analysis.sandwich import _view_kernel
from polyprof.model import tree

__all__ = ["compile_kernels", "start", "start_labels"]

#: The kernels (numba dispatchers of :mod:`polyprof.model._tree_compiled`) called below.
KERNELS = ("_reversed_paths", "_path_sums", "_preorder_layout", "_keep", "_compact")


def cached(fast: ModuleType) -> bool:
    """numba's cache holds every kernel of :data:`KERNELS` (their index files exist): a run
    after the first. False when it cannot tell (a numba without these internals)."""
    view = _view_kernel(tree.COMPILED_WHEN_LOADED)
    try:
        return all(os.path.exists(getattr(fast, name)._cache._cache_file._index_path) for name in KERNELS) and \
            (view is None or os.path.exists(view._view._cache._cache_file._index_path))
    except AttributeError:
        return False


def compile_kernels(size: int = tree.COMPILED_WHEN_LOADED) -> bool:
    """Call every tree kernel a view reaches after the landing page once on a tiny tree, so
    that numba compiles (or loads) it now; False when trees of ``size`` items (the largest
    input's callsites; by default: only if already loaded) stay on numpy (small inputs, no
    numba, ``POLYPROF_KERNELS=numpy``)."""
    fast = tree.compiled(size)
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
    if (view := _view_kernel(size)) is not None:  # the full-resolution sandwich's callers
        view.caller_view(parent, name, np.array([0, 1, 2, 1], np.int32), np.array([2, 3], np.int64), weight[2:], 1)
    return True


def start(size: int) -> threading.Thread:
    """:func:`compile_kernels` for inputs of ``size`` callsites in a daemon thread (started),
    unless numba's cache holds the kernels already; a failure there only costs the compile
    time it meant to save, so it is not reported."""
    def run() -> None:
        try:
            fast = tree.compiled(size)
            if fast is not None and not cached(fast):
                compile_kernels(size)
        except Exception:  # noqa: BLE001, S110 - the views compile on their own when called
            pass

    thread = threading.Thread(target=run, name="polyprof-warm-kernels", daemon=True)
    thread.start()
    return thread


_labels_started = threading.Event()


def start_labels(size: int) -> threading.Thread | None:
    """Load the group-by-label kernel (:func:`~polyprof.analysis.label_groups.load_kernels`) for
    inputs of ``size`` callsites in a daemon thread, once per process: the labels panel asks for
    it, and its group by is the next click (0.4 s of its first answer otherwise). None when
    started before."""
    if _labels_started.is_set():
        return None
    _labels_started.set()

    def run() -> None:
        try:
            label_groups.load_kernels(size)
        except Exception:  # noqa: BLE001, S110 - the group by loads it on its own when called
            pass

    thread = threading.Thread(target=run, name="polyprof-warm-labels", daemon=True)
    thread.start()
    return thread
