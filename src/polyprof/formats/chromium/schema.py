"""The wire schema of Chromium's sampling profiles, and its enum tables.

Field numbers come from ``../shared/spec/wire-formats.md`` section 4 (and, for
the few ``SystemProfileProto`` fields kept, from Chromium's
``third_party/metrics_proto/system_profile.proto``). Enum fields are declared
``int32`` on purpose: proto2 enums are closed, so a value newer than these
tables would otherwise vanish into unknown fields. Strings that a client may
fill with arbitrary bytes (build ids, function names) are declared ``bytes``
and decoded by the reader with replacement.
"""

from __future__ import annotations

from functools import lru_cache

from polyprof.wire.schema import Schema

__all__ = ["CHANNELS", "PROCESSES", "PROCESS_PHASES", "THERMAL_STATES", "THREADS", "TRIGGERS",
           "enum_name", "enum_value", "messages"]

PROCESSES = ("UNKNOWN_PROCESS", "BROWSER_PROCESS", "RENDERER_PROCESS", "GPU_PROCESS",
             "UTILITY_PROCESS", "ZYGOTE_PROCESS", "SANDBOX_HELPER_PROCESS", "PPAPI_PLUGIN_PROCESS",
             "PPAPI_BROKER_PROCESS", "OTHER_PROCESS", "NETWORK_SERVICE_PROCESS")
THREADS = ("UNKNOWN_THREAD", "MAIN_THREAD", "FILE_THREAD", "FILE_USER_BLOCKING_THREAD",
           "PROCESS_LAUNCHER_THREAD", "CACHE_THREAD", "IO_THREAD", "DB_THREAD", "GPU_MAIN_THREAD",
           "RENDER_THREAD", "UTILITY_THREAD", "COMPOSITOR_THREAD", "OTHER_THREAD",
           "SCHEDULER_WORKER_THREAD", "COMPOSITOR_TILE_WORKER_THREAD", "SERVICE_WORKER_THREAD",
           "THREAD_POOL_THREAD", "GPU_MEMORY_THREAD", "DEDICATED_WORKER_THREAD",
           "MEMORY_INFRA_THREAD", "MEDIA_THREAD", "WEBRTC_THREAD", "DRM_THREAD",
           "AUDIO_DEVICE_THREAD", "AUDIO_THREAD", "DAV1D_WORKER_THREAD", "STACK_SAMPLING_THREAD",
           "VIDEO_FRAME_COMPOSITOR_THREAD", "DISPLAY_COMPOSITOR_THREAD", "CODEC_WORKER_THREAD")
TRIGGERS = ("UNKNOWN_TRIGGER_EVENT", "PERIODIC_COLLECTION", "RESUME_FROM_SUSPEND",
            "RESTORE_SESSION", "PROCESS_STARTUP", "JANKY_TASK", "THREAD_HUNG",
            "PERIODIC_HEAP_COLLECTION")
PROCESS_PHASES = ("MAIN_LOOP_START", "MAIN_NAVIGATION_START", "MAIN_NAVIGATION_FINISHED",
                  "FIRST_NONEMPTY_PAINT", "SHUTDOWN_START")
THERMAL_STATES = ("THERMAL_STATE_UNKNOWN", "THERMAL_STATE_NOMINAL", "THERMAL_STATE_FAIR",
                  "THERMAL_STATE_SERIOUS", "THERMAL_STATE_CRITICAL")
CHANNELS = ("CHANNEL_UNKNOWN", "CHANNEL_CANARY", "CHANNEL_DEV", "CHANNEL_BETA", "CHANNEL_STABLE")

#: Prefix of the name given to values newer than a table, e.g. "PROCESS_11".
_UNKNOWN_PREFIX = {PROCESSES: "PROCESS_", THREADS: "THREAD_", TRIGGERS: "TRIGGER_",
                   PROCESS_PHASES: "PHASE_", THERMAL_STATES: "THERMAL_STATE_", CHANNELS: "CHANNEL_"}


def enum_name(table: tuple[str, ...], value: int) -> str:
    """The name of ``value``; numbers the table does not know become e.g. ``PROCESS_11``."""
    if 0 <= value < len(table):
        return table[value]
    return f"{_UNKNOWN_PREFIX[table]}{value}"


