"""Where input bytes come from, and the one place gzip is undone.

A :class:`Source` wraps a path or in-memory bytes. ``data()`` returns the
content with at most one gzip layer removed, refusing to inflate past
``max_inflate`` bytes (a decompression bomb gets a clear error instead of
eating the machine). ``stream()`` gives a file object for readers that work
through inputs larger than memory.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeAlias, Union

from polyprof.errors import DecompressionLimitError, InputError, MalformedInputError

__all__ = ["DEFAULT_MAX_INFLATE", "GZIP_MAGIC", "Input", "Source", "inflate"]

GZIP_MAGIC = b"\x1f\x8b"
#: Default ceiling for inflated input: 4 GiB, or POLYPROF_MAX_INFLATE bytes.
DEFAULT_MAX_INFLATE = int(os.environ.get("POLYPROF_MAX_INFLATE", 4 << 30))
_CHUNK = 1 << 20


def inflate(data: bytes, limit: int) -> bytes:
    """Gunzip ``data`` (all members), refusing output larger than ``limit``."""
    out = []
    size = 0
    rest = data
    while rest:
        d = zlib.decompressobj(wbits=31)
        pending = rest
        while True:
            try:
                chunk = d.decompress(pending, _CHUNK)
            except zlib.error as exc:
                raise MalformedInputError(f"corrupt gzip data ({exc})") from None
            size += len(chunk)
            if size > limit:
                raise DecompressionLimitError(
                    f"gzip data inflates past {limit} bytes; refusing (a decompression bomb?). "
                    "Set POLYPROF_MAX_INFLATE to allow more")
            out.append(chunk)
            pending = d.unconsumed_tail
            if d.eof:
                break
            if not pending and not chunk:
                raise MalformedInputError("truncated gzip data")
        rest = d.unused_data.lstrip(b"\x00")
        if rest and not rest.startswith(GZIP_MAGIC):
            raise MalformedInputError("trailing garbage after gzip data")
    return b"".join(out)


@dataclass
class Source:
    """A profile input: a file path or bytes, with a display name for errors."""

    path: str | None = None
    raw: bytes | None = None
    #: Display name of an input that is not a path (a file object's name); errors use it.
    label: str | None = None
    max_inflate: int = DEFAULT_MAX_INFLATE
    _data: bytes | None = field(default=None, repr=False)
    gzipped: bool = False
    #: Called with (bytes read, total bytes) of the file as streaming readers consume it.
    progress: Callable[[int, int], None] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, src: Input, max_inflate: int | None = None) -> "Source":
        """A Source over a path (``str``/``os.PathLike``), bytes-like data, or a
        binary file object (read to its end once, so non-seekable streams such as
        ``sys.stdin.buffer`` or an HTTP response work)."""
        if isinstance(src, Source):
            return src
        limit = DEFAULT_MAX_INFLATE if max_inflate is None else max_inflate
        if isinstance(src, (bytes, bytearray, memoryview)):
            return cls(raw=bytes(src), max_inflate=limit)
        if isinstance(src, (str, os.PathLike)):
            return cls(path=os.fspath(src), max_inflate=limit)
        if callable(getattr(src, "read", None)):
            return cls._of_file(src, limit)
        raise TypeError(f"cannot read a profile from {type(src).__name__}: pass a path, bytes or a binary file object")

    @classmethod
    def _of_file(cls, fh: Any, limit: int) -> "Source":  # BinaryIO, or a text file refused here
        name = getattr(fh, "name", None)
        label = name if isinstance(name, str) and name else f"<{type(fh).__name__}>"
        text_mode = InputError("is open in text mode; open it in binary mode ('rb')", path=label)
        if isinstance(fh, io.TextIOBase):
            raise text_mode
        try:
            data = fh.read()
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror or exc})", path=label) from None
        if isinstance(data, str):
            raise text_mode
        return cls(raw=bytes(data or b""), label=label, max_inflate=limit)

    @property
    def name(self) -> str:
        return self.path or self.label or "<bytes>"

    def _file(self) -> str:
        """The path of a file source (callers check that it is one)."""
        if self.path is None:
            raise TypeError("this Source holds bytes, not a file")
        return self.path

    def _raw(self) -> bytes:
        if self.raw is None:
            with self.open_raw() as fh:
                try:
                    self.raw = fh.read()
                except OSError as exc:
                    raise InputError(f"cannot read ({exc.strerror})", path=self.path) from None
        return self.raw

    def head(self, n: int = 1 << 16) -> bytes:
        """The first ``n`` bytes of the content (after gzip), for sniffing."""
        if self._data is not None:
            return self._data[:n]
        if self.raw is not None:
            first = self.raw[: 1 << 20]
        else:
            try:
                with open(self._file(), "rb") as fh:
                    first = fh.read(1 << 20)
            except OSError:
                first = self._raw()[: 1 << 20]  # raises the right InputError
        if not first.startswith(GZIP_MAGIC):
            return first[:n]
        try:
            return zlib.decompressobj(wbits=31).decompress(first, n)
        except zlib.error as exc:
            raise MalformedInputError(f"corrupt gzip data ({exc})", path=self.path) from None

    def data(self) -> bytes:
        """The whole content with one gzip layer removed (bounded by max_inflate)."""
        if self._data is None:
            raw = self._raw()
            if raw.startswith(GZIP_MAGIC):
                self.gzipped = True
                try:
                    self._data = inflate(raw, self.max_inflate)
                except InputError as exc:
                    raise exc.with_path(self.name) from None
                if self._data.startswith(GZIP_MAGIC):
                    raise MalformedInputError(
                        "gzip inside gzip: unpack the outer layer first", path=self.path)
            else:
                self._data = raw
        return self._data

    def open_raw(self) -> BinaryIO:
        """The file itself (gzip not undone), reporting read progress to ``progress``."""
        try:
            fh = open(self._file(), "rb")
        except FileNotFoundError:
            raise InputError("no such file", path=self.path) from None
        except IsADirectoryError:
            raise InputError("is a directory, not a profile file", path=self.path) from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror})", path=self.path) from None
        if self.progress is None:
            return fh
        return _Progress(fh, os.fstat(fh.fileno()).st_size, self.progress)  # type: ignore[return-value]

    def stream(self) -> BinaryIO:
        """A file object over the content (gzip undone on the fly)."""
        if self._data is not None:
            return io.BytesIO(self._data)
        if self.path is not None:
            fh = self.open_raw()
            if fh.read(2) == GZIP_MAGIC:
                fh.seek(0)
                self.gzipped = True
                return gzip.GzipFile(fileobj=fh)  # type: ignore[return-value]
            fh.seek(0)
            return fh
        return io.BytesIO(self.data())


#: What ``Source.of`` (and so ``polyprof.read``) accepts.
Input: TypeAlias = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO, Source]


class _Progress:
    """A read-only file wrapper that reports how far reading has got."""

    def __init__(self, fh: io.BufferedReader, total: int, report: Callable[[int, int], None]) -> None:
        self._fh, self._total, self._report = fh, total, report

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._report(self._fh.tell(), self._total)
        return data

    def readinto(self, buf) -> int:  # noqa: ANN001
        count = self._fh.readinto(buf)
        self._report(self._fh.tell(), self._total)
        return count

    def __getattr__(self, name: str):  # noqa: ANN204 - seek, tell, close, fileno, ...
        return getattr(self._fh, name)

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()
