"""Perfetto wire facts used by the reader and writer (../shared/spec/wire-formats.md, section 2).

Field numbers are constants; the messages the reader parses one at a time
(control packets, interned data, heap dumps, symbols) are upb classes built
at run time with :class:`polyprof.wire.schema.Schema`. Every text field is
declared ``bytes`` and decoded with replacement by the reader, so invalid
UTF-8 never aborts a read. The hot PerfSample path does not use these
classes; it decodes packets with the vectorized kernels.
"""

from __future__ import annotations

from polyprof.formats.perfetto._sniff import VARINT_FIELDS  # noqa: F401  (defined by the sniffer)
from polyprof.wire.schema import MessageClass, Schema

__all__ = ["BUILTIN_CLOCKS", "CPU_MODES", "PERF_COUNTERS", "SKIP_REASONS", "UNWIND_ERRORS", "messages"]

# --- TracePacket field numbers ------------------------------------------------
F_PROCESS_TREE = 2
F_CHROME_EVENTS = 5  # ChromeEventBundle: its key/value metadata carries polyprof's profile facts
F_CLOCK_SNAPSHOT = 6
F_TIMESTAMP = 8
F_SEQ_ID = 10
F_INTERNED_DATA = 12
F_SEQUENCE_FLAGS = 13
F_PROFILE_PACKET = 37
F_INCREMENTAL_CLEARED = 41
F_PREVIOUS_DROPPED = 42
F_PROCESS_DESCRIPTOR = 43
F_THREAD_DESCRIPTOR = 44
F_COMPRESSED = 50
F_STREAMING_PROFILE = 54
F_PROFILED_FRAME_SYMBOLS = 55  # removed 2025-03; old traces only
F_CLOCK_ID = 58
F_DEFAULTS = 59
F_TRACK_DESCRIPTOR = 60
F_MODULE_SYMBOLS = 61
F_DEOBFUSCATION = 64
F_PERF_SAMPLE = 66
F_STREAMING_ALLOCATION = 74
F_STREAMING_FREE = 75
F_ZSTD_COMPRESSED = 133
F_STACK_SAMPLE = 135

SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2

#: Payload fields the reader handles; a packet with another payload is
#: skipped and counted (it holds no profiling data).
HANDLED_PAYLOADS = frozenset({F_PROCESS_TREE, F_CLOCK_SNAPSHOT, F_PROFILE_PACKET, F_PROCESS_DESCRIPTOR,
                              F_THREAD_DESCRIPTOR, F_COMPRESSED, F_STREAMING_PROFILE,
                              F_PROFILED_FRAME_SYMBOLS, F_TRACK_DESCRIPTOR, F_MODULE_SYMBOLS,
                              F_PERF_SAMPLE, F_STREAMING_ALLOCATION, F_STREAMING_FREE,
                              F_ZSTD_COMPRESSED, F_STACK_SAMPLE, F_DEOBFUSCATION})
#: TracePacket fields that are metadata, not payloads.
METADATA_FIELDS = frozenset({3, F_TIMESTAMP, F_SEQ_ID, F_INTERNED_DATA, F_SEQUENCE_FLAGS,
                             F_INCREMENTAL_CLEARED, F_PREVIOUS_DROPPED, F_CLOCK_ID, F_DEFAULTS,
                             79, 87, 98})

BUILTIN_CLOCKS = {1: "REALTIME", 2: "REALTIME_COARSE", 3: "MONOTONIC", 4: "MONOTONIC_COARSE",
                  5: "MONOTONIC_RAW", 6: "BOOTTIME", 9: "TSC", 10: "PERF", 11: "TRACE_FILE"}
BOOTTIME = 6
MONOTONIC = 3
MONOTONIC_COARSE = 4
REALTIME = 1

# Names as trace processor prints them (profile_packet_utils.h).
CPU_MODES = ("unknown", "kernel", "user", "hypervisor", "guest_kernel", "guest_user")
UNWIND_ERRORS = ("unknown", "none", "memory_invalid", "unwind_info", "unsupported", "invalid_map",
                 "max_frames_exceeded", "repeated_frame", "invalid_elf", "system_call",
                 "thread_timeout", "thread_does_not_exist", "bad_arch", "maps_parse",
                 "invalid_parameter", "ptrace_call")
SKIP_REASONS = ("unknown", "read_stage", "unwind_stage", "unwind_enqueue", "not_in_scope")

