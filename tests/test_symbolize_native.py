"""Symbolizing real programs: C, C++ and Rust built here, recorded by simpleperf, stripped.

The stripped recording symbolized with the debug files must name the same
functions, in the same stacks, as simpleperf naming the unstripped binary
itself; inline chains must agree with addr2line and llvm-symbolizer; the
pure-Python DWARF reader must answer exactly as llvm-symbolizer; and the
same recording converted to pprof and Perfetto symbolizes the same way.
Load bias is checked with real process mappings (PIE, non-PIE, a shared
library) and an Android-style library stored inside an APK.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from native_programs import program, recording, root

import polyprof
from polyprof.formats.options import ReadOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.model.validate import check
from polyprof.symbolize import Sources, symbolize
from polyprof.symbolize.elf import ElfFile
from polyprof.symbolize.frames import Frame
from polyprof.symbolize.cache import ResultCache
from polyprof.symbolize.llvm import LlvmPool, find_llvm_symbolizer
from polyprof.symbolize.resolve import Module, Resolver

LANGS = ["c", "cpp", "rust"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):  # noqa: ANN001, ANN202
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path / "cache"))


def _read(path: Path, **options) -> polyprof.Profile:  # noqa: ANN003
    return polyprof.read(path, options=ReadOptions(**options))


def _program_rows(p: polyprof.Profile, exe: str) -> set[int]:
    return {loc for loc in range(len(p.locations))
            if p.mapping_file(int(p.locations.mapping[loc])).endswith("/" + exe)}


def _physical_stacks(p: polyprof.Profile, exe: str) -> list[list[str]]:
    """Per sample, the physical function of each frame in the program's own mapping."""
    mine = _program_rows(p, exe)
    out = []
    for i in range(len(p.samples)):
        names = []
        for loc in p.stack_locations(i) if p.samples.stack[i] >= 0 else []:
            rows = p.locations.lines_of(loc)
            if loc in mine:
                names.append(p.function_name(int(p.lines.function[rows[-1]])) if len(rows) else "?")
        out.append(names)
    return out


def _named_rows(p: polyprof.Profile, exe: str) -> int:
    """How many of the program's own locations have a name."""
    return sum(1 for loc in _program_rows(p, exe) if len(p.locations.lines_of(loc)))


def _sampled_vaddrs(p: polyprof.Profile, exe: str) -> list[int]:
    return sorted({int(p.locations.address[loc]) for loc in _program_rows(p, exe)})


@pytest.mark.parametrize("lang", LANGS)
def test_stripped_recording_names_what_simpleperf_names(lang):  # noqa: ANN001
    rec = recording(lang)
    exe = rec.program.name
    ours = _read(rec.plain, symbols=(str(rec.program.debug.parent),), demangle="full")
    check(ours)
    theirs = _read(rec.self_symbolized, demangle="full")
    assert len(ours.samples) == len(theirs.samples) > 50
    mine, expected = _physical_stacks(ours, exe), _physical_stacks(theirs, exe)
    assert mine == expected
    named = [n for s in mine for n in s]
    assert len(named) > 50 and named.count("?") < 0.02 * len(named)  # a PLT stub may stay unnamed, for both
    assert ours.samples.values.tolist() == _read(rec.plain).samples.values.tolist()  # values untouched
    report = ours.extras["symbolization"]
    entry = next(m for m in report["mappings"] if m["file"].endswith("/" + exe))
    # simpleperf names a sampled PLT stub "@plt" even in the stripped binary: those frames only
    plain = _read(rec.plain)
    named_before = [n for s in _physical_stacks(plain, exe) for n in s if n != "?"]
    assert set(named_before) <= {"@plt"}
    # a stray frame-pointer return address outside code stays unnamed, by simpleperf as by us
    before, after = _named_rows(plain, exe), _named_rows(theirs, exe)
    assert entry["symbolized_before"] == before and entry["symbolized_after"] == after > before
    assert str(rec.program.debug) in entry["found"]


