"""``disasm REGEX``: machine instructions of the matching symbols with their weights,
as ``go tool pprof -disasm`` prints them (it needs binutils' ``nm`` and ``objdump``).

For every mapping whose binary is on this machine and has samples in a
matching function, the binary's symbols (``nm -n``) matching the regular
expression are disassembled (``objdump -d -l``) and every instruction gets
the flat and cum weight of the sampled addresses from it up to the next
instruction, at address granularity without inline expansion (pprof's
rules). Addresses are translated into the binary's own: as they are for
executables, relative to the mapping for position-independent code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from polyprof.analysis import filters
from polyprof.analysis.filters import FilterResult
from polyprof.analysis.graph import callsite_weights, node_map, node_weights
from polyprof.analysis.options import Options
from polyprof.analysis.result import Result, dataclass_columns
from polyprof.analysis.trim import report_column
from polyprof.errors import OptionsError, UnsupportedFeatureError
from polyprof.model.profile import Profile, ValueType

__all__ = ["DisasmResult", "Instruction", "Symbol", "disassembly", "tools_available"]

_NM_LINE = re.compile(r"^\s*([0-9a-fA-F]+)\s+(.)\s+(.*)")
_ASM = re.compile(r"^\s*([0-9a-fA-F]+):\s+(.*)")
_FILE_LINE = re.compile(r"^;?\s?(.*):([0-9]+)")
_FUNCTION = re.compile(r"^;?\s?(\S.*)\(\):")
_FUNCTION_LLVM = re.compile(r"^([0-9a-fA-F]+)?\s?(.*):")


@dataclass(frozen=True)
class Instruction:
    address: int
    text: str
    function: str
    file: str     # base name
    line: int
    flat: int
    cum: int


@dataclass
class Symbol:
    names: list[str]    # the symbol and its aliases (same address)
    binary: str
    start: int
    end: int
    flat: int
    cum: int
    instructions: list[Instruction] = field(default_factory=list)


@dataclass(repr=False)
class DisasmResult(Result):
    """Annotated disassembly: ``to_pandas()`` gives one row per instruction
    (``"instructions"``, with its symbol's first name), ``to_pandas("symbols")`` one per symbol."""

    TABLES: ClassVar[tuple[str, ...]] = ("instructions", "symbols")

    sample_type: ValueType
    total: int
    symbols: list[Symbol]

    def _columns(self, table: str) -> dict[str, Any]:
        if table == "symbols":
            cols: dict[str, Any] = dataclass_columns(self.symbols, Symbol)
            del cols["instructions"]
            return cols
        pairs = [(s, i) for s in self.symbols for i in s.instructions]
        return {"symbol": [s.names[0] if s.names else "" for s, _ in pairs],
                **dataclass_columns([i for _, i in pairs], Instruction)}

    def _summary(self) -> str:
        return f"{self.sample_type}, total={self.total}, {len(self.symbols)} symbols"


def tools_available() -> bool:
    return shutil.which("objdump") is not None and shutil.which("nm") is not None


def disassembly(src: Profile | FilterResult, regex: str, options: Options | None = None) -> DisasmResult:
    """Annotated instructions of the symbols of ``src``'s binaries matching ``regex``."""
    if not tools_available():
        raise UnsupportedFeatureError("disasm needs binutils' objdump and nm on PATH (Debian: apt-get install "
                                      "binutils)")
    try:
        rx = re.compile(regex)
    except re.error as exc:
        raise OptionsError(f"disasm: bad regular expression {regex!r}: {exc}") from None
    o = options or Options()
    fr = filters.prepare(src, o)
    p = fr.profile
    col = report_column(fr, o)
    nodes = node_map(p, "addresses", inlines=False, names=o.symbolize != "none", objnames=True)
    flat, cum = node_weights(p, nodes, callsite_weights(p, col.values))
    live = np.flatnonzero((flat != 0) | (cum != 0)).tolist()
    wanted = {nodes.infos[n].objfile for n in live if nodes.infos[n].objfile and rx.search(nodes.names[n])}
    symbols: list[Symbol] = []
    for m in range(len(p.mappings)):
        binary = p.strings[p.mappings.filename[m]]
        if binary not in wanted or not os.path.isfile(binary):
            continue
        base = _base(binary, int(p.mappings.start[m]), int(p.mappings.offset[m]))
        samples = sorted((nodes.infos[n].address - base, n) for n in live)
        for names, start, end in _symbols(binary, rx):
            inside = [(a, n) for a, n in samples if start <= a < end]
            if not inside:
                continue
            sym = Symbol(names, binary, start, end, sum(int(flat[n]) for _, n in inside),
                         sum(int(cum[n]) for _, n in inside))
            sym.instructions = _annotate(_objdump(binary, start, end), inside, nodes, flat, cum)
            symbols.append(sym)
    if not symbols:
        raise OptionsError(f"disasm: no symbol matching {regex!r} in a binary found on this machine "
                           "(the profile's binaries must be at their recorded paths)")
    symbols.sort(key=lambda s: (s.names[0], s.start))
    return DisasmResult(col.sample_type, col.total, symbols)


def _base(binary: str, start: int, offset: int) -> int:
    """What to subtract from a profile address to get the binary's own address."""
    with open(binary, "rb") as fh:
        head = fh.read(18)
    if head[:4] != b"\x7fELF" or len(head) < 18:
        return 0
    little = head[5] == 1
    e_type = int.from_bytes(head[16:18], "little" if little else "big")
    return 0 if e_type == 2 else start - offset  # ET_EXEC: absolute; ET_DYN: relative to the mapping


def _symbols(binary: str, rx: re.Pattern[str]) -> list[tuple[list[str], int, int]]:
    """(names, start, end) of the symbols whose name matches, from ``nm -n``."""
    out = subprocess.run(["nm", "-n", binary], capture_output=True, timeout=300, check=False).stdout
    found: list[tuple[list[str], int, int]] = []
    names: list[str] = []
    start = 0
    for line in [*out.decode("utf-8", errors="replace").splitlines(), None]:
        m = _NM_LINE.match(line) if line is not None else None
        if line is not None and m is None:
            continue
        addr = int(m.group(1), 16) if m else start + 1
        if m and addr == start:
            names.append(m.group(3))
            continue
        match = next((n for n in names if rx.search(n)), None)
        if match is not None:
            found.append(([match], start, addr - 1))
        if m:
            names, start = [m.group(3)], addr
    return found


def _objdump(binary: str, start: int, end: int) -> list[tuple[int, str, str, str, int]]:
    """(address, text, function, file, line) of every instruction in [start, end]."""
    done = subprocess.run(["objdump", "--disassemble", "--demangle", "--no-show-raw-insn", "--line-numbers",
                           f"--start-address={start:#x}", f"--stop-address={end:#x}", binary],
                          capture_output=True, timeout=300, check=False)
    function, file, line = "", "", 0
    out = []
    for raw in done.stdout.decode("utf-8", errors="replace").split("\n"):
        text = raw.strip()
        m = _ASM.match(text)
        if m:
            out.append((int(m.group(1), 16), m.group(2), function, file, line))
            continue
        m = _FILE_LINE.match(text)
        if m:
            file, line = m.group(1), int(m.group(2))
            continue
        m = _FUNCTION.match(text) or _FUNCTION_LLVM.match(text)
        if m:
            function = m.group(m.lastindex or 1)
            continue
        function, file, line = "", "", 0
    return out


def _annotate(insts: list, samples: list, nodes, flat: np.ndarray, cum: np.ndarray) -> list[Instruction]:  # noqa: ANN001
    """Each instruction with the samples from its address up to the next instruction."""
    out = []
    s = 0
    for i, (addr, text, function, file, line) in enumerate(insts):
        nxt = insts[i + 1][0] if i + 1 < len(insts) else 1 << 64
        f = c = 0
        file = os.path.basename(file) if file else ""
        while s < len(samples) and samples[s][0] < nxt:
            info, n = nodes.infos[samples[s][1]], samples[s][1]
            f, c = f + int(flat[n]), c + int(cum[n])
            file = file or (os.path.basename(info.file) if info.file else "")
            line = line or info.lineno
            function = function or info.name
            s += 1
        out.append(Instruction(addr, text, function, file, line, f, c))
    return out