# PerfEvents.Counter -> (perf tool name, unit); names follow trace processor.
PERF_COUNTERS = {
    1: ("cpu-clock", "nanoseconds"), 2: ("page-faults", "count"), 3: ("task-clock", "nanoseconds"),
    4: ("context-switches", "count"), 5: ("cpu-migrations", "count"), 6: ("minor-faults", "count"),
    7: ("major-faults", "count"), 8: ("alignment-faults", "count"), 9: ("emulation-faults", "count"),
    10: ("cpu-cycles", "cycles"), 11: ("instructions", "instructions"),
    12: ("cache-references", "count"), 13: ("cache-misses", "count"),
    14: ("branch-instructions", "count"), 15: ("branch-misses", "count"), 16: ("bus-cycles", "cycles"),
    17: ("stalled-cycles-frontend", "count"), 18: ("stalled-cycles-backend", "count"),
    19: ("ref-cycles", "cycles"), 20: ("dummy", "count"),
}
EVENT_MODIFIERS = {1: "u", 2: "k", 3: "h"}

#: ChromeMetadata name of the JSON object in which polyprof's writer keeps the profile facts
#: a trace has no field for (default sample type, start time, duration).
POLYPROF_METADATA = "polyprof.profile"

CLIENT_ERRORS = ("none", "hit_timeout", "invalid_stack_bounds")


