"""Where a protobuf message is broken, when the runtime only says "Wire format was corrupt".

upb rejects a bad message without saying which field or byte. When it does,
:func:`locate` walks the same bytes with the vectorized kernels, following
the message's descriptor into nested messages (all instances of a field at
once), and returns the first structural problem with its field path and
byte offset. It is only called after a parse has failed, so it costs nothing
on good input.
"""

from __future__ import annotations

import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from polyprof.errors import MalformedInputError
from polyprof.wire import vector as V

__all__ = ["locate"]

_VARINT_TYPES = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
                 FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
                 FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_ENUM}
_WIDTH = {FieldDescriptor.TYPE_FIXED64: 8, FieldDescriptor.TYPE_SFIXED64: 8, FieldDescriptor.TYPE_DOUBLE: 8,
          FieldDescriptor.TYPE_FIXED32: 4, FieldDescriptor.TYPE_SFIXED32: 4, FieldDescriptor.TYPE_FLOAT: 4}


def locate(data: bytes, descriptor: Descriptor, base: int = 0) -> MalformedInputError | None:
    """The first structural error in ``data`` read as ``descriptor``'s message, or None.

    Offsets are relative to ``data`` plus ``base``.
    """
    buf = V.as_buffer(data)
    return _walk(buf, np.zeros(1, np.int64), np.array([buf.size], np.int64), descriptor, "", base)


def _walk(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, descriptor: Descriptor, path: str,
          base: int, depth: int = 0) -> MalformedInputError | None:
    try:
        fields = V.walk_fields(buf, starts, ends)
    except MalformedInputError as exc:
        return MalformedInputError(f"in {path}: {exc.message}" if path else exc.message,
                                   offset=(exc.offset or 0) + base)
    if depth > 64:
        return None
    for fd in descriptor.fields:
        sel = fields.select(fd.number, V.LEN)
        if not len(sel):
            continue
        where = f"{path}.{fd.name}" if path else fd.name
        if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type is not None:
            found = _walk(buf, sel.start, sel.start + sel.length, fd.message_type, where, base, depth + 1)
            if found is not None:
                return found
        elif _repeated(fd) and fd.type in _VARINT_TYPES:
            try:
                V.packed_varints(buf, sel.start, sel.length)
            except MalformedInputError as exc:
                return MalformedInputError(f"in {where} (packed): {exc.message}", offset=(exc.offset or 0) + base)
        elif _repeated(fd) and fd.type in _WIDTH:
            odd = sel.length % _WIDTH[fd.type] != 0
            if odd.any():
                i = int(np.argmax(odd))
                return MalformedInputError(f"in {where} (packed): length {int(sel.length[i])} is not a multiple "
                                           f"of {_WIDTH[fd.type]}", offset=int(sel.start[i]) + base)
    return None


def _repeated(fd: FieldDescriptor) -> bool:
    flag = getattr(fd, "is_repeated", None)
    # protobuf >= 5.28 has is_repeated; older ones only the label (which newer stubs no longer declare)
    return bool(flag) if flag is not None else getattr(fd, "label") == FieldDescriptor.LABEL_REPEATED
