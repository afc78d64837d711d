"""Render a DisasmResult as ``go tool pprof -disasm`` text."""

from __future__ import annotations

from polyprof.analysis.disasm import DisasmResult
from polyprof.render import units

__all__ = ["disasm_text"]


def disasm_text(r: DisasmResult, *, unit: str = "minimum") -> str:
    """pprof's ``-disasm``: per symbol a header, then each instruction with flat, cum,
    address and text, and the source position where it changes."""
    def fmt(v: int) -> str:
        return units.scaled_label(v, r.sample_type.unit, unit)

    def dot(v: int) -> str:
        return "." if v == 0 else fmt(v)

    out = [f"Total: {fmt(r.total)}"]
    for sym in r.symbols:
        out.append(f"ROUTINE ======================== {sym.names[0]}")
        out += [f"    AKA ======================== {name}" for name in sym.names[1:]]
        out.append(f"{fmt(sym.flat):>10} {fmt(sym.cum):>10} (flat, cum) {units.percentage(sym.cum, r.total)} of Total")
        where = ("", "", 0)
        for ins in sym.instructions:
            loc = ""
            if (ins.function, ins.file, ins.line) != where:
                where = (ins.function, ins.file, ins.line)
                loc = (ins.function + " " if ins.function else "") + \
                    (ins.file + (f":{ins.line}" if ins.line else "") if ins.file else "")
            head = f"{dot(ins.flat):>10} {dot(ins.cum):>10} {ins.address:10x}: "
            if not loc:
                out.append(head + ins.text)
            elif len(ins.text) < 40:
                out.append(head + f"{ins.text:<40};{loc}")
            else:
                out.append(" " * 74 + ";" + loc)
                out.append(head + ins.text)
    return "\n".join(out) + "\n"