def enum_value(table: tuple[str, ...], name: str) -> int | None:
    """Inverse of :func:`enum_name`; None when ``name`` is neither form."""
    if name in table:
        return table.index(name)
    prefix = _UNKNOWN_PREFIX[table]
    rest = name[len(prefix):] if name.startswith(prefix) else ""
    if rest.lstrip("-").isdigit():
        return int(rest)
    return None


def _call_stack_profile(s: Schema, lazy: bool) -> None:
    s.message("CallStackProfile",
              DEPRECATED_sample=(1, "Sample", "repeated"),
              module_id=(2, "ModuleIdentifier", "repeated"),
              profile_duration_ms=(3, "int32"), sampling_period_ms=(4, "int32"),
              metadata_name_hash=(5, "fixed64", "unpacked"),
              profile_metadata=(6, "MetadataItem", "repeated"),
              async_backtrace=(7, "AsyncBacktrace", "repeated"),
              stack=(8, "bytes" if lazy else "Stack", "repeated"),
              stack_sample=(9, "bytes" if lazy else "StackSample", "repeated"),
              profile_time_offset_ms=(10, "int64"))
    s.message("CallStackProfile.ModuleIdentifier", build_id=(1, "bytes"), name_md5_prefix=(2, "fixed64"))
    s.message("CallStackProfile.Location", address=(1, "uint64"), module_id_index=(2, "int32"),
              function_name=(3, "bytes"))
    s.message("CallStackProfile.Stack", frame=(1, "Location", "repeated"))
    s.message("CallStackProfile.MetadataItem", name_hash_index=(1, "int32"), value=(2, "sint64"),
              key=(3, "sint64"))
    s.message("CallStackProfile.AsyncBacktrace", location=(1, "Location", "repeated"))
    s.message("CallStackProfile.Sample", frame=(1, "Location", "repeated"), count=(2, "int64"),
              process_phase=(3, "int32", "unpacked"))
    s.message("CallStackProfile.StackSample", stack_index=(1, "int32"),
              sample_time_offset_ms=(2, "int32"), continued_work=(3, "bool"),
              async_backtrace_index=(4, "int32"), metadata=(5, "MetadataItem", "repeated"),
              weight=(6, "int64"), count=(7, "int64"))


def _sampled_profile(s: Schema) -> None:
    s.message("SampledProfile",
              trigger_event=(1, "int32"), ms_after_boot=(2, "int64"), ms_after_login=(3, "int64"),
              perf_data=(4, "bytes"), suspend_duration_ms=(5, "int64"), ms_after_resume=(6, "int64"),
              num_tabs_restored=(7, "int32"), ms_after_restore=(8, "int64"),
              call_stack_profile=(9, "CallStackProfile"), perf_stat=(10, "bytes"),
              process=(11, "int32"), thread=(12, "int32"),
              process_types=(13, "TypeEntry", "repeated"), thread_types=(14, "TypeEntry", "repeated"),
              cpu_max_frequency_mhz=(15, "uint32", "unpacked"),
              psi_cpu_last_10s_pct=(16, "float"), psi_cpu_last_60s_pct=(17, "float"),
              lacros_pids=(18, "uint32", "packed"), lacros_version=(19, "bytes"),
              lacros_channel=(20, "int32"), thermal_state=(21, "int32"),
              cpu_speed_limit_percent=(22, "int32"))
    # map<uint32, Process/Thread> on the wire: repeated {key = 1, value = 2}
    s.message("SampledProfile.TypeEntry", key=(1, "uint32"), value=(2, "int32"))


def _uma_log(s: Schema) -> None:
    s.message("ChromeUserMetricsExtension", client_id=(1, "fixed64"), session_id=(2, "int32"),
              system_profile=(3, "SystemProfile"), product=(10, "int32"),
              sampled_profile=(11, "SampledProfile", "repeated"))
    s.message("SystemProfile", app_version=(2, "bytes"), channel=(10, "int32"), os=(5, "OS"))
    s.message("SystemProfile.OS", name=(1, "bytes"), version=(2, "bytes"))


@lru_cache(maxsize=2)
def messages(lazy: bool = False) -> dict[str, type]:
    """Message classes by dotted name (built once, on first use). ``lazy``: the stack table and
    the StackSamples of a CallStackProfile stay bytes, for the reader's column decoding."""
    s = Schema("polyprof.chromium.lazy" if lazy else "polyprof.chromium")
    _call_stack_profile(s, lazy)
    _sampled_profile(s)
    _uma_log(s)
    return s.build()
