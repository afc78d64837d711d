"""pprof ``perftools.profiles.Profile``: reader and writer.

Reading: upb parses the top level (the large repeated messages are declared
``bytes`` so they stay unparsed), then the vectorized kernels decode all
samples, labels, locations and lines at once. Every field of profile.proto is
kept: labels (str, num, num_unit), mapping flags, inline lines with columns,
``is_folded``, drop/keep frames, comments, default sample type, doc_url.

Leniency follows ``go tool pprof``: strings that are not UTF-8 are decoded
with replacement (a warning says how many); id 0, duplicate ids, dangling
references and wrong value counts are errors, as they are for pprof.

Writing: a gzip-compressed profile.proto. Lossless for everything the reader
keeps. Sample columns pprof has no field for (time, pid, tid, cpu) are
written as numeric labels and listed in the loss report; per-format extras
are listed as not kept.
"""

from __future__ import annotations

from polyprof.formats.pprof._common import _PROFILE_FIELDS
from polyprof.formats.pprof._read import read
from polyprof.formats.pprof._write import encode, write
from polyprof.wire.scan import is_text, read_varint

__all__ = ["encode", "read", "sniff", "write"]


def sniff(head: bytes) -> bool:
    """True if the first top-level fields look like a pprof Profile.

    A Perfetto trace also starts with field 1 (LEN), so field-1 payloads must
    look like a ValueType (two small varint fields), and some field other than
    1 must appear or the whole head must be consumed. Bytes that are no
    protobuf field at all (field 0, a group or reserved wire type) after a
    convincing start -- a ValueType, or several pprof fields -- are a pprof
    file with trailing garbage: the reader then says it is malformed, where
    "unrecognized" would send the user looking for another tool.
    Plain text is never claimed (:func:`~polyprof.wire.scan.is_text`): it is
    "unrecognized", not a malformed pprof.
    """
    if is_text(head):
        return False
    i = 0
    seen = 0
    convincing = False
    try:
        while i < len(head) and seen < 64:
            key, i = read_varint(head, i)
            field, wire = key >> 3, key & 7
            if field == 0 or wire in (3, 4, 6, 7):
                return convincing or seen >= 4
            expected = _PROFILE_FIELDS.get(field, -1)
            if expected == -1 or (expected is not None and wire != expected):
                return False
            if field == 13 and wire not in (0, 2):
                return False
            if wire == 0:
                _, i = read_varint(head, i)
            elif wire == 2:
                length, i = read_varint(head, i)
                if field in (1, 11):  # sample_type / period_type are ValueTypes
                    body = head[i:i + length]
                    if i + length <= len(head):
                        if not _is_value_type(body):
                            return False
                        convincing = True
                i += length
            seen += 1
    except IndexError:
        return seen > 0
    return seen > 0


def _is_value_type(body: bytes) -> bool:
    i = 0
    try:
        while i < len(body):
            key, i = read_varint(body, i)
            if key not in (0x08, 0x10):
                return False
            _, i = read_varint(body, i)
    except IndexError:
        return False
    return True