@pytest.mark.parametrize("lang", LANGS)
def test_top_matches_simpleperf_on_the_programs_own_frames(lang, capsys):  # noqa: ANN001
    from polyprof.cli.main import main

    rec = recording(lang)
    show = ["--show", rec.program.name, "--noinlines", "--demangle", "full", "--nodecount", "0", "--format", "json"]
    assert main(["top", str(rec.plain), "--symbols", str(rec.program.debug.parent), *show]) == 0
    ours = capsys.readouterr().out
    assert main(["top", str(rec.self_symbolized), *show]) == 0
    theirs = capsys.readouterr().out
    import json

    def rows(text: str) -> list:  # what simpleperf knows too (ours also have files from DWARF)
        data = json.loads(text)
        table = next(v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict) and "flat" in v[0])
        return [(r["name"], r["flat"], r["cum"]) for r in table]

    assert rows(ours) == rows(theirs) and len(rows(ours)) >= 2


def _addr2line(debug: Path, addresses: list[int]) -> list[list[tuple[str, int]]]:
    """(file, line) chains, innermost first, as GNU addr2line -i prints them (one process, -a)."""
    exe = shutil.which("addr2line")
    if exe is None:
        pytest.skip("addr2line not installed (binutils)")
    text = subprocess.run([exe, "-a", "-i", "-e", str(debug)], input="".join(f"{a:#x}\n" for a in addresses),
                          capture_output=True, text=True, timeout=120).stdout
    chains: dict[int, list[tuple[str, int]]] = {}
    chain: list[tuple[str, int]] = []
    for line in text.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):  # -a: the address asked, then its chain
            chain = chains.setdefault(int(line, 16), [])
            continue
        file, _, number = re.sub(r" \(discriminator \d+\)$", "", line).rpartition(":")
        chain.append((file, int(number) if number.isdigit() else 0))
    return [_no_line_as_none(chains[a], "??") for a in addresses]


def _no_line_as_none(chain: list[tuple[str, int]], unknown: str) -> list[tuple[str, int]]:
    """No line information at all: addr2line's ``??:?``, or our frame named from the symbol table alone."""
    return [] if chain == [(unknown, 0)] else chain


def _chains(p: polyprof.Profile, rows: list[int]) -> tuple[list[list[tuple[str, int]]], list[list[str]]]:
    """(file, line) chains and function names of locations ``rows``, innermost first."""
    lines = [_no_line_as_none([(p.strings[p.functions.filename[int(p.lines.function[r])]], int(p.lines.line[r]))
                               for r in p.locations.lines_of(loc)], "") for loc in rows]
    names = [[p.strings[p.functions.name[int(p.lines.function[r])]] for r in p.locations.lines_of(loc)]
             for loc in rows]
    return lines, names


def _every_text_address(prog) -> polyprof.Profile:  # noqa: ANN001
    """Every byte of the program's .text as an address frame of its stripped binary, symbolized from
    its debug file: every return address the program can have, whatever a recording sampled."""
    text = ElfFile(str(prog.debug)).section(".text")
    b = ProfileBuilder("simpleperf")  # addresses are ELF virtual addresses, as simpleperf reports them
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, str(prog.run), prog.build_id)
    for address in range(text.addr, text.addr + text.size):
        b.add_sample(b.stack([b.location(m, address)]), [1])
    q, report = symbolize(b.finish(), Sources(paths=(str(prog.debug.parent),), use_env=False, system_dirs=()),
                          demangle="none", force_demangle=True)
    assert str(prog.debug) in report.mappings[0].source
    return q


