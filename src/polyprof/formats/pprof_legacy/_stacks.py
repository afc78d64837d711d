"""pprof's corrections of legacy stacks, on address columns.

Every function takes a :class:`~._parsed.Parsed` whose samples are columns
(``flat`` addresses leaf first, split by ``offsets``) and changes them as
pprof's legacy parsers change their sample objects.
"""

from __future__ import annotations

import numpy as np

from polyprof.formats.pprof_legacy._parsed import Parsed
from polyprof.model.tree import segment_owner

__all__ = ["drop_handler_frames", "dedupe_leaf", "number_locations"]


def _remove(p: Parsed, drop: np.ndarray) -> None:
    """Remove the frames where ``drop`` (over ``flat``) is true."""
    lengths = np.diff(p.offsets)
    sample_of = segment_owner(lengths)
    lengths = lengths - np.bincount(sample_of[drop], minlength=len(lengths))
    p.offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    p.flat = p.flat[~drop]
    if p.frame_loc.size:  # numbered: one location per frame
        p.frame_loc = p.frame_loc[~drop]


def _second_frames(p: Parsed) -> np.ndarray:
    """Index in ``flat`` of each sample's second frame (samples with at least two)."""
    starts = p.offsets[:-1]
    return starts[np.diff(p.offsets) > 1] + 1


def drop_handler_frames(p: Parsed) -> None:
    """Remove a second frame common to nearly all samples: the signal handler's.

    The leaf comes from the signal context and is right; the frame above it
    is often pushed by the handler. An address second in all samples but one
    in 32 is removed from them, at most twice. Two addresses can never both
    qualify, so pprof's map order does not matter."""
    n = len(p.offsets) - 1
    for _ in range(2):
        second = _second_frames(p)
        if not len(second):
            return
        addresses, counts = np.unique(p.flat[second], return_counts=True)
        hit = np.flatnonzero(counts >= n - n // 32)
        if not len(hit):
            continue
        drop = np.zeros(len(p.flat), dtype=bool)
        drop[second[p.flat[second] == addresses[hit[0]]]] = True
        _remove(p, drop)


def number_locations(p: Parsed) -> None:
    """One location per address, numbered in order of first use (pprof's
    ``remapLocationIDs``); ``frame_loc`` gives each frame its location."""
    addresses, first, inverse = np.unique(p.flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    p.loc_address = addresses[order]
    p.frame_loc = rank[inverse.reshape(-1)]


def dedupe_leaf(p: Parsed) -> None:
    """Remove a caller equal to the leaf minus one: the same pc seen twice (by
    the unwinder and the signal context). Its location stays listed, as in pprof."""
    second = _second_frames(p)
    leaf = p.flat[second - 1]
    drop = np.zeros(len(p.flat), dtype=bool)
    drop[second[leaf == p.flat[second] + np.uint64(1)]] = True
    if drop.any():
        _remove(p, drop)
