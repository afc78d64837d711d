"""The one exception tree of polyprof.

::

    PolyprofError                 every error polyprof raises on purpose
    ├── InputError                a file (or bytes) could not be used
    │   ├── UnrecognizedFormatError   no reader claims the data
    │   ├── MalformedInputError       a reader claims it, but it is broken
    │   │   └── DecompressionLimitError   it inflates past the limit
    │   └── UnsupportedFeatureError   valid, but uses something we cannot read
    ├── OptionsError              a flag or option value does not make sense
    └── OutputError               a result could not be written

    PolyprofWarning (a UserWarning)   something the user should know, e.g. a
                                      temporary file left by a killed run

Every error carries the context a user needs to act: the path (or
``<bytes>``), the format and, for malformed data, the byte offset. ``str()``
of an error is the one line the command line prints.
"""

from __future__ import annotations

__all__ = [
    "DecompressionLimitError",
    "InputError",
    "MalformedInputError",
    "OptionsError",
    "OutputError",
    "PolyprofError",
    "PolyprofWarning",
    "UnrecognizedFormatError",
    "UnsupportedFeatureError",
]


class PolyprofError(Exception):
    """Base of every error polyprof raises on purpose."""

    exit_code = 1


class InputError(PolyprofError):
    """An input could not be used. ``path`` names it when known."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, fmt: str | None = None,
                 offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.format = fmt
        self.offset = offset

    def with_path(self, path: str) -> "InputError":
        """Return this error with ``path`` filled in (readers work on bytes)."""
        if self.path is None:
            self.path = path
        return self

    def __str__(self) -> str:
        where = self.path or "<bytes>"
        parts = [where]
        if self.format:
            parts.append(self.format)
        head = ": ".join(parts)
        at = f" (at byte {self.offset})" if self.offset is not None else ""
        return f"{head}: {self.message}{at}"


class UnrecognizedFormatError(InputError):
    """No registered reader recognises the data."""

    exit_code = 3


class MalformedInputError(InputError):
    """The data claims to be a known format but is truncated or corrupt."""

    exit_code = 4


class DecompressionLimitError(MalformedInputError):
    """Compressed data inflates past the configured limit (a likely bomb)."""


class UnsupportedFeatureError(InputError):
    """Valid data that uses a feature polyprof cannot handle."""

    exit_code = 5


class OptionsError(PolyprofError):
    """An option or flag value does not make sense for this input."""

    exit_code = 6


class OutputError(PolyprofError):
    """A result could not be written."""

    exit_code = 7


class PolyprofWarning(UserWarning):
    """A warning from polyprof (the command line prints it as "polyprof: warning: ...")."""
