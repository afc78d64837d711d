"""Which sample-value columns a simpleperf recording becomes (shared by reader and writer).

Column 0 is ``samples/count`` (one per Sample record, whatever its event).
Then, per event type in ``MetaInfo.event_type`` order: ``<event>_samples/count``
(only when there is more than one event type; with one it would repeat column
0) and ``<event>/<unit>`` (the summed ``event_count``; the unit is nanoseconds
for cpu-clock and task-clock, the one an event name written by polyprof
carries as ``name(unit)``, count otherwise). An off-CPU recording adds
``off-cpu/nanoseconds`` and ``on+off-cpu/nanoseconds``.
"""

from __future__ import annotations

from dataclasses import dataclass

from polyprof.model.profile import ValueType
from polyprof.model.units import split_unit, with_unit

__all__ = ["OFF_CPU", "ON_OFF_CPU", "SAMPLES", "Layout", "event_name", "event_type", "event_unit", "infer_events"]

SAMPLES = ValueType("samples", "count")
OFF_CPU = ValueType("off-cpu", "nanoseconds")
ON_OFF_CPU = ValueType("on+off-cpu", "nanoseconds")
_TIME_EVENTS = ("cpu-clock", "task-clock")


def event_unit(name: str) -> str:
    """Unit of an event's counts: time for the clock events (also with modifiers, "cpu-clock:u")."""
    return "nanoseconds" if name.split(":", 1)[0] in _TIME_EVENTS else "count"


def event_type(name: str) -> ValueType:
    """The sample type an event's counts become (``name(unit)`` gives the unit explicitly)."""
    base, unit = split_unit(name)
    return ValueType(base, unit or event_unit(base))


def event_name(vt: ValueType) -> str:
    """The event name that reads back as sample type ``vt`` (inverse of :func:`event_type`)."""
    return with_unit(vt.type, vt.unit, event_unit(vt.type))


@dataclass(frozen=True)
class Layout:
    events: tuple[str, ...]
    offcpu: bool = False

    @property
    def per_event_samples(self) -> bool:
        return len(self.events) > 1

    def sample_column(self, event: int) -> int:
        """Column counting the samples of event ``event``."""
        return 1 + 2 * event if self.per_event_samples else 0

    def count_column(self, event: int) -> int:
        """Column summing the event counts of event ``event``."""
        return 2 + 2 * event if self.per_event_samples else 1 + event

    @property
    def offcpu_column(self) -> int:
        return len(self.types) - 2

    @property
    def types(self) -> list[ValueType]:
        out = [SAMPLES]
        for name in self.events:
            vt = event_type(name)
            if self.per_event_samples:
                out.append(ValueType(f"{vt.type}_samples", "count"))
            out.append(vt)
        if self.offcpu:
            out += [OFF_CPU, ON_OFF_CPU]
        return out


def infer_events(types: list[ValueType]) -> Layout | None:
    """The layout that produced ``types``, or None if they do not follow it."""
    if not types or types[0] != SAMPLES:
        return None
    rest = list(types[1:])
    offcpu = len(rest) >= 2 and rest[-2:] == [OFF_CPU, ON_OFF_CPU]
    if offcpu:
        rest = rest[:-2]
    if len(rest) == 1:
        events: tuple[str, ...] = (event_name(rest[0]),)
    elif len(rest) % 2 == 0:
        events = tuple(event_name(rest[i + 1]) for i in range(0, len(rest), 2))
    else:
        return None
    if any(split_unit(e)[1] for e in events):  # not what simpleperf itself records: the writer's general plan
        return None
    layout = Layout(events, offcpu)
    return layout if layout.types == types else None
