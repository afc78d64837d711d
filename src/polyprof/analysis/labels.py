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
from polyprof.errors import OptionsError
from polyprof.model.builder import ProfileBuilder
from polyprof.model.merge import copy_into
from polyprof.model.profile import Profile, SampleTable
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
    lmap = copy_into(b, dataclasses.replace(p, samples=SampleTable(values=np.zeros((0, len(p.sample_types)),
                                                                                  dtype=np.int64))))
    units = tags.num_label_units(p)
    matched = False
    frame: dict[tuple[str, str], int] = {}

    def frames(labels: tuple, keys: list[str]) -> list[int]:
        nonlocal matched
        out = []
        for key in reversed(keys):  # pprof adds them last key first
            values = [lab.str for lab in labels if lab.key == key and lab.str is not None] + \
                [scaled_label(lab.num or 0, units.get(key, key), unit) for lab in labels
                 if lab.key == key and lab.str is None]
            matched |= bool(values)
            name = ",".join(values)
            if (key, name) not in frame:
                frame[(key, name)] = b.location(-1, 0, [(b.function(name, "", key, 0), 0, 0)])
            out.append(frame[(key, name)])
        return out

    s = p.samples
    groups, first, inverse = np.unique(np.stack([s.stack.astype(np.int64), s.labelset.astype(np.int64)]),
                                       axis=1, return_index=True, return_inverse=True)
    flat: list[int] = []
    offsets = [0]
    for stack, ls in groups.T.tolist():
        labels = p.labelsets[ls]
        path = [int(lmap[loc]) for loc in (p.callsites.path(stack) if stack >= 0 else [])]
        flat += frames(labels, leaf_keys) + path + frames(labels, root_keys)
        offsets.append(len(flat))
    stacks = b.stacks_from_csr(np.asarray(flat, dtype=np.int64), np.asarray(offsets, dtype=np.int64),
                               leaf_first=True)
    sets = np.array([b.labelset(ls) for ls in p.labelsets], dtype=np.int64)
    b.add_samples_bulk(stacks[inverse.reshape(-1)], s.values, sets[s.labelset],
                       **{n: getattr(s, n) for n in s.OPTIONAL_COLUMNS})
    out = b.finish()
    keep = ("default_sample_type", "period_type", "period", "time_nanos", "duration_nanos", "comments",
            "drop_frames", "keep_frames", "doc_url", "extras", "warnings")
    return dataclasses.replace(out, **{k: getattr(p, k) for k in keep}), matched
