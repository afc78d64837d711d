"""Options every reader and writer accepts (one object, whatever the front end)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from polyprof.formats.limits import DEFAULT_MAX_INFLATE, LIMITS, Limits

__all__ = ["ReadOptions", "WriteOptions"]


@dataclass
class ReadOptions:
    """What to read. Readers use the fields that apply to their format.

    ``pid``/``tid``/``heap``/``time_range`` let streaming readers skip data
    early; the analysis filters apply the same selections to any profile.
    ``time_range`` is (start_ns, end_ns), either end None for open.
    """

    pid: frozenset[int] | None = None
    tid: frozenset[int] | None = None
    heap: str | None = None
    time_range: tuple[int | None, int | None] | None = None
    metadata_names: str | None = None  # file of names to resolve Chromium hashes
    symbols: str | None = None  # Breakpad symbol directory
    merge: bool = False  # several profiles of different kinds in one input -> one profile (union of types)
    #: Profiles to pick (1-based, as ``polyprof info`` numbers them); see polyprof.selection.
    profiles: tuple[int, ...] | None = None
    #: Told one-line notes about the input (e.g. that several profiles were merged).
    note: Callable[[str], None] | None = None
    max_inflate: int = DEFAULT_MAX_INFLATE
    #: Resource limits for untrusted input (formats/limits.py; README "Limits").
    limits: Limits = LIMITS
    extra: dict[str, Any] = field(default_factory=dict)
    #: Called with (bytes read, total) while a streaming reader consumes a file.
    progress: Callable[[int, int], None] | None = None


@dataclass
class WriteOptions:
    """How to write. ``extra`` carries format-specific switches."""

    sample_index: str | int | None = None  # for single-value targets (folded, ...)
    extra: dict[str, Any] = field(default_factory=dict)
