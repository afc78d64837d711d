"""The unit every symbol source answers with: one level of a symbolized address."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Frame"]


class Frame(NamedTuple):
    """One function level of an address, innermost inlined level first in a list.

    ``function`` is the name as the debug data spells it (a linkage name is
    mangled; demangling happens later, for every format alike); ``file`` is
    "" and ``line``/``column`` 0 when unknown.
    """

    function: str
    file: str = ""
    line: int = 0
    column: int = 0
