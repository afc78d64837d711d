"""Answers as columns (symbolize/answers.py) and llvm-symbolizer's output parsed in bulk."""

from __future__ import annotations

import numpy as np
import pytest

from polyprof.symbolize.answers import Answers
from polyprof.symbolize.elf import _dedup
from polyprof.symbolize.frames import Frame
from polyprof.symbolize.llvm import LlvmSymbolizerError, parse_output

CHAINS = [[Frame("inner", "/a.h", 3, 1), Frame("outer", "/a.cc", 9, 2)], [], [Frame("solo", "", 0, 0)]]


def test_columns_round_trip_through_frames_concat_lookup_and_the_packed_blob():
    a = Answers.from_frames([0x10, 0x20, 0x30], CHAINS)
    assert [a.frames(i) for i in range(3)] == CHAINS
    assert a.to_dict() == {0x10: CHAINS[0], 0x30: CHAINS[2]}
    b = Answers.from_frames([0x40, 0x10], [[Frame("later", "/b.cc", 1, 0)], [Frame("newer", "/c.cc", 2, 0)]])
    both = Answers.concat([a, b])
    found, hit = both.lookup(np.array([0x30, 0x99, 0x10, 0x40], dtype=np.uint64))
    assert hit.tolist() == [True, False, True, True]
    assert [found.frames(i) for i in range(4)] == [CHAINS[2], [], [Frame("newer", "/c.cc", 2, 0)],
                                                   [Frame("later", "/b.cc", 1, 0)]]  # the last answer wins
    again = Answers.unpack(both.pack())
    assert again.to_dict() == both.to_dict() and again.strings == both.strings
    for bad in (b"", b"PPA1" + bytes(24), both.pack()[:-3], b"XXXX" + both.pack()[4:]):
        with pytest.raises(ValueError):
            Answers.unpack(bad)


def test_symbol_names_go_on_the_outermost_frame_and_fill_empty_answers():
    a = Answers.from_frames([1, 2, 3], [[Frame("in", "", 5, 0), Frame("out", "", 6, 0)], [], [Frame("x", "/f", 1, 0)]])
    named = a.name_outermost(np.array([True, True, False]), ["sym1", "sym2"], ["/s1", "/s2"])
    assert [named.frames(i) for i in range(3)] == [
        [Frame("in", "", 5, 0), Frame("sym1", "/s1", 6, 0)], [Frame("sym2", "/s2", 0, 0)], [Frame("x", "/f", 1, 0)]]
    # where the symbol's own file is asked for (a PLT stub), it replaces the frame's file too
    b = Answers.from_frames([1, 2], [[Frame("_fini", "crtstuff.c", 0, 0)], [Frame("_fini", "crtstuff.c", 0, 0)]])
    named = b.name_outermost(np.array([True, True]), ["@plt", "f"], ["", "/s"], own_file=np.array([True, False]))
    assert [named.frames(i) for i in range(2)] == [[Frame("@plt", "", 0, 0)], [Frame("f", "crtstuff.c", 0, 0)]]


def test_llvm_output_parsed_in_bulk():
    out = (b"_Z5innerv\n/src/a.h:3:7\n_Z5outerv\n/src/a.cc:10:0\n\n"
           b"??\n??:0:0\n\n"
           b"main\n/src/m.c:4:1\n\n")
    got = parse_output(out, np.array([1, 2, 3], dtype=np.uint64))
    assert got.to_dict() == {1: [Frame("_Z5innerv", "/src/a.h", 3, 7), Frame("_Z5outerv", "/src/a.cc", 10, 0)],
                             3: [Frame("main", "/src/m.c", 4, 1)]}
    with pytest.raises(LlvmSymbolizerError):
        parse_output(out, np.array([1, 2], dtype=np.uint64))  # answers and addresses must pair up


def test_a_size_zero_symbol_covers_up_to_the_next_symbol_but_not_past_its_section() -> None:
    # _init (size 0) in .init, then a sized function, then __FRAME_END__ (size 0) at the end of
    # .eh_frame, whose section ends where it starts: a PLT stub after it stays unnamed
    syms = _dedup(np.array([0x1000, 0x1100, 0x3000], np.uint64), np.array([0, 0x20, 0], np.uint64),
                  ["_init", "work", "__FRAME_END__"], ["", "", ""],
                  np.array([0x1020, 0x2000, 0x3000], np.uint64))
    assert syms.lookup(0x1010) == ("_init", "")
    assert syms.lookup(0x1030) is None  # past .init, before work
    assert syms.lookup(0x1110) == ("work", "")
    assert syms.lookup(0x1120) is None  # past work's size
    assert syms.lookup(0x3008) is None  # past __FRAME_END__'s section
    assert syms.lookup_many([0x1010, 0x1030, 0x3008]) == [("_init", ""), None, None]


