"""Perfetto traces (``perfetto.protos.Trace``): profiling packets in, profiles out, and back.

Reading (raw or gzip, detected by content; streamed, so multi-GB traces read
in bounded memory) gives one profile per

- heapprofd dump: (process, heap, dump) from ``ProfilePacket`` -- legacy
  in-packet tables or interned data, ``continued`` chunks, dump-at-max,
  client errors and stats (:mod:`._heap`);
- traced_perf event and process, from ``PerfSample`` -- defaults, clocks,
  counters, unwind errors, skipped samples, lost records (:mod:`._perf`);
- Chrome process, from ``StreamingProfilePacket`` (:mod:`._chrome`);
- producer process of ``StreamingAllocation``/``StreamingFree``;
- stream and process of the 2026 ``StackSample`` packet (:mod:`._stack`).

Interning and incremental state follow trace processor per sequence
(:mod:`._sequence`); clocks are converted to trace time with the trace's
snapshots (:mod:`._clock`); process and thread names come from process
trees and descriptors; ``ModuleSymbols`` name frames. Selections and the
profile labels are described in :mod:`._build`. Not read: track events,
ftrace, heap graphs, smaps, Java deobfuscation maps and the legacy
``ProfiledFrameSymbols`` (counted in the warnings); frame ``kind``
annotations are counted, not kept.

Writing (:mod:`._writer`) produces a trace Perfetto's own parser accepts:
PerfSample packets for time/event profiles, ProfilePacket dumps for heap
profiles, StreamingProfilePackets for Chrome ones, StackSample and streaming
allocation packets for those kinds, with interning, sequence flags and
unpacked repeated fields. What a trace cannot hold is listed in
the loss report. :func:`summarize` gives what a whole trace holds (processes,
threads, kinds, sample counts, losses) from all its profiles, for ``info``.
"""

from __future__ import annotations

from typing import BinaryIO

from polyprof.formats.loss import LossReport
from polyprof.formats.options import ReadOptions, WriteOptions
from polyprof.formats.perfetto._sniff import sniff
from polyprof.formats.perfetto._summary import summarize
from polyprof.formats.source import Source
from polyprof.model.profile import Profile

__all__ = ["read", "sniff", "summarize", "write"]


def read(source: Source, options: ReadOptions) -> list[Profile]:
    """Every profile in the trace, selected by ``options`` (pid, tid, heap, time_range)."""
    from polyprof.formats.perfetto._reader import TraceReader

    return TraceReader(options).read(source)


def write(profile: Profile, out: BinaryIO, options: WriteOptions) -> LossReport:
    """Write ``profile`` as a Perfetto trace; return what the trace could not hold."""
    from polyprof.formats.perfetto._writer import write_trace

    return write_trace(profile, out, options)
