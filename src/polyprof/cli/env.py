"""The environment a command runs in, passed in so tests can substitute it."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Callable, Iterator
from typing import IO

__all__ = ["Env"]


@dataclass
class Env:
    """Output streams and whether stderr is a terminal (for progress lines)."""

    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    interactive: bool = field(default_factory=lambda: sys.stderr.isatty())

    def out(self, text: str = "") -> None:
        self.stdout.write(text if text.endswith("\n") else text + "\n")

    def note(self, text: str) -> None:
        """An informational line on stderr (never mixed into data on stdout)."""
        self.stderr.write(f"polyprof: {text}\n")

    def binary_stdout(self) -> IO[bytes]:
        return getattr(self.stdout, "buffer", sys.stdout.buffer)

    @contextmanager
    def progress(self, text: str) -> Iterator[Callable[[int, int], None] | None]:
        """A progress bar on stderr (TTY only) for ``text``.

        Yields a ``(done, total)`` callback, or None when stderr is not a
        terminal; the bar is redrawn at most once per percent and erased at
        the end.
        """
        if not self.interactive:
            yield None
            return
        shown = [-1]

        def report(done: int, total: int) -> None:
            percent = min(100, done * 100 // total) if total else 100
            if percent == shown[0]:
                return
            shown[0] = percent
            bar = "#" * (percent // 5) + "." * (20 - percent // 5)
            self.stderr.write(f"\r{text} [{bar}] {percent:3d}% ({done / 2**20:.0f}/{total / 2**20:.0f} MiB)")
            self.stderr.flush()

        self.stderr.write(f"\r{text} ...")
        self.stderr.flush()
        try:
            yield report
        finally:
            self.stderr.write("\r" + " " * (len(text) + 48) + "\r")
            self.stderr.flush()

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """Show ``text`` as a transient status line while long work runs (TTY only)."""
        if not self.interactive:
            yield
            return
        self.stderr.write(f"\r{text} ...")
        self.stderr.flush()
        try:
            yield
        finally:
            self.stderr.write("\r" + " " * (len(text) + 4) + "\r")
            self.stderr.flush()
