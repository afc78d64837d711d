"""pprof's legacy (pre-``profile.proto``) inputs, read as ``go tool pprof`` reads them.

Covered, each with pprof's own corrections (see the modules):

- gperftools binary CPU profiles, 32/64-bit words, either byte order, and
  their Java variant (:mod:`._binary`);
- text heap and growth profiles (gperftools ``heapz``/``heap_v2``, Go's
  ``debug=1`` heap page), Go count profiles (``goroutine``,
  ``threadcreate``), thread dumps (``--- threadz``), contention/mutex/block
  profiles (:mod:`._text`);
- Java heapz/contentionz text profiles (:mod:`._java`);
- the ``/proc/self/maps`` sections they end with, as mappings (:mod:`._maps`).

Detection tries the formats in pprof's order; when none reads the input, the
error comes from the reader that got furthest, with its line and byte
offset. The profile keeps pprof's numbers, sample order (equal samples are
not merged, as pprof's parser does not) and its ``drop_frames`` /
``keep_frames`` rules for the kind of profile.

Lost: nothing pprof keeps. Thread names and ids of thread dumps, and the
attributes pprof ignores (``discarded samples``), are not kept.
"""

from __future__ import annotations

from polyprof.errors import InputError
from polyprof.formats.pprof_legacy._binary import header, parse_cpu
from polyprof.formats.pprof_legacy._java import parse_java
from polyprof.formats.pprof_legacy._parsed import (NotMine, Parsed, Scanner, broken, build, is_space_or_comment,
                                                   trim)
from polyprof.formats.pprof_legacy._text import (CONTENTION_PREFIXES, COUNT_HEADER, HEAP_HEADER, OTHER_HEAP,
                                                 THREAD, THREADZ, parse_contention, parse_count, parse_heap,
                                                 parse_thread)

__all__ = ["kind", "read", "sniff"]

_TEXT_PARSERS = (parse_heap, parse_count, parse_thread, parse_contention)  # pprof's order
_HEAP_KINDS = ("heapz_v2", "heap_v2", "heapprofile", "heap")


def kind(head: bytes) -> str | None:
    """The legacy format ``head`` starts, or None (cheap: header lines only)."""
    found = header(head)
    if found:
        return "Java CPU profile (binary)" if found[1] else "CPU profile (gperftools binary)"
    lines = head[:16384].decode("latin-1").split("\n")
    first = lines[0].rstrip("\r")
    m = HEAP_HEADER.search(first)
    if (m and m[5] in _HEAP_KINDS) or OTHER_HEAP.search(first):
        return "heap profile (text)"
    if first.startswith(CONTENTION_PREFIXES):
        return "contention profile (text)"
    if trim(first) in ("--- heapz 1 ---", "--- contentionz 1 ---"):
        return "Java profile (text)"
    line = next((ln.rstrip("\r") for ln in lines[:-1] if not is_space_or_comment(ln)), "")
    m = COUNT_HEADER.fullmatch(line)
    if m:
        return f"Go {m[1]} profile (text)"
    if THREADZ.search(line) or THREAD.search(line):
        return "thread profile (text)"
    return None


def sniff(head: bytes) -> bool:
    return kind(head) is not None


def read(source, options):
    """The one profile in a legacy input."""
    try:
        p = _parse(source.data())
        return [build(p, *_frame_rules(p.sample_types))]
    except InputError as exc:
        raise exc.with_path(source.name) from None


def _parse(data: bytes) -> Parsed:
    misses = []
    try:
        return parse_cpu(data)
    except NotMine as miss:
        misses.append(miss)
    text = data.decode("latin-1")  # byte for byte: offsets stay byte offsets
    for parser in _TEXT_PARSERS:
        try:
            return parser(Scanner(text))
        except NotMine as miss:
            misses.append(miss)
    try:
        return parse_java(text)
    except NotMine as miss:
        misses.append(miss)
    deepest = max(misses, key=lambda m: -1 if m.offset is None else m.offset)
    if deepest.offset is None:
        raise broken("none of pprof's legacy formats starts like this", 0)
    raise broken(f"not readable as pprof reads it: {deepest.reason}", deepest.offset)


# pprof's addLegacyFrameInfo: frames that are the profiler's or the allocator's own
_ALLOC_FRAMES = "|".join((
    "calloc", "cfree", "malloc", "free", "memalign", "do_memalign", "(__)?posix_memalign", "pvalloc", "valloc",
    "realloc", r"tcmalloc::.*", "tc_calloc", "tc_cfree", "tc_malloc", "tc_free", "tc_memalign", "tc_posix_memalign",
    "tc_pvalloc", "tc_valloc", "tc_realloc", "tc_new", "tc_delete", "tc_newarray", "tc_deletearray",
    "tc_new_nothrow", "tc_newarray_nothrow", "malloc_zone_malloc", "malloc_zone_calloc", "malloc_zone_valloc",
    "malloc_zone_realloc", "malloc_zone_memalign", "malloc_zone_free", r"runtime\..*", r"BaseArena::.*",
    "(::)?do_malloc_no_errno", "(::)?do_malloc_pages", "(::)?do_malloc", "DoSampledAllocation",
    "MallocedMemBlock::MallocedMemBlock", "_M_allocate", "__builtin_(vec_)?delete", "__builtin_(vec_)?new",
    "__gnu_cxx::new_allocator::allocate", "__libc_malloc", "__malloc_alloc_template::allocate", "allocate",
    "cpp_alloc", r"operator new(\[\])?", "simple_alloc::allocate"))
_ALLOC_KEEP = r"runtime\.panic|runtime\.reflectcall|runtime\.call[0-9]*"
_CPU_FRAMES = r"ProfileData::Add|ProfileData::prof_handler|CpuProfiler::prof_handler|__pthread_sighandler|__restore"
_LOCK_FRAMES = "|".join((
    "RecordLockProfileData", r"(base::)?RecordLockProfileData.*", r"(base::)?SubmitMutexProfileData.*",
    r"(base::)?SubmitSpinLockProfileData.*", r"(base::Mutex::)?AwaitCommon.*", r"(base::Mutex::)?Unlock.*",
    r"(base::Mutex::)?UnlockSlow.*", r"(base::Mutex::)?ReaderUnlock.*", r"(base::MutexLock::)?~MutexLock.*",
    r"(Mutex::)?AwaitCommon.*", r"(Mutex::)?Unlock.*", r"(Mutex::)?UnlockSlow.*", r"(Mutex::)?ReaderUnlock.*",
    r"(MutexLock::)?~MutexLock.*", r"(SpinLock::)?Unlock.*", r"(SpinLock::)?SlowUnlock.*",
    r"(SpinLockHolder::)?~SpinLockHolder.*"))
_HEAP_TYPES = (("allocations", "size"), ("objects", "space"), ("inuse_objects", "inuse_space"),
               ("alloc_objects", "alloc_space"), ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space"))


def _frame_rules(sample_types: list[tuple[str, str]]) -> tuple[str, str]:
    """(drop_frames, keep_frames) pprof gives a legacy profile of these sample types."""
    names = tuple(t for t, _ in sample_types)
    if names in _HEAP_TYPES:
        return _ALLOC_FRAMES, _ALLOC_KEEP
    if names == ("contentions", "delay"):
        return _LOCK_FRAMES, ""
    return _CPU_FRAMES, ""
