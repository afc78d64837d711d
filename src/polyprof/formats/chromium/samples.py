"""Samples of a CallStackProfile: StackSamples (or deprecated Samples) and assembly."""

from __future__ import annotations

import numpy as np

from polyprof.formats.chromium import names as N
from polyprof.formats.chromium import schema as S
from polyprof.formats.chromium.callstack import MS, CallStackEncoder, metadata_key_hash
from polyprof.formats.chromium.reader import NAMES_METADATA, NAMES_SHARED, TIME_METADATA
from polyprof.model.profile import Profile
from polyprof.wire.encode import Encoder

__all__ = ["encode_body"]


def _metadata_delta(enc: CallStackEncoder, prev: dict, cur: dict, out: Encoder) -> None:
    """Append the items that turn ``prev`` into ``cur`` (field 5 of StackSample)."""
    for ident in sorted(set(prev) | set(cur), key=lambda k: (k[0], k[1] is not None, k[1] or 0)):
        if ident not in cur:
            out.message(5, enc.metadata_item(ident, None))
        elif prev.get(ident) != cur[ident] or ident not in prev:
            out.message(5, enc.metadata_item(ident, cur[ident]))


class _Stacks:
    """De-duplicates stacks by their encoded frames (as Chrome's builder does)."""

    def __init__(self, enc: CallStackEncoder) -> None:
        self.enc = enc
        self.bodies: list[bytes] = []
        self._by_body: dict[bytes, int] = {}
        self._by_node: dict[int, int] = {}
        self._wrapped: dict[bytes, bytes] = {}

    def index(self, node: int) -> int:
        got = self._by_node.get(node)
        if got is None:
            wrapped = self._wrapped  # each distinct Location framed once (deep stacks repeat them)
            body = b"".join([wrapped.get(f) or wrapped.setdefault(f, Encoder().message(1, f).getvalue())
                             for f in self.enc.stack_frames(node)])
            got = self._by_node[node] = self._by_body.setdefault(body, len(self.bodies))
            if got == len(self.bodies):
                self.bodies.append(body)
        return got


def _stack_samples(enc: CallStackEncoder, stacks: _Stacks) -> list[bytes]:
    """Encoded StackSamples, in sample order."""
    s = enc.p.samples
    counts, weights = enc.counts_weights()
    times = enc.times_ms()
    # A heap profile whose weights are all 1 still needs one weight on the wire,
    # or a reader would take it for a CPU profile.
    mark_heap = enc.heap and all(w == 1 for w in weights)
    prev: dict = {}
    out = []
    for i, (node, ls) in enumerate(zip(s.stack.tolist(), s.labelset.tolist())):
        labels = enc.labels(ls)
        for what in labels.lost:
            enc.report.add(what)
        e = Encoder().varint_field(1, stacks.index(node), always=True)
        if times is not None:
            e.varint_field(2, times[i], always=True)
        if labels.special.get("continued_work") == "true":
            e.bool_field(3, True)
        if "async_backtrace" in labels.special:
            bt = enc.backtrace_index(labels.special["async_backtrace"])
            if bt is not None:
                e.varint_field(4, bt, always=True)
        _metadata_delta(enc, prev, labels.metadata, e)
        prev = labels.metadata
        if weights[i] != 1 or (mark_heap and i == 0):
            e.varint_field(6, weights[i], always=True)
        if counts[i] != 1:
            e.varint_field(7, counts[i], always=True)
        out.append(e.getvalue())
    return out