@pytest.mark.parametrize("lang", ["c", "cpp"])
def test_inline_chains_agree_with_addr2line_and_llvm_symbolizer(lang):  # noqa: ANN001
    """Checked at every address of .text (what sampling reaches varies with the machine's load: a
    loaded CI once sampled _start) and at the recording's own frames, read through its route."""
    rec = recording(lang)
    exe = rec.program.name
    p = _read(rec.plain, symbols=(str(rec.program.debug.parent),), demangle="none")
    text = ElfFile(str(rec.program.debug)).section(".text")  # PLT stubs have no DWARF: addr2line says ??
    rows = sorted((r for r in _program_rows(p, exe) if text.addr <= int(p.locations.address[r]) < text.addr + text.size),
                  key=lambda r: int(p.locations.address[r]))
    every = _every_text_address(rec.program)
    all_rows = list(range(len(every.locations)))
    assert len(rows) >= 2 and len(all_rows) == text.size
    llvm = find_llvm_symbolizer()
    for q, locs in ((p, rows), (every, all_rows)):
        addresses = [int(q.locations.address[loc]) for loc in locs]
        ours, names = _chains(q, locs)
        # simpleperf's frames above the leaf are return addresses; both tools are asked the same address
        assert ours == _addr2line(rec.program.debug, addresses)
        if llvm is None:
            continue
        out = subprocess.run([llvm, "--no-demangle", "-i", f"--obj={rec.program.debug}"],
                             input="".join(f"{a:#x}\n" for a in addresses), capture_output=True, text=True,
                             timeout=120).stdout
        answers = [blk.splitlines()[0::2] for blk in out.strip("\n").split("\n\n")]
        assert [n[:-1] for n in names] == [a[:-1] for a in answers]  # inlined levels: DWARF names, as llvm
    # the recording's frames are named as the same addresses asked alone (its route adds nothing)
    at = dict(zip(every.locations.address.tolist(), _chains(every, all_rows)[0]))
    assert _chains(p, rows)[0] == [at[int(p.locations.address[r])] for r in rows]
    assert sum(len(chain) > 1 for chain in at.values()) >= 8, "-O2 should have inlined something in .text"


@pytest.mark.parametrize("lang", ["c", "cpp", pytest.param("rust", marks=pytest.mark.slow)])
def test_pure_python_and_llvm_symbolizer_give_identical_answers(lang):  # noqa: ANN001
    if find_llvm_symbolizer() is None:
        pytest.skip("llvm-symbolizer not installed (Debian llvm; bash .ci/run installs it)")
    rec = recording(lang)
    debug = ElfFile(str(rec.program.debug))
    p = _read(rec.plain)
    addresses = set(_sampled_vaddrs(p, rec.program.name))
    if lang != "rust":  # every third byte of the program's own code as well
        text = debug.section(".text")
        addresses |= set(range(text.addr, text.addr + text.size, 3))
    else:  # Rust's std is too big: every byte of the crate's own functions and of _start, whatever was sampled
        own = [(int(a), int(n)) for a, n, name in zip(debug.symbols.start, debug.symbols.size, debug.symbols.names)
               if name == "_start" or re.match(r"_ZN3hot|_R\w*?_3hot", name)]  # legacy or v0 mangling
        assert len(own) >= 3
        addresses |= {a for start, size in own for a in range(start, start + size)}
    for name in (".plt", ".plt.sec", ".plt.got"):  # and every byte of its PLT stubs
        plt = debug.section(name)
        if plt is not None:
            addresses |= set(range(plt.addr, plt.addr + plt.size))
    addresses = sorted(addresses)
    module = Module(debug.build_id, debug=debug)
    python = Resolver("python").resolve(module, addresses)
    llvm = Resolver("llvm").resolve(module, addresses)
    assert python == llvm
    plt = debug.section(".plt")
    if plt is not None and plt.addr + 1 in addresses:  # named as simpleperf names them (llvm-symbolizer alone says _init)
        assert python[plt.addr + 1] == [Frame(function="@plt", file="", line=0, column=0)]
    assert len(llvm) > 0.9 * len(addresses)
    # an unwinder's stray return address outside code (.eh_frame, .rodata, data) stays unnamed by both,
    # as simpleperf leaves it (llvm-symbolizer alone names .eh_frame after __FRAME_END__)
    outside = [a for s in debug.sections if s.addr and s.size and not s.executable
               for a in range(s.addr, s.addr + s.size, 16)]
    assert len(outside) > 100
    assert Resolver("python").resolve(module, outside) == Resolver("llvm").resolve(module, outside) == {}


