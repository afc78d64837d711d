"""The environment a command runs in, passed in so tests can substitute it."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Iterator

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
