"""Content detection: which Chromium message (if any) some bytes hold.

There is no magic number, so detection walks the protobuf structure of the
first bytes against the *shape* of each message -- field numbers with their
wire types, recursing into the nested messages -- and asks for evidence
(a stack, a sample, a wrapped profile). A pprof profile, a Perfetto trace or
an arbitrary protobuf breaks some rule within a few bytes. The same walk
decides, when reading, which of the three messages to parse.

Base64 text (of any of the three) is recognised by its alphabet and checked
the same way after decoding its first part.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re

__all__ = ["CALLSTACK", "HEAD", "SAMPLED", "UMA", "decode_base64", "detect", "is_base64"]

UMA, SAMPLED, CALLSTACK = "ChromeUserMetricsExtension", "SampledProfile", "CallStackProfile"
V, I64, L, I32 = 0, 1, 2, 5

# field -> (allowed wire types, shape of the nested message or None)
_LOC = {1: ({V}, None), 2: ({V}, None), 3: ({L}, None)}
_MODULE = {1: ({L}, None), 2: ({I64}, None)}
_STACK = {1: ({L}, _LOC)}
_META = {1: ({V}, None), 2: ({V}, None), 3: ({V}, None)}
_SAMPLE = {1: ({L}, _LOC), 2: ({V}, None), 3: ({V, L}, None)}
_STACK_SAMPLE = {1: ({V}, None), 2: ({V}, None), 3: ({V}, None), 4: ({V}, None),
                 5: ({L}, _META), 6: ({V}, None), 7: ({V}, None)}
_CSP = {1: ({L}, _SAMPLE), 2: ({L}, _MODULE), 3: ({V}, None), 4: ({V}, None), 5: ({I64, L}, None),
        6: ({L}, _META), 7: ({L}, {1: ({L}, _LOC)}), 8: ({L}, _STACK), 9: ({L}, _STACK_SAMPLE),
        10: ({V}, None)}
_ENTRY = {1: ({V}, None), 2: ({V}, None)}
_SP = {**{n: ({V}, None) for n in (1, 2, 3, 5, 6, 7, 8, 11, 12, 20, 21, 22)},
       4: ({L}, None), 9: ({L}, _CSP), 10: ({L}, None), 13: ({L}, _ENTRY), 14: ({L}, _ENTRY),
       15: ({V, L}, None), 16: ({I32}, None), 17: ({I32}, None), 18: ({V, L}, None), 19: ({L}, None)}
_UMA = {1: ({I64}, None), 2: ({V}, None), 10: ({V}, None), 11: ({L}, _SP), 24: ({I64}, None),
        28: ({V}, None), 29: ({V}, None), 30: ({V}, None),
        **{n: ({L}, None) for n in (3, 4, 5, 6, 12, 15, 16, 17, 19, 20, 21, 23, 25, 26, 27)},
        # numbers retired from (or not yet in) the schema this was written from: older
        # and newer logs may hold them
        **{n: ({V, I64, L, I32}, None) for n in (7, 8, 9, 13, 14, 18, 22, *range(31, 41))}}

_UNBOUNDED = 1 << 62
_BUDGET = 5000  # fields examined at most; the rest is assumed to be fine
#: The head a sniffer is given (``Source.head``): a reader that detects on these bytes gets the
#: sniffer's answer from a cache instead of walking up to _BUDGET fields in Python again (20 ms).
HEAD = 1 << 16


class _Bad(Exception):
    """The bytes break the shape."""


class _Walk:
    """Checks bytes against a shape; remembers top-level fields and truncation."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.budget = _BUDGET
        self.truncated = False

    def varint(self, i: int, end: int) -> tuple[int, int] | None:
        """(value, next position), or None when the data runs out first."""
        shift = value = 0
        while True:
            if i >= end:
                return None
            byte = self.data[i]
            value |= (byte & 0x7F) << shift
            i += 1
            if byte < 0x80:
                return value, i
            shift += 7
            if shift > 63:
                raise _Bad

    def fields(self, start: int, end: int, shape: dict, depth: int) -> set[int]:
        """Walk one message; return the field numbers seen. Raises _Bad."""
        seen: set[int] = set()
        avail = min(end, len(self.data))
        if end > len(self.data) and end != _UNBOUNDED:
            self.truncated = True
        i = start
        while i < avail:
            if self.budget <= 0:
                self.truncated = True
                return seen
            self.budget -= 1
            head = self.varint(i, avail)
            if head is None:
                self.truncated = True
                return seen
            key, i = head
            number, wire = key >> 3, key & 7
            if depth == 0 and seen and (number == 0 or wire in (3, 4, 6, 7)):
                return seen  # no protobuf field at all after a good start: trailing garbage, malformed
            allowed, nested = shape.get(number, (None, None))
            if allowed is None or wire not in allowed:
                raise _Bad
            seen.add(number)
            after = self.skip(i, avail, end, wire, nested, depth)
            if after is None:
                self.truncated = True
                return seen
            i = after
        return seen

    def skip(self, i: int, avail: int, end: int, wire: int, nested: dict | None, depth: int) -> int | None:
        if wire == V:
            got = self.varint(i, avail)
            return None if got is None else got[1]
        if wire in (I64, I32):
            size = 8 if wire == I64 else 4
            if i + size > end:
                raise _Bad
            return i + size if i + size <= avail else None
        got = self.varint(i, avail)
        if got is None:
            return None
        length, i = got
        if i + length > end:
            raise _Bad  # longer than its parent: not this shape
        if nested is not None and depth < 6:
            self.fields(i, i + length, nested, depth + 1)
        return i + length if i + length <= avail else None


