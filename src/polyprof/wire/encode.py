"""A small protobuf encoder for writers.

Calls chain: ``Encoder().varint_field(1, x).message(2, inner)``. Zero
scalars are skipped (proto3 implicit presence) unless ``always=True``.
Negative int64 values take ten bytes as protobuf requires; ``zigzag`` fields
are encoded with ``sint_field``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Encoder", "varint"]

_SMALL = [bytes([i]) for i in range(128)]


def varint(value: int) -> bytes:
    """The varint encoding of ``value`` (negative values as 64-bit two's complement)."""
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63) if value < 0 else value << 1


class Encoder:
    """Accumulates the encoded fields of one message."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def raw(self, data: bytes) -> "Encoder":
        if data:
            self._parts.append(data)
        return self

    def varint_field(self, field: int, value: int, *, always: bool = False) -> "Encoder":
        if value or always:
            self._parts.append(varint(field << 3))
            self._parts.append(varint(int(value)))
        return self

    def sint_field(self, field: int, value: int, *, always: bool = False) -> "Encoder":
        if value or always:
            self._parts.append(varint(field << 3))
            self._parts.append(varint(zigzag(int(value))))
        return self

    def bool_field(self, field: int, value: bool, *, always: bool = False) -> "Encoder":
        return self.varint_field(field, 1 if value else 0, always=always)

    def fixed64_field(self, field: int, value: int, *, always: bool = False) -> "Encoder":
        if value or always:
            self._parts.append(varint((field << 3) | 1))
            self._parts.append((int(value) & ((1 << 64) - 1)).to_bytes(8, "little"))
        return self

    def fixed32_field(self, field: int, value: int, *, always: bool = False) -> "Encoder":
        if value or always:
            self._parts.append(varint((field << 3) | 5))
            self._parts.append((int(value) & 0xFFFFFFFF).to_bytes(4, "little"))
        return self

    def bytes_field(self, field: int, data: bytes, *, always: bool = False) -> "Encoder":
        if data or always:
            self._parts.append(varint((field << 3) | 2))
            self._parts.append(varint(len(data)))
            self._parts.append(data)
        return self

    def string_field(self, field: int, text: str, *, always: bool = False) -> "Encoder":
        return self.bytes_field(field, text.encode("utf-8", errors="surrogatepass"), always=always)

    def message(self, field: int, inner: "Encoder | bytes") -> "Encoder":
        """A nested message; written even when empty (presence matters)."""
        data = inner.getvalue() if isinstance(inner, Encoder) else inner
        return self.bytes_field(field, data, always=True)

    def packed_field(self, field: int, values: Iterable[int], *, signed: bool = False) -> "Encoder":
        body = b"".join(varint(int(v)) for v in values)
        if body or signed:
            return self.bytes_field(field, body, always=bool(body))
        return self

    def unpacked_field(self, field: int, values: Iterable[int]) -> "Encoder":
        tag = varint(field << 3)
        for v in values:
            self._parts.append(tag)
            self._parts.append(varint(int(v)))
        return self

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)
