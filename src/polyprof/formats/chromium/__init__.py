"""Chromium UMA sampling profiles (``metrics.CallStackProfile``): sniff, read, write.

Reads a bare ``CallStackProfile``, a ``SampledProfile`` wrapping one, or a
``ChromeUserMetricsExtension`` (UMA log) holding many -- binary or base64
text -- and writes a profile back as a ``SampledProfile`` (or a bare
``CallStackProfile``, or a one-profile UMA log). See :mod:`.reader` and
:mod:`.writer` for what is kept; wire facts are in
``../shared/spec/wire-formats.md`` section 4. Frames arrive unsymbolized
(module build id + offset): see :mod:`polyprof.symbolize`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO

from polyprof.formats.chromium.shape import detect, is_base64
from polyprof.wire.scan import is_text

if TYPE_CHECKING:
    from polyprof.formats.loss import LossReport
    from polyprof.formats.options import ReadOptions, WriteOptions
    from polyprof.formats.source import Source
    from polyprof.model.profile import Profile

__all__ = ["read", "sniff", "write"]


# The reader and writer import protobuf: only when used (the symbolizer imports this package for
# module names whatever the input's format).
def read(source: Source, options: ReadOptions) -> list[Profile]:
    """Every CallStackProfile in ``source`` (see :mod:`.reader`)."""
    from polyprof.formats.chromium.reader import read as read_profiles

    return read_profiles(source, options)


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` in the chosen Chromium container (see :mod:`.writer`)."""
    from polyprof.formats.chromium.writer import write as write_profile

    return write_profile(profile, out, options)


def sniff(head: bytes) -> bool:
    """True when ``head`` starts a Chromium profile message (or base64 text of one).

    Other plain text is not claimed (:func:`~polyprof.wire.scan.is_text`).
    """
    try:
        if is_text(head):
            return is_base64(head)
        return detect(head) is not None or is_base64(head)
    except Exception:  # noqa: BLE001 - a sniffer must never raise
        return False