def _program_addresses(lang: str) -> tuple[ElfFile, list[int]]:
    """The debug file of a test program and every third byte of its own code."""
    debug = ElfFile(str(recording(lang).program.debug))
    text = debug.section(".text")
    return debug, list(range(text.addr, text.addr + text.size, 3))


@pytest.mark.parametrize("lang", ["c", "cpp"])
def test_llvm_symbolizer_sharded_over_processes_answers_as_one_process(lang):  # noqa: ANN001
    exe = find_llvm_symbolizer()
    if exe is None:
        pytest.skip("llvm-symbolizer not installed (Debian llvm; bash .ci/run installs it)")
    debug, addresses = _program_addresses(lang)
    one, three = LlvmPool(exe, jobs=1), LlvmPool(exe, jobs=3, min_shard=1)
    try:
        single, sharded = one.lookup(debug.path, addresses), three.lookup(debug.path, addresses)
        assert len(three.procs) == 3 and len(one.procs) == 1
        assert sharded.to_dict() == single.to_dict() and len(single.to_dict()) > 0.9 * len(addresses)
        # the same processes answer a second batch (long-lived), again alike
        again = three.lookup(debug.path, addresses[::7])
        assert again.to_dict() == {a: f for a, f in single.to_dict().items() if a in set(addresses[::7])}
    finally:
        one.close()
        three.close()


