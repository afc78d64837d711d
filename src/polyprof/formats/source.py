"""Where input bytes come from, and the one place gzip is undone.

A :class:`Source` wraps a path or in-memory bytes. ``data()`` returns the
content with at most one gzip layer removed, refusing to inflate past
``max_inflate`` bytes or the inflation ratio of ``limits`` (checked after
every chunk, so a decompression bomb gets a clear error instead of eating
the machine). ``stream()`` gives a file object for readers that work through
inputs larger than memory, inflated on the fly under the same limits: there
is one gzip path, :class:`GunzipReader`.
"""

from __future__ import annotations

import io
import mmap
import os
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeAlias, Union

from polyprof.errors import InputError, MalformedInputError
from polyprof.formats.limits import DEFAULT_MAX_INFLATE, LIMITS, Limits
from polyprof.wire.vector import COMPILED_FOR_INPUT, expect_sized, prefetch

__all__ = ["DEFAULT_MAX_INFLATE", "GZIP_MAGIC", "GunzipReader", "Input", "Source", "inflate"]

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20
#: :meth:`Source.mapped` reads, not maps, a file modified less than this many seconds ago: a file
#: being written (its modification time moves with every write). Short, so that a file just
#: converted (a benchmark's) is mapped from its second read on.
SETTLED_AFTER = 2.0


