"""pprof's legacy inputs: recognised, named, and refused with a way out.

``go tool pprof`` still parses formats from before ``profile.proto``:
gperftools' binary CPU profiles (and the Java variant), and the text heap,
growth, contention, thread, threadcreate and goroutine profiles of the C++
and Go runtimes (``debug=1`` pages). Reading them means reproducing pprof's
heuristics (address adjustments, ``/proc/self/maps`` parsing, sampling
corrections), which polyprof does not do: it recognises each of them so the
error says which format the file is, why it is refused, and how to convert
it with the tool that reads it.
"""

from __future__ import annotations

import struct

from polyprof.errors import UnsupportedFeatureError

__all__ = ["kind", "read", "sniff"]

_TEXT = (
    (b"heap profile:", "text heap/growth profile (gperftools or Go runtime, debug=1)"),
    (b"heap_v2/", "text heap profile (heap_v2)"),
    (b"--- heapz", "Java heap profile (text)"),
    (b"--- contentionz", "contention profile (text)"),
    (b"--- contention", "contention profile (text)"),
    (b"--- mutex", "mutex contention profile (text)"),
    (b"--- threadz", "thread profile (text)"),
    (b"threadcreate profile:", "Go threadcreate profile (text, debug=1)"),
    (b"goroutine profile:", "Go goroutine profile (text, debug=1)"),
)


def kind(head: bytes) -> str | None:
    """The legacy format ``head`` starts, or None."""
    text = head.lstrip()[:64]
    for prefix, name in _TEXT:
        if text.startswith(prefix):
            return name
    for fmt, size in (("<Q", 8), (">Q", 8), ("<I", 4), (">I", 4)):
        if len(head) < 5 * size:
            continue
        words = [struct.unpack_from(fmt, head, i * size)[0] for i in range(5)]
        if words[0] == 0 and words[1] == 3 and words[3] > 0 and words[4] == 0 and words[2] in (0, 1):
            return "gperftools CPU profile (legacy binary)" if words[2] == 0 else "Java CPU profile (legacy binary)"
    return None


def sniff(head: bytes) -> bool:
    return kind(head) is not None


def read(source, options):  # noqa: ANN001, ANN201, ARG001
    name = kind(source.head()) or "legacy pprof profile"
    raise UnsupportedFeatureError(
        f"{name}: a pre-profile.proto format that polyprof recognises but does not read (its parsing "
        "depends on pprof's address and sampling heuristics); convert it with "
        "'go tool pprof -proto FILE > FILE.pb.gz' and use that", path=source.name, fmt="pprof-legacy")