def _evidence(kind: str, seen: set[int], truncated: bool) -> bool:
    if kind == UMA:
        return 11 in seen or {1, 3} <= seen
    if kind == SAMPLED:
        return 9 in seen
    return bool(seen & {1, 8, 9}) or (truncated and 2 in seen)


def detect(data: bytes, *, evidence: bool = True) -> str | None:
    """The message ``data`` (binary, possibly only the head of it) looks like, or None.

    With ``evidence`` False, a message that merely fits a shape (say, a
    CallStackProfile without stacks) is accepted: for reading data already
    known to be Chromium's, never for sniffing.
    """
    if not data:
        return None
    if len(data) <= HEAD:  # a head, or a whole small input: walked once per process
        return _detect_head(bytes(data), evidence)
    return _detect(data, evidence)


@functools.lru_cache(maxsize=4)
def _detect_head(data: bytes, evidence: bool) -> str | None:
    return _detect(data, evidence)


def _detect(data: bytes, evidence: bool) -> str | None:
    for kind, shape in ((UMA, _UMA), (SAMPLED, _SP), (CALLSTACK, _CSP)):
        walk = _Walk(data)
        try:
            seen = walk.fields(0, _UNBOUNDED, shape, 0)  # the head may end anywhere
        except _Bad:
            continue
        if evidence and _evidence(kind, seen, walk.truncated):
            return kind
        if not evidence and kind != UMA and seen and not walk.truncated:  # the whole data fits
            return kind
    return None


_B64_TEXT = re.compile(rb"[A-Za-z0-9+/=_\-\s]+")


def is_base64(head: bytes) -> bool:
    """True when ``head`` is base64 text of a Chromium message."""
    sample = head[:1 << 14]
    if len(sample.strip()) < 8 or not _B64_TEXT.fullmatch(sample):
        return False
    compact = re.sub(rb"\s+", b"", sample)
    if len(head) > len(sample) or len(compact) % 4:
        compact = compact[: len(compact) - len(compact) % 4]
    try:
        decoded = decode_base64(compact.rstrip(b"="), strict=False)
    except ValueError:
        return False
    return detect(decoded) is not None


def decode_base64(text: bytes, *, strict: bool = True) -> bytes:
    """Decode standard or URL-safe base64, whitespace allowed. Raises ValueError."""
    compact = re.sub(rb"\s+", b"", text)
    if b"-" in compact or b"_" in compact:
        compact = compact.translate(bytes.maketrans(b"-_", b"+/"))
    if not strict:
        compact = compact[: len(compact) - len(compact) % 4]
    elif len(compact) % 4:
        compact += b"=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None
