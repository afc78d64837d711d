"""The hostile inputs of issue #17, built from scratch (a few bytes to a few KB each).

Each builder returns the bytes of one attack: small inputs that once took
tens of seconds or gigabytes, or that gave an error naming no field. The
tests build them to check the limits (``tests/test_hostile.py``), and
``python fuzz/cases.py`` runs each through the command line in a fresh
process and prints its time and peak memory (the numbers of the README's
"Limits" section).
"""

from __future__ import annotations

import gzip
import struct

from polyprof.wire.encode import Encoder

__all__ = ["CASES"]

U64_MAX = (1 << 64) - 1


# ---------------------------------------------------------------- pprof

def _pprof(samples: list[bytes], strings: list[str], n_locations: int = 1, extra: bytes = b"") -> bytes:
    """A pprof Profile: one sample type, ``n_locations`` locations (one function each)."""
    e = Encoder().message(1, Encoder().varint_field(1, 1).varint_field(2, 2))
    for s in samples:
        e.message(2, s)
    for i in range(1, n_locations + 1):
        e.message(4, Encoder().varint_field(1, i).message(4, Encoder().varint_field(1, 1)))
    e.message(5, Encoder().varint_field(1, 1).varint_field(2, 3))
    for s in strings:
        e.string_field(6, s, always=True)
    return e.getvalue() + extra


_PPROF_STRINGS = ["", "samples", "count", "main", "key", "value"]


def _sample(locations: list[int], value: int = 1, labels: int = 0) -> bytes:
    e = Encoder().packed_field(1, locations).packed_field(2, [value])
    for _ in range(labels):
        e.message(3, Encoder().varint_field(1, 4).varint_field(2, 5))
    return e.getvalue()


def pprof_labels(n_samples: int = 20_000, labels: int = 20_000) -> bytes:
    """One sample with ``labels`` labels among ``n_samples`` samples (once 10.6 s and 3.1 GB)."""
    samples = [_sample([1], labels=labels)] + [_sample([1])] * (n_samples - 1)
    return gzip.compress(_pprof(samples, _PPROF_STRINGS), mtime=0)


def pprof_unpacked_ids(n: int = 1_000_000) -> bytes:
    """A sample with ``n`` unpacked location ids (once 73 s and 1.1 GB)."""
    sample = Encoder().unpacked_field(1, [1] * n).packed_field(2, [1]).getvalue()
    return gzip.compress(_pprof([sample], _PPROF_STRINGS), mtime=0)


def pprof_deep_stack(n: int = 1_000_000, distinct: int = 8) -> bytes:
    """A sample whose stack is ``n`` frames deep (a recursion through ``distinct`` locations):
    once 22 s, mostly in the folded and speedscope writers."""
    body = bytes(1 + i % distinct for i in range(n))
    sample = Encoder().bytes_field(1, body).packed_field(2, [1]).getvalue()
    return gzip.compress(_pprof([sample], _PPROF_STRINGS, n_locations=distinct), mtime=0)


def pprof_empty_strings(n: int = 40_000_000) -> bytes:
    """``n`` empty strings (once 2.7 GB): 78 KB of gzip."""
    head = _pprof([_sample([1])], _PPROF_STRINGS)
    return _gzip_repeat(head, b"\x32\x00", n)


def pprof_trailing_garbage() -> bytes:
    """A valid profile followed by bytes that are no protobuf field (malformed, not unrecognized)."""
    return _pprof([_sample([1])], _PPROF_STRINGS) + b"garbage!"


def pprof_bad_label_string() -> bytes:
    """A label whose value string index is out of the table: every verb must refuse it."""
    sample = Encoder().packed_field(1, [1]).packed_field(2, [1]).message(
        3, Encoder().varint_field(1, 4).varint_field(2, 999)).getvalue()
    return _pprof([sample], _PPROF_STRINGS)


