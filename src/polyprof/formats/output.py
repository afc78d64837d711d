"""Atomic output: a result appears whole at its path, or not at all.

The data goes to a temporary file ``.polyprof-<pid>-<random>`` beside the
target and is renamed into place when complete. Any exception, Ctrl-C, or
(from the command line, which turns SIGTERM into an exception) a kill
request removes it. A SIGKILL cannot be caught: the next write into that
directory names such leftovers in a :class:`PolyprofWarning` (the pid in
the name tells a dead writer from a live one); it never deletes them, since
only the user knows whether they matter.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from polyprof.errors import OutputError, PolyprofWarning

__all__ = ["TEMP_PREFIX", "atomic_output", "stale_temporaries", "write_text_atomic"]

TEMP_PREFIX = ".polyprof-"


@contextmanager
def atomic_output(path: str) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``path`` only if the block succeeds.

    The data goes to a temporary file beside ``path``, which gets the usual
    permissions (not mkstemp's 0600) and is renamed into place; on any error
    or interruption it is removed and ``path`` is left untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    for stale in stale_temporaries(directory):
        warnings.warn(PolyprofWarning(
            f"{stale}: a temporary file left by an interrupted polyprof run (not deleted; "
            "remove it if you do not need it)"), stacklevel=3)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=directory)
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


def stale_temporaries(directory: str) -> list[str]:
    """Paths of ``.polyprof-*`` temporaries in ``directory`` whose writer is gone.

    Names with a pid are stale when no process has that pid; older names
    without one always count.
    """
    try:
        names = [n for n in os.listdir(directory) if n.startswith(TEMP_PREFIX)]
    except OSError:
        return []
    out = []
    for name in sorted(names):
        pid = name[len(TEMP_PREFIX):].partition("-")[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        out.append(os.path.join(directory, name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or an odd pid): not ours to judge
    return True


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically."""
    with atomic_output(path) as out:
        out.write(text.encode("utf-8"))
