"""Writer side of interning: model stacks to Perfetto frames, mappings and callstacks.

Entries are emitted once per sequence, in the ``interned_data`` of the first
packet that uses them (``take()``). A location becomes a Frame at its
address (``rel_pc``) in its mapping: with no line, a nameless frame; with one
plain line, the frame's function name, source path and line; with inlined
lines or a system name, the frame keeps the system name and the lines go to
a ``ModuleSymbols`` packet (``symbols()``), which the reader applies back.
What a frame cannot hold is added to the loss report: columns, function
start lines, folded flags, mapping flags, inline lines of a location without
a mapping, line numbers without a file, file names without a leading "/",
build ids that are neither 33-character ids nor hex.
"""

from __future__ import annotations

import string

from polyprof.formats.loss import LossReport
from polyprof.formats.perfetto._sequence import mapping_name
from polyprof.model.profile import Profile
from polyprof.wire.encode import Encoder

__all__ = ["Interner", "build_id_bytes"]

_HEX = set(string.hexdigits.lower())


def build_id_bytes(text: str, report: LossReport | None = None) -> bytes:
    """The raw build id the reader shows as ``text`` (see ``build_id_text``)."""
    if not text:
        return b""
    if len(text) == 33 and text.isascii() and text.isprintable():
        return text.encode("ascii")
    if len(text) % 2 == 0 and set(text) <= _HEX:
        return bytes.fromhex(text)
    if report is not None:
        report.add("build ids that are not hex (written as raw bytes; read back in hex)")
    return text.encode("utf-8", errors="surrogatepass")


