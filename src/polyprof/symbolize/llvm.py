"""llvm-symbolizer as one long-lived process, fed in batches.

pprof and Perfetto symbolize through llvm-symbolizer; it reads DWARF of
big binaries fast and caches the files it opened. One process serves every
file of a run: a batch of ``"FILE" 0xADDR`` lines is written by a helper
thread while the answers are read back, so neither side blocks on a full
pipe. Answers use the LLVM style (pairs of function and ``file:line:column``
lines, then a blank line), which llvm-symbolizer writes more than twice as
fast as JSON. Names come back
undemangled (``--no-demangle``): demangling is done once for every format
(:mod:`.demangle`).

When the process cannot start or dies, :class:`LlvmSymbolizerError` is
raised and the caller falls back to the pure-Python reader.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterable

from polyprof.errors import PolyprofError
from polyprof.symbolize.frames import Frame

__all__ = ["LlvmSymbolizer", "LlvmSymbolizerError", "find_llvm_symbolizer"]

#: Versioned names Debian and others install when the plain name is absent.
_NAMES = ("llvm-symbolizer",) + tuple(f"llvm-symbolizer-{v}" for v in range(20, 10, -1))


class LlvmSymbolizerError(PolyprofError):
    """llvm-symbolizer could not be started or stopped answering."""


def find_llvm_symbolizer() -> str | None:
    """Path of llvm-symbolizer (``$POLYPROF_LLVM_SYMBOLIZER`` first), or None."""
    forced = os.environ.get("POLYPROF_LLVM_SYMBOLIZER")
    if forced is not None:
        return shutil.which(forced) if forced else None
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _frames(lines: list[str]) -> list[Frame]:
    """Frames of one answer: pairs of "function" and "file:line:column" lines."""
    out = []
    for name, where in zip(lines[0::2], lines[1::2]):
        file, line, column = (where.rsplit(":", 2) + ["0", "0"])[:3]
        name = "" if name == "??" else name
        file = "" if file == "??" else file
        if name or file:
            out.append(Frame(name, file, int(line) if line.isdigit() else 0, int(column) if column.isdigit() else 0))
    return out


class LlvmSymbolizer:
    """One llvm-symbolizer process; :meth:`lookup` answers many addresses at once."""

    def __init__(self, exe: str) -> None:
        self.exe = exe
        try:
            self.proc = subprocess.Popen(
                [exe, "--output-style=LLVM", "--no-demangle", "--inlines", "--functions=linkage"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=1 << 16)
        except OSError as exc:
            raise LlvmSymbolizerError(f"cannot start {exe}: {exc}") from None

    def lookup(self, path: str, addresses: Iterable[int]) -> list[list[Frame]]:
        """Frames (innermost first) for each of ``addresses`` (ELF virtual addresses) in ``path``."""
        addrs = list(addresses)
        if not addrs:
            return []
        if '"' in path or "\n" in path:
            raise LlvmSymbolizerError(f"cannot pass the file name {path!r} to llvm-symbolizer")
        request = "".join(f'"{path}" {a:#x}\n' for a in addrs).encode("utf-8", "surrogateescape")
        failure: list[BaseException] = []

        def feed() -> None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(request)
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                failure.append(exc)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        out: list[list[Frame]] = []
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        pending = b""
        try:
            # Big reads split on the blank line that ends each answer: per-line reads cost
            # more than llvm-symbolizer itself on 100k addresses.
            while len(out) < len(addrs):
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise LlvmSymbolizerError(f"{self.exe} exited while symbolizing {path}")
                *answers, pending = (pending + chunk).split(b"\n\n")
                out.extend(_frames(a.decode("utf-8", "replace").strip("\n").split("\n")) for a in answers)
        except LlvmSymbolizerError:
            self.close()
            raise
        finally:
            writer.join(timeout=5)
        if failure:
            raise LlvmSymbolizerError(f"cannot talk to {self.exe}: {failure[0]}")
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LlvmSymbolizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
