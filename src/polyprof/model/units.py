"""Measurement units as ``go tool pprof`` understands them (its measurement package).

Two families convert within themselves: memory (B, kB, MB, ... in powers of
1024) and time (ns, us, ms, s, hrs). Unit names are matched case-insensitively,
singular or plural ("bytes", "nanoseconds", "ms"). Other units ("count",
"samples", "worker") do not convert. Used by merges (aligning units), label
filters (ranges with units) and the renderers.
"""

from __future__ import annotations

import re

__all__ = ["finest", "scale", "scaled_label", "split_unit", "with_unit"]

_UNIT_TYPES = (
    (("B", ("b", "byte"), 1.0), ("kB", ("kb", "kbyte", "kilobyte"), 2.0 ** 10),
     ("MB", ("mb", "mbyte", "megabyte"), 2.0 ** 20), ("GB", ("gb", "gbyte", "gigabyte"), 2.0 ** 30),
     ("TB", ("tb", "tbyte", "terabyte"), 2.0 ** 40), ("PB", ("pb", "pbyte", "petabyte"), 2.0 ** 50)),
    (("ns", ("ns", "nanosecond"), 1.0), ("us", ("μs", "us", "microsecond"), 1e3),
     ("ms", ("ms", "millisecond"), 1e6), ("s", ("s", "sec", "second"), 1e9),
     ("hrs", ("hour", "hr"), 3600e9)),
)
_DEFAULTS = (("B", 1.0), ("s", 1e9))


def _sniff(units: tuple, unit: str) -> tuple[str, float] | None:
    unit = unit.lower()
    if len(unit) > 2 and unit.endswith("s"):
        unit = unit[:-1]
    for name, aliases, factor in units:
        if unit in aliases:
            return name, factor
    return None


def scale(value: int, from_unit: str, to_unit: str) -> tuple[float, str]:
    """``value`` in ``from_unit`` expressed in ``to_unit`` ("auto"/"minimum" pick one)."""
    if value < 0:
        v, u = scale(-value, from_unit, to_unit)
        return -v, u
    for units, (dname, dfactor) in zip(_UNIT_TYPES, _DEFAULTS):
        found = _sniff(units, from_unit)
        if found is None:
            continue
        v = value * found[1]
        if to_unit in ("minimum", "auto"):
            best = None
            for name, _, factor in units:
                if (best is None or factor >= best[1]) and v / factor >= 1.0:
                    best = (name, factor)
            if best is None:
                return v / dfactor, dname
            return v / best[1], best[0]
        target = _sniff(units, to_unit)
        if target is None:
            return v / dfactor, dname
        return v / target[1], target[0]
    if to_unit in ("count", "sample", "unit", "minimum", "auto"):
        return float(value), ""
    return float(value), to_unit


def finest(unit_a: str, unit_b: str) -> str | None:
    """The finer of two units of one family (``unit_a`` on a tie), or None if they do not convert."""
    if unit_a == unit_b:
        return unit_a
    for units in _UNIT_TYPES:
        a, b = _sniff(units, unit_a), _sniff(units, unit_b)
        if a is not None and b is not None:
            return unit_b if b[1] < a[1] else unit_a
    return None


_NAMED_UNIT = re.compile(r"(.+)\(([A-Za-z_]+)\)")


def with_unit(name: str, unit: str, implied: str) -> str:
    """The event name that keeps ``unit`` in formats whose events have no unit field.

    ``name(unit)`` ("alloc_space(bytes)"), or plain ``name`` when the format
    already gives that name the unit ``implied``. :func:`split_unit` undoes it.
    """
    return name if unit == implied else f"{name}({unit})"


def split_unit(name: str) -> tuple[str, str | None]:
    """(name, unit) of an event name written by :func:`with_unit`; unit None when it carries none."""
    m = _NAMED_UNIT.fullmatch(name)
    return (m.group(1), m.group(2)) if m else (name, None)


def _go_float(v: float) -> str:
    text = f"{v:.2f}"
    return text[:-3] if text.endswith(".00") else text


def scaled_label(value: int, from_unit: str, to_unit: str) -> str:
    """``value`` as pprof's ``ScaledLabel`` prints it: scaled to ``to_unit``, two decimals
    at most, the unit appended ("1.50MB", "12ms", "0")."""
    v, u = scale(value, from_unit, to_unit)
    text = _go_float(v)
    return "0" if text in ("0", "-0") else text + u
