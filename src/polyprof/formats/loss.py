"""What a conversion could not keep.

Writers return a :class:`LossReport`; ``convert`` prints it and the API
returns it, so no conversion loses data silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LossReport"]


@dataclass
class LossReport:
    """Counts of what a writer dropped or changed, by description."""

    target: str = ""
    items: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, count: int = 1) -> None:
        """Record that ``count`` things described by ``what`` were not kept."""
        if count:
            self.items[what] = self.items.get(what, 0) + int(count)

    def __bool__(self) -> bool:
        return bool(self.items)

    def lines(self) -> list[str]:
        return [f"{what}: {count}" for what, count in sorted(self.items.items())]

    def to_json(self) -> dict:
        return {"target": self.target, "lost": dict(sorted(self.items.items()))}
