"""Atomic output: a result appears whole at its path, or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from polyprof.errors import OutputError

__all__ = ["atomic_output", "write_text_atomic"]


@contextmanager
def atomic_output(path: str) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``path`` only if the block succeeds.

    The data goes to a temporary file beside ``path``, which gets the usual
    permissions (not mkstemp's 0600) and is renamed into place; on any error
    it is removed and ``path`` is left untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".polyprof-", dir=directory)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically."""
    with atomic_output(path) as out:
        out.write(text.encode("utf-8"))
