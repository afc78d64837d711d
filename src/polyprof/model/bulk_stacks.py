"""Bulk stack interning: many stacks (CSR) into a callsite tree numbered in pre-order.

This is :meth:`ProfileBuilder.stacks_from_csr`'s engine, for a builder with
no callsites yet. It walks all stacks together, one depth at a time:

1. **Frontier.** Every stack that still has frames is a row of the
   frontier: the stack, the position of its frame at this depth in ``flat``
   and the frames it has left; beside it, the callsite each row's previous
   frame became (its parent at this depth).
2. **Intern the level.** Key = (parent callsite, location). A stable sort
   groups equal keys (skipped when already sorted, which is common because
   the frontier stays ordered by parent); the first of each run of equal keys
   is a new callsite, so callsites of one depth get consecutive ids ordered
   by parent, then location.
3. **Emit lone tails.** A stack that is alone under its new callsite shares
   nothing below it: its remaining frames become one chain of new callsites
   at once, and the stack leaves the frontier. On real profiles this ends
   most stacks long before their leaves.
4. **Retire finished stacks** (no frame left) and step one frame down.
5. **Pre-order.** Subtree sizes are summed bottom-up over the levels (the
   chains' sizes are known from their lengths), then positions are handed
   out top-down (:func:`polyprof.model.tree.place_children`); chains run
   straight down from the callsite they hang under.
6. **Renumber** every column by pre-order position, so each subtree is an id
   range that analyses scan sequentially.

Keys are int32 when (callsites x locations) fits: sorts and gathers are
cheaper; narrow location ids (uint8/uint16) stay narrow for the same reason.

Large inputs take a compiled road to the same numbering
(:mod:`polyprof.model._stacks_compiled`: sort the stacks by content, then
one walk), with the tree kernels' rule for when numba is worth loading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import NamedTuple

import numpy as np

from polyprof.model import tree
from polyprof.wire import vector
from polyprof.wire.vector import compiled_wanted, gather_runs, hash_factorize_spans, import_compiled

__all__ = ["InternedStacks", "intern_stacks", "size_dtype", "stack_kernels"]


@dataclass
class InternedStacks:
    """The callsite tree of bulk-interned stacks, in pre-order (see the module docstring)."""

    leaf: np.ndarray       # leaf callsite of every input stack (-1: empty stack)
    parent: np.ndarray     # int32, -1 for roots
    location: np.ndarray   # int32
    depth: np.ndarray      # int32
    size: np.ndarray       # subtree size (int32, int64 from 2**31 callsites): the subtree of c is ids [c, c + size[c])


class _Chains(NamedTuple):
    """One batch of lone tails, emitted one after another from id ``first``."""

    first: int
    within: np.ndarray     # every callsite's place in its chain (0 = just below ``attach``)
    length: np.ndarray     # callsites in each chain
    attach: np.ndarray     # the callsite each chain hangs under


@dataclass
class _Frontier:
    """The stacks still being walked at the current depth, ordered by parent callsite."""

    stack: np.ndarray      # which input stack
    pos: np.ndarray        # position of its frame at this depth in ``flat``
    remaining: np.ndarray  # frames it has from this depth down (>= 1)

    def take(self, index: np.ndarray) -> _Frontier:
        return _Frontier(self.stack[index], self.pos[index], self.remaining[index])


@dataclass
class _Walk:
    """State of one bulk interning: the input and what has been built so far."""

    flat: np.ndarray
    n_loc: int             # location ids are < n_loc - 1 (key width)
    dtype: type            # key dtype: np.int32 or np.int64
    step: int              # -1 walks ``flat`` leaf-first stacks backwards
    leaf: np.ndarray       # result: leaf callsite per stack, in construction ids
    next_id: int = 0
    levels: list[tree.Level] = field(default_factory=list)  # callsites interned per depth
    chains: list[_Chains] = field(default_factory=list)
    location: list[np.ndarray] = field(default_factory=list)  # per batch of new ids, in id order
    depth: list[np.ndarray] = field(default_factory=list)


def intern_stacks(flat: np.ndarray, offsets: np.ndarray, leaf_first: bool, distinct: bool = False) -> InternedStacks:
    """Intern stack ``i`` = ``flat[offsets[i]:offsets[i+1]]`` (leaf first or root first) for every i.

    Many stacks that repeat (a simpleperf sample per event, pprof samples apart only by their
    labels) are first grouped by content with the compiled hash table, and only the distinct
    ones are walked: the same tree, numbered the same (siblings are ordered by location, so
    the order and multiplicity of the input stacks change no id). ``distinct``: the caller knows
    the stacks hardly repeat (a table of stacks), so the grouping would be wasted."""
    lengths = np.diff(offsets)
    grouped = None if distinct else hash_factorize_spans(flat, offsets[:-1], lengths)
    if grouped is None or grouped[1].size > _REPEATS_WORTH * lengths.size:
        return _intern(flat, offsets, leaf_first)
    group, first = grouped
    sub = np.zeros(first.size + 1, dtype=np.int64)
    np.cumsum(lengths[first], out=sub[1:])
    built = _intern(gather_runs(flat, offsets[first], lengths[first]), sub, leaf_first)
    built.leaf = built.leaf[group]
    return built


#: Distinct stacks (as a share of all) below which only the distinct ones are walked.
_REPEATS_WORTH = 0.8


_compiled: ModuleType | None | bool = None  # polyprof.model._stacks_compiled once loaded; False: no numba


def stack_kernels(frames: int) -> ModuleType | None:
    """The compiled stack kernels for ``frames`` frames of work, or None: the tree kernels' sizes
    (numba's load pays from ``COMPILED_FROM`` frames, from ``COMPILED_WHEN_LOADED`` once a read
    already loaded the compiled decoders)."""
    global _compiled
    loaded = isinstance(_compiled, ModuleType) or vector.compiled()
    if not compiled_wanted(frames, tree.COMPILED_WHEN_LOADED if loaded else tree.COMPILED_FROM):
        return None
    if _compiled is None:
        _compiled = import_compiled("polyprof.model._stacks_compiled")
    return _compiled if isinstance(_compiled, ModuleType) else None


def _intern(flat: np.ndarray, offsets: np.ndarray, leaf_first: bool) -> InternedStacks:
    """:func:`intern_stacks` of every stack given, repeated or not."""
    fast = stack_kernels(len(flat))
    if fast is not None:
        return InternedStacks(*fast.intern_stacks(flat, offsets, leaf_first))
    n_loc = int(flat.max()) + 2
    wide = (len(flat) + 1) * n_loc >= 2**31
    dtype = np.int64 if wide else np.int32
    if flat.itemsize > np.dtype(dtype).itemsize:  # narrow inputs (uint8/16 ids) stay narrow: cheaper gathers
        flat = flat.astype(dtype)
    walk = _Walk(flat, n_loc, dtype, -1 if leaf_first else 1, np.full(len(offsets) - 1, -1, dtype=np.int32))
    frontier = _start(offsets, leaf_first, dtype)
    parent = np.full(frontier.stack.size, -1, dtype=dtype)  # callsite above each row (-1 at depth 0)
    depth = 0
    while frontier.stack.size:
        node, fresh, frontier = _intern_level(walk, frontier, parent, depth)
        alone = _emit_lone_tails(walk, frontier, node, fresh, depth)
        frontier, parent = _step_down(walk, frontier, node, alone)
        depth += 1
    return _renumber(walk)


def _start(offsets: np.ndarray, leaf_first: bool, dtype: type) -> _Frontier:
    """Step 1: the frontier at depth 0 (stacks with at least one frame)."""
    lengths = np.diff(offsets)
    stack = np.flatnonzero(lengths > 0)
    pos = (offsets[stack + 1] - 1 if leaf_first else offsets[stack]).astype(np.int64)
    return _Frontier(stack, pos, lengths[stack].astype(dtype))


def _intern_level(walk: _Walk, f: _Frontier, parent: np.ndarray,
                  depth: int) -> tuple[np.ndarray, np.ndarray, _Frontier]:
    """Step 2: the callsite of every frontier row at ``depth``; the frontier comes back in key order.

    Returns (callsite of each row, True where a row is the first of its
    callsite, the reordered frontier).
    """
    dtype = walk.dtype
    key = (parent + 1) * dtype(walk.n_loc) + walk.flat[f.pos]
    # The frontier stays ordered by parent, so the stable sort only reorders
    # within runs of siblings (and is skipped when nothing is out of order).
    order, key, fresh = tree.sorted_runs(key)
    if order is not None:
        f = f.take(order)
    node = np.cumsum(fresh, dtype=dtype) + dtype(walk.next_id - 1)
    uniq = key[fresh]
    walk.levels.append(tree.Level.of(slice(walk.next_id, walk.next_id + uniq.size),
                                     (uniq // walk.n_loc - 1).astype(np.int32)))
    walk.location.append((uniq % walk.n_loc).astype(np.int32))
    walk.depth.append(np.full(uniq.size, depth, dtype=np.int32))
    walk.next_id += uniq.size
    return node, fresh, f


def _emit_lone_tails(walk: _Walk, f: _Frontier, node: np.ndarray, fresh: np.ndarray,
                     depth: int) -> np.ndarray:
    """Step 3: rows alone under their callsite with frames left become chains; returns those rows."""
    alone = fresh.copy()
    alone[:-1] &= fresh[1:]
    alone &= f.remaining > 1
    if not alone.any():
        return alone
    length = (f.remaining[alone] - 1).astype(np.int64)
    within = tree.segment_positions(length)
    start = np.repeat(f.pos[alone] + walk.step, length)
    walk.location.append(walk.flat[start + walk.step * within].astype(np.int32))
    walk.depth.append((depth + 1 + within).astype(np.int32))
    walk.leaf[f.stack[alone]] = walk.next_id + np.cumsum(length) - 1  # each chain's last callsite
    walk.chains.append(_Chains(walk.next_id, within, length, node[alone]))
    walk.next_id += within.size
    return alone


def _step_down(walk: _Walk, f: _Frontier, node: np.ndarray,
               alone: np.ndarray) -> tuple[_Frontier, np.ndarray]:
    """Step 4: retire rows with no frame left (or emitted as chains); the rest
    move one frame down, under their callsite at this depth (returned as the parents)."""
    last = f.remaining == 1
    done = last | alone
    if done.any():
        walk.leaf[f.stack[last]] = node[last]
        more = ~done
        f, node = f.take(more), node[more]
    return _Frontier(f.stack, f.pos + walk.step, f.remaining - 1), node


def _preorder(walk: _Walk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 5: pre-order position, its parent's position (-1 for roots) and subtree size of every callsite."""
    n = walk.next_id
    size = np.ones(n, dtype=np.int64)
    for first, within, length, attach in walk.chains:  # a chain's k-th callsite holds the rest of the chain
        size[first:first + within.size] = np.repeat(length, length) - within
        size[attach] += length
    tree.add_subtree_sums(size, walk.levels)
    parent_tin = np.empty(n, dtype=np.int32)
    tin = tree.place_children(size, walk.levels, 1, parent_tin)
    for first, within, length, attach in walk.chains:
        ids = slice(first, first + within.size)
        tin[ids] = np.repeat(tin[attach], length) + 1 + within
        parent_tin[ids] = tin[ids] - 1  # a chain runs straight down from the callsite it hangs under
    return tin, parent_tin, size


def size_dtype(n: int) -> type:
    """The subtree-size column's type for ``n`` callsites: int32 (4 bytes a callsite held by the
    profile, not 8) unless a subtree could reach 2**31."""
    return np.int32 if n < 2**31 else np.int64


def _renumber(walk: _Walk) -> InternedStacks:
    """Step 6: every column indexed by pre-order position."""
    n = walk.next_id
    location = np.concatenate(walk.location).astype(np.int32)
    depth = np.concatenate(walk.depth)
    walk.location, walk.depth = [], []
    tin, parent_tin, size = _preorder(walk)
    out = InternedStacks(np.where(walk.leaf >= 0, tin[np.maximum(walk.leaf, 0)], -1).astype(np.int32),
                         np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32),
                         np.empty(n, dtype=np.int32), np.empty(n, dtype=size_dtype(n)))
    out.parent[tin] = parent_tin
    out.location[tin] = location
    out.depth[tin] = depth
    out.size[tin] = size
    return out
