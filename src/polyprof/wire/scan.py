"""Scalar protobuf scanning for sniffers: a few fields at the head of a file.

Sniffers read only the first records of an input, so a plain Python loop is
right here (the vectorized kernels are in :mod:`polyprof.wire.vector`).
"""

from __future__ import annotations

__all__ = ["is_text", "read_varint"]

#: Bytes of plain text: printable ASCII and whitespace.
_TEXT = bytes(range(0x20, 0x7F)) + b"\t\n\v\f\r"


def is_text(head: bytes) -> bool:
    """Whether ``head`` is plain text, which a protobuf sniffer should not claim.

    Some short texts are valid protobuf ("hi" is field 13 = 105), but a real
    profile or trace always has a length or field key that is a control byte
    (a pprof ValueType's 0x08 and 0x10, a packet's length), so text is
    "unrecognized", never a malformed binary profile.
    """
    return not head.translate(None, _TEXT)


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint at ``buf[i]`` and the position after it.

    Raises IndexError when it runs past the end or over ten bytes: to a
    sniffer both mean "not mine (or not enough bytes to tell)".
    """
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise IndexError("truncated or over-long varint")
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7
