"""Folded stacks: ``root;caller;...;leaf value`` per line (Brendan Gregg's format).

Writes one sample type (``WriteOptions.sample_index``; the profile's
default type when unset). Identical lines are summed, zero totals are left
out, and lines are sorted, as ``flamegraph.pl`` and simpleperf's
``stackcollapse.py`` expect. Inlined functions are frames of their own.

``WriteOptions.extra`` switches (the names of ``stackcollapse.py`` flags):

``thread``  ``"auto"`` (default: the thread name is the first element when
            the profile knows threads), ``"name"`` or ``"none"``;
``pid``     first element ``comm-pid``;  ``tid``: ``comm-pid/tid``;
``kernel``  suffix kernel frames with ``_[k]``;  ``jit``: ART JIT frames ``_[j]``;
``addrs``   name unknown symbols ``lib[+addr]`` (``--addrs``) instead of the
            default ``lib+0xaddr``;  ``unknown_style`` picks any of
            :data:`polyprof.formats.viewer.UNKNOWN_STYLES` (``"unknown"``
            gives the word, like ``stackcollapse.py`` without ``--addrs``);
``drop_leaf``  leave out each sample's own frame, keeping its callers only.
            ``stackcollapse.py`` does this (its report library's callchain
            starts at the caller), so AOSP's ``*.foldedstack`` goldens need it.

Lost (and reported): other sample types, labels, mappings and addresses
of symbolized frames, file/line information, timestamps; samples with an
empty stack when no thread element is written. ``;`` inside names becomes
``:`` and line breaks become spaces, since they would end a frame or a line.
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

from polyprof.errors import OptionsError
from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.formats.viewer import (
    UNKNOWN_STYLES,
    is_jit,
    is_kernel,
    location_frames,
    stack_paths,
    samples_with_other_labels,
    utf8,
    value_column,
)
from polyprof.model.profile import Profile
from polyprof.model.threads import THREAD_LABELS, ThreadInfo, sample_threads

__all__ = ["fold", "write"]

_SWITCHES = {"thread", "pid", "tid", "kernel", "jit", "addrs", "unknown_style", "drop_leaf"}


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` as folded stacks (UTF-8, one line per distinct stack)."""
    report = LossReport("folded")
    lines = fold(profile, options, report)
    out.write(utf8("".join(f"{text} {value}\n" for text, value in lines)))
    return report


def _clean(name: str, report: LossReport) -> str:
    if ";" in name or "\n" in name or "\r" in name:
        report.add("names with ';' or line breaks changed")
        return name.replace(";", ":").replace("\r", " ").replace("\n", " ")
    return name


def _thread_element(t: ThreadInfo, extra: dict) -> str | None:
    mode = extra.get("thread", "auto")
    if mode == "none" or (mode == "auto" and t.name is None and t.tid is None):
        return None
    name = t.name if t.name is not None else (f"tid {t.tid}" if t.tid is not None else "all")
    pid = t.pid if t.pid is not None else 0
    if extra.get("tid"):
        return f"{name}-{pid}/{t.tid if t.tid is not None else 0}"
    if extra.get("pid"):
        return f"{name}-{pid}"
    return name


def _frame_texts(p: Profile, extra: dict, report: LossReport) -> list[str]:
    """The ``;``-joined frames of every location, outermost first."""
    style = "aosp" if extra.get("addrs") else extra.get("unknown_style", "address")
    if style not in UNKNOWN_STYLES:
        raise OptionsError(f"folded: unknown_style must be one of {', '.join(UNKNOWN_STYLES)}")
    paths = [p.strings[i] for i in p.mappings.filename.tolist()]
    out = []
    for frames in location_frames(p, style):
        parts = []
        for fr in frames:
            name = _clean(fr.name, report)
            path = paths[fr.mapping] if fr.mapping >= 0 else ""
            if extra.get("kernel") and is_kernel(path):
                name += "_[k]"
            if extra.get("jit") and is_jit(path):
                name += "_[j]"
            parts.append(name)
        out.append(";".join(parts))
    return out


def _stack_texts(p: Profile, wanted: np.ndarray, loc_text: list[str], drop_leaf: bool) -> dict[int, str]:
    """Root-first text of every callsite in ``wanted``."""
    return {c: ";".join([loc_text[loc] for loc in (path[:-1] if drop_leaf else path)])
            for c, path in stack_paths(p, wanted)}


def fold(p: Profile, options: WriteOptions, report: LossReport | None = None) -> list[tuple[str, int]]:
    """The folded lines of ``p`` as (text, value), sorted by text."""
    report = report if report is not None else LossReport("folded")
    extra = dict(options.extra)
    unknown = set(extra) - _SWITCHES
    if unknown:
        raise OptionsError(f"folded: unknown option(s) {', '.join(sorted(unknown))}; "
                           f"known: {', '.join(sorted(_SWITCHES))}")
    column, values = value_column(p, options.sample_index)
    _report_losses(p, column, extra, report)
    thread_of, threads = sample_threads(p)
    heads = [_thread_element(t, extra) for t in threads]
    heads = [None if h is None else _clean(h, report) for h in heads]
    live = np.nonzero(values != 0)[0]
    stack = p.samples.stack.astype(np.int64)[live]
    key = thread_of[live].astype(np.int64) * (len(p.callsites) + 1) + stack + 1
    uniq, inverse = np.unique(key, return_inverse=True)
    sums = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(sums, inverse.reshape(-1), values[live])
    ustack = uniq % (len(p.callsites) + 1) - 1
    texts = _stack_texts(p, ustack, _frame_texts(p, extra, report), bool(extra.get("drop_leaf")))
    lines: dict[str, int] = {}
    for k, st, total in zip(uniq.tolist(), ustack.tolist(), sums.tolist()):
        head = heads[k // (len(p.callsites) + 1)]
        body = texts.get(st, "") if st >= 0 else ""
        text = ";".join(x for x in (head, body) if x)
        if not text:
            report.add("samples with an empty stack (no line to put them on)")
            continue
        lines[text] = lines.get(text, 0) + total
    return sorted((t, v) for t, v in lines.items() if v != 0)


def _report_losses(p: Profile, column: int, extra: dict, report: LossReport) -> None:
    for i, vt in enumerate(p.sample_types):
        if i != column:
            report.add(f"sample type {vt} not written (one type per file; choose with --sample-index)")
    threads = extra.get("thread", "auto") != "none"
    kept = THREAD_LABELS if threads else frozenset()
    report.add(f"samples with labels{' other than thread names' if threads else ''} (labels not written)",
               samples_with_other_labels(p, kept))
    written = {"pid"} if extra.get("pid") else {"pid", "tid"} if extra.get("tid") else set()
    for name in ("time", "cpu", "pid", "tid"):
        if getattr(p.samples, name) is not None and name not in written:
            report.add(f"sample {name} column not written", len(p.samples))
    if len(p.mappings):
        report.add("mappings not written", len(p.mappings))
