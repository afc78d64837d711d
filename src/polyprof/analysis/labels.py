"""Labels reshaped as ``go tool pprof`` does before a report.

- :func:`keep_label_keys` — ``-tagshow``/``-taghide``: drop the labels whose
  key does not match / matches a regular expression (samples stay);
- :func:`label_frames` — ``-tagroot``/``-tagleaf``: every sample gets one
  pseudo-frame per listed label key at the root (or the leaf) of its stack,
  named after the sample's values of that label (numbers in their unit,
  several values joined by commas; empty when the sample has none), with the
  key as its file name, so reports and flame graphs split by label.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from polyprof.analysis import tags
from polyprof.analysis.stacks import CompiledTwin
from polyprof.errors import OptionsError
from polyprof.model import tree
from polyprof.model.builder import ProfileBuilder
from polyprof.model.merge import copy_into
from polyprof.model.profile import CallsiteTable, Profile, SampleTable
from polyprof.model.units import scaled_label

__all__ = ["keep_label_keys", "label_frames", "option_regex"]


def option_regex(name: str, text: str | None) -> re.Pattern[str] | None:
    """The regular expression of option ``name`` (None when unset); an OptionsError naming
    the option when it does not compile."""
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise OptionsError(f"bad regular expression {{{name}}}={text!r}: {exc}", options=(name,)) from None


def keep_label_keys(p: Profile, show: str | None, hide: str | None) -> tuple[Profile, bool, bool]:
    """``p`` without the labels ``show``/``hide`` remove; and whether each matched a key."""
    rx_show, rx_hide = option_regex("tagshow", show), option_regex("taghide", hide)
    shown = hidden = False
    out: list[tuple] = []
    for labels in p.labelsets:
        kept = []
        for lab in labels:
            if rx_show is not None and not rx_show.search(lab.key):
                continue
            shown |= rx_show is not None
            if rx_hide is not None and rx_hide.search(lab.key):
                hidden = True
                continue
            kept.append(lab)
        out.append(tuple(kept))
    index: dict[tuple, int] = {}
    remap = np.array([index.setdefault(ls, len(index)) for ls in out], dtype=np.int32)
    s = p.samples
    table = SampleTable(stack=s.stack, values=s.values, labelset=remap[s.labelset] if len(remap) else s.labelset,
                        **{n: getattr(s, n) for n in s.OPTIONAL_COLUMNS})
    return dataclasses.replace(p, samples=table, labelsets=list(index)), shown, hidden


def label_frames(p: Profile, roots: str | None, leaves: str | None, unit: str = "minimum") -> tuple[Profile, bool]:
    """``p`` with pseudo-frames for the labels ``roots``/``leaves`` (comma-separated keys);
    and whether any sample had one of those labels."""
    root_keys = [k for k in (roots or "").split(",") if k]
    leaf_keys = [k for k in (leaves or "").split(",") if k]
    if not root_keys and not leaf_keys:
        return p, False
    b = ProfileBuilder(p.source_format)
    b.set_sample_types(p.sample_types)
    # the tables but not the callsites (the stacks are interned anew, all at once: a builder
    # holding callsites interns stack by stack) nor the label sets (mapped below)
    lmap = copy_into(b, dataclasses.replace(p, samples=SampleTable(values=np.zeros((0, len(p.sample_types)),
                                                                                  dtype=np.int64)),
                                            callsites=CallsiteTable(), labelsets=[()]))
    units = tags.num_label_units(p)
    matched = False
    frame: dict[tuple[str, str], int] = {}
    by_value: dict[tuple, int] = {}  # (key, strings, numbers): its frame (a label set per sample is common)

    def frames(labels: tuple, keys: list[str]) -> list[int]:
        nonlocal matched
        out = []
        for key in reversed(keys):  # pprof adds them last key first
            strs = tuple(lab.str for lab in labels if lab.key == key and lab.str is not None)
            nums = tuple(lab.num or 0 for lab in labels if lab.key == key and lab.str is None)
            matched |= bool(strs or nums)
            got = by_value.get((key, strs, nums))
            if got is None:
                name = ",".join([*strs, *(scaled_label(x, units.get(key, key), unit) for x in nums)])
                if (key, name) not in frame:
                    frame[(key, name)] = b.location(-1, 0, [(b.function(name, "", key, 0), 0, 0)])
                got = by_value[(key, strs, nums)] = frame[(key, name)]
            out.append(got)
        return out

    s = p.samples
    groups, inverse = _distinct_pairs(s.stack.astype(np.int64), s.labelset.astype(np.int64))
    # label frames per labelset, made in the order the groups first reach each labelset
    used, first = np.unique(groups[1], return_index=True)
    leaf_of: dict[int, list[int]] = {}
    root_of: dict[int, list[int]] = {}
    for ls in used[np.argsort(first, kind="stable")].tolist():
        leaf_of[ls] = frames(p.labelsets[ls], leaf_keys)
        root_of[ls] = frames(p.labelsets[ls], root_keys)
    framed = _framed_tree(p, lmap, groups, root_of) if len(root_keys) == 1 and not leaf_keys else None
    if framed is not None:  # the interner's tree, made from the callsites (no paths)
        stacks = b.take_callsites(*framed)
    else:
        flat, offsets = _framed_paths(p, lmap, groups, leaf_of, root_of)
        stacks = b.stacks_from_csr(flat, offsets, leaf_first=True)
    sets = np.array([b.labelset(ls) for ls in p.labelsets], dtype=np.int64)
    b.add_samples_bulk(stacks[inverse.reshape(-1)], s.values, sets[s.labelset],
                       **{n: getattr(s, n) for n in s.OPTIONAL_COLUMNS})
    out = b.finish()
    keep = ("default_sample_type", "period_type", "period", "time_nanos", "duration_nanos", "comments",
            "drop_frames", "keep_frames", "doc_url", "extras", "warnings")
    return dataclasses.replace(out, **{k: getattr(p, k) for k in keep}), matched


def _framed_paths(p: Profile, lmap: np.ndarray, groups: np.ndarray, leaf_of: dict[int, list[int]],
                  root_of: dict[int, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Every (stack, labelset) group's new stack, leaf first, as CSR (flat locations, offsets):
    its leaf label frames, its path (locations through ``lmap``), its root label frames. The
    paths are walked one depth at a time for all groups at once (a Python walk per group took
    a minute on 900k distinct stacks); large ones in one compiled walk per group
    (:mod:`polyprof.analysis._labels_compiled`, the same CSR)."""
    stack, ls = groups[0], groups[1]
    n = stack.size
    sets = int(ls.max(initial=-1)) + 1
    leaf, n_leaf = _frames_csr(leaf_of, sets)
    root, n_root = _frames_csr(root_of, sets)
    cs = p.callsites
    fast = _kernels(n + len(cs))
    if fast is not None:
        depth = np.zeros(n, np.int64)
        has = stack >= 0
        if has.any():  # (a profile without callsites has no depth to look up)
            depth[has] = cs.depth()[stack[has]].astype(np.int64) + 1
        offsets = _offsets(n_leaf[ls] + depth + n_root[ls])
        flat = fast.fill_paths(stack, ls, cs.parent, cs.location, lmap, offsets, leaf, root)
        if flat is not None:
            return flat, offsets
    depth = np.zeros(n, np.int64)
    cur = stack.copy()
    steps = []  # (groups alive, their location) per depth, leaf first
    alive = np.flatnonzero(cur >= 0)
    parent = cs.parent.astype(np.int64)
    location = cs.location.astype(np.int64)
    while alive.size:
        steps.append((alive, lmap[location[cur[alive]]]))
        depth[alive] += 1
        cur[alive] = parent[cur[alive]]
        alive = alive[cur[alive] >= 0]
    offsets = _offsets(n_leaf[ls] + depth + n_root[ls])
    flat = np.empty(int(offsets[-1]), np.int64)
    for d, (at, loc) in enumerate(steps):
        flat[offsets[at] + n_leaf[ls[at]] + d] = loc
    for (frames, own), counts, after in ((leaf, n_leaf, False), (root, n_root, True)):
        per = counts[ls]
        at = np.repeat(np.arange(n, dtype=np.int64), per)
        pos = tree.segment_positions(per)
        flat[offsets[at] + (n_leaf[ls[at]] + depth[at] if after else 0) + pos] = frames[own[ls[at]] + pos]
    return flat, offsets