def _gzip_repeat(head: bytes, unit: bytes, count: int) -> bytes:
    """gzip of ``head + unit * count``, built without holding the inflated bytes.

    Large counts become one member per 64 MiB of output, all but the first
    the same bytes (compressed once): gzip readers must read every member.
    """
    block = 64 << 20
    per = max(1, block // len(unit))
    first = min(count, per)
    parts = [gzip.compress(head + unit * first, 9, mtime=0)]
    left = count - first
    if left:
        full, rest = divmod(left, per)
        if full:
            parts.append(gzip.compress(unit * per, 9, mtime=0) * full)
        if rest:
            parts.append(gzip.compress(unit * rest, 9, mtime=0))
    return b"".join(parts)


def gzip_bomb(inflated: int = 11 << 30) -> bytes:
    """A pprof-looking gzip that inflates to ``inflated`` bytes (11 GiB: 11.5 MB of gzip)."""
    head = Encoder().message(1, Encoder().varint_field(1, 1).varint_field(2, 2)).getvalue()
    return _gzip_repeat(head, b"\x68\x00", inflated // 2)  # comment = 0, again and again


def perfetto_bomb(inflated: int = 11 << 30) -> bytes:
    """A Perfetto-shaped gzip: tiny packets (sequence id 1) for ``inflated`` bytes."""
    return _gzip_repeat(b"", b"\x0a\x02\x50\x01", inflated // 4)


# ---------------------------------------------------------------- simpleperf

def simpleperf(records: list[bytes]) -> bytes:
    parts = [b"SIMPLEPERF", struct.pack("<H", 1)]
    for r in records:
        parts += [struct.pack("<I", len(r)), r]
    return b"".join(parts + [struct.pack("<I", 0)])


def simpleperf_event_type(event_type_id: int = 0xFFFFFFFF) -> bytes:
    """One sample of event type ``event_type_id`` and no MetaInfo (34 bytes; once 15 s to MemoryError)."""
    sample = Encoder().varint_field(1, 1).varint_field(2, 1).varint_field(4, 1).varint_field(5, event_type_id)
    return simpleperf([Encoder().message(1, sample).getvalue()])


# ---------------------------------------------------------------- perfetto

def _heap_packet(pid: int, alloc_count: int) -> bytes:
    sample = Encoder().varint_field(1, 1).varint_field(2, 64).varint_field(5, alloc_count)
    dump = Encoder().varint_field(1, pid).message(2, sample)
    frames = Encoder().message(2, Encoder().varint_field(1, 1))  # frame iid 1, no function
    stacks = Encoder().message(3, Encoder().varint_field(1, 1).unpacked_field(2, [1]))
    profile = frames.raw(stacks.getvalue()).message(5, dump)
    packet = Encoder().varint_field(8, 100).varint_field(10, 1).message(37, profile)
    return Encoder().message(1, packet).getvalue()


def perfetto_alloc_count() -> bytes:
    """A heapprofd dump with ``alloc_count = 2**64 - 1``."""
    return _heap_packet(5, U64_MAX)


def perfetto_pid() -> bytes:
    """A heapprofd dump of ``pid = 2**63``."""
    return _heap_packet(1 << 63, 1)


# ---------------------------------------------------------------- chromium

def chromium_sample_count() -> bytes:
    """A deprecated-encoding CallStackProfile whose ``sample.count`` is 2**63 - 1."""
    module = Encoder().bytes_field(1, b"1").fixed64_field(2, 0x554838A8451AC36C)
    frame = Encoder().varint_field(1, 0x10).varint_field(2, 0, always=True)
    sample = Encoder().message(1, frame).varint_field(2, (1 << 63) - 1)
    return Encoder().message(1, sample).message(2, module).varint_field(3, 600).varint_field(4, 100).getvalue()


#: name -> (builder, CLI verbs to time it on)
CASES = {
    "simpleperf event_type_id=0xFFFFFFFF": (simpleperf_event_type, ("top",)),
    "simpleperf event_type_id=1000000": (lambda: simpleperf_event_type(1_000_000), ("top",)),
    "gzip bomb (11 GiB)": (gzip_bomb, ("top",)),
    "perfetto gzip bomb by path (11 GiB)": (perfetto_bomb, ("top",)),
    "pprof 20k labels on one of 20k samples": (pprof_labels, ("top", "convert")),
    "pprof 1M unpacked location ids": (pprof_unpacked_ids, ("top",)),
    "pprof 1M-frame stack": (pprof_deep_stack, ("top", "folded", "speedscope", "convert", "perfetto",
                                                "simpleperf", "chromium", "firefox")),
    "pprof 40M empty strings": (pprof_empty_strings, ("top",)),
    "pprof valid message + trailing garbage": (pprof_trailing_garbage, ("top",)),
    "pprof bad label string index": (pprof_bad_label_string, ("top", "convert")),
    "perfetto alloc_count=2^64-1": (perfetto_alloc_count, ("top",)),
    "perfetto pid=2^63": (perfetto_pid, ("top",)),
    "chromium sample.count=2^63-1": (chromium_sample_count, ("top",)),
}
