"""Writing a profile as a Chromium SampledProfile, CallStackProfile or UMA log.

The container is ``WriteOptions.extra["chromium_container"]`` ("sampled",
"callstack" or "uma"), else the one the profile was read from
(``extras["container"]``), else a SampledProfile -- what Chrome itself makes
of each profile. The SampledProfile gets process, thread, trigger and its
other scalars back from ``extras``; a UMA log also gets the client and
session ids, version, channel and OS. Everything else is in
:mod:`.callstack`. Facts a container cannot hold are in the loss report.
"""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any, BinaryIO

from polyprof.errors import OptionsError
from polyprof.formats.chromium import schema as S
from polyprof.formats.chromium.callstack import CallStackEncoder, Facts, columns
from polyprof.formats.chromium.reader import LOG_KEYS
from polyprof.formats.chromium.samples import encode_body
from polyprof.formats.chromium.shape import CALLSTACK, SAMPLED, UMA
from polyprof.formats.loss import LossReport
from polyprof.formats.options import WriteOptions
from polyprof.model.profile import Profile
from polyprof.wire.encode import Encoder

__all__ = ["encode", "write"]

_CONTAINERS = {"callstack": CALLSTACK, "sampled": SAMPLED, "uma": UMA,
               CALLSTACK: CALLSTACK, SAMPLED: SAMPLED, UMA: UMA}
_INT_FIELDS = (("ms_after_boot", 2), ("ms_after_login", 3), ("suspend_duration_ms", 5),
               ("ms_after_resume", 6), ("num_tabs_restored", 7), ("ms_after_restore", 8))
_TAIL_ENUMS = (("lacros_channel", 20, S.CHANNELS), ("thermal_state", 21, S.THERMAL_STATES))
_SAMPLED_KEYS = ("trigger_event", "process", "thread", "process_types", "thread_types",
                 "cpu_max_frequency_mhz", "psi_cpu_last_10s_pct", "psi_cpu_last_60s_pct", "lacros_pids",
                 "lacros_version", "lacros_channel", "thermal_state", "cpu_speed_limit_percent",
                 *(name for name, _ in _INT_FIELDS))
