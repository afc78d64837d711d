"""A CallStackProfile's stack table and StackSamples decoded as columns (no step per frame or sample).

The reader parses the profile with upb but keeps ``stack`` and
``stack_sample`` entries as bytes (``schema.messages(lazy=True)``); here
they (found in the input by :mod:`.spans`) are walked together by the field walker: every Location of
every stack at once, then every StackSample and its metadata items.
Locations are interned by (module, address, function name) in bulk,
names compared by content; stacks go to the builder's level-wise
interning. Metadata deltas are replayed into the items active at each
sample with forward fills per metadata key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from polyprof.errors import MalformedInputError
from polyprof.formats.chromium.spans import Entries
from polyprof.formats.span_bytes import decoded, factorize_in_order, last_varints, sub_spans
from polyprof.model.builder import ProfileBuilder
from polyprof.model.columns import factorize_rows, factorize_spans
from polyprof.wire import vector as V

__all__ = ["StackSamples", "stack_samples", "stack_table"]


def _int32(v: np.ndarray) -> np.ndarray:
    """The low 32 bits of a uint64 column as a signed int32 widened to int64, in place (the
    decoded columns are used once)."""
    v &= np.uint64(0xFFFFFFFF)
    out = v.view(np.int64)
    out ^= 1 << 31
    out -= 1 << 31
    return out


def _zigzag(v: np.ndarray) -> np.ndarray:
    return (v >> np.uint64(1)).astype(np.int64) ^ -(v & np.uint64(1)).astype(np.int64)


def stack_table(b: ProfileBuilder, entries: Entries, modules: list[int], ctx: Any,
                fill_names: bool) -> np.ndarray:
    """Leaf callsite of every Stack (``entries``, see :mod:`.spans`; ``frame[0]`` is the leaf).
    ``modules``: the mapping of each module index; ``ctx.bad_utf8`` counts names that are not UTF-8 (once per location, as
    before). ``fill_names``: a nameless frame takes the name of a named frame at the same
    module and address (how polyprof's writer shares names, see ``callstack``)."""
    buf, starts, ends = entries
    per_stack, rep, scalars, present, name_start, name_len = _frame_rows(buf, starts, ends)
    address, module, has_module = scalars[:, 0], _int32(scalars[:, 1]), present[:, 1]
    bad = has_module & ((module < 0) | (module >= len(modules)))
    if bad.any():
        raise MalformedInputError(f"a frame refers to module {int(module[np.argmax(bad)])}, but the profile "
                                  f"has {len(modules)}")
    named = name_len >= 0
    name_len = np.where(named, name_len, 0)
    name, first = factorize_spans(buf, name_start, name_len)  # 0: "" when some are nameless
    raw = memoryview(buf.data)
    module = np.where(has_module, module, -1)
    # Frames grouped by what they hold (few distinct rows); names are filled on those rows, in
    # order of first sight, so "the first named frame" is the first such row.
    held, hfirst = factorize_in_order([module, address.view(np.int64), name, named.view(np.int8)])
    h_module, h_address, h_name = module[hfirst], address[hfirst], name[hfirst]
    if fill_names:
        h_name = _filled(h_name, ~named[hfirst], h_module, h_address)  # an explicitly empty name stays empty
    key, kfirst = factorize_rows([h_module, h_address.view(np.int64), h_name])  # the old reader's location key
    raws = [raw[a:a + ln] for a, ln in zip(name_start[first].tolist(), name_len[first].tolist())]
    fast = decoded(raws)
    texts = [(t, False) for t in fast] if fast is not None else [_decode(bytes(r)) for r in raws]
    fn_of_name = _functions(b, [t for t, _ in texts])
    k_name = h_name[kfirst]
    ctx.bad_utf8 += int(np.array([bad for _, bad in texts], dtype=bool)[k_name].sum()) if texts else 0
    mapping_of = np.array(modules + [-1], dtype=np.int64)
    k_mapping, k_fn, k_address = mapping_of[h_module[kfirst]], fn_of_name[k_name], h_address[kfirst]
    loc, lfirst = factorize_rows([k_mapping, k_address.view(np.int64), k_fn])  # equal locations, one row
    has = k_fn[lfirst] >= 0
    zeros = np.zeros(int(has.sum()), dtype=np.int64)
    row0 = b.add_locations_bulk(k_mapping[lfirst], k_address[lfirst], np.zeros(lfirst.size, dtype=bool),
                                has.astype(np.int64), k_fn[lfirst][has], zeros, zeros)
    per_row = (row0 + loc[key])[held]
    locs = per_row.astype(np.min_scalar_type(int(per_row.max()) if per_row.size else 0))[rep]  # narrow: one per frame
    stack_offsets = np.zeros(starts.size + 1, dtype=np.int64)
    np.cumsum(per_stack, out=stack_offsets[1:])
    return b.stacks_from_csr(locs, stack_offsets, leaf_first=True, distinct=True)


def _frame_rows(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """(frames per stack, row of each frame, then per row: (address, module) values and
    present, name start, name length (-1: none)). A row per distinct frame byte string
    (:func:`polyprof.formats.span_bytes.sub_spans`): a frame recurs in many stacks (24.8M frames,
    91 distinct), and decoding each once is what makes reading quick; rows are in order of
    first sight, so grouping them numbers things as grouping the frames would."""
    per_stack, rep, _, lo, length, _ = sub_spans(buf, starts, ends, 1)
    f = V.walk_fields(buf, lo, lo + length)
    scalars, present = last_varints(f, lo.size, (1, 2))
    names = f.select(3, V.LEN)
    name_start = np.zeros(lo.size, dtype=np.int64)
    name_len = np.full(lo.size, -1, dtype=np.int64)
    name_start[names.msg], name_len[names.msg] = names.start, names.length  # the last one is written last
    return per_stack, rep, scalars, present, name_start, name_len


def _functions(b: ProfileBuilder, names: list[str]) -> np.ndarray:
    """The function of every name (-1 for ""): the rows ``b.function(name)`` would give, in one
    bulk call (23k names: 0.1 s less)."""
    out = np.full(len(names), -1, dtype=np.int64)
    named = [i for i, t in enumerate(names) if t]
    if named:
        ids = np.array([b.string(names[i]) for i in named], dtype=np.int64)
        zeros = np.zeros(ids.size, dtype=np.int64)
        out[named] = b.functions_bulk(ids, zeros, zeros, zeros)
    return out


def _decode(raw: bytes) -> tuple[str, bool]:
    """A name as text, and whether it was not valid UTF-8 (then decoded with replacement)."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), True


def _filled(name: np.ndarray, nameless: np.ndarray, module: np.ndarray, address: np.ndarray) -> np.ndarray:
    """Nameless rows take the name of the first named row at the same (module, address)."""
    if not nameless.any() or nameless.all():
        return name
    place, _ = factorize_rows([module, address.view(np.int64)])
    named = np.flatnonzero(~nameless)
    first_named = np.full(int(place.max()) + 1, -1, dtype=np.int64)
    first_named[place[named][::-1]] = named[::-1]  # reversed: the first one is written last
    donor = first_named[place]
    take = nameless & (donor >= 0)
    out = name.copy()
    out[take] = name[donor[take]]
    return out


@dataclass
class StackSamples:
    """StackSample fields as columns, and the metadata items (owner sample, name index, value, key)."""

    stack: np.ndarray
    time: np.ndarray
    has_time: np.ndarray
    continued: np.ndarray
    backtrace: np.ndarray
    has_backtrace: np.ndarray
    weight: np.ndarray
    has_weight: np.ndarray
    count: np.ndarray
    has_count: np.ndarray
    items: tuple[np.ndarray, ...]  # owner, name index, value, has value, key, has key

    def __len__(self) -> int:
        return self.stack.size


def stack_samples(entries: Entries) -> StackSamples:
    """Every StackSample (``entries``, see :mod:`.spans`) as columns."""
    buf, starts, ends = entries
    n = starts.size
    vals, has = V.scalar_fields(buf, starts, ends, (1, 2, 3, 4, 6, 7))
    stack, time, continued, backtrace, weight, count = (vals[:, j] for j in range(6))
    per_sample, ivals, ihas = V.nested_scalars(buf, starts, ends, 5, (1, 2, 3))  # metadata items
    owner = np.repeat(np.arange(n, dtype=np.int64), per_sample)
    return StackSamples(_int32(stack), _int32(time), has[:, 1], continued != 0, _int32(backtrace), has[:, 3],
                        weight.view(np.int64), has[:, 4], count.view(np.int64), has[:, 5],
                        (owner, _int32(ivals[:, 0]), _zigzag(ivals[:, 1]), ihas[:, 1], _zigzag(ivals[:, 2]),
                         ihas[:, 2]))


MetadataState = list[tuple[int, "int | None", int]]  # active (name index, key or None, value)


def metadata_states(items: tuple[np.ndarray, ...], n: int) -> tuple[np.ndarray, list[MetadataState]]:
    """The metadata active at every sample, replayed from the deltas ``items`` (see
    :class:`StackSamples`): a state id per sample and each state's active items. A later item
    of a key overrides an earlier one; an item without a value removes its key."""
    owner, name, value, has_value, key, has_key = items
    if not owner.size:
        return np.zeros(n, dtype=np.int64), [[]]
    ident, ifirst = factorize_rows([name, has_key.astype(np.int64), np.where(has_key, key, 0)])
    k = int(ident.max()) + 1
    points, row = np.unique(owner, return_inverse=True)  # samples where something changes
    m = points.size
    if m * k > 1 << 24:  # too many keys for a (changes x keys) table: replay change by change
        return _replay(items, ident, points, row.reshape(-1), n)
    touch = np.zeros((m, k), dtype=np.int8)  # 0 untouched, 1 set, 2 removed
    val = np.zeros((m, k), dtype=np.int64)
    row = row.reshape(-1)
    val[row, ident] = value  # a key's last item in a sample wins
    touch[row, ident] = np.where(has_value, 1, 2)
    steps = np.arange(m)
    for j in range(k):  # carry each key's state forward to the next change
        last = np.maximum.accumulate(np.where(touch[:, j] != 0, steps, -1))
        val[:, j] = np.where(last >= 0, val[np.maximum(last, 0), j], 0)
        touch[:, j] = np.where(last >= 0, touch[np.maximum(last, 0), j], 0)
    active = touch == 1
    sid, sfirst = factorize_rows([active[:, j].astype(np.int64) for j in range(k)] +
                                 [np.where(active[:, j], val[:, j], 0) for j in range(k)])
    idents = [(int(name[ifirst[j]]), int(key[ifirst[j]]) if has_key[ifirst[j]] else None) for j in range(k)]
    states: list[MetadataState] = [[(*idents[j], int(val[r, j])) for j in np.flatnonzero(active[r]).tolist()]
                                   for r in sfirst.tolist()]
    at = np.searchsorted(points, np.arange(n), side="right") - 1
    states.append([])  # before the first change
    return np.where(at >= 0, sid[np.maximum(at, 0)], len(states) - 1), states


def _replay(items: tuple[np.ndarray, ...], ident: np.ndarray, points: np.ndarray, row: np.ndarray,
            n: int) -> tuple[np.ndarray, list[MetadataState]]:
    """:func:`metadata_states` one change at a time (for profiles with very many keys)."""
    _, name, value, has_value, key, has_key = (c.tolist() for c in items)
    active: dict[int, tuple[int, int | None, int]] = {}
    index: dict[tuple, int] = {}
    states: list[MetadataState] = []
    sid = np.zeros(points.size, dtype=np.int64)
    bounds = np.searchsorted(row, np.arange(points.size + 1)).tolist()
    for r in range(points.size):
        for i in range(bounds[r], bounds[r + 1]):
            if has_value[i]:
                active[int(ident[i])] = (name[i], key[i] if has_key[i] else None, value[i])
            else:
                active.pop(int(ident[i]), None)
        frozen = tuple(sorted(active.items()))
        got = index.get(frozen)
        if got is None:
            got = index[frozen] = len(states)
            states.append([item for _, item in frozen])
        sid[r] = got
    at = np.searchsorted(points, np.arange(n), side="right") - 1
    states.append([])
    return np.where(at >= 0, sid[np.maximum(at, 0)], len(states) - 1), states
