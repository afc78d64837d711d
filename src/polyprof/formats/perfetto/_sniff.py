"""Content detection: does this look like a Perfetto trace?

A trace has no magic number: it is a run of ``0A len TracePacket`` records,
which is also how a pprof profile starts (``sample_type`` is field 1 too).
So the sniffer walks the records in the head and requires every one to be
field 1, and every packet payload it can see to decode as TracePacket
fields: fields 1 and 2 (ftrace events, process tree) must be messages, the
known scalar metadata fields must be varints. pprof's ValueType payload
(fields 1 and 2 as varints) fails that test at once. Empty packets alone are
not enough: at least one packet must hold a field.
"""

from __future__ import annotations

from polyprof.wire.scan import is_text, read_varint

__all__ = ["VARINT_FIELDS", "sniff"]

#: TracePacket fields that are varints (timestamp, sequence id, flags, ...).
#: Defined here, not in _schema, so sniffing never builds the full schema.
VARINT_FIELDS = frozenset({3, 8, 10, 13, 41, 42, 58, 79, 87, 98})

_MAX_RECORDS = 64


def _packet_ok(body: bytes, complete: bool) -> tuple[bool, int]:
    """(fields decode as a TracePacket, number of fields seen)."""
    i = fields = 0
    try:
        while i < len(body):
            key, i = read_varint(body, i)
            field, wire = key >> 3, key & 7
            if field == 0 or wire not in (0, 1, 2, 5):
                return False, fields
            if field in (1, 2) and wire != 2 or field in VARINT_FIELDS and wire != 0:
                return False, fields
            if wire == 0:
                _, i = read_varint(body, i)
            elif wire == 2:
                length, i = read_varint(body, i)
                i += length
            else:
                i += 8 if wire == 1 else 4
            if i > len(body) and complete:
                return False, fields
            fields += 1
    except IndexError:
        return not complete, fields
    return True, fields


def sniff(head: bytes) -> bool:
    """True if ``head`` (gzip already undone) starts like a Perfetto trace (never plain text)."""
    if is_text(head):
        return False
    i = records = fields = 0
    try:
        while i < len(head) and records < _MAX_RECORDS:
            if head[i] != 0x0A:
                # No protobuf field at all (field 0, a group or reserved wire type) after
                # good packets: a trace with trailing garbage, which the reader calls malformed.
                garbage = head[i] < 8 or head[i] & 7 in (3, 4, 6, 7)
                return garbage and records > 0 and fields > 0
            length, j = read_varint(head, i + 1)
            body = head[j:j + length]
            ok, seen = _packet_ok(body, complete=j + length <= len(head))
            if not ok:
                return False
            fields += seen
            records += 1
            i = j + length
    except IndexError:
        pass
    return records > 0 and fields > 0
