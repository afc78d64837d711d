"""Sample and frame filters with ``go tool pprof`` semantics, plus time and thread selection.

:func:`apply` returns a new profile (the input is never changed) and says
which filters matched something, so front ends can warn (STYLE 7).

Name filters match a Python regular expression (``re.search``, as Go's
``MatchString``) against what pprof matches: a frame's function name (after
the same name clean-up the reports show), its source file name, and the file
of its mapping. They act on the profile before any granularity is applied,
as in pprof, so ``--focus`` finds functions even in a ``files`` report.

``focus``/``ignore``
    keep samples with a frame matching ``focus`` and none matching
    ``ignore``. Samples with empty stacks are dropped whenever any name
    filter is set (pprof does the same).
``hide``/``show``
    remove matching (resp. non-matching) inline lines from frames; frames
    left without lines vanish from stacks, samples left without frames are
    dropped. A mapping-file match hides (resp. shows) the whole frame.
``show_from``
    cut every stack above its outermost matching frame; samples with no
    matching frame are dropped.
``prune_from``
    cut every stack below its innermost frame whose function name (without
    its argument list) matches.
``tagfocus``/``tagignore``
    pprof's label filters: ``REGEX[,REGEX]`` on ``key:value`` of string
    labels, ``KEY=REGEX[,REGEX]`` on one key's values, or numeric ranges
    ``[KEY=]VALUE``, ``VALUE:``, ``:VALUE``, ``LOW:HIGH`` with units
    (``bytes=1kb:``, ``64mb``).
``pid``/``tid``
    keep samples of these processes/threads: the sample column, else a
    numeric ``pid``/``tid`` label (how pprof files written by polyprof
    carry them).
``thread``
    a regular expression on the thread name, found as the viewer writers
    find it (:func:`polyprof.model.threads.sample_threads`): a string label
    ``thread_name``, ``thread`` or ``comm`` on the sample, else the
    reader's thread table (``extras.threads``) looked up with
    the sample's tid.
``time_range``
    (start, end) in ns, keeping start <= t < end (as the Perfetto reader's
    own selection), relative to the profile start: the profile's
    ``time_nanos`` when samples are not older than it (a clock shared with
    the samples), otherwise the earliest sample (samples on a boot or
    monotonic clock). Needs sample times (the ``time`` column or a numeric
    ``time`` label).

Kept: every value column, label and table. Lost: the dropped samples and,
for hide/show/show_from/prune_from, the removed frames and inline lines.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyprof.analysis import stacks, tags
from polyprof.analysis.graph import display_name
from polyprof.analysis.labels import keep_label_keys, label_frames, option_regex
from polyprof.analysis.options import Options, resolve
from polyprof.errors import OptionsError
from polyprof.model.profile import Profile, ValueType
from polyprof.model.threads import sample_threads
from polyprof.model.tree import segment_owner, segment_positions

__all__ = ["FILTERS", "REMAKE_STACKS", "FilterResult", "apply", "hide_plan", "name_tree_filter", "prepare", "prune_plan",
           "time_origin", "without"]

#: Filter option names in the order pprof lists active filters.
FILTERS = ("focus", "ignore", "hide", "show", "show_from", "tagfocus", "tagignore", "tagshow", "taghide",
           "prune_from", "pid", "tid", "thread", "time_range")
#: Filters that remake the stacks other than by hiding frames: with none of them set, a hide
#: filter's stacks are the input's with the hidden frames taken out of every path, and the
#: other filters only select samples (what the flame graph's name-tree hide pass needs).
REMAKE_STACKS = ("show", "show_from", "prune_from", "tagroot", "tagleaf", "tagshow", "taghide")
_REGEX_OPTIONS = ("focus", "ignore", "hide", "show", "show_from", "prune_from", "thread")


@dataclass
class FilterResult:
    """A filtered profile, the profile it came from, and what each filter matched."""

    profile: Profile
    original: Profile
    #: ``name=value`` of every filter set, as pprof's "Active filters" legend shows them.
    active: list[str] = field(default_factory=list)
    #: For every filter set: whether it matched anything.
    matched: dict[str, bool] = field(default_factory=dict)
    #: For every sample of ``profile``: its row in ``original``.
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __repr__(self) -> str:
        flt = ", ".join(self.active) or "no filters"
        return f"FilterResult({len(self.profile.samples)} of {len(self.original.samples)} samples kept, {flt})"

    def unmatched(self) -> list[str]:
        """Names of the filters that matched nothing."""
        return [name for name, ok in self.matched.items() if not ok]

    def total(self, index: int) -> int:
        """Sum of absolute values of column ``index`` *before* filtering (pprof's 100%)."""
        values = self.original.samples.values
        if not values.size:
            return 0
        return int(np.abs(values[:, index], dtype=np.int64).sum())  # (int32 values: |-2**31| needs int64)

    def column(self, sample_index: str | int | None) -> tuple[int, np.ndarray, ValueType, int]:
        """(index, filtered values, value type, total before filtering) of a ``--sample-index``."""
        p = self.profile
        if not p.sample_types:
            return 0, np.zeros(len(p.samples), dtype=np.int64), ValueType("", ""), 0
        index = p.sample_index(sample_index)
        return index, p.samples.values[:, index], p.sample_types[index], self.total(index)


def prepare(src: Profile | FilterResult, options: Options | None) -> FilterResult:
    """``src`` filtered by ``options`` (a FilterResult is taken as already filtered)."""
    if isinstance(src, FilterResult):
        return src
    return apply(src, options)


def apply(p: Profile, options: Options | None = None, **overrides: Any) -> FilterResult:
    """Apply every filter set in ``options`` to ``p``, in pprof's order (see module doc).

    Keywords override fields of ``options`` (``apply(p, focus="sha256")``). Every
    analysis accepts the result in place of a profile; ``.profile`` is the
    filtered profile, ``.unmatched()`` the filters that matched nothing.
    """
    o = resolve(options, **overrides)
    rx = {name: option_regex(name, getattr(o, name)) for name in _REGEX_OPTIONS}
    tagf = tags.compile_filter("tagfocus", o.tagfocus, p)
    tagi = tags.compile_filter("tagignore", o.tagignore, p)
    framed = {}
    if o.tagroot or o.tagleaf:  # pprof adds label frames before any filter
        p, hit = label_frames(p, o.tagroot, o.tagleaf, o.unit)
        framed = {name: hit for name in ("tagroot", "tagleaf") if getattr(o, name)}
    result = FilterResult(p, p, _active(o))
    n = len(p.samples)
    matched = result.matched
    matched.update(framed)
    steps = [lambda q: _select(q, o, rx["thread"], matched)]
    if any(rx[k] is not None for k in ("focus", "ignore", "hide", "show")):
        steps.append(lambda q: _by_name(q, rx, matched))
    if (show_from := rx["show_from"]) is not None:
        steps.append(lambda q: _show_from(q, show_from, matched))
    if tagf is not None or tagi is not None:
        steps.append(lambda q: _by_tag(q, tagf, tagi, matched))
    if o.tagshow or o.taghide:
        steps.append(lambda q: _label_keys(q, o, matched))
    if (prune_from := rx["prune_from"]) is not None:
        steps.append(lambda q: _prune_from(q, prune_from, matched))
    mask = None  # the original's samples that stayed
    for step in steps:
        p, kept = step(p)  # kept: a mask of the samples that stayed, None for all
        if kept is not None:
            mask = kept if mask is None else stacks.within(mask, kept)
    result.profile = p
    result.rows = np.arange(n, dtype=_row_type(n)) if mask is None else _row_numbers(mask)
    return result


def _row_type(n: int) -> type:
    return np.int32 if n < 2**31 else np.int64


def _row_numbers(mask: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """``np.flatnonzero(mask)`` as int32 where the rows fit, a chunk at a time (no int64 array
    as long as the kept samples: 41 MB of 6.5M Perfetto samples)."""
    n = len(mask)
    out: np.ndarray = np.empty(int(np.count_nonzero(mask)), dtype=_row_type(n))
    at = 0
    for start in range(0, n, chunk):
        got = np.flatnonzero(mask[start:start + chunk])
        out[at:at + len(got)] = got
        out[at:at + len(got)] += start
        at += len(got)
    return out


def _label_keys(p: Profile, o: Options, matched: dict[str, bool]) -> tuple[Profile, None]:
    q, shown, hidden = keep_label_keys(p, o.tagshow, o.taghide)
    for name, hit in (("tagshow", shown), ("taghide", hidden)):
        if getattr(o, name):
            matched[name] = hit
    return q, None


def _active(o: Options) -> list[str]:
    out = []
    for name in FILTERS:
        value = getattr(o, name)
        if value is None or value == "":
            continue
        if name == "prune_from":
            continue  # pprof leaves it out of its legend
        if name in ("pid", "tid"):
            value = ",".join(str(v) for v in sorted(value))
        elif name == "time_range":
            value = ":".join("" if v is None else f"{v}ns" for v in value)
        out.append(f"{name}={value}")
    return out


# ---------------------------------------------------------------- name matching

@dataclass
class _Names:
    """Per-function and per-mapping match results of one regular expression."""

    line: np.ndarray      # per line row: its function matches by name or file
    mapping: np.ndarray   # per location: its mapping file matches
    location: np.ndarray  # per location: any line or the mapping matches


def _match(p: Profile, rx: re.Pattern[str]) -> _Names:
    strs = p.strings
    files = p.functions.filename.tolist()
    fn = np.array([bool(rx.search(name)) or bool(rx.search(strs[files[i]])) for i, name in enumerate(_names(p))]
                  + [False], dtype=bool)  # index -1: no function, never matches
    mp = np.array([bool(rx.search(strs[m])) for m in p.mappings.filename.tolist()] + [False], dtype=bool)
    line = fn[p.lines.function]
    loc_map = mp[p.locations.mapping]
    any_line = np.bincount(_line_positions(p)[0][line], minlength=len(p.locations)) > 0
    return _Names(line, loc_map, any_line | loc_map)


def _names(p: Profile) -> list[str]:
    """Function names as reports show them (what pprof's filters see after its symbolizer)."""
    strs = p.strings
    return [display_name(strs[n], strs[s]) for n, s in zip(p.functions.name.tolist(), p.functions.system_name.tolist())]


def _line_positions(p: Profile) -> tuple[np.ndarray, np.ndarray]:
    """Per line row: its location, and its position in it (0 = innermost)."""
    counts = np.diff(p.locations.line_start)
    return segment_owner(counts), segment_positions(counts)


def _by_name(p: Profile, rx: dict, matched: dict[str, bool]) -> tuple[Profile, np.ndarray]:
    """pprof's FilterSamplesByName: focus/ignore on samples, hide/show on lines."""
    keep_sample = np.ones(len(p.samples), dtype=bool)
    stack = p.samples.stack
    focused = np.ones(len(p.locations), dtype=bool)
    if rx["ignore"] is not None:
        ignored = _match(p, rx["ignore"]).location
        matched["ignore"] = bool(ignored.any())
        focused &= ~ignored
        keep_sample &= ~_on_stack(p, ignored, stack)
    if rx["focus"] is not None:
        fm = _match(p, rx["focus"]).location & focused
        matched["focus"] = bool(fm.any())
        focused = fm
    keep_sample &= _on_stack(p, focused, stack)
    line_keep = np.ones(len(p.lines), dtype=bool)
    touched = np.zeros(len(p.locations), dtype=bool)
    line_loc, _ = _line_positions(p)
    if rx["hide"] is not None:
        h = _match(p, rx["hide"])
        matched["hide"] = bool(h.location.any())
        touched |= h.location
        line_keep &= ~_hidden(h, line_loc)
    if rx["show"] is not None:
        s = _match(p, rx["show"])
        touched[:] = True
        line_keep &= s.mapping[line_loc] | s.line | (p.lines.function < 0)
    if not keep_sample.all():  # (a hide alone keeps them all: _reshape copies them once)
        p = stacks.take_samples(p, keep_sample)
    if not touched.any():
        return p, keep_sample
    hidden = _emptied(p, line_keep, touched, line_loc)
    if rx["show"] is not None:
        matched["show"] = bool((~hidden).any())
    cs = p.callsites
    p, still = _reshape(p, line_keep, ~hidden[cs.location])
    return p, stacks.within(keep_sample, still)


def _emptied(p: Profile, line_keep: np.ndarray, touched: np.ndarray, line_loc: np.ndarray) -> np.ndarray:
    """Per location: a hide or show touched it and left it without lines (it vanishes from stacks)."""
    return touched & (np.bincount(line_loc[line_keep], minlength=len(p.locations)) == 0)


def hide_plan(p: Profile, options: Options) -> tuple[np.ndarray, np.ndarray, bool]:
    """What ``options.hide`` alone does to ``p``'s frames (as :func:`apply`), before the stacks
    are remade: per line row whether it stays, per location whether it vanishes from every
    stack (left without lines), and whether the filter matched anything."""
    rx = option_regex("hide", options.hide)
    if rx is None:
        return np.ones(len(p.lines), dtype=bool), np.zeros(len(p.locations), dtype=bool), False
    h = _match(p, rx)
    line_loc, _ = _line_positions(p)
    line_keep = ~_hidden(h, line_loc)
    return line_keep, _emptied(p, line_keep, h.location, line_loc), bool(h.location.any())


def _on_stack(p: Profile, loc_flag: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """Per sample: some frame of its stack has ``loc_flag`` (False for empty stacks)."""
    if loc_flag.all():  # every frame has it (no focus, no ignore): only empty stacks lack it
        return stack >= 0
    cs = p.callsites
    on_path = np.append(stacks.path_any(cs, loc_flag[cs.location]), False)  # -1 -> False
    return on_path[stack]


def _reshape(p: Profile, line_keep: np.ndarray, keep: np.ndarray, cut: np.ndarray | None = None,
             stack: np.ndarray | None = None, keep_empty: bool = False) -> tuple[Profile, np.ndarray]:
    """Keep ``line_keep`` lines and ``keep`` callsites (``cut`` ones become roots); every
    sample moves to what became of callsite ``stack`` (its own stack by default). Samples
    left without a stack are dropped (unless ``keep_empty`` and they had none before);
    returns the profile and the kept-sample mask."""
    cs = p.callsites
    p, loc_map = stacks.rewrite_lines(p, line_keep)
    table, new_of = stacks.rebuild(cs, keep, loc_map[cs.location], cut)
    # int32 before the gather over every sample: the sample table's type, no second copy
    new_stack = np.append(new_of.astype(np.int32), -1)[p.samples.stack if stack is None else stack]
    kept = new_stack >= 0
    if keep_empty:
        kept |= p.samples.stack < 0
    p = stacks.take_samples(p, kept, new_stack)
    p.callsites = table
    return p, kept


def _show_from(p: Profile, rx: re.Pattern[str], matched: dict[str, bool]) -> tuple[Profile, np.ndarray]:
    """Cut stacks above the outermost matching frame; drop samples without one."""
    m = _match(p, rx)
    matched["show_from"] = bool(m.location.any())
    cs = p.callsites
    hit = m.location[cs.location]
    above = stacks.path_any(cs, hit, strict=True)
    return _reshape(p, _lines_up_to_last_match(p, m), hit | above, cut=hit & ~above)


def _lines_up_to_last_match(p: Profile, m: _Names) -> np.ndarray:
    """Lines of matching locations up to the outermost matching line (all if the mapping matched)."""
    line_loc, pos = _line_positions(p)
    last = np.full(len(p.locations), -1, dtype=np.int64)
    np.maximum.at(last, line_loc[m.line], pos[m.line])
    limit = np.where(m.mapping | (last < 0), np.iinfo(np.int64).max, last)
    return pos <= limit[line_loc]


def _prune_from(p: Profile, rx: re.Pattern[str], matched: dict[str, bool]) -> tuple[Profile, None]:
    """Cut stacks below their innermost frame whose function name matches."""
    plan = _prune_plan(p, rx)
    matched["prune_from"] = plan is not None
    if plan is None:
        return p, None
    line_keep, stack = plan
    p, _ = _reshape(p, line_keep, np.ones(len(p.callsites), dtype=bool), stack=stack, keep_empty=True)
    return p, None


def prune_plan(p: Profile, options: Options) -> tuple[np.ndarray, np.ndarray] | None:
    """What ``options.prune_from`` does to ``p`` (as :func:`apply`), before the stacks are
    remade: per line row whether it stays (a matching location loses its lines inside the
    match), and per sample the callsite its stack now ends at (its innermost callsite with a
    match; -1: no stack). None when it matches nothing (the profile stays as it is)."""
    rx = option_regex("prune_from", options.prune_from)
    return None if rx is None else _prune_plan(p, rx)


def _prune_plan(p: Profile, rx: re.Pattern[str]) -> tuple[np.ndarray, np.ndarray] | None:
    line_hit = _prune_hits(p, rx)
    line_loc, pos = _line_positions(p)
    first = np.full(len(p.locations), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, line_loc[line_hit], pos[line_hit])
    prune = first < np.iinfo(np.int64).max
    if not prune.any():
        return None
    cs = p.callsites
    old = p.samples.stack
    near = stacks.nearest(cs, prune[cs.location])  # per callsite (11M on the large pprof: no copy of it)
    deepest = np.full(old.shape, -1, dtype=np.int64)  # (old -1: no stack)
    has = old >= 0
    deepest[has] = near[old[has]]
    del near, has
    return pos >= np.where(prune, first, 0)[line_loc], np.where(deepest >= 0, deepest, old)


def _prune_hits(p: Profile, rx: re.Pattern[str]) -> np.ndarray:
    """Per line row: its function's name without arguments matches ``rx`` (prune_from's rule)."""
    fn = np.array([bool(n) and bool(rx.search(_simplify(n))) for n in _names(p)] + [False], dtype=bool)
    return fn[p.lines.function]


_RESERVED = ("(anonymous namespace)", "operator()")


def _simplify(name: str) -> str:
    """A function name without its argument list (pprof's simplifyFunc)."""
    name = name.removeprefix(".")
    i = 0
    while True:
        i = name.find("(", i)
        if i < 0:
            return name
        if any(name.startswith(r, i) or _ends_reserved(name, i, r) for r in _RESERVED):
            i += 1
            continue
        return name[:i]


def _ends_reserved(name: str, i: int, reserved: str) -> bool:
    # "operator()" holds its "(" inside: the match starts before i.
    at = reserved.find("(")
    return 0 < at <= i and name.startswith(reserved, i - at)


# ---------------------------------------------------------------- tags

def _by_tag(p: Profile, focus, ignore, matched: dict[str, bool]) -> tuple[Profile, np.ndarray]:  # noqa: ANN001
    ls = p.labelsets
    keep = np.ones(len(ls), dtype=bool)
    used = np.zeros(len(ls), dtype=bool)
    used[np.unique(p.samples.labelset)] = True
    if focus is not None:
        f = np.array([focus(s) for s in ls], dtype=bool)
        matched["tagfocus"] = bool((f & used).any())
        keep &= f
    if ignore is not None:
        g = np.array([ignore(s) for s in ls], dtype=bool)
        matched["tagignore"] = bool((g & used).any())
        keep &= ~g
    kept = keep[p.samples.labelset]
    return stacks.take_samples(p, kept), kept


# ---------------------------------------------------------------- selection

def _select(p: Profile, o: Options, thread: re.Pattern[str] | None,
            matched: dict[str, bool]) -> tuple[Profile, np.ndarray | None]:
    keep = np.ones(len(p.samples), dtype=bool)
    for name in ("pid", "tid"):
        wanted = getattr(o, name)
        if wanted:
            values, present = tags.sample_numbers(p, name)
            if values is None or present is None:
                raise OptionsError(f"cannot select {{{name}}}={','.join(map(str, sorted(wanted)))}: "
                                   f"the samples of this profile carry no {name}", options=(name,))
            hit = present & np.isin(values, np.fromiter(wanted, dtype=np.int64))
            matched[name] = bool(hit.any())
            keep &= hit
    if thread is not None:
        hit = _thread_match(p, thread)
        matched["thread"] = bool(hit.any())
        keep &= hit
    if o.time_range is not None and o.time_range != (None, None):
        hit = _in_time_range(p, o.time_range)
        matched["time_range"] = bool(hit.any())
        keep &= hit
    return (p, None) if keep.all() else (stacks.take_samples(p, keep), keep)


def _thread_match(p: Profile, rx: re.Pattern[str]) -> np.ndarray:
    thread_of, threads = sample_threads(p)
    if all(t.name is None for t in threads):
        raise OptionsError(f"cannot select {{thread}}={rx.pattern!r}: this profile has no thread names "
                           "(no thread_name/thread/comm labels, no threads/thread_names table)", options=("thread",))
    ok = np.array([t.name is not None and bool(rx.search(t.name)) for t in threads], dtype=bool)
    return ok[thread_of]


def time_origin(p: Profile, times: np.ndarray) -> int:
    """Where relative times start: ``time_nanos`` unless samples predate it, else the first sample."""
    first = int(times.min()) if times.size else 0
    if p.time_nanos and (not times.size or first >= p.time_nanos):
        return p.time_nanos
    return first


def _in_time_range(p: Profile, window: tuple[int | None, int | None]) -> np.ndarray:
    times, present = tags.sample_numbers(p, "time")
    if times is None or present is None:
        raise OptionsError("cannot select by {time_range}: the samples of this profile have no timestamps",
                           options=("time_range",))
    origin = time_origin(p, times[present])
    rel = times - origin
    start, end = window
    hit = present.copy()
    if start is not None:
        hit &= rel >= start
    if end is not None:
        hit &= rel < end
    return hit


def hidden_lines(p: Profile, options: Options) -> np.ndarray:
    """Per line row of ``p``: whether ``options.hide`` removes it (what :func:`apply` does with
    the lines; the flame graph's hide pass on a name tree decides by these)."""
    rx = option_regex("hide", options.hide)
    if rx is None:
        return np.zeros(len(p.lines), dtype=bool)
    h = _match(p, rx)
    line_loc, _ = _line_positions(p)
    return _hidden(h, line_loc)


def _hidden(h, line_loc: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """Per line row: hidden by the hide match ``h`` (the one rule of :func:`apply` and
    :func:`hidden_lines`): its location matched, and its mapping or the line itself did."""
    return h.location[line_loc] & (h.mapping[line_loc] | h.line)



def name_tree_filter(options: Options) -> str | None:
    """``"hide"`` or ``"prune_from"`` when it is the one filter of ``options`` that remakes
    stacks (:data:`REMAKE_STACKS`): its stacks are the input's with frames taken out, or cut
    below a frame, and the other filters set only select samples (what the flame graph's
    name-tree passes need); else None."""
    remaking = [name for name in ("hide", *REMAKE_STACKS) if getattr(options, name)]
    return remaking[0] if len(remaking) == 1 and remaking[0] in ("hide", "prune_from") else None


def without(options: Options, name: str) -> Options:
    """``options`` with the filter ``name`` unset (the samples the other filters select)."""
    unset: dict[str, Any] = {name: None}
    return dataclasses.replace(options, **unset)


def pruned_lines(p: Profile, options: Options) -> np.ndarray:
    """Per line row of ``p``: whether ``options.prune_from`` matches it (stacks are cut below
    it: what :func:`apply` does; the flame graph's name-tree prune pass decides by these)."""
    rx = option_regex("prune_from", options.prune_from)
    return np.zeros(len(p.lines), dtype=bool) if rx is None else _prune_hits(p, rx)


def legend(options: Options) -> list[str]:
    """``name=value`` of every filter ``options`` sets, as :class:`FilterResult`'s ``active``."""
    return _active(options)
