"""One rule for inputs that hold several profiles, used by ``polyprof.read`` and every verb.

A Perfetto trace holds one profile per process, event and heap dump; a UMA
log one per sampled profile. Given the profiles an input holds (in the order
``read_all`` returns them, numbered from 1 as ``polyprof info`` lists them):

1. ``numbers`` (``--profile N``) picks those profiles; otherwise successive
   cumulative dumps of one process and heap are reduced to the last one
   (merging them would count allocations several times).
2. One profile left: that is the answer.
3. Several, with the same sample types: they are merged, each sample
   labelled with the profile it came from (the readers' ``profile_labels``),
   and ``note`` is told how many were merged.
4. Several of different kinds: :class:`~polyprof.errors.OptionsError`
   listing each with the selectors that pick it (``--profile N``, ``--pid``,
   ``--heap``) -- unless ``merge_kinds`` (``--merge``) asks for one profile
   with the union of their sample types.

No profile at all is a :class:`~polyprof.errors.MalformedInputError`
("holds no profiling data"). A merged profile keeps in ``extras["merged_from"]``
what each input was (process name and pid, or main file), which report
headers show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from polyprof.errors import MalformedInputError, OptionsError, Spelling, keyword_spelling, spell_options
from polyprof.model.profile import Label, Profile

__all__ = ["SELECTOR_OPTIONS", "Choice", "choices", "latest_snapshots", "pick", "select"]

#: The options a selector names.
SELECTOR_OPTIONS = ("profiles", "pid", "heap")


@dataclass(frozen=True)
class Choice:
    """One profile of a multi-profile input, as it is listed to the user."""

    number: int  # 1-based: what ``profiles=[N]`` (--profile N) takes
    profile: Profile
    #: Selectors that pick this profile alone, as option placeholders (``{pid=7}``):
    #: spell them with :meth:`spelled_selectors` (see :class:`polyprof.errors.OptionsError`).
    selectors: tuple[str, ...] = ()

    @property
    def labels(self) -> dict:
        return self.profile.extras.profile_labels

    def describe(self) -> str:
        """``kind=perf event=cpu-clock pid=7 process_name=app`` (or ``profile N``)."""
        return " ".join(f"{k}={v}" for k, v in self.labels.items()) or f"profile {self.number}"

    def spelled_selectors(self, spell: Spelling = keyword_spelling) -> list[str]:
        """The selectors as ``spell`` writes options (library keywords by default)."""
        return [spell_options(s, SELECTOR_OPTIONS, spell) for s in self.selectors]

    def line(self, spell: Spelling | None = None) -> str:
        """One line of the list an error or ``info`` shows; with ``spell`` the selectors
        are spelled, else left as placeholders (for an OptionsError message)."""
        types = ", ".join(map(str, self.profile.sample_types)) or "no sample types"
        sel = self.spelled_selectors(spell) if spell is not None else list(self.selectors)
        return f"[{self.number}] {self.describe()}: {types} (select with {' or '.join(sel)})"


def choices(profiles: Sequence[Profile]) -> list[Choice]:
    """The profiles of an input, numbered as ``--profile`` and ``polyprof info`` number them, each with
    the selectors that leave it alone: ``--profile N`` always, ``--pid P`` when no other profile has
    that pid, ``--heap H`` when every profile is a heap dump and no other one is of that heap."""
    labels = [p.extras.profile_labels for p in profiles]
    pids = [str(lb.get("pid")) for lb in labels if "pid" in lb]
    heaps = [str(lb["heap"]) for lb in labels if "heap" in lb]
    out = []
    for i, (p, lb) in enumerate(zip(profiles, labels), 1):
        sel = [f"{{profiles={i}}}"]
        if "pid" in lb and pids.count(str(lb["pid"])) == 1:
            sel.append(f"{{pid={lb['pid']}}}")
        if "heap" in lb and len(heaps) == len(profiles) and heaps.count(str(lb["heap"])) == 1:
            sel.append(f"{{heap={lb['heap']}}}")
        out.append(Choice(i, p, tuple(sel)))
    return out


def pick(listed: list[Choice], numbers: Sequence[int], name: str = "<input>") -> list[Choice]:
    """The choices ``numbers`` (``--profile N``) name; an OptionsError for a number out of range."""
    if not listed:
        raise MalformedInputError("holds no profiling data", path=name)
    for n in numbers:
        if not 1 <= n <= len(listed):
            raise OptionsError(f"{name}: {{profiles={n}}}: the input holds {len(listed)} profile(s), "
                               f"numbered 1 to {len(listed)} (see 'polyprof info')", options=("profiles",))
    return [listed[n - 1] for n in dict.fromkeys(numbers)]


def select(profiles: Sequence[Profile], *, numbers: Sequence[int] | None = None, merge_kinds: bool = False,
           name: str = "<input>", note: Callable[[str], None] | None = None) -> Profile:
    """The one profile an analysis of an input works on (see the module docstring for the rule)."""
    listed = choices(profiles)
    if numbers:
        picked = pick(listed, numbers, name)
    else:
        if not profiles:
            raise MalformedInputError("holds no profiling data", path=name)
        kept = latest_snapshots(list(profiles))
        picked = [c for c in listed if any(c.profile is p for p in kept)]
    if len(picked) == 1:
        return picked[0].profile
    first = picked[0].profile.sample_types
    if any(c.profile.sample_types != first for c in picked) and not merge_kinds:
        raise OptionsError(f"{name} holds {len(picked)} profiles of different kinds; pick one "
                           "(or combine them into one with {merge}):\n  "
                           + "\n  ".join(c.line() for c in picked), options=(*SELECTOR_OPTIONS, "merge=True"))
    merged = _merge([c.profile for c in picked], merge_kinds)
    if note is not None:
        note(f"note: {name}: merged {len(picked)} profiles with the same sample types "
             f"(pick one with --profile N, --pid or --heap; 'polyprof info' lists them)"
             if not merge_kinds else f"note: {name}: merged {len(picked)} profiles (--merge)")
    return merged


def _merge(profiles: list[Profile], union: bool) -> Profile:
    from polyprof.model.merge import merge, union_sample_types

    origins = [_origin(p) or f"profile {i}" for i, p in enumerate(profiles, 1)]
    labels = [tuple(Label(k, str=str(v)) if isinstance(v, str) else Label(k, num=int(v))
                    for k, v in p.extras.profile_labels.items()) for p in profiles]
    merged = merge(union_sample_types(profiles) if union else profiles, labels)
    if len(set(origins)) > 1:
        merged.extras["merged_from"] = list(dict.fromkeys(origins))
    return merged


def _origin(p: Profile) -> str:
    """What a profile was: ``name (pid N)`` from its labels, else its main file's name."""
    labels = p.extras.profile_labels
    process = labels.get("process_name") or labels.get("process")
    pid = labels.get("pid")
    if process and pid is not None:
        return f"{process} (pid {pid})"
    if process or pid is not None:
        return str(process) if process else f"pid {pid}"
    if len(p.mappings):
        return p.strings[p.mappings.filename[0]].rsplit("/", 1)[-1]
    return ""


def latest_snapshots(profiles: list[Profile]) -> list[Profile]:
    """Keep the last of each series of cumulative snapshots (e.g. heap dumps).

    Profiles whose ``profile_labels`` differ only in ``dump_time`` are
    successive dumps of one process and heap; their values are cumulative,
    so merging them would count allocations several times. ``read_all``
    still returns every dump.
    """
    series: dict[tuple, list[int]] = {}
    for i, p in enumerate(profiles):
        labels = p.extras.profile_labels
        if "dump_time" in labels:
            key = tuple(sorted((k, str(v)) for k, v in labels.items() if k != "dump_time"))
            series.setdefault(key, []).append(i)
    drop: set[int] = set()
    for members in series.values():
        if len(members) > 1:
            last = max(members, key=lambda i: (profiles[i].extras.profile_labels["dump_time"], i))
            drop.update(m for m in members if m != last)
            warning = (f"kept the last of {len(members)} cumulative dumps of this process and heap "
                       "(earlier dumps are listed by 'polyprof info')")
            if warning not in profiles[last].warnings:
                profiles[last].warnings.append(warning)
    return [p for i, p in enumerate(profiles) if i not in drop]
