"""The one declarative format registry.

Each :class:`FormatSpec` names a format, its file extensions, a one-line
help, and the module implementing it. That module (imported only when
needed, so ``polyprof --help`` stays fast) provides some of:

``sniff(head: bytes) -> bool``
    True when the first bytes (gzip already undone) are this format. It must
    say "not mine" cheaply and never raise.
``read(source: Source, options: ReadOptions) -> list[Profile]``
    Every profile in the input. Raise MalformedInputError for broken data.
``write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport``
    Write one profile; report what the target cannot hold.

The registry drives ``--to`` choices, ``polyprof formats``, extension
guessing and detection order.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType

__all__ = ["FORMATS", "FormatSpec", "by_extension", "by_name", "names"]


@dataclass(frozen=True)
class FormatSpec:
    name: str
    extensions: tuple[str, ...]
    help: str
    module: str
    can_read: bool = True
    can_write: bool = True

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


# Detection tries readers in this order: formats with a magic number first,
# formats that are "a protobuf with certain field numbers" after them.
FORMATS: tuple[FormatSpec, ...] = (
    FormatSpec("simpleperf", (".trace", ".simpleperf", ".proto_data", ".simpleperf.trace"),
               "simpleperf report-sample protobuf (Android)", "polyprof.formats.simpleperf"),
    FormatSpec("perfetto", (".perfetto-trace", ".pftrace", ".perfetto"),
               "Perfetto trace with heapprofd / traced_perf / Chrome sampler packets",
               "polyprof.formats.perfetto"),
    FormatSpec("pprof", (".pb.gz", ".pprof", ".pb", ".prof"),
               "pprof profile.proto (gzip or raw)", "polyprof.formats.pprof"),
    FormatSpec("pprof-legacy", (), "pprof's pre-proto inputs as go tool pprof reads them: gperftools/Java "
               "binary CPU, text heap/growth/contention/thread/goroutine, Java heapz/contentionz",
               "polyprof.formats.pprof_legacy", can_write=False),
    FormatSpec("chromium", (".callstack", ".uma", ".cspb"),
               "Chromium UMA CallStackProfile / SampledProfile / ChromeUserMetricsExtension",
               "polyprof.formats.chromium"),
    FormatSpec("folded", (".folded", ".collapsed", ".txt"),
               "folded stacks text: 'root;...;leaf value' per line", "polyprof.formats.folded",
               can_read=False),
    FormatSpec("speedscope", (".speedscope.json",),
               "speedscope JSON (open at speedscope.app)", "polyprof.formats.speedscope",
               can_read=False),
    FormatSpec("firefox", (".firefox.json", ".gecko.json"),
               "Firefox Profiler processed-format JSON", "polyprof.formats.firefox",
               can_read=False),
)


def _available(spec: FormatSpec) -> bool:
    try:
        return importlib.util.find_spec(spec.module) is not None
    except ModuleNotFoundError:
        return False


def available() -> list[FormatSpec]:
    """Formats whose implementation module is present."""
    return [f for f in FORMATS if _available(f)]


def names(*, readable: bool = False, writable: bool = False) -> list[str]:
    return [f.name for f in available()
            if (not readable or f.can_read) and (not writable or f.can_write)]


def by_name(name: str) -> FormatSpec | None:
    for f in available():
        if f.name == name:
            return f
    return None


def by_extension(path: str) -> FormatSpec | None:
    """The writable format whose extension ends ``path`` (longest match wins)."""
    base = os.path.basename(path).lower()
    best: tuple[int, FormatSpec] | None = None
    for f in available():
        for ext in f.extensions:
            if base.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), f)
    return best[1] if best else None
