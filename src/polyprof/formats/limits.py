"""Resource limits for reading untrusted input, read from the environment in one place.

A profile comes from a device, a bug report or a fleet; a few hostile bytes
must not cost minutes or gigabytes. Every count a reader takes from the data
(how far gzip inflates, how many event types a file names, how many values
its samples imply) is checked against a limit *while decoding*, and going
past one is a :class:`~polyprof.errors.MalformedInputError` (or
:class:`~polyprof.errors.DecompressionLimitError`) that names the field, the
value, the limit and the environment variable that raises it.

Most structural counts need no limit: the decoders are linear in the input
(each string, label, frame or field costs at least one byte of it). The
limits below cover what input bytes alone do not bound. README, "Limits",
lists them with their defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from polyprof.errors import DecompressionLimitError, MalformedInputError

__all__ = ["DEFAULT_MAX_INFLATE", "LIMITS", "Limits", "check_int64", "over_limit"]


def _env(name: str, default: float, kind: type = int) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw)
    except ValueError:
        return default
    return value if value >= 0 else default


#: Default ceiling for inflated input: 4 GiB, or POLYPROF_MAX_INFLATE bytes.
DEFAULT_MAX_INFLATE = int(_env("POLYPROF_MAX_INFLATE", 4 << 30))


@dataclass(frozen=True)
class Limits:
    """The limits of one read (defaults from the environment; 0 turns a ratio limit off)."""

    #: gzip may inflate to at most this many times its compressed size ...
    inflate_ratio: float = _env("POLYPROF_MAX_INFLATE_RATIO", 32.0, float)
    #: ... once the output is past this size (small files may compress very well).
    inflate_ratio_floor: int = int(_env("POLYPROF_INFLATE_RATIO_FLOOR", 4 << 20))
    #: simpleperf: sample event type ids beyond those MetaInfo names.
    event_types: int = int(_env("POLYPROF_MAX_EVENT_TYPES", 1024))
    #: Sample values a reader may create per byte of (inflated) input, for formats
    #: whose value columns come from counts in the data (simpleperf event types).
    values_per_byte: float = _env("POLYPROF_MAX_VALUES_PER_BYTE", 16.0, float)

    def check_inflation(self, produced: int, consumed: int, limit: int) -> None:
        """Raise DecompressionLimitError when ``produced`` bytes from ``consumed`` is too much."""
        if produced > limit:
            raise DecompressionLimitError(
                f"gzip data inflates past {limit} bytes; refusing (a decompression bomb?). "
                "Set POLYPROF_MAX_INFLATE to allow more")
        if self.inflate_ratio and produced > self.inflate_ratio_floor \
                and produced > self.inflate_ratio * max(consumed, 1):
            raise DecompressionLimitError(
                f"gzip data inflates {produced / max(consumed, 1):.0f} times its compressed size "
                f"({consumed} bytes gave {produced} so far; limit {self.inflate_ratio:g} times past "
                f"{self.inflate_ratio_floor >> 20} MiB); refusing (a decompression bomb?). "
                "Set POLYPROF_MAX_INFLATE_RATIO (0 = no ratio limit) to allow more")

    def inflate_cap(self, consumed: int, limit: int) -> int:
        """The most output ``consumed`` compressed bytes may inflate to (for one-shot decoders)."""
        if not self.inflate_ratio:
            return limit
        return min(limit, max(self.inflate_ratio_floor, int(self.inflate_ratio * consumed)))

    def check_values(self, what: str, rows: int, columns: int, input_size: int) -> None:
        """Refuse a rows x columns value table larger than ``input_size`` can justify."""
        cells = rows * columns
        allowed = max(1 << 20, int(self.values_per_byte * input_size))
        if cells > allowed:
            raise MalformedInputError(
                f"{what}: {rows} samples x {columns} value columns = {cells} values, more than "
                f"{input_size} bytes of input can justify (limit {allowed}, "
                f"{self.values_per_byte:g} per byte); set POLYPROF_MAX_VALUES_PER_BYTE to allow more")


#: The limits every read uses unless ReadOptions.limits says otherwise.
LIMITS = Limits()


def over_limit(field: str, value: int, limit: int, env: str, offset: int | None = None,
               why: str = "") -> MalformedInputError:
    """The error for a count in the data past a documented limit."""
    return MalformedInputError(
        f"{field} = {value} is over the limit of {limit}{why}; set {env} to allow more", offset=offset)


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def check_int64(field: str, value: int, why: str = "") -> int:
    """``value`` if it fits the model's signed 64-bit columns, else a "value out of range" error."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise MalformedInputError(f"{field} = {value} is out of range{why} (the model holds signed "
                                  "64-bit values)")
    return value
