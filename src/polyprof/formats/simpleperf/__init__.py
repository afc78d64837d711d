"""simpleperf ``report-sample --protobuf`` files (``cmd_report_sample.proto``): reader and writer.

The file is ``SIMPLEPERF``, a little-endian uint16 version (1), then records,
each a little-endian uint32 size and a serialized ``Record``, ended by a zero
size (wire facts: ../shared/spec/wire-formats.md, section 3). Records may come
in any order; simpleperf writes File and Thread records after the samples.

What a read gives (one profile):

- **Samples**: one row per Sample record, in file order, with ``time`` (ns,
  the recording's clock, not epoch), ``tid`` and, when Thread records exist,
  ``pid`` columns. A label ``thread_name`` carries the Thread record's name.
- **Sample types** (``_layout``): ``samples/count`` (one per record), then per
  event type ``<event>_samples/count`` (only with several event types) and
  ``<event>/<unit>`` = the summed ``event_count`` (nanoseconds for cpu-clock
  and task-clock, count otherwise). The default type is the first event.
  ``top --sample-index samples`` counts samples, ``--sample-index cpu-clock``
  sums the event. A sample adds to the columns of its own event only.
- **Frames**: ``callchain[0]`` is the leaf. A File is a mapping (its path);
  an entry with a symbol is a location at ``vaddr_in_file`` with one line of
  the function (name = ``symbol``, system name = ``mangled_symbol``); an entry
  with ``symbol_id`` -1 is an address-only location in that file. Files with
  the same path are one mapping.
- **Off-CPU** (``MetaInfo.trace_offcpu``): two more columns,
  ``off-cpu/nanoseconds`` and ``on+off-cpu/nanoseconds``. Each switch-off
  sample (an event after the first, i.e. ``sched:sched_switch``) carries the
  time its thread then stayed off the CPU, ending at the thread's next sample
  or ContextSwitch ``switch_on`` record (as simpleperf's report library
  computes it); ``on+off-cpu`` adds the first event's on-CPU time, which is
  simpleperf's default "mixed on/off-cpu" view, per thread and stack. That
  is the default sample type of such recordings. The read option
  ``ReadOptions.extra["offcpu"]`` = ``"on"`` | ``"off"`` | ``"on+off"``
  picks the default among cpu-clock (or task-clock), off-cpu and on+off-cpu
  (``"off"``/``"on+off"`` on a recording without off-CPU data is an
  OptionsError). Raw ContextSwitch records are not kept; a warning gives
  their count.
- **Unwinding results** become sample labels ``unwinding_error`` (the
  ErrorCode name), ``unwinding_raw_error`` and ``unwinding_error_addr``.
- **Extras** (printed by ``info``): ``meta_info`` (event types, app package,
  app type, Android SDK/build type, trace_offcpu, as present),
  ``lost_situation`` and ``lost_ratio`` (lost / (kept + lost)),
  ``unwinding_failures`` (samples per ErrorCode), ``unsymbolized_frames``
  (callchain entries without a symbol and their share), ``threads`` (every
  Thread record: [tid, pid, name], also threads without samples), ``offcpu``
  (switch-off samples and how many of them never ended) and
  ``frame_execution_types`` (file path -> execution type -> addresses, for
  frames that are not native; the model holds one type per frame, so an
  address seen with two types keeps the more common one and a warning says
  so).

Bad input (truncated framing, sizes past the end, undecodable records,
symbol ids outside their File, duplicate File ids) raises
MalformedInputError; strings that are not UTF-8 are decoded with replacement
and counted in a warning.

Writing gives the same framing, records in simpleperf's order (MetaInfo,
samples, LostSituation, Files with ids 0.. in order, Threads). A profile this
reader made is written back exactly (read -> write -> read gives the same
canonical dump); off-CPU times are written as a switch-off/switch-on
ContextSwitch pair around each switch-off sample. Other profiles write every
sample type but ``samples/count`` as an event (only
``WriteOptions.sample_index`` when given), the default type first, since
simpleperf's default is its first event. CPU time (``cpu``, ``cpu-time``...)
becomes event ``cpu-clock`` in nanoseconds, so Firefox and Android Studio
weight it as CPU time; other types keep their name, and their unit as
``name(unit)`` when the reader would otherwise give another one
(``wall(microseconds)``, ``alloc_space(bytes)``): wall time is never called
cpu-clock. A row standing for k samples becomes k records sharing its values,
so ``samples/count`` survives. The loss report lists the rest, and
``renamed`` the types read back under another name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, BinaryIO

from polyprof.formats.simpleperf._schema import MAGIC, OFFCPU_VIEWS

if TYPE_CHECKING:  # numpy and protobuf load only when a file is read or written
    from polyprof.formats.loss import LossReport
    from polyprof.formats.options import ReadOptions, WriteOptions
    from polyprof.formats.source import Source
    from polyprof.model.profile import Profile

__all__ = ["OFFCPU_VIEWS", "read", "sniff", "write"]


def sniff(head: bytes) -> bool:
    """True when ``head`` starts with the SIMPLEPERF magic."""
    return head.startswith(MAGIC)


#: Inputs from which the compiled decode kernels are loaded before the first decode: below it
#: the numpy path (callchain entries decoded once per distinct byte string) is as quick as the
#: compiled one with numba's loading included (measured: 15 MB about even, 4.9 and 7.5 MB
#: recordings 1.5-2x quicker by numpy).
COMPILED_FROM = 16 << 20


def read(source: Source, options: ReadOptions) -> list[Profile]:
    """The one profile in a report-sample file (a large plain file mapped, not copied)."""
    from polyprof.formats.simpleperf._reader import read_bytes
    from polyprof.wire.vector import sized_read

    data: Any = source.mapped(COMPILED_FROM) or source.data(COMPILED_FROM)
    with sized_read(len(data), COMPILED_FROM):
        profile = read_bytes(data, options)
    source.unchanged(data)
    return [profile]


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` as a report-sample file; return what it could not hold."""
    from polyprof.formats.simpleperf._writer import encode

    data, report = encode(profile, options)
    out.write(data)
    return report
