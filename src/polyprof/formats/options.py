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
    #: Symbolization (polyprof.symbolize): --symbols paths (directories or files: ELF binaries and
    #: debug files, .build-id trees, Breakpad stores), debuginfod URLs, R8/ProGuard mapping files
    #: (FILE or PACKAGE=FILE), offline (no network), the symbolizer engine (auto|llvm|python),
    #: symbolize (None: when a source is given; True: always, with the environment's and system's
    #: sources; False: never, not even demangling) and demangle (simple|templates|full|none; None =
    #: pprof's default, simplified names for functions not demangled yet).
    symbols: str | tuple[str, ...] | list[str] | None = None
    debuginfod: tuple[str, ...] = ()
    java_mappings: tuple[str, ...] = ()
    offline: bool = False
    symbolizer: str = "auto"
    symbolize: bool | None = None
    demangle: str | None = None
    #: Called with each profile's polyprof.symbolize.SymbolizeReport when symbolization ran.
    on_symbolized: Callable[[Any], None] | None = None
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
