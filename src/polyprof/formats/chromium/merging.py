"""``--merge``: the CallStackProfiles of one input become one profile.

Every sample is labelled with its profile's ``profile_labels`` (process,
thread, profile metadata) and the profiles are merged with
:func:`polyprof.model.merge.merge`. When the input mixes kinds (CPU and heap
profiles), the sample types are the union of theirs, in order of first
appearance, and each sample holds 0 in the columns of the other kinds; the
default sample type is the first profile's. The merged profile keeps only
the extras all its inputs agree on, plus ``merged_profiles``.
"""

from __future__ import annotations



from polyprof.model.extras import Extras
from polyprof.model.merge import merge, union_sample_types
from polyprof.model.profile import Label, Profile

__all__ = ["merge_profiles"]


def _labels(p: Profile) -> tuple[Label, ...]:
    return tuple(Label(k, str=v) if isinstance(v, str) else Label(k, num=int(v))
                 for k, v in sorted(p.extras.profile_labels.items()))


def _common_extras(profiles: list[Profile]) -> dict:
    first = profiles[0].extras
    return {k: v for k, v in first.items()
            if k != "profile_labels" and all(p.extras.get(k, object()) == v for p in profiles[1:])}


def merge_profiles(profiles: list[Profile]) -> list[Profile]:
    """One profile holding every sample of ``profiles`` (see the module docstring)."""
    if len(profiles) < 2:
        return profiles
    first = profiles[0]
    merged = merge(union_sample_types(profiles), [_labels(p) for p in profiles])
    merged.default_sample_type = first.default_sample_type or first.sample_types[-1].type
    merged.extras = Extras(_common_extras(profiles))
    merged.extras["merged_profiles"] = len(profiles)
    return [merged]
