"""Trace-wide, content-interned mappings, frames and stacks, and their copy into profiles.

Interning ids (iids) only mean something inside one sequence generation, so
the reader resolves them right away into this catalog, whose ids are stable
for the whole read: a mapping is its content, a frame is (mapping, rel_pc,
function name, source file, line), a stack is a trie node (parent, frame)
built root first. Symbols (``ModuleSymbols``) may come after the samples, so
frames are turned into model locations only when profiles are built, with
the symbols known by then.

What a frame becomes: a location at ``rel_pc`` (the ELF-relative pc Perfetto
records) in its mapping, with one line per symbolized inline function
(innermost first) when symbols exist, else one line for its interned
function name and source position, else no line. A symbolized frame keeps
its interned name as the system name of its outermost function.
"""

from __future__ import annotations

import numpy as np

from polyprof.model.builder import ProfileBuilder

__all__ = ["Catalog", "Emitter", "build_id_text"]

MappingKey = tuple[str, str, int, int, int, int, int]  # path, build id, start, end, exact_offset, start_offset, load_bias
LineSpec = tuple[str, str, int]  # function name, source file, line


def build_id_text(raw: bytes) -> str:
    """How a build id is shown: Chrome's 33-character ids as text, others in hex (as trace processor)."""
    if not raw:
        return ""
    if len(raw) == 33:
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            return raw.hex()
        if text.isprintable():
            return text
    return raw.hex()


class Catalog:
    """Content-interned mappings, frames and stack trie of a whole trace."""

    def __init__(self) -> None:
        self._mappings: dict[MappingKey, int] = {}
        self.mapping_rows: list[MappingKey] = []
        self._frames: dict[tuple, int] = {}
        self.frame_rows: list[tuple[int, int, str, str, int]] = []
        self._nodes: dict[tuple[int, int], int] = {}
        self.node_parent: list[int] = []
        self.node_frame: list[int] = []
        # (path, build id or None) -> {address: lines innermost first}
        self.symbols: dict[tuple[str, str | None], dict[int, tuple[LineSpec, ...]]] = {}
        self.frame_kinds = 0

    def mapping(self, key: MappingKey) -> int:
        mid = self._mappings.get(key)
        if mid is None:
            mid = self._mappings[key] = len(self.mapping_rows)
            self.mapping_rows.append(key)
        return mid

    def frame(self, mapping: int, rel_pc: int, name: str, source: str = "", line: int = 0) -> int:
        key = (mapping, rel_pc, name, source, line)
        fid = self._frames.get(key)
        if fid is None:
            fid = self._frames[key] = len(self.frame_rows)
            self.frame_rows.append(key)
        return fid

    def stack(self, frames_root_first: list[int] | tuple[int, ...]) -> int:
        """The trie node of a stack given root first; -1 for an empty stack."""
        node = -1
        nodes = self._nodes
        for fid in frames_root_first:
            key = (node, fid)
            nxt = nodes.get(key)
            if nxt is None:
                nxt = nodes[key] = len(self.node_parent)
                self.node_parent.append(node)
                self.node_frame.append(fid)
            node = nxt
        return node

    def add_symbols(self, path: str, build_id: str, address: int, lines: tuple[LineSpec, ...]) -> None:
        self.symbols.setdefault((path, build_id or None), {}).setdefault(address, lines)

    def symbols_of(self, mapping: int, address: int) -> tuple[LineSpec, ...] | None:
        if mapping < 0 or not self.symbols:
            return None
        path, build_id = self.mapping_rows[mapping][:2]
        for key in ((path, build_id or None), (path, None)):
            table = self.symbols.get(key)
            if table is not None and address in table:
                return table[address]
        return None


class Emitter:
    """Copies the catalog entries one profile uses into that profile's builder."""

    def __init__(self, catalog: Catalog, builder: ProfileBuilder) -> None:
        self.cat = catalog
        self.b = builder
        self._map: dict[int, int] = {}
        self._loc: dict[int, int] = {}
        self._node: dict[int, int] = {-1: -1}

    def _mapping(self, mid: int) -> int:
        m = self._map.get(mid)
        if m is None:
            path, build_id, start, end, exact_offset, _, _ = self.cat.mapping_rows[mid]
            m = self._map[mid] = self.b.mapping(start, end, exact_offset, path, build_id)
        return m

    def mapping_offsets(self) -> list[list]:
        """[file, build id, start, start_offset, load_bias] of used mappings where those are set."""
        rows = [self.cat.mapping_rows[mid] for mid in self._map]
        return sorted([path, build, start, so, lb] for path, build, start, _, _, so, lb in rows if so or lb)

    def location(self, fid: int) -> int:
        loc = self._loc.get(fid)
        if loc is None:
            mid, rel_pc, name, source, line = self.cat.frame_rows[fid]
            b = self.b
            symbols = self.cat.symbols_of(mid, rel_pc)
            if symbols:
                last = len(symbols) - 1
                lines = [(b.function(fn, name if i == last and name != fn else "", file), ln, 0)
                         for i, (fn, file, ln) in enumerate(symbols)]
            elif name or source:
                lines = [(b.function(name, "", source), line, 0)]
            else:
                lines = []
            loc = self._loc[fid] = b.location(self._mapping(mid) if mid >= 0 else -1, rel_pc, lines)
        return loc

    def callsite(self, node: int) -> int:
        """The model callsite of trie node ``node`` (creating its ancestors first)."""
        done = self._node
        if node in done:
            return done[node]
        chain = []
        while node not in done:
            chain.append(node)
            node = self.cat.node_parent[node]
        parent = done[node]
        for n in reversed(chain):
            parent = done[n] = self.b.callsite(parent, self.location(self.cat.node_frame[n]))
        return parent

    def callsites(self, nodes: np.ndarray) -> np.ndarray:
        """Model callsite of every trie node in ``nodes`` (-1 stays -1)."""
        if not nodes.size:
            return np.zeros(0, dtype=np.int32)
        uniq, inverse = np.unique(nodes, return_inverse=True)
        mapped = np.array([self.callsite(int(n)) for n in uniq], dtype=np.int32)
        return mapped[inverse.reshape(-1)]