def test_output_parsed_in_pieces_is_the_output_parsed_at_once():
    from polyprof.symbolize.llvm import _Parser

    answers = [b"_Z5innerv\n/src/a.h:3:7\n_Z5outerv\n/src/a.cc:10:0\n\n", b"??\n??:0:0\n\n", b"main\n/src/m.c:4:1\n\n",
               b"_Z5outerv\n/src/b.cc:1:2\n\n", b"\xff\xfebad\n/src/\xc3\xa9.c:7:0\n\n", b"main\n??:0:0\n\n"]
    addresses = np.arange(1, len(answers) + 1, dtype=np.uint64)
    whole = parse_output(b"".join(answers), addresses)
    assert whole.frames(4) == [Frame("\ufffd\ufffdbad", "/src/\u00e9.c", 7, 0)]
    for cuts in ([1], [2, 4], [1, 2, 3, 4, 5], [5]):
        parser = _Parser(addresses)
        for a, b in zip([0, *cuts], [*cuts, len(answers)]):
            parser.feed(b"".join(answers[a:b]))
        pieces = parser.answers()
        assert pieces.strings == whole.strings, cuts  # the same table, in the same order
        assert pieces.to_dict() == whole.to_dict() and pieces.function.tolist() == whole.function.tolist()
    parser = _Parser(addresses[:2])
    with pytest.raises(LlvmSymbolizerError):
        parser.feed(b"".join(answers[:3]))  # more answers than addresses


def test_llvm_symbolizer_read_in_small_pieces_answers_the_same(monkeypatch):  # noqa: ANN001
    from native_programs import program

    from polyprof.symbolize import llvm
    from polyprof.symbolize.elf import ElfFile

    exe = llvm.find_llvm_symbolizer()
    if exe is None:
        pytest.skip("llvm-symbolizer not installed (Debian llvm; bash .ci/run installs it)")
    debug = ElfFile(str(program("cpp").debug))
    text = debug.section(".text")
    addresses = np.arange(text.addr, text.addr + text.size, 3, dtype=np.uint64)
    with llvm.LlvmSymbolizer(exe) as one:
        whole = parse_output(one.raw(debug.path, addresses), addresses)
        monkeypatch.setattr(llvm, "PIECE", 256)  # many pieces, cut wherever a read ends
        pieces = one.answers(debug.path, addresses)
    assert pieces.strings == whole.strings and pieces.to_dict() == whole.to_dict() and len(whole.to_dict()) > 100


@pytest.mark.parametrize("engine", ["llvm", "python"])
def test_names_demangled_ahead_of_the_fill_give_the_same_profile(engine, tmp_path, monkeypatch):  # noqa: ANN001
    from native_programs import program

    import polyprof
    from polyprof.model.builder import ProfileBuilder
    from polyprof.symbolize import Sources, apply, symbolize
    from polyprof.symbolize.elf import ElfFile

    if engine == "llvm" and not __import__("shutil").which("llvm-symbolizer"):
        pytest.skip("llvm-symbolizer not installed (Debian llvm; bash .ci/run installs it)")
    prog = program("cpp")
    text = ElfFile(str(prog.debug)).section(".text")
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, str(prog.bin), prog.build_id)
    b.add_sample(b.stack([b.location(m, a) for a in range(text.addr, text.addr + text.size, 5)]), [1])
    raw = b.finish()
    monkeypatch.setenv("POLYPROF_CACHE_DIR", str(tmp_path))
    src = Sources(paths=(str(prog.debug.parent),), engine=engine, use_env=False, system_dirs=(), cache=False)

    def names(p: polyprof.Profile) -> list[tuple[str, str]]:
        return [(p.function_name(int(f)), p.strings[p.functions.system_name[int(f)]]) for f in p.lines.function]

    later = names(symbolize(raw, src)[0])
    monkeypatch.setattr(apply, "AHEAD", 1)  # every mapping's names go to c++filt before the fill
    assert names(symbolize(raw, src)[0]) == later
    assert sum(n != s for n, s in later) > 10  # C++ names were demangled


@pytest.mark.parametrize("script,problem", [
    ("read a; printf 'f\\n/x.c:1:0\\n\\n'; read b; exit 3\n", "exited while symbolizing"),
    ("while read a; do printf 'f\\n\\n'; done\n", "not pairs"),  # an answer of one line
])
def test_a_failing_llvm_symbolizer_is_an_error_in_every_shard_never_a_hang(script, problem, tmp_path):  # noqa: ANN001
    from polyprof.symbolize.llvm import LlvmPool

    exe = tmp_path / "llvm-symbolizer"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    pool = LlvmPool(str(exe), jobs=2, min_shard=1)
    try:
        with pytest.raises(LlvmSymbolizerError, match=problem):
            pool.lookup("/no/such.debug", range(0x1000, 0x1000 + 40))
        assert len(pool.procs) == 2
    finally:
        pool.close()