def _deprecated_samples(enc: CallStackEncoder) -> list[bytes]:
    """Encoded deprecated Samples (frames, count, newly reached phases)."""
    p, report = enc.p, enc.report
    counts, _ = enc.counts_weights()
    col = enc.weight_col if enc.heap else enc.time_col if enc.time_in_weights else None
    if col is not None:
        what = p.sample_types[col]
        report.add(f"values of {what} not kept: the deprecated Sample encoding holds counts only", len(p.samples))
    if p.samples.time is not None:
        report.add("sample times (the deprecated Sample encoding has none)", len(p.samples))
    reached: list[str] = []
    out = []
    for i, (node, ls) in enumerate(zip(p.samples.stack.tolist(), p.samples.labelset.tolist())):
        labels = enc.labels(ls)
        lost = len(labels.metadata) + sum(k in labels.special for k in ("continued_work", "async_backtrace"))
        if lost:
            report.add("sample labels (the deprecated Sample encoding holds phases only)", lost)
        e = Encoder()
        for f in enc.frames(node):
            e.message(1, f)
        e.varint_field(2, counts[i], always=True)
        phases = [ph for ph in labels.special.get("process_phases", "").split(",") if ph]
        for name in phases:
            if name in reached:
                continue
            reached.append(name)
            value = S.enum_value(S.PROCESS_PHASES, name)
            if value is None:
                report.add(f"process phase {name!r} (not a known value)")
            else:
                e.varint_field(3, value, always=True)
        out.append(e.getvalue())
    return out


def _profile_metadata(enc: CallStackEncoder) -> list[Encoder]:
    items = enc.p.extras.get("profile_metadata") or {}
    out = []
    if enc.time_mode:  # what the time column is (see reader.TIME_MODES)
        out.append(enc.metadata_item((N.hash_metric_name(TIME_METADATA.encode()), None), enc.time_mode))
    if enc.shared_names:  # frames without a name take their address's (see reader.NAMES_METADATA)
        out.append(enc.metadata_item((N.hash_metric_name(NAMES_METADATA.encode()), None), NAMES_SHARED))
    for key, value in (items.items() if isinstance(items, dict) else ()):
        if value is not None and not isinstance(value, int):
            enc.report.add(f"profile metadata {key!r} (not a number)")
            continue
        out.append(enc.metadata_item(metadata_key_hash(str(key)), value))
    if not isinstance(items, dict):
        enc.report.add("format-specific fact not kept: profile_metadata (unexpected value)")
    return out


def _used_locations(p: Profile) -> np.ndarray:
    """Every location on the stacks of the samples."""
    parent, location = p.callsites.parent, p.callsites.location
    seen = np.zeros(len(parent), dtype=bool)
    frontier = np.unique(p.samples.stack[p.samples.stack >= 0])
    while frontier.size:  # one step per stack depth
        seen[frontier] = True
        up = parent[frontier]
        frontier = np.unique(up[up >= 0])
        frontier = frontier[~seen[frontier]]
    return np.unique(location[seen])


def encode_body(enc: CallStackEncoder) -> bytes:
    """Assemble the CallStackProfile in field-number order (as Chrome's encoder does)."""
    p = enc.p
    deprecated = any(any(lb.key == "process_phases" for lb in p.labelsets[ls])
                     for ls in set(p.samples.labelset.tolist()))
    stacks = _Stacks(enc)
    if not deprecated:
        enc.share_names(_used_locations(p))
    samples = _deprecated_samples(enc) if deprecated else _stack_samples(enc, stacks)
    profile_meta = _profile_metadata(enc)
    e = Encoder()
    for body in samples if deprecated else ():
        e.message(1, body)
    for m in enc.module_msgs:
        e.message(2, m)
    if p.duration_nanos % MS:
        enc.report.add("profile duration rounded down to milliseconds")
    e.varint_field(3, p.duration_nanos // MS, always=True)
    e.varint_field(4, enc.period_ms, always=True)
    for h in enc.hashes:  # dicts keep insertion order: index order
        e.fixed64_field(5, h, always=True)
    for meta in profile_meta:
        e.message(6, meta)
    for bt in enc.backtrace_msgs:
        e.message(7, bt)
    for body in stacks.bodies:
        e.message(8, body)
    for body in () if deprecated else samples:
        e.message(9, body)
    if (offset := enc.facts.get("profile_time_offset_ms", int)) is not None:
        e.varint_field(10, offset, always=True)
    return e.getvalue()
