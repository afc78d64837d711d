"""Breakpad text symbol files (``.sym``): parse and look addresses up.

Records read (``docs/symbol_files.md`` of Breakpad, plus its inline
records): ``MODULE os arch id name``; ``FILE n name``; ``FUNC [m] address
size param_size name`` followed by its line records ``address size line
file``; ``INLINE_ORIGIN id [file] name`` and ``INLINE depth call_line
[call_file] origin (address size)+`` (both the older form, without the
call-site file, and the newer one; told apart as Breakpad does);
``PUBLIC [m] address param_size name``. ``INFO`` and ``STACK`` records are
skipped; records of an unknown upper-case kind are counted and skipped.
Addresses are hex, relative to the module's load address.

Lookup follows Breakpad's resolver: the FUNC covering the address (with its
line record and the chain of INLINE records covering it), else the nearest
PUBLIC symbol below the address that lies above the nearest FUNC below it.

Symbol files can be hundreds of megabytes. Given the addresses wanted,
:func:`parse` keeps only the FUNCs covering them and does not parse the line
and INLINE records of the others (those are not validated either).
Malformed records that are read raise :class:`MalformedInputError` naming
the file and line.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from polyprof.errors import InputError, MalformedInputError

__all__ = ["Frame", "SymbolFile", "parse", "parse_lines"]

#: (function name, source file, line): one level of a symbolized location.
Frame = tuple[str, str, int]
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass
class _Inline:
    depth: int
    call_line: int
    call_file: int | None
    origin: int
    ranges: list[tuple[int, int]]

    def covers(self, address: int) -> bool:
        return any(start <= address < start + size for start, size in self.ranges)


@dataclass
class _Func:
    start: int
    size: int
    name: str
    line_starts: list[int] = field(default_factory=list)
    lines: list[tuple[int, int, int]] = field(default_factory=list)  # (size, line, file)
    inlines: list[_Inline] = field(default_factory=list)


@dataclass
class SymbolFile:
    """The records of one symbol file that lookups need."""

    os: str = ""
    arch: str = ""
    debug_id: str = ""
    name: str = ""
    files: dict[int, str] = field(default_factory=dict)
    origins: dict[int, tuple[str, int | None]] = field(default_factory=dict)
    funcs: list[_Func] = field(default_factory=list)
    func_starts: list[int] = field(default_factory=list)
    publics: list[tuple[int, str]] = field(default_factory=list)
    public_starts: list[int] = field(default_factory=list)
    has_inlines: bool = False
    skipped_records: int = 0

    def lookup(self, address: int) -> list[Frame] | None:
        """Frames for ``address``, innermost inlined function first; None if unknown."""
        i = bisect.bisect_right(self.func_starts, address) - 1
        func = self.funcs[i] if i >= 0 else None
        if func is not None and address < func.start + func.size:
            return self._func_frames(func, address)
        j = bisect.bisect_right(self.public_starts, address) - 1
        if j >= 0 and (func is None or self.public_starts[j] > func.start):
            return [(self.publics[j][1], "", 0)]
        return None

    def _func_frames(self, func: _Func, address: int) -> list[Frame]:
        file, line = "", 0
        k = bisect.bisect_right(func.line_starts, address) - 1
        if k >= 0 and address < func.line_starts[k] + func.lines[k][0]:
            line, file = func.lines[k][1], self.files.get(func.lines[k][2], "")
        chain = sorted((r for r in func.inlines if r.covers(address)), key=lambda r: r.depth)
        chain = [r for d, r in enumerate(chain) if r.depth == d]  # a broken nest ends the chain
        if not chain:
            return [(func.name, file, line)]
        frames = [(self._origin(chain[-1])[0], file, line)]
        for j in range(len(chain) - 1, 0, -1):
            frames.append((self._origin(chain[j - 1])[0], self._call_file(chain[j], chain[j - 1], func),
                           chain[j].call_line))
        frames.append((func.name, self._call_file(chain[0], None, func), chain[0].call_line))
        return frames

    def _origin(self, rec: _Inline) -> tuple[str, int | None]:
        return self.origins.get(rec.origin, ("<name omitted>", None))

    def _call_file(self, rec: _Inline, caller: _Inline | None, func: _Func) -> str:
        """File of the call site of ``rec``, inside ``caller`` (or ``func`` when None)."""
        if rec.call_file is not None:
            return self.files.get(rec.call_file, "")
        # Older records name no call-site file: the caller's own file is the best guess.
        if caller is not None:
            file_id = self._origin(caller)[1]
            return self.files.get(file_id, "") if file_id is not None else ""
        return self.files.get(func.lines[0][2], "") if func.lines else ""


class _Parser:
    """Line-by-line state of one parse."""

    def __init__(self, path: str, wanted: list[int] | None) -> None:
        self.path = path
        self.wanted = wanted
        self.sym = SymbolFile()
        self.func: _Func | None = None
        self.skipping = False  # inside a FUNC nobody asked for
        self.lineno = 0

    def fail(self, what: str) -> NoReturn:
        raise MalformedInputError(f"line {self.lineno}: {what}", path=self.path, fmt="breakpad")

    def hex(self, text: str, what: str) -> int:
        if not text or not set(text) <= _HEX or len(text) > 16:
            self.fail(f"bad hex number {text[:40]!r} in {what}")
        return int(text, 16)

    def dec(self, text: str, what: str, minimum: int = 0) -> int:
        digits = text[1:] if text.startswith("-") else text
        if not digits.isascii() or not digits.isdigit() or len(digits) > 18 or int(text) < minimum:
            self.fail(f"bad number {text[:40]!r} in {what}")
        return int(text)

    def wants(self, start: int, size: int) -> bool:
        if self.wanted is None:
            return True
        i = bisect.bisect_left(self.wanted, start)
        return i < len(self.wanted) and self.wanted[i] < start + size

    def line(self, text: str) -> None:
        self.lineno += 1
        text = text.rstrip("\r\n")
        if not text:
            return
        head = text.split(" ", 1)[0]
        handler = _HANDLERS.get(head)
        if handler is not None:
            handler(self, text)
        elif head[:1].isupper() and head.replace("_", "").isalpha():
            self.sym.skipped_records += 1
        else:
            self.line_record(text)

    def module(self, text: str) -> None:
        parts = text.split(" ", 4)
        if len(parts) < 5:
            self.fail("MODULE record needs os, arch, id and name")
        _, self.sym.os, self.sym.arch, self.sym.debug_id, self.sym.name = parts

    def file(self, text: str) -> None:
        parts = text.split(" ", 2)
        if len(parts) < 3:
            self.fail("FILE record needs a number and a name")
        self.sym.files[self.dec(parts[1], "FILE")] = parts[2]

    def origin(self, text: str) -> None:
        parts = text.split(" ", 2)
        if len(parts) < 3:
            self.fail("INLINE_ORIGIN record needs an id and a name")
        origin = self.dec(parts[1], "INLINE_ORIGIN")
        first, _, rest = parts[2].partition(" ")
        if rest and first.lstrip("-").isdigit():  # older form: INLINE_ORIGIN id file name
            self.sym.origins[origin] = (rest, self.dec(first, "INLINE_ORIGIN", -1))
        else:
            self.sym.origins[origin] = (parts[2], None)

    def function(self, text: str) -> None:
        parts = text.split(" ")
        multiple = len(parts) > 1 and parts[1] == "m"
        parts = text.split(" ", 5 if multiple else 4)
        if len(parts) < (6 if multiple else 5):
            self.fail("FUNC record needs address, size, parameter size and name")
        start_text, size_text, psize, name = parts[-4:]
        start, size = self.hex(start_text, "FUNC"), self.hex(size_text, "FUNC")
        self.hex(psize, "FUNC")
        self.skipping = not self.wants(start, size)
        self.func = None if self.skipping else _Func(start, size, name)
        if self.func is not None:
            self.sym.funcs.append(self.func)

    def public(self, text: str) -> None:
        self.func, self.skipping = None, False
        parts = text.split(" ")
        multiple = len(parts) > 1 and parts[1] == "m"
        parts = text.split(" ", 4 if multiple else 3)
        if len(parts) < (5 if multiple else 4):
            self.fail("PUBLIC record needs address, parameter size and name")
        address_text, psize, name = parts[-3:]
        address = self.hex(address_text, "PUBLIC")
        self.hex(psize, "PUBLIC")
        if address:  # Breakpad ignores PUBLIC records at address 0
            self.sym.publics.append((address, name))

    def inline(self, text: str) -> None:
        if self.skipping:
            return
        func = self.func
        if func is None:
            self.fail("INLINE record outside a FUNC")
        tokens = text.split()[1:]
        if len(tokens) < 5:
            self.fail("INLINE record needs depth, call line, origin and at least one range")
        has_file = len(tokens) % 2 == 0
        depth = self.dec(tokens[0], "INLINE")
        call_line = self.dec(tokens[1], "INLINE")
        call_file = self.dec(tokens[2], "INLINE", -1) if has_file else None
        rest = tokens[3:] if has_file else tokens[2:]
        origin = self.dec(rest[0], "INLINE")
        ranges = [(self.hex(a, "INLINE"), self.hex(s, "INLINE")) for a, s in zip(rest[1::2], rest[2::2])]
        func.inlines.append(_Inline(depth, call_line, call_file, origin, ranges))
        self.sym.has_inlines = True

    def line_record(self, text: str) -> None:
        if self.skipping:
            return
        parts = text.split(" ")
        if len(parts) != 4:
            self.fail(f"not a Breakpad record: {text[:60]!r}")
        func = self.func
        if func is None:
            self.fail("line record outside a FUNC")
        address, size = self.hex(parts[0], "line record"), self.hex(parts[1], "line record")
        func.line_starts.append(address)
        func.lines.append((size, self.dec(parts[2], "line record"), self.dec(parts[3], "line record")))

    def skip(self, text: str) -> None:
        """INFO and STACK records: not needed to symbolize."""

    def finish(self) -> SymbolFile:
        sym = self.sym
        sym.funcs.sort(key=lambda f: f.start)
        sym.func_starts = [f.start for f in sym.funcs]
        for func in sym.funcs:
            order = sorted(range(len(func.line_starts)), key=func.line_starts.__getitem__)
            func.line_starts = [func.line_starts[i] for i in order]
            func.lines = [func.lines[i] for i in order]
        sym.publics.sort()
        sym.public_starts = [a for a, _ in sym.publics]
        return sym


_HANDLERS = {"MODULE": _Parser.module, "FILE": _Parser.file, "FUNC": _Parser.function,
             "PUBLIC": _Parser.public, "INLINE": _Parser.inline, "INLINE_ORIGIN": _Parser.origin,
             "INFO": _Parser.skip, "STACK": _Parser.skip}


def parse_lines(lines: Iterable[str], path: str = "<symbols>",
                addresses: Iterable[int] | None = None) -> SymbolFile:
    """Parse symbol-file text; keep only FUNCs covering ``addresses`` when given."""
    parser = _Parser(path, sorted(set(addresses)) if addresses is not None else None)
    for text in lines:
        parser.line(text)
    return parser.finish()


def parse(path: str, addresses: Iterable[int] | None = None) -> SymbolFile:
    """Parse the symbol file at ``path`` (see :func:`parse_lines`)."""
    try:
        with open(path, "rb") as fh:
            return parse_lines((raw.decode("utf-8", errors="replace") for raw in fh), path, addresses)
    except OSError as exc:
        raise InputError(f"cannot read symbol file ({exc.strerror})", path=path) from None