def _build() -> dict[str, type]:
    s = Schema("polyprof.perfetto")
    s.message("InternedString", iid=(1, "uint64"), str=(2, "bytes"))
    s.message("Mapping", iid=(1, "uint64"), build_id=(2, "uint64"), start_offset=(3, "uint64"),
              start=(4, "uint64"), end=(5, "uint64"), load_bias=(6, "uint64"),
              path_string_ids=(7, "uint64", "unpacked"), exact_offset=(8, "uint64"))
    s.message("Frame", iid=(1, "uint64"), function_name_id=(2, "uint64"), mapping_id=(3, "uint64"),
              rel_pc=(4, "uint64"), source_path_iid=(5, "uint64"), line_number=(6, "uint32"),
              kind=(7, "int32"), kind_str=(8, "bytes"))
    s.message("Callstack", iid=(1, "uint64"), frame_ids=(2, "uint64", "unpacked"))
    s.message("InternedData", function_names=(5, "InternedString", "repeated"),
              frames=(6, "Frame", "repeated"), callstacks=(7, "Callstack", "repeated"),
              build_ids=(16, "InternedString", "repeated"),
              mapping_paths=(17, "InternedString", "repeated"),
              source_paths=(18, "InternedString", "repeated"), mappings=(19, "Mapping", "repeated"),
              stack_sample_task_contexts=(48, "StackSample.TaskContext", "repeated"),
              stack_sample_execution_contexts=(49, "StackSample.ExecutionContext", "repeated"),
              stack_sample_counter_descriptors=(50, "StackSample.CounterDescriptor", "repeated"),
              stack_sample_async_context_descriptors=(51, "StackSample.AsyncContextDescriptor", "repeated"))
    s.message("Line", function_name=(1, "bytes"), source_file_name=(2, "bytes"), line_number=(3, "uint32"))
    s.message("AddressSymbols", address=(1, "uint64"), lines=(2, "Line", "repeated"))
    s.message("ModuleSymbols", path=(1, "bytes"), build_id=(2, "bytes"),
              address_symbols=(3, "AddressSymbols", "repeated"))
    s.message("ObfuscatedMember", obfuscated_name=(1, "bytes"), deobfuscated_name=(2, "bytes"),
              obfuscated_line_start=(3, "uint32"), obfuscated_line_end=(4, "uint32"),
              source_line_start=(5, "uint32"), source_line_end=(6, "uint32"))
    s.message("ObfuscatedClass", obfuscated_name=(1, "bytes"), deobfuscated_name=(2, "bytes"),
              obfuscated_members=(3, "ObfuscatedMember", "repeated"),
              obfuscated_methods=(4, "ObfuscatedMember", "repeated"))
    s.message("DeobfuscationMapping", package_name=(1, "bytes"), version_code=(2, "int64"),
              obfuscated_classes=(3, "ObfuscatedClass", "repeated"))
    s.message("ProfiledFrameSymbols", frame_iid=(1, "uint64"),
              function_name_id=(2, "uint64", "repeated"), file_name_id=(3, "uint64", "repeated"),
              line_number=(4, "uint32", "repeated"))
    _profile_packet(s)
    _entries(s)
    _perf(s)
    _stack_sample(s)
    _descriptors(s)
    s.message("StreamingProfilePacket", callstack_iid=(1, "uint64", "unpacked"),
              timestamp_delta_us=(2, "int64", "unpacked"), process_priority=(3, "int32"))
    s.message("StreamingAllocation", address=(1, "uint64", "repeated"), size=(2, "uint64", "repeated"),
              sample_size=(3, "uint64", "repeated"),
              clock_monotonic_coarse_timestamp=(4, "uint64", "repeated"),
              heap_id=(5, "uint32", "repeated"), sequence_number=(6, "uint64", "repeated"))
    s.message("StreamingFree", address=(1, "uint64", "repeated"), heap_id=(2, "uint32", "repeated"),
              sequence_number=(3, "uint64", "repeated"))
    s.message("ClockSnapshot", clocks=(1, "Clock", "repeated"), primary_trace_clock=(2, "int32"))
    s.message("ClockSnapshot.Clock", clock_id=(1, "uint32"), timestamp=(2, "uint64"),
              is_incremental=(3, "bool"), unit_multiplier_ns=(4, "uint64"))
    s.message("ChromeMetadata", name=(1, "bytes"), string_value=(2, "bytes"))
    s.message("ChromeEventBundle", metadata=(2, "ChromeMetadata", "repeated"))
    packet: dict[str, tuple[object, ...]] = dict(
              timestamp=(F_TIMESTAMP, "uint64"), timestamp_clock_id=(F_CLOCK_ID, "uint32"),
              trusted_packet_sequence_id=(F_SEQ_ID, "uint32"), trusted_pid=(79, "int32"),
              chrome_events=(F_CHROME_EVENTS, "ChromeEventBundle"),
              interned_data=(F_INTERNED_DATA, "InternedData"), sequence_flags=(F_SEQUENCE_FLAGS, "uint32"),
              incremental_state_cleared=(F_INCREMENTAL_CLEARED, "bool"),
              previous_packet_dropped=(F_PREVIOUS_DROPPED, "uint32"),
              trace_packet_defaults=(F_DEFAULTS, "TracePacketDefaults"),
              process_tree=(F_PROCESS_TREE, "ProcessTree"), clock_snapshot=(F_CLOCK_SNAPSHOT, "ClockSnapshot"),
              profile_packet=(F_PROFILE_PACKET, "ProfilePacket"),
              process_descriptor=(F_PROCESS_DESCRIPTOR, "ProcessDescriptor"),
              thread_descriptor=(F_THREAD_DESCRIPTOR, "ThreadDescriptor"),
              compressed_packets=(F_COMPRESSED, "bytes"),
              streaming_profile_packet=(F_STREAMING_PROFILE, "StreamingProfilePacket"),
              profiled_frame_symbols=(F_PROFILED_FRAME_SYMBOLS, "ProfiledFrameSymbols"),
              track_descriptor=(F_TRACK_DESCRIPTOR, "TrackDescriptor"),
              module_symbols=(F_MODULE_SYMBOLS, "ModuleSymbols"),
              deobfuscation_mapping=(F_DEOBFUSCATION, "DeobfuscationMapping"),
              perf_sample=(F_PERF_SAMPLE, "PerfSample"),
              streaming_allocation=(F_STREAMING_ALLOCATION, "StreamingAllocation"),
              streaming_free=(F_STREAMING_FREE, "StreamingFree"),
              zstd_compressed_packets=(F_ZSTD_COMPRESSED, "bytes"),
              stack_sample=(F_STACK_SAMPLE, "StackSample"))
    s.message("TracePacket", **packet)
    # The control-packet parse: a heap dump and interned data stay bytes (both are decoded in
    # bulk by the reader's walkers; a damaged heap dump is parsed again as TracePacket, which
    # names the damage as before).
    s.message("TracePacketLazy", **{**packet, "profile_packet": (F_PROFILE_PACKET, "bytes"),
                                    "interned_data": (F_INTERNED_DATA, "bytes")})
    return s.build()