_CSP_KEYS = ("profile_time_offset_ms", "profile_metadata", "sampling_period_ms")
#: extras computed by readers/tools, not facts a writer must keep.
_DERIVED_KEYS = ("profile_labels", "unresolved_metadata_names", "merged_profiles", "symbolization")


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` in the chosen Chromium container (see the module docstring)."""
    report = LossReport("chromium")
    out.write(encode(profile, report, options.extra.get("chromium_container")))
    return report


def encode(p: Profile, report: LossReport, container: str | None = None) -> bytes:
    """The serialized message of ``p`` in ``container`` (default: see the module docstring)."""
    chosen = container or p.extras.get("container") or SAMPLED
    kind = _CONTAINERS.get(str(chosen))
    if kind is None:
        raise OptionsError(f"unknown Chromium container {chosen!r}; use sampled, callstack or uma")
    kept = set(_CSP_KEYS) | set(_DERIVED_KEYS) | {"container"}
    for name in ("pid", "tid", "cpu"):
        if getattr(p.samples, name) is not None:
            report.add(f"sample {name} column", len(p.samples))
    if p.time_nanos:
        report.add("profile start time (time_nanos) not kept: a CallStackProfile holds times relative to "
                   "the profile only")
    body = encode_body(CallStackEncoder(p, report))
    if kind != CALLSTACK:
        kept |= set(_SAMPLED_KEYS)
        body = _sampled(p, body, report)
    if kind == UMA:
        kept |= set(LOG_KEYS)
        body = _log(p, body, report)
    for key in sorted(set(p.extras) - kept):
        report.add(f"format-specific fact not kept: {key}")
    return body


def _enum(table: tuple[str, ...], name: Any, what: str, report: LossReport) -> int | None:
    value = S.enum_value(table, str(name))
    if value is None:
        report.add(f"{what} {name!r} (not a known value)")
    return value


def _uniform_label(p: Profile, key: str, expected: str | None, report: LossReport) -> str | None:
    """The value of sample label ``key`` if one value covers the profile; counts the rest as lost."""
    values = [next((lb.str for lb in p.labelsets[ls] if lb.key == key), None)
              for ls in p.samples.labelset.tolist()]
    present = Counter(v for v in values if v is not None)
    if expected is None and present:
        expected = present.most_common(1)[0][0]
    differ = sum(1 for v in values if v is not None and v != expected)
    if differ:
        report.add(f"sample label '{key}' (one {key} per SampledProfile)", differ)
    return expected


def _trigger(p: Profile, report: LossReport) -> int | None:
    if "trigger_event" in p.extras:
        return _enum(S.TRIGGERS, p.extras["trigger_event"], "trigger_event", report)
    if columns(p)[0]:  # a heap profile from elsewhere
        return S.TRIGGERS.index("PERIODIC_HEAP_COLLECTION")
    return None


def _sampled(p: Profile, csp: bytes, report: LossReport) -> bytes:
    facts = Facts(p.extras, report)
    e = Encoder()
    trigger = _trigger(p, report)
    if trigger is not None:
        e.varint_field(1, trigger, always=True)
    for name, number in _INT_FIELDS:
        if (v := facts.get(name, int)) is not None:
            e.varint_field(number, v, always=True)
    e.message(9, csp)
    for name, number, table in (("process", 11, S.PROCESSES), ("thread", 12, S.THREADS)):
        value = _uniform_label(p, name, p.extras.get(name), report)
        v = None if value is None else _enum(table, value, name, report)
        if v is not None:
            e.varint_field(number, v, always=True)
    return e.getvalue() + _sampled_tail(facts)


def _sampled_tail(facts: Facts) -> bytes:
    """SampledProfile fields 13 to 22."""
    e = Encoder()
    for name, number, table in (("process_types", 13, S.PROCESSES), ("thread_types", 14, S.THREADS)):
        for key, value in (facts.get(name, dict) or {}).items():
            v = _enum(table, value, name, facts.report)
            if v is not None:
                e.message(number, Encoder().varint_field(1, key, always=True).varint_field(2, v, always=True))
    e.unpacked_field(15, facts.get("cpu_max_frequency_mhz", list) or ())
    for name, number in (("psi_cpu_last_10s_pct", 16), ("psi_cpu_last_60s_pct", 17)):
        if (f := facts.get(name, float)) is not None:
            e.fixed32_field(number, struct.unpack("<I", struct.pack("<f", f))[0], always=True)
    if pids := facts.get("lacros_pids", list):
        e.packed_field(18, pids)
    if "lacros_version" in facts:
        e.string_field(19, str(facts.x["lacros_version"]), always=True)
    for name, number, names in _TAIL_ENUMS:
        if (v := facts.enum(name, names)) is not None:
            e.varint_field(number, v, always=True)
    if (v := facts.get("cpu_speed_limit_percent", int)) is not None:
        e.varint_field(22, v, always=True)
    return e.getvalue()


def _log(p: Profile, sampled: bytes, report: LossReport) -> bytes:
    facts, x = Facts(p.extras, report), p.extras
    e = Encoder()
    if (client := facts.get("client_id", int)) is not None:
        e.fixed64_field(1, client, always=True)
    if (session := facts.get("session_id", int)) is not None:
        e.varint_field(2, session, always=True)
    system = Encoder()
    if "app_version" in x:
        system.string_field(2, str(x["app_version"]), always=True)
    os_msg = Encoder()
    for name, number in (("os_name", 1), ("os_version", 2)):
        if name in x:
            os_msg.string_field(number, str(x[name]), always=True)
    if len(os_msg):
        system.message(5, os_msg)
    if (v := facts.enum("channel", S.CHANNELS)) is not None:
        system.varint_field(10, v, always=True)
    if len(system):
        e.message(3, system)
    if (product := facts.get("product", int)) is not None:
        e.varint_field(10, product, always=True)
    e.message(11, sampled)
    return e.getvalue()