class GunzipReader:
    """The one gzip path: a file object that inflates ``fh`` chunk by chunk.

    It reads every gzip member (zero padding between members is allowed),
    reports a stream cut before its end marker, and checks ``limits`` after
    every chunk of at most 1 MiB, so a decompression bomb stops at the limit
    instead of after it has filled memory. ``Source.data()``,
    ``Source.stream()`` and the streaming readers all go through it.
    """

    def __init__(self, fh: BinaryIO, limit: int, limits: Limits = LIMITS) -> None:
        self.fh = fh
        self.limit = limit
        self.limits = limits
        self.produced = 0  # inflated bytes handed out
        self.consumed = 0  # compressed bytes read from fh
        self._d = zlib.decompressobj(wbits=31)
        self._pending = b""
        self._done = False

    def close(self) -> None:
        self.fh.close()

    def __enter__(self) -> "GunzipReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fill(self) -> bool:
        """Read more compressed bytes into ``_pending``; False at the end of the file."""
        self._pending = self.fh.read(_CHUNK)
        self.consumed += len(self._pending)
        return bool(self._pending)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` inflated bytes (all the rest for ``n < 0``); b"" at the end."""
        out = []
        want = n if n >= 0 else 1 << 62
        size = 0
        while size < want and not self._done:
            chunk = self._step(min(want - size, _CHUNK))
            size += len(chunk)
            out.append(chunk)
        return b"".join(out)

    def _step(self, n: int) -> bytes:
        if not self._pending and not self._fill():
            if self._d.eof or (not self.produced and not self.consumed):
                self._done = True
                return b""
            raise MalformedInputError("truncated gzip data (the file ends inside the stream)")
        try:
            chunk = self._d.decompress(self._pending, n)
        except zlib.error as exc:
            raise MalformedInputError(f"corrupt gzip data ({exc})") from None
        self._pending = self._d.unconsumed_tail
        self.produced += len(chunk)
        self.limits.check_inflation(self.produced, self.consumed - len(self._pending), self.limit)
        if self._d.eof:
            self._next_member()
        return chunk

    def _next_member(self) -> None:
        rest = self._d.unused_data
        while True:
            rest = rest.lstrip(b"\x00")
            if rest or not self._fill():
                break
            rest = self._pending
        if not rest:
            self._done = True
        elif not rest.startswith(GZIP_MAGIC[: len(rest)]):
            raise MalformedInputError("trailing garbage after gzip data")
        self._d = zlib.decompressobj(wbits=31)
        self._pending = rest


def inflate(data: bytes, limit: int, limits: Limits = LIMITS) -> bytes:
    """Gunzip ``data`` (all members), refusing more than ``limit`` bytes or the ratio limit."""
    return GunzipReader(io.BytesIO(data), limit, limits).read()


@dataclass
class Source:
    """A profile input: a file path or bytes, with a display name for errors."""

    path: str | None = None
    raw: bytes | None = None
    #: Display name of an input that is not a path (a file object's name); errors use it.
    label: str | None = None
    max_inflate: int = DEFAULT_MAX_INFLATE
    #: The ratio limit (and the others) of formats/limits.py; api.read_all sets ReadOptions.limits.
    limits: Limits = field(default=LIMITS, repr=False)
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

    def data(self, compiled_from: int = COMPILED_FOR_INPUT) -> bytes:
        """The whole content with one gzip layer removed (bounded by max_inflate). A content of
        ``compiled_from`` bytes or more loads the compiled decode kernels before the reader's
        first decode (a reader passes the size from which they pay for it, measured)."""
        if self._data is None:
            raw = self._raw()
            if raw.startswith(GZIP_MAGIC):
                self.gzipped = True
                prefetch(len(raw), compiled_from)  # a large input loads the compiled kernels while it inflates
                try:
                    self._data = inflate(raw, self.max_inflate, self.limits)
                except InputError as exc:
                    raise exc.with_path(self.name) from None
                if self._data.startswith(GZIP_MAGIC):
                    raise MalformedInputError(
                        "gzip inside gzip: unpack the outer layer first", path=self.path)
            else:
                self._data = raw
            expect_sized(len(self._data), compiled_from)  # a large input: compiled kernels from the start
        return self._data

    def mapped(self, compiled_from: int) -> mmap.mmap | None:
        """The content of a plain (not gzip) file of ``compiled_from`` bytes or more as a read-only
        memory map, loading the compiled kernels as :meth:`data` would; None for anything else
        (bytes, gzip, a smaller file, a file that cannot be mapped, a read with a progress bar, a
        file modified in the last :data:`SETTLED_AFTER` seconds: the caller reads :meth:`data`).
        Reading a 215 MB file into bytes costs ~0.12 s of CPU and 53k page faults; mapping it,
        the pages its decoders touch, ~0.05 s and 3.7k faults (the kernel maps file pages in
        runs); a 614 MB simpleperf recording, ~0.3 s of CPU and as much system time.

        A mapped file that shrinks while it is read makes the reading of its lost pages fault
        (SIGBUS: the process dies without a word), where a read copy would not notice. A file
        still being written (a report-sample run, a copy in progress) is the likely case: it is
        read instead, and the reader calls :meth:`unchanged` after its read."""
        import time

        if self.path is None or self.raw is not None or self._data is not None or self.progress is not None:
            return None
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                if st.st_size < compiled_from or not stat.S_ISREG(st.st_mode) or fh.read(2) == GZIP_MAGIC or \
                        time.time() - st.st_mtime < SETTLED_AFTER:
                    return None
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        expect_sized(len(data), compiled_from)
        return data

    def unchanged(self, data: Any) -> None:  # noqa: ANN401 - what mapped() or data() gave
        """After a read of ``data``: a MalformedInputError if it is a map (:meth:`mapped`) of a
        file now shorter than the map (cut while it was read: what was read may mix old and new
        bytes)."""
        if isinstance(data, mmap.mmap) and (size := data.size()) < len(data):
            raise MalformedInputError(f"the file shrank from {len(data)} to {size} bytes while it was read; "
                                      "read it again once it is complete", path=self.name)

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
        """A file object over the content, gzip undone on the fly by the bounded GunzipReader."""
        if self._data is not None:
            return io.BytesIO(self._data)
        fh = self.open_raw() if self.path is not None else io.BytesIO(self._raw())
        if fh.read(2) == GZIP_MAGIC:
            fh.seek(0)
            self.gzipped = True
            return GunzipReader(fh, self.max_inflate, self.limits)  # type: ignore[return-value]
        fh.seek(0)
        return fh


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
