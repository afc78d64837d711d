"""What each format tells about a profile, as the store's ``profiles`` columns.

One function per source format (the registry :data:`EXTRACTORS`), each
filling :class:`ProfileMeta` from the profile's metadata and ``extras``:

- pprof: build ids of the mappings, the main binary as ``app``, comments;
- perfetto: process name (also ``app``, Android apps are processes), pid,
  kind, heap and event as labels;
- simpleperf: app package, event types, Android SDK / build type;
- chromium (UMA): process, thread, channel, version and milestone, OS.

Every format's ``profile_labels`` extra becomes labels too. Values are
strings (labels are a map of strings); nothing is dropped from the profile
itself: ``extras`` are kept whole in the ``meta`` JSON column.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from polyprof.model.profile import Profile

__all__ = ["EXTRACTORS", "ProfileMeta", "extract"]


@dataclass
class ProfileMeta:
    app: str | None = None
    version: str | None = None
    process: str | None = None
    platform: str | None = None
    build_ids: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def _pprof(p: Profile, m: ProfileMeta) -> None:
    files = [p.strings[f] for f in p.mappings.filename.tolist()]
    main = next((f for f in files if f and not f.startswith("[")), None)
    if main:
        m.app = os.path.basename(main)


def _perfetto(p: Profile, m: ProfileMeta) -> None:
    labels = p.extras.profile_labels
    name = labels.get("process_name")
    if name:
        m.process = m.app = str(name)
    m.platform = "android" if name and "." in str(name) else None


def _simpleperf(p: Profile, m: ProfileMeta) -> None:
    info = p.extras.get("meta_info", {})
    m.platform = "android"
    if info.get("app_package_name"):
        m.app = str(info["app_package_name"])
    if info.get("event_type"):
        m.labels["event_types"] = _text(info["event_type"])
    for key in ("app_type", "android_sdk_version", "android_build_type"):
        if info.get(key) not in (None, ""):
            m.labels[key] = _text(info[key])
    if info.get("android_sdk_version"):
        m.version = _text(info["android_sdk_version"])


def _chromium(p: Profile, m: ProfileMeta) -> None:
    x = p.extras
    m.app = "chrome"
    m.process = x.get("process")
    version = x.get("app_version")
    if version:
        m.version = str(version)
        milestone = re.match(r"(\d+)\.", str(version))
        if milestone:
            m.labels["milestone"] = milestone.group(1)
    m.platform = x.get("os_name")
    for key in ("process", "thread", "channel", "os_version", "trigger_event", "product"):
        if x.get(key) not in (None, ""):
            m.labels[key] = _text(x[key])


#: source format -> function filling ProfileMeta (formats not listed get the generic part only).
EXTRACTORS: dict[str, Callable[[Profile, ProfileMeta], None]] = {
    "pprof": _pprof,
    "perfetto": _perfetto,
    "simpleperf": _simpleperf,
    "chromium": _chromium,
}


def extract(p: Profile, user_labels: dict[str, str]) -> ProfileMeta:
    """The store metadata of ``p``; ``user_labels`` (``--label``) win over format labels."""
    m = ProfileMeta()
    for key, value in p.extras.profile_labels.items():
        m.labels[str(key)] = _text(value)
    fill = EXTRACTORS.get(p.source_format)
    if fill is not None:
        fill(p, m)
    m.build_ids = sorted({p.strings[b] for b in p.mappings.build_id.tolist() if b})
    m.labels.update(user_labels)
    for column in ("app", "version", "process", "platform"):  # --label app=... fills the column too
        if column in user_labels:
            setattr(m, column, user_labels[column])
    return m
