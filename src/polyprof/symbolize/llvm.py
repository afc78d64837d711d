"""llvm-symbolizer as long-lived processes, fed in batches.

pprof and Perfetto symbolize through llvm-symbolizer; it reads DWARF of
big binaries fast and caches the files it opened. The same processes serve
every file of a run: a batch of ``"FILE" 0xADDR`` lines is written by a
helper thread while the answers are read back, so neither side blocks on a
full pipe. The tool is single-threaded, so a big batch is split over a few
processes (:class:`LlvmPool`). Answers use the LLVM style (pairs of
function and ``file:line:column`` lines, then a blank line), which
llvm-symbolizer writes more than twice as fast as JSON, and are parsed in
bulk into columns (:class:`.answers.Answers`). Names come back undemangled
(``--no-demangle``): demangling is done once for every format
(:mod:`.demangle`).

When the process cannot start or dies, :class:`LlvmSymbolizerError` is
raised and the caller falls back to the pure-Python reader.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable

import numpy as np

from polyprof.errors import PolyprofError
from polyprof.symbolize.answers import Answers

__all__ = ["LlvmPool", "LlvmSymbolizer", "LlvmSymbolizerError", "find_llvm_symbolizer", "parse_output"]

#: Output parsed as it comes, in pieces of about this many bytes (tens of them for 100k addresses).
PIECE = 4 << 20

#: Versioned names Debian and others install when the plain name is absent.
_NAMES = ("llvm-symbolizer",) + tuple(f"llvm-symbolizer-{v}" for v in range(20, 10, -1))


class LlvmSymbolizerError(PolyprofError):
    """llvm-symbolizer could not be started or stopped answering."""


def find_llvm_symbolizer() -> str | None:
    """Path of llvm-symbolizer (``$POLYPROF_LLVM_SYMBOLIZER`` first), or None."""
    forced = os.environ.get("POLYPROF_LLVM_SYMBOLIZER")
    if forced is not None:
        return shutil.which(forced) if forced else None
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def parse_output(data: bytes, addresses: np.ndarray) -> Answers:
    """Answers from llvm-symbolizer's LLVM-style output for ``addresses``, in bulk.

    Each answer is pairs of a function line and a ``file:line:column`` line,
    ended by a blank line. Lines are split and classified with numpy; only
    distinct names and distinct locations are decoded and parsed in Python
    (a per-frame parse costs more than llvm-symbolizer itself).
    """
    parser = _Parser(addresses)
    parser.feed(data)
    return parser.answers()


class _Parser:
    """:func:`parse_output` piece by piece (whole answers each), so the output of a big batch is
    parsed while llvm-symbolizer is still writing the rest; one string table for all pieces."""

    def __init__(self, addresses: np.ndarray) -> None:
        self.addresses = addresses
        self.done = 0
        self.strings: dict[str, int] = {"": 0}
        self.columns: list[tuple[np.ndarray, ...]] = []  # (frames per answer, function, file, line, column)

    def feed(self, data: bytes) -> None:
        """Parse ``data``, the next whole answers."""
        if not data:
            return
        n = data.count(b"\n\n")
        if self.done + n > len(self.addresses):
            raise LlvmSymbolizerError(f"llvm-symbolizer gave {self.done + n} answers for {len(self.addresses)} "
                                      f"addresses")
        lines = data.split(b"\n")[:-1]  # the output ends with "\n\n": one trailing empty piece
        ends_at = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)  # line lengths, no call per line
        ends = np.flatnonzero(np.diff(ends_at, prepend=-1) == 1)
        if len(ends) != n:
            raise LlvmSymbolizerError("llvm-symbolizer's answers are not separated by single blank lines")
        first = np.zeros(n, dtype=np.int64)
        first[1:] = ends[:-1] + 1
        sizes = ends - first
        if np.any(sizes % 2):
            raise LlvmSymbolizerError("llvm-symbolizer's answer is not pairs of function and location lines")
        filled = list(filter(None, lines))  # without the blank lines, names and places alternate
        names = filled[0::2]
        distinct = list(dict.fromkeys(names))
        fn_code = dict(zip(distinct, _intern(_decode_lines(distinct), self.strings)))
        fn = np.fromiter(map(fn_code.__getitem__, names), dtype=np.int32, count=len(names))
        where = filled[1::2]
        places = {raw: i for i, raw in enumerate(dict.fromkeys(where))}
        parsed = np.array([_place(raw, self.strings) for raw in places], dtype=np.int64).reshape(-1, 3)
        loc = parsed[np.fromiter(map(places.__getitem__, where), dtype=np.int64, count=len(where))]
        self.columns.append((sizes // 2, fn, loc[:, 0], loc[:, 1], loc[:, 2]))
        self.done += n

    def answers(self, *, ordered: bool = True) -> Answers:
        """Every answer fed, without frames that name nothing; the string table in first-use
        order unless not ``ordered`` (the caller joins several and orders them once)."""
        if self.done != len(self.addresses):
            raise LlvmSymbolizerError(f"llvm-symbolizer gave {self.done} answers for {len(self.addresses)} addresses")
        if not self.columns:
            return Answers.empty(self.addresses)
        counts, fn, file, line, column = (np.concatenate(c) for c in zip(*self.columns))
        starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        out = Answers(self.addresses, starts, fn, file, line, column, list(self.strings)).drop_unknown()
        return out.in_first_use_order() if ordered and len(self.columns) > 1 else out  # as one piece would give


def _decode_lines(raws: list[bytes]) -> list[str]:
    """Each of ``raws`` (lines, no newline in them) decoded, in one call; ``??`` (unknown) is ""."""
    texts = b"\n".join(raws).decode("utf-8", "replace").split("\n") if raws else []
    return ["" if t == "??" else t for t in texts]


def _intern(texts: list[str], strings: dict[str, int]) -> list[int]:
    """String-table codes of ``texts``, new ones appended in order."""
    fresh = [t for t in dict.fromkeys(texts) if t not in strings]
    strings.update(zip(fresh, range(len(strings), len(strings) + len(fresh))))
    return list(map(strings.__getitem__, texts))


def _place(raw: bytes, strings: dict[str, int]) -> tuple[int, int, int]:
    """(file code, line, column) of one ``file:line:column`` line."""
    file, line, column = (raw.rsplit(b":", 2) + [b"0", b"0"])[:3]
    text = "" if file == b"??" else file.decode("utf-8", "replace")
    return (strings.setdefault(text, len(strings)), int(line) if line.isdigit() else 0,
            int(column) if column.isdigit() else 0)


class LlvmSymbolizer:
    """One llvm-symbolizer process; :meth:`raw` answers many addresses at once."""

    def __init__(self, exe: str) -> None:
        self.exe = exe
        try:
            self.proc = subprocess.Popen(
                [exe, "--output-style=LLVM", "--no-demangle", "--inlines", "--functions=linkage"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=1 << 16)
        except OSError as exc:
            raise LlvmSymbolizerError(f"cannot start {exe}: {exc}") from None
        _grow_pipe(self.proc.stdout)

    def raw(self, path: str, addresses: np.ndarray) -> bytes:
        """The output for ``addresses`` (ELF virtual addresses) in ``path``, unparsed."""
        pieces: list[bytes] = []
        self._read(path, addresses, pieces.append)
        return b"".join(pieces)

    def answers(self, path: str, addresses: np.ndarray) -> Answers:
        """:meth:`lookup` of an array, the output parsed piece by piece while more is written."""
        return _answers_of([self], path, [addresses])

    def _read(self, path: str, addresses: np.ndarray, sink: Callable[[bytes], None]) -> None:
        """Ask for ``addresses`` in ``path``; give ``sink`` the output in pieces of whole answers."""
        if '"' in path or "\n" in path:
            raise LlvmSymbolizerError(f"cannot pass the file name {path!r} to llvm-symbolizer")
        prefix = f'"{path}" '
        request = "".join(f"{prefix}{a:#x}\n" for a in addresses.tolist()).encode("utf-8", "surrogateescape")
        failure: list[BaseException] = []

        def feed() -> None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(request)
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                failure.append(exc)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        assert self.proc.stdout is not None
        fd, chunks, held, seen, tail = self.proc.stdout.fileno(), [], 0, 0, b""
        try:
            # Big reads, counting the blank lines that end answers (across chunk borders too).
            # llvm-symbolizer flushes every answer: reading each as it comes costs a Python
            # loop turn per address, so after a short read the pipe is left to fill a little.
            while seen < len(addresses):
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise LlvmSymbolizerError(f"{self.exe} exited while symbolizing {path}")
                seen += (tail + chunk).count(b"\n\n") - tail.count(b"\n\n")
                tail = chunk[-1:]
                chunks.append(chunk)
                held += len(chunk)
                if held >= PIECE and seen < len(addresses):  # parsed now, while the tool writes on
                    data = b"".join(chunks)
                    cut = data.rfind(b"\n\n") + 2
                    sink(data[:cut])
                    chunks, held = [data[cut:]], len(data) - cut
                elif len(chunk) < 1 << 15 and seen < len(addresses):
                    time.sleep(0.002)
        except LlvmSymbolizerError:
            self.close()
            raise
        finally:
            writer.join(timeout=5)
        if failure:
            raise LlvmSymbolizerError(f"cannot talk to {self.exe}: {failure[0]}")
        sink(b"".join(chunks))

    def lookup(self, path: str, addresses: Iterable[int]) -> Answers:
        """Frames (innermost first) for each of ``addresses`` (ELF virtual addresses) in ``path``."""
        addrs = np.asarray(list(addresses), dtype=np.uint64)
        return self.answers(path, addrs) if len(addrs) else Answers.empty()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LlvmSymbolizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LlvmPool:
    """Several llvm-symbolizer processes over shards of a batch: the tool is single-threaded.

    Addresses are split into contiguous runs (each process then walks its own
    part of the file), one per process, answered concurrently and joined
    back in order; answers do not depend on the split. Processes start on
    first need, at most ``POLYPROF_LLVM_JOBS`` (default: the CPU count, up to
    4), and only for batches big enough to pay for loading the file again.
    """

    def __init__(self, exe: str, jobs: int | None = None, min_shard: int = 2000) -> None:
        self.exe = exe
        self.jobs = max(1, jobs if jobs is not None else _default_jobs())
        self.min_shard = max(1, min_shard)  # below this, loading the debug file again costs more than it saves
        self.procs: list[LlvmSymbolizer] = [LlvmSymbolizer(exe)]

    def lookup(self, path: str, addresses: Iterable[int]) -> Answers:
        """Frames (innermost first) for each of ``addresses`` (ELF virtual addresses) in ``path``."""
        addrs = np.asarray(list(addresses), dtype=np.uint64)
        if not len(addrs):
            return Answers.empty()
        shards = min(self.jobs, max(1, len(addrs) // self.min_shard))
        while len(self.procs) < shards:
            self.procs.append(LlvmSymbolizer(self.exe))
        return _answers_of(self.procs[:shards], path, np.array_split(addrs, shards))

    def close(self) -> None:
        for proc in self.procs:
            proc.close()
        self.procs = []


def _answers_of(procs: list[LlvmSymbolizer], path: str, parts: list[np.ndarray]) -> Answers:
    """The answers for ``parts[i]`` asked of ``procs[i]``, concurrently, joined in order.

    A thread per process only reads (so its pipe is drained at once and the
    tool never waits on it); this thread parses the pieces as they come.
    """
    pieces: queue.SimpleQueue[tuple[int, bytes | BaseException | None]] = queue.SimpleQueue()

    def read(i: int) -> None:
        try:
            procs[i]._read(path, parts[i], lambda piece: pieces.put((i, piece)))
            pieces.put((i, None))
        except LlvmSymbolizerError as exc:
            pieces.put((i, exc))

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(parts))]
    for t in readers:
        t.start()
    parsers = [_Parser(part) for part in parts]
    failures: list[BaseException] = []
    running = len(parts)
    while running:
        i, item = pieces.get()
        if item is None or isinstance(item, BaseException):
            running -= 1
            failures.extend([item] if item is not None else [])
        elif not failures:  # after a failure the rest is drained, not parsed
            try:
                parsers[i].feed(item)
            except LlvmSymbolizerError as exc:
                failures.append(exc)
    for t in readers:
        t.join()
    if failures:
        raise failures[0]
    if len(parsers) == 1:
        return parsers[0].answers()
    return Answers.concat([p.answers(ordered=False) for p in parsers]).in_first_use_order()


def _grow_pipe(stream: object) -> None:
    """A 1 MB pipe buffer where Linux allows it, so llvm-symbolizer need not wait while answers
    are left to gather; elsewhere the default is kept."""
    try:
        import fcntl

        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)  # type: ignore[attr-defined]
    except (OSError, ImportError, AttributeError, ValueError):
        pass


def _default_jobs() -> int:
    forced = os.environ.get("POLYPROF_LLVM_JOBS", "")
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    return min(os.cpu_count() or 1, 4)
