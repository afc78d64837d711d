"""The library entry points: detect, read, write, convert.

Readers work on bytes and know nothing of paths; this layer adds the path to
every error, chooses the format (by content, never by file name, when
reading), validates every profile it returns, and writes outputs atomically
(a temporary file renamed into place), so a failure never leaves half a file.
"""

from __future__ import annotations

import os
import sys
from typing import TypeAlias

from polyprof.errors import InputError, MalformedInputError, OptionsError, UnrecognizedFormatError
from polyprof.formats import registry
from polyprof.formats.loss import LossReport
from polyprof.formats.options import ReadOptions, WriteOptions
from polyprof.formats.output import atomic_output
from polyprof.formats.source import GZIP_MAGIC, Input, Source
from polyprof.model.profile import Profile

__all__ = ["convert", "detect", "read", "read_all", "write"]

#: A path (str or os.PathLike), bytes, bytearray, memoryview, a binary file object
#: (seekable or not: sys.stdin.buffer, an HTTP response) or a Source.
PathOrBytes: TypeAlias = Input


def detect(src: PathOrBytes) -> registry.FormatSpec:
    """The format of ``src``, decided by content. Raises UnrecognizedFormatError."""
    source = Source.of(src)
    head = source.head()
    if head.startswith(GZIP_MAGIC) and _raw_is_gzip(source):
        raise MalformedInputError("gzip inside gzip: unpack the outer layer first", path=source.name)
    for spec in registry.available():
        if not spec.can_read:
            continue
        sniff = getattr(spec.load(), "sniff", None)
        if sniff is not None and sniff(head):
            return spec
    if not head:
        raise UnrecognizedFormatError("file is empty", path=source.name)
    readable = ", ".join(registry.names(readable=True))
    raise UnrecognizedFormatError(
        f"not a profile format polyprof reads (tried {readable}); run 'polyprof formats' for the list",
        path=source.name)


def _raw_is_gzip(source: Source) -> bool:
    if source.raw is not None:
        return source.raw.startswith(GZIP_MAGIC)
    with open(source.name, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def read_all(src: PathOrBytes, *, format: str | None = None,
             options: ReadOptions | None = None) -> list[Profile]:
    """Every profile in ``src`` (one for pprof; several for some traces and logs)."""
    opts = options or ReadOptions()
    source = Source.of(src, opts.max_inflate)
    source.progress = opts.progress
    source.limits = opts.limits
    if format:
        spec = registry.by_name(format)
        if spec is None or not spec.can_read:
            raise OptionsError(f"cannot read format {format!r}; readable: "
                               f"{', '.join(registry.names(readable=True))}")
    else:
        spec = detect(source)
    try:
        profiles = spec.load().read(source, opts)
    except InputError as exc:
        exc.format = exc.format or spec.name
        raise exc.with_path(source.name) from None
    # Any other exception is a bug in polyprof, not bad input: it propagates
    # (the CLI reports it as an internal error), so tests and fuzzing see it.
    # Symbolization is its own layer, applied to any format: demangling and in-trace Java maps
    # always, the rest when asked for (ReadOptions.symbols and its neighbours).
    from polyprof.symbolize import after_read
    try:
        profiles = after_read(profiles, opts)
    except InputError as exc:
        raise exc.with_path(exc.path or source.name) from None
    from polyprof.model.validate import check
    for p in profiles:
        p.source_format = p.source_format or spec.name
        try:
            check(p)
        except InputError as exc:
            exc.format = spec.name
            raise exc.with_path(source.name) from None
    return profiles


def read(src: PathOrBytes, *, format: str | None = None, options: ReadOptions | None = None) -> Profile:
    """One profile from ``src`` (a path, bytes-like data or a binary file object), by the
    rule of :mod:`polyprof.selection` for inputs holding several.

    ``options.profiles`` picks profiles by number (as ``polyprof info`` lists
    them); several profiles with the same sample types are merged, each
    sample labelled with the profile it came from (``options.note`` is told);
    several of different kinds are an OptionsError listing them, unless
    ``options.merge`` unites their sample types. Successive cumulative dumps
    of one process and heap are not merged: the last one is kept. An input
    holding no profile is a MalformedInputError.
    """
    from polyprof.selection import select

    opts = options or ReadOptions()
    source = Source.of(src, opts.max_inflate)
    profiles = read_all(source, format=format, options=opts)
    return select(profiles, numbers=opts.profiles, merge_kinds=opts.merge, name=source.name, note=opts.note)


def _target(path: str, format: str | None) -> registry.FormatSpec:
    if format:
        spec = registry.by_name(format)
        if spec is None or not spec.can_write:
            raise OptionsError(f"cannot write format {format!r}; writable: "
                               f"{', '.join(registry.names(writable=True))}")
        return spec
    spec = registry.by_extension(path)
    if spec is None or not spec.can_write:
        raise OptionsError(f"cannot tell the output format from {path!r}; pass {{format}}=NAME "
                           f"({', '.join(registry.names(writable=True))})", options=("format",))
    return spec


def write(profile: Profile, path: str | os.PathLike[str], *, format: str | None = None,
          options: WriteOptions | None = None) -> LossReport:
    """Write ``profile`` to ``path`` ("-" for stdout) atomically; return the loss report."""
    path = os.fspath(path)
    spec = _target(path, format)
    opts = options or WriteOptions()
    module = spec.load()
    if path == "-":
        report = module.write(profile, sys.stdout.buffer, opts)
        sys.stdout.buffer.flush()
        report.target = spec.name
        return report
    with atomic_output(path) as out:
        report = module.write(profile, out, opts)
    report.target = spec.name
    return report


def convert(src: PathOrBytes, dst: str | os.PathLike[str], *, to: str | None = None,
            read_options: ReadOptions | None = None,
            write_options: WriteOptions | None = None) -> LossReport:
    """Read ``src`` and write it to ``dst``; return what the target could not keep."""
    profile = read(src, options=read_options)
    return write(profile, dst, format=to, options=write_options)