class Interner:
    """Interning tables of one sequence; callers take pending entries into packets."""

    def __init__(self, p: Profile, report: LossReport, extra_mappings: dict | None = None) -> None:
        self.p = p
        self.report = report
        self._strings: dict[int, dict[bytes, int]] = {5: {}, 16: {}, 17: {}, 18: {}}
        self._mappings: dict[int, int] = {}
        self._frames: dict[int, int] = {}
        self._stacks: dict[int, int] = {}
        self._pending: dict[int, list[bytes]] = {}
        self._symbols: dict[tuple[int, int], list[tuple[str, str, int]]] = {}
        self._extra = extra_mappings or {}
        self._paths = [p.strings[i] for i in p.mappings.filename.tolist()]
        self._parts = [path.lstrip("/").split("/") if path else [] for path in self._paths]

    def _emit(self, field: int, body: Encoder) -> None:
        self._pending.setdefault(field, []).append(body.getvalue())

    def take(self) -> bytes:
        """Encoded InternedData of the entries added since the last call (b"" if none)."""
        if not self._pending:
            return b""
        out = Encoder()
        for field in sorted(self._pending):
            for body in self._pending[field]:
                out.message(field, body)
        self._pending = {}
        return out.getvalue()

    def string(self, table: int, raw: bytes) -> int:
        ids = self._strings[table]
        iid = ids.get(raw)
        if iid is None:
            iid = ids[raw] = len(ids) + 1
            self._emit(table, Encoder().varint_field(1, iid).bytes_field(2, raw, always=True))
        return iid

    def mapping(self, m: int) -> int:
        iid = self._mappings.get(m)
        if iid is None:
            ms = self.p.mappings
            path = self._paths[m]
            if int(ms.flags[m]):
                self.report.add("mapping flags (has_functions, ...) not kept")
            if path and not path.startswith("/"):
                self.report.add("mapping file names without a leading '/' (read back with one)")
            parts = self._parts[m]
            build = build_id_bytes(self.p.strings[ms.build_id[m]], self.report)
            iid = self._mappings[m] = len(self._mappings) + 1
            start, end = int(ms.start[m]), int(ms.limit[m])
            start_offset, load_bias = self._extra.get((path, self.p.strings[ms.build_id[m]], start), (0, 0))
            e = Encoder().varint_field(1, iid)
            e.varint_field(2, self.string(16, build) if build else 0)
            e.varint_field(3, start_offset).varint_field(4, start).varint_field(5, end).varint_field(6, load_bias)
            e.unpacked_field(7, [self.string(17, c.encode("utf-8", errors="surrogatepass")) for c in parts])
            e.varint_field(8, int(ms.offset[m]))
            self._emit(19, e)
        return iid

    def frame(self, loc: int) -> int:
        iid = self._frames.get(loc)
        if iid is None:
            iid = self._frames[loc] = len(self._frames) + 1
            self._emit(6, self._frame_body(loc, iid))
        return iid

    def _frame_body(self, loc: int, iid: int) -> Encoder:
        lt = self.p.locations
        mapping, address = int(lt.mapping[loc]), int(lt.address[loc])
        rows = list(lt.lines_of(loc))
        if lt.folded[loc]:
            self.report.add("folded location flags not kept")
        lines = [self._line(r) for r in rows]
        e = Encoder().varint_field(1, iid)
        name, file, line, sysname = lines[-1] if lines else ("", "", 0, "")
        symbolize = len(lines) > 1 or (bool(sysname) and sysname != name)
        if symbolize and mapping < 0:
            self.report.add("inline or system-named frames without a mapping (outer function kept)")
            symbolize = False
        if symbolize:
            key = (mapping, address)
            lines_out = [(n, f, ln) for n, f, ln, _ in lines]
            if self._symbols.setdefault(key, lines_out) != lines_out:
                self.report.add("different symbols at one mapping address (first kept)")
            for _, f, ln, _ in lines:
                if ln and not f:
                    self.report.add("symbolized line numbers without a file (dropped)")
            name = sysname
        e.varint_field(2, self.string(5, name.encode("utf-8", errors="surrogatepass")) if name else 0)
        e.varint_field(3, self.mapping(mapping) if mapping >= 0 else 0)
        e.varint_field(4, address, always=mapping >= 0)
        if not symbolize:
            e.varint_field(5, self.string(18, file.encode("utf-8", errors="surrogatepass")) if file else 0)
            e.varint_field(6, line)
        return e

    def _line(self, row: int) -> tuple[str, str, int, str]:
        p = self.p
        fn = int(p.lines.function[row])
        if int(p.lines.column[row]):
            self.report.add("line columns not kept")
        if fn < 0:
            return "", "", int(p.lines.line[row]), ""
        f = p.functions
        if int(f.start_line[fn]):
            self.report.add("function start lines not kept")
        return (p.strings[f.name[fn]], p.strings[f.filename[fn]], int(p.lines.line[row]),
                p.strings[f.system_name[fn]])

    def callstack(self, node: int) -> int:
        """iid of the callstack ending at callsite ``node`` (frames root first)."""
        iid = self._stacks.get(node)
        if iid is None:
            frames = [self.frame(loc) for loc in reversed(self.p.callsites.path(node))] if node >= 0 else []
            iid = self._stacks[node] = len(self._stacks) + 1
            self._emit(7, Encoder().varint_field(1, iid).unpacked_field(2, frames))
        return iid

    def symbols(self) -> list[bytes]:
        """ModuleSymbols payloads for the symbolized frames, one per mapping."""
        by_mapping: dict[int, list[tuple[int, list[tuple[str, str, int]]]]] = {}
        for (m, address), lines in self._symbols.items():
            by_mapping.setdefault(m, []).append((address, lines))
        out = []
        for m, entries in sorted(by_mapping.items()):
            e = Encoder().string_field(1, mapping_name(self._parts[m]))
            e.bytes_field(2, build_id_bytes(self.p.strings[self.p.mappings.build_id[m]]))
            for address, lines in sorted(entries):
                a = Encoder().varint_field(1, address, always=True)
                for name, file, line in lines:
                    a.message(2, Encoder().string_field(1, name).string_field(2, file).varint_field(3, line))
                e.message(3, a)
            out.append(e.getvalue())
        return out