def test_second_run_answers_from_the_result_cache_and_a_corrupt_cache_is_a_miss(tmp_path):  # noqa: ANN001
    debug, addresses = _program_addresses("cpp")
    module = Module(debug.build_id, debug=debug)
    first = Resolver("python", ResultCache(tmp_path))
    fresh = first.resolve(module, addresses[:300])
    first.close()
    second = Resolver("python", ResultCache(tmp_path))
    assert second.resolve(module, addresses[:300]) == fresh and second.cache.hits == 300
    assert "python" not in second.used  # nothing was parsed again
    # a new batch beside the first; both answer, the string tables merged
    both = second.resolve(module, addresses[:400])
    assert {a: f for a, f in both.items() if a in set(addresses[:300])} == fresh
    second.close()
    with sqlite3.connect(tmp_path / "symbols.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 2
        db.execute("UPDATE answers SET data = ?", (b"PPA1 not a blob",))
    third = Resolver("python", ResultCache(tmp_path))
    assert third.resolve(module, addresses[:300]) == fresh and third.cache.hits == 0
    third.close()


@pytest.mark.parametrize("target", ["pprof", "perfetto"])
def test_a_recording_converted_to_another_format_symbolizes_the_same(target, tmp_path):  # noqa: ANN001
    rec = recording("cpp")
    symbols = (str(rec.program.debug.parent),)
    original = _read(rec.plain, symbols=symbols)
    out = tmp_path / f"converted.{target}"
    polyprof.write(_read(rec.plain, symbolize=False), out, format=target)
    converted = polyprof.read(out, format=target, options=ReadOptions(symbols=symbols))
    check(converted)

    def lines(p: polyprof.Profile) -> list:
        return [[[(p.function_name(int(p.lines.function[r])), int(p.lines.line[r])) for r in p.locations.lines_of(loc)]
                 for loc in p.stack_locations(i)] for i in range(len(p.samples)) if p.samples.stack[i] >= 0]

    assert sorted(map(str, lines(converted))) == sorted(map(str, lines(original)))


# ---------------------------------------------------------------- load bias with real mappings


def _maps(pid: int, path: Path) -> list[tuple[int, int, int, str]]:
    out = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[5] == str(path):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append((lo, hi, int(parts[2], 16), parts[1]))
    return out


def _runtime(elf: ElfFile, start: int, offset: int, vaddr: int) -> int:
    seg = next(s for s in elf.segments if s.offset <= offset < s.offset + max(s.filesz, 1)
               or (s.offset & ~0xFFF) == offset)
    return start + (vaddr - seg.vaddr) + (seg.offset - offset)


@pytest.mark.parametrize("lang", ["c", "nopie"])
def test_runtime_addresses_of_a_running_process(lang, tmp_path):  # noqa: ANN001
    prog = program(lang)
    proc = subprocess.Popen([str(prog.run), "3"])
    try:
        deadline = time.time() + 10
        while not _maps(proc.pid, prog.run) and time.time() < deadline:
            time.sleep(0.05)
        maps = _maps(proc.pid, prog.run)
    finally:
        proc.kill()
        proc.wait()
    full = ElfFile(str(prog.bin))
    syms = {n: int(s) for n, s in zip(full.symbols.names, full.symbols.start)}
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    code = next(m for m in maps if "x" in m[3])
    m = b.mapping(code[0], code[1], code[2], str(prog.run), prog.build_id)
    want = {}
    for name in ("churn", "main"):
        address = _runtime(full, code[0], code[2], syms[name] + 4)
        assert code[0] <= address < code[1]
        want[name] = b.location(m, address)
    b.add_sample(b.stack([want["churn"], want["main"]]), [1])
    path = tmp_path / "runtime.pb.gz"
    polyprof.write(b.finish(), path)
    p = _read(path, symbols=(str(prog.debug.parent),))
    names = [p.function_name(int(p.lines.function[r])) for loc in p.stack_locations(0)
             for r in p.locations.lines_of(loc)]
    assert names[0] == "churn" and names[-1] == "main"


def _aligned_zip(apk: Path, member: str, data: bytes) -> int:
    """An APK-like zip with ``member`` stored page-aligned (as Android requires); its data offset."""
    with zipfile.ZipFile(apk, "w") as z:
        z.writestr("AndroidManifest.xml", b"<manifest/>")
        header = 30 + len(member)
        at = z.fp.tell()  # type: ignore[union-attr]
        pad = (-(at + header + 4)) % 4096
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_STORED
        info.extra = b"\xfe\xca" + pad.to_bytes(2, "little") + b"\0" * pad  # an alignment field, as zipalign
        z.writestr(info, data)
    with zipfile.ZipFile(apk) as z:
        info = z.getinfo(member)
    from polyprof.symbolize.locate import _data_offset

    offset = _data_offset(str(apk), info)
    assert offset % 4096 == 0
    return offset


@pytest.mark.parametrize("with_apk", [True, False])
def test_a_library_mapped_from_inside_an_apk(with_apk, tmp_path):  # noqa: ANN001
    lib = program("lib")
    full = ElfFile(str(lib.bin))
    apk_dir = tmp_path / "symbols"
    apk_dir.mkdir()
    apk = apk_dir / "base.apk"
    apk_offset = _aligned_zip(apk, "lib/x86_64/libhot.so", lib.run.read_bytes())
    code = next(s for s in full.segments if s.executable)
    start = 0x7A0000000000
    offset = apk_offset + (code.offset & ~0xFFF)
    churn = next(int(s) for n, s in zip(full.symbols.names, full.symbols.start) if n == "churn")
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(start, start + 0x10000, offset, "/data/app/com.example-1/base.apk", lib.build_id)
    b.add_sample(b.stack([b.location(m, start + churn + 4 - code.vaddr + code.offset - (code.offset & ~0xFFF))]), [1])
    if not with_apk:  # only the library itself, as an NDK build leaves it
        apk.unlink()
        shutil.copy(lib.debug, apk_dir / "libhot.so.debug")
    q, report = symbolize(b.finish(), Sources(paths=(str(apk_dir), str(lib.debug.parent))))
    names = [q.function_name(int(q.lines.function[r])) for r in q.locations.lines_of(0)]
    assert names[-1] == "churn", report
    assert ("base.apk!/lib/x86_64/libhot.so" in report.mappings[0].source) == with_apk


def test_report_names_the_files_to_provide_when_symbols_are_missing(capsys):  # noqa: ANN001
    from polyprof.cli.main import main

    rec = recording("c")
    out = root() / "c.sym.trace"
    assert main(["symbolize", str(rec.plain), "-o", str(out), "--format", "json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)["symbolization"]
    entry = next(m for m in report["mappings"] if m["file"].endswith("/hot_c"))
    # the stripped binary itself was found at its path: names from nowhere (no symbols) but no crash
    assert entry["frames"] > 0 and entry["symbolized_after"] < entry["frames"]
    assert main(["symbolize", str(rec.plain), "-o", str(out), str(rec.program.debug.parent)]) == 0
    text = capsys.readouterr().err
    found = re.search(r"found +\S+/hot_c: (\d+) -> (\d+) of (\d+) frames; binary \S+/run/hot_c \(the mapping's "
                      r"own path\); debug file \S+/debug/hot_c.debug", text)
    assert found, text
    # all that simpleperf names itself (a stray return address outside code stays unnamed for both)
    assert [int(found[1]), int(found[2]), int(found[3])] == [
        _named_rows(_read(rec.plain), "hot_c"), _named_rows(_read(rec.self_symbolized), "hot_c"), entry["frames"]]


def test_minidebuginfo_names_functions_of_a_stripped_binary(tmp_path):  # noqa: ANN001
    """A binary stripped but carrying .gnu_debugdata (an xz-compressed .symtab), as Fedora and
    Android ship them: function names without DWARF."""
    import lzma

    prog = program("c")
    objcopy = shutil.which("objcopy")
    mini = tmp_path / "mini.debug"
    subprocess.run([objcopy, "-S", "--remove-section", ".comment", "--keep-symbol=churn", "--keep-symbol=main",
                    str(prog.debug), str(mini)], check=True, capture_output=True, timeout=60)
    xz = tmp_path / "mini.xz"
    xz.write_bytes(lzma.compress(mini.read_bytes()))
    binary = tmp_path / "hot_c"
    subprocess.run([objcopy, "--add-section", f".gnu_debugdata={xz}", str(prog.run), str(binary)], check=True,
                   capture_output=True, timeout=60)
    elf = ElfFile(str(binary))
    assert elf.section(".symtab") is None and elf.minidebuginfo is not None
    full = ElfFile(str(prog.bin))
    churn = next(int(s) for n, s in zip(full.symbols.names, full.symbols.start) if n == "churn")
    b = ProfileBuilder("simpleperf")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, str(binary), "")
    b.add_sample(b.stack([b.location(m, churn + 4)]), [1])
    q, report = symbolize(b.finish(), Sources(use_env=False, system_dirs=()))  # found at its own path
    assert [q.function_name(int(f)) for f in q.lines.function] == ["churn"]
    assert report.mappings[0].after == 1


@pytest.mark.parametrize("layout", ["<build id>/<name>", "ab/cdef.debug", "<name>"])
def test_pprof_binary_path(layout, tmp_path, monkeypatch):  # noqa: ANN001
    prog = program("c")
    bid = prog.build_id
    target = tmp_path / {"<build id>/<name>": f"{bid}/hot_c", "ab/cdef.debug": f"{bid[:2]}/{bid[2:]}.debug",
                         "<name>": "hot_c"}[layout]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(prog.debug, target)
    monkeypatch.setenv("PPROF_BINARY_PATH", f"/nonexistent:{tmp_path}")
    b = ProfileBuilder("simpleperf")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, "/device/only/hot_c", bid)
    b.add_sample(b.stack([b.location(m, _churn_address(prog))]), [1])
    q, report = symbolize(b.finish(), Sources(system_dirs=()))
    assert q.function_name(int(q.lines.function[-1])) == "churn"
    assert f"binary path {tmp_path}" in report.mappings[0].source


def _churn_address(prog) -> int:  # noqa: ANN001
    full = ElfFile(str(prog.bin))
    return next(int(s) for n, s in zip(full.symbols.names, full.symbols.start) if n == "churn") + 4