def _framed_tree(p: Profile, lmap: np.ndarray, groups: np.ndarray,
                 root_of: dict[int, list[int]]) -> tuple[np.ndarray, ...] | None:
    """The callsites :func:`_framed_paths`' paths intern to, under one root frame per group,
    made from ``p``'s callsites where they are numbered as the interner numbers them
    (:func:`polyprof.analysis._labels_compiled.framed_tree`: the same ids, in one pass over the
    callsites and one over the new ones); None elsewhere, or without the compiled kernels."""
    stack, ls = groups[0], groups[1]
    cs = p.callsites
    fast = _kernels(stack.size + len(cs))
    if fast is None or not stack.size:
        return None
    per_set = np.full(int(ls.max(initial=-1)) + 1, -1, np.int64)
    for k, v in root_of.items():
        per_set[k] = v[0]
    frame_loc = np.unique(per_set[ls])
    made: tuple[np.ndarray, ...] | None = fast.framed_tree(cs.parent, cs.location, lmap, stack,
                                                           np.searchsorted(frame_loc, per_set[ls]), frame_loc)
    return made


def _frames_csr(table: dict[int, list[int]], sets: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Each labelset's label frames as CSR ((frames, starts), and the count per labelset)."""
    counts = np.zeros(sets, np.int64)
    for k, v in table.items():
        counts[k] = len(v)
    own = _offsets(counts)
    frames = np.zeros(int(own[-1]), np.int64)
    for k, v in table.items():
        frames[own[k]:own[k] + len(v)] = v
    return (frames, own), counts


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


_kernels = CompiledTwin("polyprof.analysis._labels_compiled")


def _distinct_pairs(stack: np.ndarray, ls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (stack, labelset) pairs sorted (a 2 x n array) and each sample's pair: what
    ``np.unique(axis=1)`` answers, by one int64 key per pair (its row sort took 46 s on 6.5M
    samples), counted through a table when the keys' range is small."""
    width = int(ls.max(initial=0)) + 1
    key = (stack + 1) * width + ls  # stack -1 (no stack) first, as the row sort puts it
    span = int(key.max(initial=-1)) + 1
    if span <= 4 * key.size + 1024:
        seen = np.zeros(span, np.int64)
        seen[key] = 1
        distinct = np.flatnonzero(seen)
        np.cumsum(seen, out=seen)
        inverse = seen[key] - 1
    else:
        distinct, inverse = np.unique(key, return_inverse=True)
    return np.stack([distinct // width - 1, distinct % width]), inverse.reshape(-1)
