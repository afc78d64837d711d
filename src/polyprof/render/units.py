"""Human units the way ``go tool pprof`` prints them (its measurement package)."""

from __future__ import annotations

# the one unit table, shared with merges, filters and the tags report
from polyprof.model.units import scale, scaled_label

__all__ = ["label", "output_unit", "percentage", "scale", "scaled_label"]


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
