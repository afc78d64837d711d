"""What the pprof reader and writer share: field numbers and the run-time schema."""

from __future__ import annotations

from polyprof.model.profile import (
    MAPPING_HAS_FILENAMES,
    MAPPING_HAS_FUNCTIONS,
    MAPPING_HAS_INLINE_FRAMES,
    MAPPING_HAS_LINE_NUMBERS,
)
from polyprof.wire.schema import Schema

_PROFILE_FIELDS = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 0, 8: 0, 9: 0, 10: 0, 11: 2, 12: 0,
                   13: None, 14: 0, 15: 0}
_FLAG_FIELDS = ((7, MAPPING_HAS_FUNCTIONS), (8, MAPPING_HAS_FILENAMES),
                (9, MAPPING_HAS_LINE_NUMBERS), (10, MAPPING_HAS_INLINE_FRAMES))


def _schema() -> type:
    s = Schema("polyprof.pprof", syntax="proto3")
    s.message("ValueType", type=(1, "int64"), unit=(2, "int64"))
    s.message("Profile",
              sample_type=(1, "ValueType", "repeated"),
              sample=(2, "bytes", "repeated"),
              mapping=(3, "bytes", "repeated"),
              location=(4, "bytes", "repeated"),
              function=(5, "bytes", "repeated"),
              string_table=(6, "bytes", "repeated"),
              drop_frames=(7, "int64"), keep_frames=(8, "int64"),
              time_nanos=(9, "int64"), duration_nanos=(10, "int64"),
              period_type=(11, "ValueType"), period=(12, "int64"),
              comment=(13, "int64", "repeated"),
              default_sample_type=(14, "int64"), doc_url=(15, "int64"))
    return s.build()["Profile"]


_PROFILE_CLASS: type | None = None


def _profile_class() -> type:
    global _PROFILE_CLASS
    if _PROFILE_CLASS is None:
        _PROFILE_CLASS = _schema()
    return _PROFILE_CLASS
