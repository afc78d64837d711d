"""The one exception tree of polyprof.

::

    PolyprofError                 every error polyprof raises on purpose
    ├── InputError                a file (or bytes) could not be used
    │   ├── UnrecognizedFormatError   no reader claims the data
    │   ├── MalformedInputError       a reader claims it, but it is broken
    │   │   └── DecompressionLimitError   it inflates past the limit
    │   └── UnsupportedFeatureError   valid, but uses something we cannot read
    ├── OptionsError              a flag or option value does not make sense
    ├── MissingDependencyError    an optional extra (pandas, pyarrow) is not installed
    ├── OutputError               a result could not be written
    └── StoreError                a fleet store is missing, damaged, too new or busy

    PolyprofWarning (a UserWarning)   something the user should know, e.g. a
                                      temporary file left by a killed run

Every error carries the context a user needs to act: the path (or
``<bytes>``), the format and, for malformed data, the byte offset. ``str()``
of an error is the one line the command line prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Sequence

__all__ = [
    "DecompressionLimitError",
    "InputError",
    "MalformedInputError",
    "MissingDependencyError",
    "OptionsError",
    "OutputError",
    "PolyprofError",
    "PolyprofWarning",
    "StoreError",
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
        return _one_line(f"{head}: {self.message}{at}")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _one_line(text: str) -> str:
    """``text`` with control characters escaped: names taken from hostile data
    (an ELF section's, a path's) must not break the one-line message or the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


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
    """An option or flag value does not make sense for this input.

    ``options`` names the options the message is about. The message refers
    to each as ``{name}`` (followed by ``=value`` where it shows one) or
    ``{name=value}``; ``str()`` spells them as library keywords (``pid=1234``,
    ``profiles=[2]``; a switch, given as ``"merge=True"`` in ``options``, as
    ``merge=True``) and :meth:`spelled` as another front end does (the CLI:
    ``--pid=1234``, ``--profile 2``, ``--merge``).
    """

    exit_code = 6

    def __init__(self, message: str, *, options: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.template = message
        self.options = tuple(o.removesuffix("=True") for o in options)
        self.switches = frozenset(o.removesuffix("=True") for o in options if o.endswith("=True"))

    def spelled(self, spell: Spelling) -> str:
        """The message with every placeholder replaced by ``spell(name, is_switch, value)``."""
        return spell_options(self.template, self.options, spell, self.switches)

    def __str__(self) -> str:
        return self.spelled(keyword_spelling)


#: How a front end writes an option: (name, is_switch, value or None) -> text.
Spelling = Callable[[str, bool, "str | None"], str]
#: Options that take a list of values (``profiles=[2]``).
_LIST_OPTIONS = frozenset({"profiles"})


def keyword_spelling(name: str, switch: bool, value: str | None = None) -> str:
    """An option as a library keyword: ``pid``, ``pid=7``, ``profiles=[2]``, ``merge=True``."""
    if switch:
        return f"{name}=True"
    if value is None:
        return name
    return f"{name}=[{value}]" if name in _LIST_OPTIONS else f"{name}={value}"


def spell_options(text: str, options: Sequence[str], spell: Spelling,
                  switches: Container[str] = ()) -> str:
    """``text`` with its ``{name}`` and ``{name=value}`` placeholders (for names in
    ``options``) spelled by ``spell``."""
    for name in options:
        switch = name in switches
        text = text.replace("{" + name + "}", spell(name, switch, None))
        text = re.sub(r"\{" + re.escape(name) + r"=([^{}]*)\}", lambda m: spell(name, switch, m.group(1)), text)
    return text


class MissingDependencyError(PolyprofError, ImportError):
    """An optional dependency is not installed; ``extra`` names the polyprof extra
    that installs it (``pip install 'polyprof[pandas]'``)."""

    def __init__(self, message: str, *, module: str, extra: str) -> None:
        super().__init__(message)
        self.module = module
        self.extra = extra


class OutputError(PolyprofError):
    """A result could not be written."""

    exit_code = 7


class StoreError(PolyprofError):
    """A fleet store (``polyprof store``) cannot be used: not a store, damaged,
    written by a newer polyprof, or locked by another writer."""

    exit_code = 10


class PolyprofWarning(UserWarning):
    """A warning from polyprof (the command line prints it as "polyprof: warning: ...")."""