def _profile_packet(s: Schema) -> None:
    # Field types resolve when the schema is built, so the nested types may follow.
    s.message("ProfilePacket", strings=(1, "InternedString", "repeated"), frames=(2, "Frame", "repeated"),
              callstacks=(3, "Callstack", "repeated"), mappings=(4, "Mapping", "repeated"),
              process_dumps=(5, "ProcessHeapSamples", "repeated"), continued=(6, "bool"),
              index=(7, "uint64"))
    s.message("ProfilePacket.HeapSample", callstack_id=(1, "uint64"), self_allocated=(2, "uint64"),
              self_freed=(3, "uint64"), timestamp=(4, "uint64"), alloc_count=(5, "uint64"),
              free_count=(6, "uint64"), self_max=(8, "uint64"), self_max_count=(9, "uint64"))
    s.message("ProfilePacket.ProcessStats", unwinding_errors=(1, "uint64"), heap_samples=(2, "uint64"),
              map_reparses=(3, "uint64"), total_unwinding_time_us=(5, "uint64"),
              client_spinlock_blocked_us=(6, "uint64"))
    s.message("ProfilePacket.ProcessHeapSamples", pid=(1, "uint64"),
              samples=(2, "HeapSample", "repeated"), from_startup=(3, "bool"),
              rejected_concurrent=(4, "bool"), stats=(5, "ProcessStats"),
              disconnected=(6, "bool"), buffer_overran=(7, "bool"), buffer_corrupted=(8, "bool"),
              timestamp=(9, "uint64"), hit_guardrail=(10, "bool"), heap_name=(11, "bytes"),
              sampling_interval_bytes=(12, "uint64"), orig_sampling_interval_bytes=(13, "uint64"),
              client_error=(14, "int32"), start_timestamp=(15, "uint64"))


def _entries(s: Schema) -> None:
    """Twins of InternedData, ProfilePacket and ProcessHeapSamples whose repeated entries stay
    bytes: upb splits a large message into its entries, which the numpy walker then decodes
    together (see ``_tables``)."""
    s.message("InternedDataEntries", **{f"f{k}": (k, "bytes", "repeated") for k in (5, 6, 7, 16, 17, 18, 19,
                                                                                   48, 49, 50, 51)})
    s.message("ProfilePacketEntries", **{f"f{k}": (k, "bytes", "repeated") for k in (1, 2, 3, 4)},
              process_dumps=(5, "ProcessHeapSamplesEntries", "repeated"), continued=(6, "bool"),
              index=(7, "uint64"))
    fields: dict[str, tuple[object, ...]] = {"samples": (2, "bytes", "repeated")}
    for name, spec in (("pid", (1, "uint64")), ("from_startup", (3, "bool")), ("rejected_concurrent", (4, "bool")),
                       ("stats", (5, "ProfilePacket.ProcessStats")), ("disconnected", (6, "bool")),
                       ("buffer_overran", (7, "bool")), ("buffer_corrupted", (8, "bool")),
                       ("timestamp", (9, "uint64")), ("hit_guardrail", (10, "bool")), ("heap_name", (11, "bytes")),
                       ("sampling_interval_bytes", (12, "uint64")), ("orig_sampling_interval_bytes", (13, "uint64")),
                       ("client_error", (14, "int32")), ("start_timestamp", (15, "uint64"))):
        fields[name] = spec
    s.message("ProcessHeapSamplesEntries", **fields)
    # The same without the samples (left as unknown fields: no Python object per sample); the
    # samples are then walked in the packet's bytes.
    s.message("ProfilePacketHead", **{f"f{k}": (k, "bytes", "repeated") for k in (1, 2, 3, 4)},
              process_dumps=(5, "ProcessHeapSamplesHead", "repeated"), continued=(6, "bool"),
              index=(7, "uint64"))
    s.message("ProcessHeapSamplesHead", **{k: v for k, v in fields.items() if k != "samples"})


