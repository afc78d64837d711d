"""Symbolized addresses as columns: the form every engine answers in and the cache stores.

A 100k-address profile of template-heavy C++ resolves to about half a
million frames; a Python object per frame costs more than llvm-symbolizer
itself. :class:`Answers` keeps them as arrays instead — address ``i`` has
the frames ``starts[i]:starts[i + 1]``, innermost inlined level first — with
function and file names as codes into one string table (code 0 is "",
unknown). Only distinct strings ever become Python objects.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence

import numpy as np

from polyprof.symbolize.frames import Frame

__all__ = ["Answers", "ranges"]

_FORMAT = b"PPA1"  # the packed form's magic (the cache checks it; a change bumps the digit)


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(s, s + c)`` for each pair, vectorized."""
    counts = counts.astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    offsets = np.repeat(ends - counts, counts)
    return np.repeat(starts.astype(np.int64), counts) + np.arange(total, dtype=np.int64) - offsets


class Answers:
    """Frames of many addresses (ELF virtual addresses or module offsets) as columns."""

    __slots__ = ("addresses", "column", "file", "function", "line", "starts", "strings")

    def __init__(self, addresses: np.ndarray, starts: np.ndarray, function: np.ndarray, file: np.ndarray,
                 line: np.ndarray, column: np.ndarray, strings: list[str]) -> None:
        self.addresses = addresses.astype(np.uint64, copy=False)
        self.starts = starts.astype(np.int64, copy=False)
        self.function = function.astype(np.int32, copy=False)
        self.file = file.astype(np.int32, copy=False)
        self.line = line.astype(np.int64, copy=False)
        self.column = column.astype(np.int64, copy=False)
        self.strings = strings

    # ------------------------------------------------------------ building

    @classmethod
    def empty(cls, addresses: Sequence[int] | np.ndarray = ()) -> Answers:
        """No frames for each of ``addresses``."""
        a = np.asarray(addresses, dtype=np.uint64)
        z = np.zeros(0, dtype=np.int64)
        return cls(a, np.zeros(len(a) + 1, dtype=np.int64), z, z, z, z, [""])

    @classmethod
    def from_frames(cls, addresses: Sequence[int], chains: Sequence[Sequence[Frame]]) -> Answers:
        """From one list of frames per address (the pure-Python reader's form)."""
        codes: dict[str, int] = {"": 0}
        fn: list[int] = []
        fl: list[int] = []
        ln: list[int] = []
        co: list[int] = []
        counts = np.zeros(len(chains), dtype=np.int64)
        for i, chain in enumerate(chains):
            counts[i] = len(chain)
            for f in chain:
                fn.append(codes.setdefault(f.function, len(codes)))
                fl.append(codes.setdefault(f.file, len(codes)))
                ln.append(f.line)
                co.append(f.column)
        starts = np.zeros(len(chains) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return cls(np.asarray(addresses, dtype=np.uint64), starts, np.asarray(fn, dtype=np.int32),
                   np.asarray(fl, dtype=np.int32), np.asarray(ln, dtype=np.int64), np.asarray(co, dtype=np.int64),
                   list(codes))

    @classmethod
    def concat(cls, parts: Sequence[Answers]) -> Answers:
        """The answers of every part, one after the other (string tables merged)."""
        parts = [p for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.empty()
        codes: dict[str, int] = {"": 0}
        remaps = []
        for p in parts:  # each table's new strings interned in bulk, in order
            fresh = [s for s in dict.fromkeys(p.strings) if s not in codes]
            codes.update(zip(fresh, range(len(codes), len(codes) + len(fresh))))
            remaps.append(np.fromiter(map(codes.__getitem__, p.strings), dtype=np.int32, count=len(p.strings)))
        counts = np.concatenate([np.diff(p.starts) for p in parts])
        starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return cls(np.concatenate([p.addresses for p in parts]), starts,
                   np.concatenate([r[p.function] for r, p in zip(remaps, parts)]),
                   np.concatenate([r[p.file] for r, p in zip(remaps, parts)]),
                   np.concatenate([p.line for p in parts]), np.concatenate([p.column for p in parts]), list(codes))

    # ------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self.addresses)

    @property
    def counts(self) -> np.ndarray:
        """Frames per address."""
        return np.diff(self.starts)

    def frames(self, i: int) -> list[Frame]:
        """The frames of address ``i`` as :class:`Frame` objects."""
        s = self.strings
        return [Frame(s[self.function[j]], s[self.file[j]], int(self.line[j]), int(self.column[j]))
                for j in range(int(self.starts[i]), int(self.starts[i + 1]))]

    def to_dict(self) -> dict[int, list[Frame]]:
        """Address -> frames, for the addresses that have some."""
        return {int(a): self.frames(i) for i, a in enumerate(self.addresses.tolist()) if self.starts[i + 1] >
                self.starts[i]}

    def take(self, rows: np.ndarray) -> Answers:
        """The answers of ``rows`` (indexes), in that order; the string table is shared."""
        rows = np.asarray(rows, dtype=np.int64)
        counts = np.diff(self.starts)[rows]
        idx = ranges(self.starts[:-1][rows], counts)
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return Answers(self.addresses[rows], starts, self.function[idx], self.file[idx], self.line[idx],
                       self.column[idx], self.strings)

    def lookup(self, addresses: np.ndarray) -> tuple[Answers, np.ndarray]:
        """(answers aligned with ``addresses``, which of them were here); misses get no frames.

        Where an address is here twice, its last answer wins.
        """
        wanted = np.asarray(addresses, dtype=np.uint64)
        order = np.argsort(self.addresses, kind="stable")
        keys = self.addresses[order]
        pos = np.searchsorted(keys, wanted, side="right") - 1
        found = pos >= 0
        found[found] = keys[pos[found]] == wanted[found]
        rows = np.where(found, order[np.maximum(pos, 0)], -1) if len(keys) else np.full(len(wanted), -1)
        if not len(self):
            return Answers.empty(wanted), found
        picked = self.take(np.maximum(rows, 0))
        counts = np.where(found, picked.counts, 0)
        keep = np.repeat(found, picked.counts)
        starts = np.zeros(len(wanted) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return Answers(wanted, starts, picked.function[keep], picked.file[keep], picked.line[keep],
                       picked.column[keep], self.strings), found

    # ------------------------------------------------------------ changing

    def name_outermost(self, hit: np.ndarray, names: list[str], files: list[str],
                       own_file: np.ndarray | None = None) -> Answers:
        """The symbol table's names on the outermost frame of each address where ``hit``.

        ``names``/``files`` hold one entry per hit address (in order). The name
        replaces the outermost frame's; the file fills it only where it had
        none, or replaces it where ``own_file`` (one flag per hit address) is
        set; an address without frames gains one frame with that name.
        """
        codes = {s: i for i, s in enumerate(self.strings)}
        strings = list(self.strings)
        for s in dict.fromkeys([*names, *files]):  # in order (a set's order changes from run to run)
            if s not in codes:
                codes[s] = len(strings)
                strings.append(s)
        name_code = np.fromiter(map(codes.__getitem__, names), dtype=np.int32, count=len(names))
        file_code = np.fromiter(map(codes.__getitem__, files), dtype=np.int32, count=len(files))
        counts = self.counts
        grow = hit & (counts == 0)
        new_counts = counts + grow
        starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(new_counts, out=starts[1:])
        total = int(starts[-1])
        old_at = ranges(starts[:-1], counts)  # old frames keep their order at the front of each block
        cols = []
        for old, dtype in ((self.function, np.int32), (self.file, np.int32), (self.line, np.int64),
                           (self.column, np.int64)):
            col = np.zeros(total, dtype=dtype)
            col[old_at] = old
            cols.append(col)
        fn, fl = cols[0], cols[1]
        last = starts[1:][hit] - 1
        fn[last] = name_code
        replace = fl[last] == 0 if own_file is None else (fl[last] == 0) | own_file
        fl[last] = np.where(replace, file_code, fl[last])
        return Answers(self.addresses, starts, fn, fl, cols[2], cols[3], strings)

    def in_first_use_order(self) -> Answers:
        """The same answers, the string table in first-use order: function names in the order
        frames use them, then file names; what one pass over all the output gives however it
        was split (pieces, processes), so function rows come out the same on every run."""
        codes, first = np.unique(np.concatenate([self.function, self.file]), return_index=True)
        order = codes[np.argsort(first, kind="stable")]
        order = np.concatenate([np.zeros(1, dtype=order.dtype), order[order != 0]])  # "" stays code 0
        remap = np.zeros(len(self.strings), dtype=np.int32)
        remap[order] = np.arange(len(order), dtype=np.int32)
        strings = [self.strings[i] for i in order.tolist()]
        return Answers(self.addresses, self.starts, remap[self.function], remap[self.file], self.line, self.column,
                       strings)

    def drop_unknown(self) -> Answers:
        """Without frames that have neither a function nor a file name."""
        keep = (self.function != 0) | (self.file != 0)
        if keep.all():
            return self
        owner = np.repeat(np.arange(len(self)), self.counts)
        counts = np.bincount(owner[keep], minlength=len(self))
        starts = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return Answers(self.addresses, starts, self.function[keep], self.file[keep], self.line[keep],
                       self.column[keep], self.strings)

    # ------------------------------------------------------------ packing

    def pack(self) -> bytes:
        """One blob: a header, the arrays' bytes, then the string table as JSON."""
        text = json.dumps(self.strings, ensure_ascii=False).encode("utf-8", "surrogatepass")
        head = struct.pack("<4sQQQ", _FORMAT, len(self), len(self.function), len(text))
        return b"".join([head, self.addresses.astype("<u8").tobytes(), self.starts.astype("<i8").tobytes(),
                         self.function.astype("<i4").tobytes(), self.file.astype("<i4").tobytes(),
                         self.line.astype("<i8").tobytes(), self.column.astype("<i8").tobytes(), text])

    @classmethod
    def unpack(cls, blob: bytes) -> Answers:
        """The answers :meth:`pack` wrote; ValueError when ``blob`` is not such a blob."""
        if len(blob) < 28:
            raise ValueError("truncated packed answer blob")
        magic, n, m, text_size = struct.unpack_from("<4sQQQ", blob)
        sizes = [8 * n, 8 * (n + 1), 4 * m, 4 * m, 8 * m, 8 * m]
        if magic != _FORMAT or 28 + sum(sizes) + text_size != len(blob):
            raise ValueError("not a packed answer blob")
        arrays, at = [], 28
        for size, dtype in zip(sizes, ("<u8", "<i8", "<i4", "<i4", "<i8", "<i8")):
            arrays.append(np.frombuffer(blob, dtype=dtype, count=size // np.dtype(dtype).itemsize, offset=at))
            at += size
        strings = json.loads(blob[at:].decode("utf-8", "surrogatepass"))
        out = cls(arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], arrays[5], strings)
        if (not isinstance(strings, list) or not strings or strings[0] != "" or out.starts[0] != 0
                or np.any(np.diff(out.starts) < 0) or out.starts[-1] != m
                or (m and (max(int(out.function.max()), int(out.file.max())) >= len(strings)
                           or min(int(out.function.min()), int(out.file.min())) < 0))):
            raise ValueError("inconsistent packed answer blob")
        return out
