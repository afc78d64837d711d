"""Hostile symbol inputs: each gives one clear warning, frames stay unsymbolized, nothing crashes.

A truncated ELF file, a section table past the end, a section claiming
2 GB, DWARF whose abstract origin refers to itself (a cycle), and a
mapping.txt with broken lines.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from native_programs import SOURCES, program, root

import polyprof
from polyprof.model.builder import ProfileBuilder
from polyprof.symbolize import Sources, symbolize
from polyprof.symbolize.elf import ElfFile
from polyprof.symbolize.llvm import find_llvm_symbolizer
from polyprof.symbolize.r8 import parse_mapping


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):  # noqa: ANN001, ANN202
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path / "cache"))


def _profile(build_id: str, address: int, name: str = "/opt/app/hot") -> polyprof.Profile:
    b = ProfileBuilder("simpleperf")  # addresses are ELF virtual addresses
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, name, build_id)
    b.add_sample(b.stack([b.location(m, address)]), [3])
    return b.finish()


def _only(path: Path) -> Sources:
    return Sources(paths=(str(path),), use_env=False, local_paths=False, system_dirs=())


def _run(debug: Path, tmp_path: Path, build_id: str, address: int):  # noqa: ANN202
    folder = tmp_path / "symbols" / ".build-id" / build_id[:2]
    folder.mkdir(parents=True)
    shutil.copy(debug, folder / f"{build_id[2:]}.debug")
    p = _profile(build_id, address)
    q, report = symbolize(p, _only(tmp_path / "symbols"))
    assert q.samples.values.tolist() == p.samples.values.tolist()
    return q, report


def _churn(prog) -> int:  # noqa: ANN001
    full = ElfFile(str(prog.bin))
    return next(int(s) for n, s in zip(full.symbols.names, full.symbols.start) if n == "churn") + 4


def test_a_working_debug_file_first(tmp_path):  # noqa: ANN001
    prog = program("c")
    q, report = _run(prog.debug, tmp_path, prog.build_id, _churn(prog))
    assert q.function_name(int(q.lines.function[-1])) == "churn" and not report.notes


def _patched(prog, tmp_path: Path, patch) -> Path:  # noqa: ANN001
    data = bytearray(prog.debug.read_bytes())
    patch(data)
    out = tmp_path / "bad.debug"
    out.write_bytes(bytes(data))
    return out


def _section_header(data: bytearray, name: str) -> int:
    """File offset of the 64-bit section header named ``name``."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_off, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    for i in range(shnum):
        at = shoff + i * shentsize
        name_off, = struct.unpack_from("<I", data, at)
        if bytes(data[names_off + name_off:]).split(b"\0", 1)[0] == name.encode():
            return at
    raise AssertionError(name)


@pytest.mark.parametrize("damage", ["truncated", "section table past the end", "2 GB section"])
def test_broken_elf_files_warn_once_and_leave_frames_alone(damage, tmp_path):  # noqa: ANN001
    prog = program("c")
    if damage == "truncated":
        bad = tmp_path / "bad.debug"
        bad.write_bytes(prog.debug.read_bytes()[:3000])
    elif damage == "section table past the end":
        bad = _patched(prog, tmp_path, lambda d: struct.pack_into("<Q", d, 0x28, len(d) + 0x1000))
    else:
        bad = _patched(prog, tmp_path, lambda d: struct.pack_into("<Q", d, _section_header(d, ".debug_info") + 0x20,
                                                                  0x80000000))
    q, report = _run(bad, tmp_path, prog.build_id, _churn(prog))
    assert len(q.lines) == 0  # still an address frame
    problems = [n for n in report.notes if "bad.debug" in n or ".debug:" in n]
    assert len(problems) == 1, report.notes
    assert "past the end" in problems[0] or "truncated" in problems[0]
    assert report.mappings[0].looked_for  # what to provide instead


def test_a_dwarf_reference_cycle_ends(tmp_path):  # noqa: ANN001
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    exe = root() / "cycle"
    if not exe.exists():
        subprocess.run([gcc, "-o", str(exe), str(SOURCES / "cycle.s")], check=True, capture_output=True, timeout=120)
    elf = ElfFile(str(exe))
    cyc = next(int(s) for n, s in zip(elf.symbols.names, elf.symbols.start) if n == "cyc") + 1
    engines = ["python"] + (["llvm"] if find_llvm_symbolizer() else [])
    answers = []
    for engine in engines:
        p = _profile(elf.build_id, cyc, str(exe))
        q, report = symbolize(p, Sources(paths=(str(exe),), engine=engine, use_env=False, local_paths=False,
                                         system_dirs=(), cache=False))
        answers.append([q.function_name(int(f)) for f in q.lines.function])
    assert answers == [["cyc"]] * len(engines)  # the cycle gives no name; the symbol table does


def test_a_mapping_file_with_broken_lines(tmp_path):  # noqa: ANN001
    text = ("com.example.Main -> a:\n"
            "    1:1:void foo():54:54 -> a\n"
            "    this is not a mapping line\n"
            "    1:1:void test():50 -> a\n"
            "garbage without arrow\n"
            "    2:x:void bad():1 -> b\n")
    notes: list[str] = []
    jm = parse_mapping(text, "mapping.txt", notes)
    assert notes == ["mapping.txt: 3 malformed line(s) skipped (first: line 3)"]
    assert jm.retrace("a", "a", 1) == [("com.example.Main.foo", "", 54), ("com.example.Main.test", "", 50)]
    path = tmp_path / "mapping.txt"
    path.write_text(text)
    b = ProfileBuilder("perfetto")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, "/data/app/com.example-1/base.apk", "")
    keep = b.location(m, 0x10, [(b.function("zz.q"), 3, 0)])  # not in the mapping: untouched
    b.add_sample(b.stack([b.location(m, 0x20, [(b.function("a.a"), 1, 0)]), keep]), [1])
    q, report = symbolize(b.finish(), Sources(mappings=(str(path),), use_env=False, local_paths=False,
                                              system_dirs=()))
    names = [q.function_name(int(q.lines.function[r])) for loc in q.stack_locations(0) for r in q.locations.lines_of(loc)]
    assert names == ["com.example.Main.foo", "com.example.Main.test", "zz.q"]
    assert sum("malformed" in w for w in q.warnings) == 1
