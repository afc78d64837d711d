"""Where symbols come from: one options object for the CLI, the API and the store.

Searched in this order for each mapping of a profile (the first file that
has DWARF wins; a stripped binary found on the way is kept for its symbol
table and program headers):

1. ``paths`` (``--symbols``, in the order given). A directory is searched
   as a Breakpad store (``<name>/<debug id>/<name>.sym``), then as a
   build-id tree (``.build-id/ab/cdef….debug`` and ``.build-id/ab/cdef…``),
   then by path (``DIR/<mapping path>``, ``DIR/<file name>``, also without an
   APK's ``base.apk!`` prefix), then any file under it whose build id
   matches. A file is used when its build id matches (or the mapping has
   none and its name matches).
2. The binary search path ``$POLYPROF_BINARY_PATH`` (else
   ``$PPROF_BINARY_PATH``; colon-separated), searched as ``go tool pprof``
   does: ``DIR/<build id>/<file name>``, ``DIR/<build id>/*``,
   ``DIR/<mapping path>/<build id>``, ``DIR/ab/cdef….debug``,
   ``DIR/<file name>``, ``DIR/<mapping path>``.
3. The mapping's own path on this machine (profiles recorded here), and
   its ``.gnu_debuglink`` next to it and in ``.debug/``.
4. The system debug directory, ``/usr/lib/debug``: build-id tree, the
   binary's path with ``.debug``, and the debuglink.
5. debuginfod servers: ``$DEBUGINFOD_URLS`` then ``debuginfod`` URLs
   (``--debuginfod``), through the cache (:mod:`.debuginfod`); skipped when
   ``offline``.

Java frames are deobfuscated with the R8/ProGuard ``mappings``
(``--mapping``), and with any mapping a Perfetto trace carries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from polyprof.symbolize.debuginfod import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT

__all__ = ["Sources"]


@dataclass(frozen=True)
class Sources:
    """Where to look for symbols and how (see the module docstring for the order).

    ``use_env`` reads ``$POLYPROF_BINARY_PATH``/``$PPROF_BINARY_PATH`` and
    ``$DEBUGINFOD_URLS``; ``system_dirs`` is ``("/usr/lib/debug",)`` by
    default; ``engine`` picks llvm-symbolizer (``"llvm"``), the pure-Python
    DWARF reader (``"python"``) or the first available (``"auto"``);
    ``cache`` keeps downloads and answers in ``$XDG_CACHE_HOME/polyprof``;
    ``timeout``/``max_download`` bound each debuginfod download (see
    :meth:`download_limits`).
    """

    paths: tuple[str, ...] = ()
    debuginfod: tuple[str, ...] = ()
    mappings: tuple[str, ...] = ()
    offline: bool = False
    engine: str = "auto"
    use_env: bool = True
    local_paths: bool = True
    system_dirs: tuple[str, ...] = ("/usr/lib/debug",)
    timeout: float | None = None
    max_download: int | None = None
    cache: bool = True

    @classmethod
    def of(cls, value: object) -> Sources:
        """``value`` as Sources: itself, a path, or a list of paths (the old ``symbols=`` forms)."""
        if isinstance(value, Sources):
            return value
        if value is None:
            return cls()
        if isinstance(value, (str, os.PathLike)):
            return cls(paths=(os.fspath(value),))
        if hasattr(value, "root") and hasattr(value, "find"):  # a Breakpad SymbolStore
            return cls(paths=(str(value.root),))
        return cls(paths=tuple(os.fspath(v) for v in value))  # type: ignore[attr-defined]

    def binary_path(self) -> list[str]:
        if not self.use_env:
            return []
        text = os.environ.get("POLYPROF_BINARY_PATH") or os.environ.get("PPROF_BINARY_PATH") or ""
        return [p for p in text.split(os.pathsep) if p]

    def download_limits(self) -> tuple[float, int]:
        """(seconds per download, bytes per download): the fields, else elfutils' variables
        ``$DEBUGINFOD_TIMEOUT`` and ``$DEBUGINFOD_MAXSIZE``, else 30 s and 2 GiB."""
        def env(name: str, kind: type) -> float | int | None:
            text = os.environ.get(name, "") if self.use_env else ""
            try:
                return kind(text) if text.strip() else None
            except ValueError:
                return None

        timeout = self.timeout if self.timeout is not None else env("DEBUGINFOD_TIMEOUT", float)
        size = self.max_download if self.max_download is not None else env("DEBUGINFOD_MAXSIZE", int)
        return (float(timeout) if timeout else DEFAULT_TIMEOUT), (int(size) if size else DEFAULT_MAX_BYTES)

    def debuginfod_urls(self) -> list[str]:
        env = os.environ.get("DEBUGINFOD_URLS", "").split() if self.use_env else []
        out: list[str] = []
        for url in [*env, *self.debuginfod]:
            if url not in out:
                out.append(url)
        return out

    @property
    def wanted(self) -> bool:
        """True when some source was asked for explicitly (symbolization should run)."""
        return bool(self.paths or self.debuginfod or self.mappings)
