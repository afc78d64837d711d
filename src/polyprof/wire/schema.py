"""Protobuf message classes built at run time from a compact description.

Readers describe the part of a wire schema they need as plain Python data
(field numbers and types come from ``../shared/spec/wire-formats.md``), and
get real ``protobuf`` (upb) message classes back, without generated code or
upstream ``.proto`` files in the repository::

    S = Schema("pp", syntax="proto3")
    S.message("ValueType", type=(1, "int64"), unit=(2, "int64"))
    S.message("Profile", sample_type=(1, "ValueType", "repeated"))
    Profile = S.build()["Profile"]

A field is ``(number, type)`` or ``(number, type, label)`` where ``type`` is a
scalar name (``int64``, ``uint64``, ``sint64``, ``bytes``, ``string``,
``bool``, ``fixed64``, ``int32``, ``uint32``, ``double``, ``float``, ...) or the
name of another message or enum of the same schema, and ``label`` is
``"optional"`` (default), ``"repeated"`` or ``"packed"``/``"unpacked"``
(repeated with explicit packing). Nested names are written with dots
(``"Sample.CallChainEntry"``) and must be declared parent first.

Strings that may hold invalid UTF-8 should be declared ``bytes`` and decoded
with replacement by the reader.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

#: A message class built at run time from a :class:`Schema`: its fields
#: exist only then, so a type checker can only see it as Any.
MessageClass: TypeAlias = Any

__all__ = ["Schema"]

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "fixed64": _F.TYPE_FIXED64,
    "fixed32": _F.TYPE_FIXED32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "uint32": _F.TYPE_UINT32, "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
}


class Schema:
    """Collects message and enum descriptions, then builds message classes."""

    def __init__(self, package: str, *, syntax: str = "proto2") -> None:
        self.package = package
        self.syntax = syntax
        self._file = descriptor_pb2.FileDescriptorProto(
            name=f"polyprof_{package.replace('.', '_')}.proto", package=package, syntax=syntax)
        self._messages: dict[str, Any] = {}
        self._enums: set[str] = set()
        self._names: list[str] = []
        self._pending: list[tuple[Any, str, str, tuple]] = []

    def _container(self, dotted: str) -> tuple[Any, str]:
        if "." in dotted:
            parent, leaf = dotted.rsplit(".", 1)
            return self._messages[parent], leaf
        return self._file, dotted

    def enum(self, dotted: str, **values: int) -> "Schema":
        holder, leaf = self._container(dotted)
        e = holder.enum_type.add(name=leaf)
        for name, number in values.items():
            e.value.add(name=f"{leaf.upper()}_{name}" if self.syntax == "proto3" else name,
                        number=number)
        self._enums.add(dotted)
        return self

    def message(self, dotted: str, **fields: tuple) -> "Schema":
        holder, leaf = self._container(dotted)
        m = holder.nested_type.add(name=leaf) if holder is not self._file else holder.message_type.add(name=leaf)
        self._messages[dotted] = m
        self._names.append(dotted)
        for fname, spec in fields.items():
            self._pending.append((m, dotted, fname.rstrip("_"), spec))
        return self

    def _resolve(self, scope: str, type_name: str) -> str:
        # Look the name up from the innermost scope outwards, as protoc does.
        parts = scope.split(".")
        for i in range(len(parts), -1, -1):
            candidate = ".".join(parts[:i] + [type_name]) if i else type_name
            if candidate in self._messages or candidate in self._enums:
                return candidate
        raise KeyError(f"unknown type {type_name!r} in {scope}")

    def _add_field(self, m: Any, scope: str, name: str, spec: tuple) -> None:
        number, type_name = spec[0], spec[1]
        label = spec[2] if len(spec) > 2 else "optional"
        f = m.field.add(name=name, number=number)
        f.label = _F.LABEL_REPEATED if label in ("repeated", "packed", "unpacked") else _F.LABEL_OPTIONAL
        if label == "packed":
            f.options.packed = True
        elif label == "unpacked":
            f.options.packed = False
        if type_name in _SCALARS:
            f.type = _SCALARS[type_name]
            return
        full = self._resolve(scope, type_name)
        f.type = _F.TYPE_ENUM if full in self._enums else _F.TYPE_MESSAGE
        f.type_name = f".{self.package}.{full}"

    def build(self) -> dict[str, MessageClass]:
        """Return ``{dotted name: message class}`` for every declared message."""
        for pending in self._pending:  # resolved late so types may be declared in any order
            self._add_field(*pending)
        self._pending = []
        pool = descriptor_pool.DescriptorPool()
        pool.Add(self._file)
        return {name: message_factory.GetMessageClass(
                    pool.FindMessageTypeByName(f"{self.package}.{name}"))
                for name in self._names}
