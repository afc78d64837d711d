"""The cmd_report_sample message classes, built at run time, and wire constants.

Field numbers and types: ../shared/spec/wire-formats.md, section 3.2. Every
string is declared ``bytes`` so invalid UTF-8 is decoded with replacement by
the reader instead of failing inside the protobuf runtime. ``Record`` is a
``oneof`` upstream; it is declared here as plain optional fields, and the
reader counts records that carry no payload or more than one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # wire.schema imports protobuf: only when the schema is built
    from polyprof.wire.schema import MessageClass

__all__ = ["ERROR_CODES", "EXECUTION_TYPES", "MAGIC", "OFFCPU_VIEWS", "VERSION", "record_class"]

MAGIC = b"SIMPLEPERF"
VERSION = 1

#: Values of ``ReadOptions.extra["offcpu"]``: which view is the default sample type.
OFFCPU_VIEWS = ("on", "off", "on+off")

#: ``Sample.CallChainEntry.ExecutionType`` values, by number.
EXECUTION_TYPES = ("native_method", "interpreted_jvm_method", "jit_jvm_method", "art_method")

#: ``Sample.UnwindingResult.ErrorCode`` values, by number.
ERROR_CODES = ("ERROR_NONE", "ERROR_UNKNOWN", "ERROR_NOT_ENOUGH_STACK", "ERROR_MEMORY_INVALID",
               "ERROR_UNWIND_INFO", "ERROR_INVALID_MAP", "ERROR_MAX_FRAME_EXCEEDED",
               "ERROR_REPEATED_FRAME", "ERROR_INVALID_ELF")

_RECORD: MessageClass | None = None


def _build() -> type:
    from polyprof.wire.schema import Schema

    s = Schema("polyprof.simpleperf")
    s.message("Sample", time=(1, "uint64"), thread_id=(2, "int32"),
              callchain=(3, "Sample.CallChainEntry", "repeated"), event_count=(4, "uint64"),
              event_type_id=(5, "uint32"), unwinding_result=(6, "Sample.UnwindingResult"))
    # Enums are read as plain uint32 so unknown numbers survive (proto2 would
    # move them to unknown fields).
    s.message("Sample.CallChainEntry", vaddr_in_file=(1, "uint64"), file_id=(2, "uint32"),
              symbol_id=(3, "int32"), execution_type=(4, "uint32"))
    s.message("Sample.UnwindingResult", raw_error_code=(1, "uint32"), error_addr=(2, "uint64"),
              error_code=(3, "uint32"))
    s.message("LostSituation", sample_count=(1, "uint64"), lost_count=(2, "uint64"))
    s.message("File", id=(1, "uint32"), path=(2, "bytes"), symbol=(3, "bytes", "repeated"),
              mangled_symbol=(4, "bytes", "repeated"))
    s.message("Thread", thread_id=(1, "uint32"), process_id=(2, "uint32"), thread_name=(3, "bytes"))
    s.message("MetaInfo", event_type=(1, "bytes", "repeated"), app_package_name=(2, "bytes"),
              app_type=(3, "bytes"), android_sdk_version=(4, "bytes"),
              android_build_type=(5, "bytes"), trace_offcpu=(6, "bool"))
    s.message("ContextSwitch", switch_on=(1, "bool"), time=(2, "uint64"), thread_id=(3, "uint32"))
    s.message("Record", sample=(1, "Sample"), lost=(2, "LostSituation"), file=(3, "File"),
              thread=(4, "Thread"), meta_info=(5, "MetaInfo"), context_switch=(6, "ContextSwitch"))
    return s.build()["Record"]


def record_class() -> MessageClass:
    """The ``Record`` message class (built once, on first use)."""
    global _RECORD
    if _RECORD is None:
        _RECORD = _build()
    return _RECORD
