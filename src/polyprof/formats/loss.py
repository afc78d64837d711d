"""What a conversion could not keep, or kept only in another form.

Writers return a :class:`LossReport`; ``convert`` prints it (``--format
json`` gives it to scripts) and the API returns it, so no conversion loses or
changes data silently.

Each item is one sentence naming its subject the way the fidelity matrix
(tests/test_fidelity_matrix.py, docs/FIDELITY.md) looks for it: a sample
type as ``name/unit`` (``values of wall/microseconds not kept: ...``), the
``default sample type``, a label by its key, ``time``/``duration`` for
times, ``pid``/``tid`` columns, ``thread`` names, and ``frames``/
``addresses``/``function names`` for what changes every sample type's
stacks. Sample types read back under another name or unit are also listed
in ``renamed`` (``"cpu/nanoseconds" -> "cpu-clock/nanoseconds"``), so a
script can find a type again after a round trip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LossReport"]


@dataclass
class LossReport:
    """Counts of what a writer dropped or changed, by description."""

    target: str = ""
    items: dict[str, int] = field(default_factory=dict)
    #: str(sample type) -> str(sample type it reads back as), for types renamed or re-united.
    renamed: dict[str, str] = field(default_factory=dict)

    def add(self, what: str, count: int = 1) -> None:
        """Record that ``count`` things described by ``what`` were not kept."""
        if count:
            self.items[what] = self.items.get(what, 0) + int(count)

    def rename(self, old: Any, new: Any, how: str = "") -> None:
        """Record that sample type ``old`` reads back as ``new`` (``how``: why, or what was done)."""
        old, new = str(old), str(new)
        if old == new:
            return
        self.renamed[old] = new
        self.add(f"sample type {old} written as {new}" + (f" ({how})" if how else ""))

    def __bool__(self) -> bool:
        return bool(self.items)

    def lines(self) -> list[str]:
        return [f"{what}: {count}" for what, count in sorted(self.items.items())]

    def to_json(self) -> dict:
        return {"target": self.target, "lost": dict(sorted(self.items.items())),
                "renamed": dict(sorted(self.renamed.items()))}