def _perf(s: Schema) -> None:
    s.message("Tracepoint", name=(1, "bytes"), filter=(2, "bytes"))
    s.message("RawEvent", type=(1, "uint32"), config=(2, "uint64"), config1=(3, "uint64"),
              config2=(4, "uint64"), pmu_name=(5, "bytes"))
    s.message("Timebase", period=(1, "uint64"), frequency=(2, "uint64"), poll_period_ms=(6, "uint32"),
              tracepoint=(3, "Tracepoint"), counter=(4, "int32"), raw_event=(5, "RawEvent"),
              name=(10, "bytes"), timestamp_clock=(11, "int32"), modifiers=(12, "int32", "repeated"))
    s.message("FollowerEvent", counter=(1, "int32"), tracepoint=(2, "Tracepoint"),
              raw_event=(3, "RawEvent"), name=(4, "bytes"), modifiers=(5, "int32", "repeated"))
    s.message("PerfSampleDefaults", timebase=(1, "Timebase"), process_shard_count=(2, "uint32"),
              chosen_process_shard=(3, "uint32"), followers=(4, "FollowerEvent", "repeated"))
    s.message("TracePacketDefaults", timestamp_clock_id=(58, "uint32"),
              perf_sample_defaults=(12, "PerfSampleDefaults"),
              stack_sample_defaults=(100, "StackSampleDefaults"))
    s.message("PerfSample", cpu=(1, "uint32"), pid=(2, "uint32"), tid=(3, "uint32"),
              callstack_iid=(4, "uint64"), cpu_mode=(5, "int32"), timebase_count=(6, "uint64"),
              follower_counts=(7, "uint64", "unpacked"), unwind_error=(16, "int32"),
              kernel_records_lost=(17, "uint64"), sample_skipped_reason=(18, "int32"),
              producer_event=(19, "ProducerEvent"))
    s.message("PerfSample.ProducerEvent", source_stop_reason=(1, "int32"))


def _stack_sample(s: Schema) -> None:
    s.message("InlineCallstack", frames=(1, "Frame", "repeated"))
    s.message("InlineCallstack.Frame", function_name=(1, "bytes"), source_file=(2, "bytes"),
              line_number=(3, "uint32"))
    s.message("StackSample", task_context=(1, "TaskContext"), task_context_iid=(2, "uint64"),
              execution_context=(3, "ExecutionContext"), execution_context_iid=(4, "uint64"),
              callstack=(5, "InlineCallstack"), callstack_iid=(6, "uint64"), unwind_error=(7, "bytes"),
              unwind_error_iid=(8, "uint64"), primary_descriptor=(9, "CounterDescriptor"),
              primary_descriptor_iid=(10, "uint64"), primary_weight=(11, "uint64"),
              follower_descriptors=(12, "CounterDescriptor", "repeated"),
              follower_descriptor_iids=(13, "uint64", "packed"), follower_weights=(14, "uint64", "packed"))
    s.message("StackSample.TaskContext", iid=(1, "uint64"), pid=(2, "uint32"), tid=(3, "uint32"),
              async_id=(4, "uint64"))
    s.message("StackSample.AsyncContextDescriptor", iid=(1, "uint64"), name=(2, "bytes"), kind=(3, "bytes"),
              parent_iid=(4, "uint64"))
    s.message("StackSample.ExecutionContext", iid=(1, "uint64"), cpu=(2, "uint32"), mode=(3, "int32"))
    s.message("StackSample.CounterDescriptor", iid=(1, "uint64"), name=(2, "bytes"), unit=(3, "int32"),
              unit_str=(4, "bytes"), unit_multiplier=(5, "uint64"), description=(6, "bytes"), scope=(7, "int32"))
    s.message("StackSampleDefaults", source=(1, "bytes"), primary_descriptor=(2, "StackSample.CounterDescriptor"),
              follower_descriptors=(3, "StackSample.CounterDescriptor", "repeated"))


def _descriptors(s: Schema) -> None:
    s.message("ThreadDescriptor", pid=(1, "int32"), tid=(2, "int64"), thread_name=(5, "bytes"),
              reference_timestamp_us=(6, "int64"))
    s.message("ProcessDescriptor", pid=(1, "int32"), cmdline=(2, "bytes", "repeated"),
              process_name=(6, "bytes"))
    s.message("TrackDescriptor", uuid=(1, "uint64"), process=(3, "ProcessDescriptor"),
              thread=(4, "ThreadDescriptor"))
    s.message("ProcessTree", processes=(1, "Process", "repeated"), threads=(2, "Thread", "repeated"))
    s.message("ProcessTree.Process", pid=(1, "int32"), ppid=(2, "int32"), cmdline=(3, "bytes", "repeated"))
    s.message("ProcessTree.Thread", tid=(1, "int32"), name=(2, "bytes"), tgid=(3, "int32"))


_MESSAGES: dict[str, MessageClass] | None = None


def messages() -> dict[str, MessageClass]:
    """The message classes, built once on first use."""
    global _MESSAGES
    if _MESSAGES is None:
        _MESSAGES = _build()
    return _MESSAGES
