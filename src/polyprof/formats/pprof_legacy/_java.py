"""Java's legacy text profiles (``--- heapz 1 ---``, ``--- contentionz 1 ---``)
and the symbol lines every Java profile ends with.

A header of ``name = value`` attributes (``format = java``, ``resolution``,
``sampling period``, ``ms since reset``), sample lines ``v1 v2 @ 0xa 0xb``
(addresses are ids, not return addresses: no adjustment), then one
``0xaddress function (File.java:line)`` line per id. As pprof does: heap
samples are un-sampled for Java's 512 KiB mean sampling interval and carry
their block size as a ``bytes`` label; contention samples are multiplied by
the sampling period; locations then lose their addresses (the ids mean
nothing outside the file) and ids without a symbol line fall into the
catch-all mapping.
"""

from __future__ import annotations

import re

from polyprof.formats.pprof_legacy._maps import apply_maps
from polyprof.formats.pprof_legacy._parsed import (MASK64, Function, NotMine, Parsed, broken, checked, go_div, go_int,
                                                   go_uint, scale_heap, trim)

__all__ = ["hex_addresses", "java_symbols", "parse_java"]

_ATTRIBUTE = re.compile(r"([\w ]+)=([\w ]+)", re.ASCII)
_SAMPLE = re.compile(r" *(\d+) +(\d+) +@ +([ x0-9a-f]*)", re.ASCII)
_SYMBOL = re.compile(r"[\t\n\f\r ]*0x([0-9A-Fa-f]+)[\t\n\f\r ]+(.*?)[\t\n\f\r ]*\Z")
_FILE_LINE = re.compile(r"(.*)[\t\n\f\r ]+\((.+):(-?[0-9]+)\)\Z")
_PATH = re.compile(r"(.*)[\t\n\f\r ]+\((.*)\)\Z")
_HEX = re.compile(r"0x([0-9a-f]+)")
_HEAP_SAMPLING = 512 * 1024  # the JVM's mean heap sampling interval
_HEADERS = {"--- heapz 1 ---": "heap", "--- contentionz 1 ---": "contention"}


def hex_addresses(text: str, where: str, offset: int) -> list[int]:
    """Every ``0x...`` number in ``text`` (pprof's ``parseHexAddresses``)."""
    values = [int(h, 16) for h in _HEX.findall(text)]
    if values and max(values) > MASK64:
        raise broken(f"{where}: address {hex(max(values))} does not fit 64 bits", offset)
    return values


def _where(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}"


def parse_java(text: str) -> Parsed:
    nl = text.find("\n")
    kind = _HEADERS.get(trim(text[:nl])) if nl >= 0 else None
    if kind is None:
        raise NotMine("not a Java heapz/contentionz header")
    p = Parsed([], ("", ""), 0)
    pos = _header(kind, text, nl + 1, p)
    pos = _samples(kind, text, pos, p)
    java_symbols(p, text[pos:], pos)
    return p


def _section(text: str, pos: int, rx: re.Pattern) -> tuple[list[tuple[int, re.Match]], int]:
    """(start, match) of the lines from ``pos`` that ``rx`` finds (blank ones
    skipped) up to the first it does not find; and where that line starts."""
    found: list[tuple[int, re.Match]] = []
    while (nl := text.find("\n", pos)) >= 0:  # pprof reads only lines ended by a newline here
        start, line, pos = pos, trim(text[pos:nl]), nl + 1
        if line:
            m = rx.search(line)
            if not m:
                return found, start
            found.append((start, m))
    return found, pos


def _header(kind: str, text: str, pos: int, p: Parsed) -> int:
    """Read ``name = value`` lines; the offset of the first other line."""
    found, end = _section(text, pos, _ATTRIBUTE)
    for start, m in found:
        name, value = trim(m[1]), trim(m[2])
        if name == "format":
            if value != "java":
                raise NotMine(f"{_where(text, start)}: format {value!r} is not java", start)
        elif name == "resolution":
            p.sample_types = ([("inuse_objects", "count"), ("inuse_space", value)] if kind == "heap"
                              else [("contentions", "count"), ("delay", value)])
        elif kind == "contention" and name in ("sampling period", "ms since reset"):
            try:
                number = go_int(value, 0)
            except ValueError as exc:
                raise broken(f"{_where(text, start)}: {name}: {exc}", start) from None
            if name == "sampling period":
                p.period_type, p.period = ("contentions", "count"), number
            elif checked(number * 1_000_000) is None:
                raise broken(f"{_where(text, start)}: ms since reset {number} too large", start)
            else:
                p.duration_nanos = number * 1_000_000
        else:
            raise NotMine(f"{_where(text, start)}: unknown attribute {name!r} in a Java {kind} profile", start)
    return end


def _samples(kind: str, text: str, pos: int, p: Parsed) -> int:
    """Read ``v1 v2 @ ids`` lines; the offset of the first other line."""
    found, end = _section(text, pos, _SAMPLE)
    line, last = text.count("\n", 0, pos) + 1, pos  # counted on from the previous sample: linear
    for start, m in found:
        line, last = line + text.count("\n", last, start), start
        where = f"line {line}"
        addresses = hex_addresses(m[3], where, start)
        try:
            values = [go_int(m[2], 0), go_int(m[1], 0)]
        except ValueError as exc:
            raise broken(f"{where}: {exc}", start) from None
        block = None
        if kind == "heap":
            if values[0] == 0:
                raise broken(f"{where}: a heap sample's object count must not be 0", start)
            block = go_div(values[1], values[0])
            scaled = scale_heap(values[0], values[1], _HEAP_SAMPLING)
            fits: list[int | None] = list(scaled) if scaled else [None, None]
        else:
            fits = [checked(v * p.period) for v in values] if p.period else list(values)
        kept = [v for v in fits if v is not None]
        if len(kept) < len(fits):
            raise broken(f"{where}: sample values too large", start)
        p.add(kept, addresses, block)
    return end


def java_symbols(p: Parsed, text: str, base: int) -> None:
    """Name the locations from ``0xid function (File.java:line)`` lines, then
    number locations and mappings as pprof does (addresses dropped)."""
    functions: dict[str, Function] = {}
    pos = 0
    for number, raw in enumerate(text.split("\n"), 1):
        line, start = trim(raw), pos
        pos += len(raw) + 1
        m = _SYMBOL.match(line) if line else None
        if m is None:
            continue
        try:
            address = go_uint(m[1], 16)
        except ValueError as exc:
            raise broken(f"symbol line {number}: {exc}", base + start) from None
        name, filename, line_no = _symbol(m[2])
        p.symbols[address] = (functions.setdefault(name, Function(name, filename)), line_no)
    apply_maps(p, [])  # numbers locations; the unnamed ones get the catch-all mapping


def _symbol(text: str) -> tuple[str, str, int]:
    m = _FILE_LINE.match(text)
    if m:
        try:
            number = go_int(m[3])
        except ValueError:
            number = 0
        return m[1], m[2], max(number, 0)
    m = _PATH.match(text)
    if m:
        return m[1], _base(m[2]), 0
    if "generated stub/JIT" in text:
        return "STUB", "", 0
    return text, "", 0


def _base(path: str) -> str:
    """Go's ``filepath.Base``."""
    if not path:
        return "."
    path = path.rstrip("/")
    return path.rsplit("/", 1)[-1] if path else "/"
