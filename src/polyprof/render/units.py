"""Human units the way ``go tool pprof`` prints them (its measurement package)."""

from __future__ import annotations

__all__ = ["label", "output_unit", "percentage", "scale", "scaled_label"]

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


def _go_float(v: float) -> str:
    text = f"{v:.2f}"
    return text[:-3] if text.endswith(".00") else text


def scaled_label(value: int, from_unit: str, to_unit: str) -> str:
    v, u = scale(value, from_unit, to_unit)
    text = _go_float(v)
    return "0" if text in ("0", "-0") else text + u


def label(value: int, unit: str) -> str:
    return scaled_label(value, unit, "auto")


def percentage(value: int, total: int) -> str:
    """pprof's percentage column: '  100%', '12.34%', or '%5.2g%' below 1%."""
    ratio = abs(value / total) * 100 if total else 0.0
    if 99.95 <= ratio <= 100.05:
        return "  100%"
    if ratio >= 1.0:
        return f"{ratio:5.2f}%"
    return _go_g(ratio) + "%"


def _go_g(ratio: float) -> str:
    # Go's %5.2g: two significant digits, shortest form, width 5.
    if ratio == 0:
        return "    0"
    text = f"{ratio:.2g}"
    if "e" in text:
        mant, exp = text.split("e")
        sign = exp[0]
        digits = exp[1:].lstrip("0").rjust(2, "0")
        text = f"{mant}e{sign}{digits}"
    return text.rjust(5)


def output_unit(min_value: int, max_value: int, sample_unit: str) -> str:
    """The one unit a table uses, chosen as pprof's selectOutputUnit does."""
    if min_value == 0:
        min_value = max_value
    _, min_unit = scale(min_value, sample_unit, "minimum")
    _, max_unit = scale(max_value, sample_unit, "minimum")
    unit = min_unit
    if min_unit != max_unit and min_value * 100 < max_value:
        _, unit = scale(100 * min_value, sample_unit, "minimum")
    return unit
