"""Demangling: C++ (Itanium), Rust (legacy and v0), Swift; pprof's modes; every format.

``fixtures/symbolize/demangle.tsv`` holds the expected spellings: the full
form is c++filt's (GNU binutils; for Rust the rustfilt form, without the
legacy hash and the v0 crate disambiguators), the ``templates`` and
``simple`` forms pprof's. When c++filt is installed, the stored full forms
are checked against it again, so the text cannot drift.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import polyprof
from polyprof.cli.common import DEMANGLE_MODES
from polyprof.formats.options import ReadOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.symbolize import DEMANGLE_MODES as MODES
from polyprof.symbolize.demangle import demangle_name, demangle_profile

TABLE = Path(__file__).resolve().parent / "fixtures" / "symbolize" / "demangle.tsv"
ROWS = [line.split("\t") for line in TABLE.read_text().splitlines() if line and not line.startswith("#")]


def test_the_cli_spells_the_modes_of_the_library():
    assert DEMANGLE_MODES == MODES


@pytest.mark.parametrize("mangled,full,templates,simple", ROWS, ids=[r[0][:60] for r in ROWS])
def test_each_mode(mangled, full, templates, simple):  # noqa: ANN001
    assert demangle_name(mangled, "full") == full
    assert demangle_name(mangled, "templates") == templates
    assert demangle_name(mangled, "simple") == simple
    assert demangle_name(mangled, "none") == mangled


def test_the_table_still_agrees_with_cxxfilt():
    exe = shutil.which("c++filt")
    if exe is None:
        pytest.skip("c++filt not installed (binutils)")
    out = subprocess.run([exe], input="\n".join(r[0] for r in ROWS) + "\n", capture_output=True, text=True,
                         timeout=60).stdout.splitlines()
    for (mangled, full, _, _), theirs in zip(ROWS, out):
        if mangled.startswith("_R"):
            theirs = re.sub(r"\[[0-9a-f]+\]", "", theirs)  # v0 crate disambiguators, which rustfilt omits
        elif re.search(r"17h[0-9a-f]{16}E", mangled):
            theirs = re.sub(r"::h[0-9a-f]{16}", "", theirs)  # the legacy hash, which rustfilt omits
        else:
            theirs = re.sub(r"(?:\s*\[clone [^\]]*\])+$", "", theirs)  # pprof's full mode drops clones
        assert full == theirs, mangled
    assert sum(r[0].startswith("_R") for r in ROWS) >= 5 and sum("17h" in r[0] for r in ROWS) >= 10


def test_swift_as_its_own_demangler_prints_it():
    assert demangle_name("$s10Foundation4DataV5countSivg", "full") == "Foundation.Data.count.getter : Swift.Int"


def _profile(names: list[tuple[str, str]]) -> polyprof.Profile:
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, "a.out", "")
    b.add_sample(b.stack([b.location(m, 16 * i, [(b.function(n, s), 0, 0)]) for i, (n, s) in enumerate(names)]), [1])
    return b.finish()


def _names(p: polyprof.Profile) -> list[tuple[str, str]]:
    return [(p.function_name(int(f)), p.strings[p.functions.system_name[int(f)]]) for f in p.lines.function]


FOLD = "_ZN6shapes4foldImEET_RKSt6vectorIS1_SaIS1_EEi"


def test_default_demangles_only_what_is_not_demangled_yet():
    p = _profile([(FOLD, FOLD), ("", FOLD), ("kept as the profile says", FOLD), ("a::b<c>(d)", "a::b<c>(d)")])
    q = demangle_profile(p, "simple")
    assert _names(q) == [("shapes::fold", FOLD), ("shapes::fold", FOLD), ("kept as the profile says", FOLD),
                         ("a::b<c>(d)", "a::b<c>(d)")]
    assert q.samples.stack.tolist() == p.samples.stack.tolist()


def test_an_explicit_mode_redemangles_everything():
    p = _profile([("kept as the profile says", FOLD), ("a::b<c>(d)", "a::b<c>(d)"), (FOLD, "")])
    assert _names(demangle_profile(p, "templates", force=True)) == [
        ("shapes::fold<unsigned long>", FOLD), ("a::b<c>", "a::b<c>(d)"), ("shapes::fold<unsigned long>", FOLD)]
    assert _names(demangle_profile(demangle_profile(p, "full", force=True), "none", force=True))[0] == (FOLD, FOLD)


def test_demangle_flag_on_every_verb(tmp_path, capsys):  # noqa: ANN001
    from polyprof.cli.main import main

    path = tmp_path / "mangled.pb.gz"
    polyprof.write(_profile([(FOLD, FOLD)]), path)
    expect = {None: "shapes::fold", "templates": "shapes::fold<unsigned long>", "none": FOLD,
              "full": "unsigned long shapes::fold<unsigned long>(std::vector<unsigned long, "
                      "std::allocator<unsigned long> > const&, int)"}
    for mode, name in expect.items():
        for verb in ("top", "traces", "tree"):
            argv = [verb, str(path)] + (["--demangle", mode] if mode else [])
            assert main(argv) == 0
            assert name in capsys.readouterr().out, (verb, mode)
    assert polyprof.read(path, options=ReadOptions(demangle="none")).function_name(0) == FOLD


def test_simpleperf_mangled_symbols_follow_the_mode():
    from native_programs import recording

    rec = recording("cpp")
    names = {mode: {n for n, _ in _names(polyprof.read(rec.self_symbolized, options=ReadOptions(demangle=mode)))}
             for mode in ("simple", "full")}
    assert "shapes::fold" in names["simple"]
    assert any(n.startswith("unsigned long shapes::fold<unsigned long>(") for n in names["full"])


@pytest.mark.parametrize("engine", ["c++filt", "pure Python"])
def test_batches_give_the_table_with_either_demangler(engine, monkeypatch):  # noqa: ANN001
    from polyprof.symbolize import demangle as d

    if engine == "c++filt" and shutil.which("c++filt") is None:
        pytest.skip("c++filt not installed (binutils)")
    monkeypatch.setenv("POLYPROF_CXXFILT", "c++filt" if engine == "c++filt" else "")
    monkeypatch.setattr(d, "_DONE", {})
    for column, mode in ((1, "full"), (2, "templates"), (3, "simple")):
        got = d.demangle_names([r[0] for r in ROWS], mode)
        assert {r[0]: got[r[0]] for r in ROWS} == {r[0]: r[column] for r in ROWS}, mode


def test_names_demangled_once_are_kept_in_the_symbol_cache(tmp_path):  # noqa: ANN001
    from polyprof.symbolize import demangle
    from polyprof.symbolize.cache import ResultCache

    names = ["_ZN2ns3fooIiEEvT_", "_ZNSt6vectorIiSaIiEE9push_backERKi", "plain"]
    first = ResultCache(tmp_path)
    demangle._DONE.clear()
    fresh = demangle.demangle_names(names, "simple", first)
    assert fresh == {"_ZN2ns3fooIiEEvT_": "ns::foo", "_ZNSt6vectorIiSaIiEE9push_backERKi": "std::vector::push_back"}
    first.close()
    # a later run takes them from the cache: a planted answer shows the memo was read, not recomputed
    second = ResultCache(tmp_path)
    second.put_names(f"simple:{demangle.RULES}", {"_ZN2ns3fooIiEEvT_": "from the cache"})
    demangle._DONE.clear()
    again = demangle.demangle_names(names, "simple", second)
    assert again == {**fresh, "_ZN2ns3fooIiEEvT_": "from the cache"}
    assert demangle.demangle_names(names, "full", second)["_ZN2ns3fooIiEEvT_"] == "void ns::foo<int>(int)"
    second.close()
    demangle._DONE.clear()


TRICKY = ["bool operator<<(std::ostream&, ns::A<int> const&)", "ns::B<int>::operator()(int) const",
          "void std::sort<{lambda(int, int)#1}>(int*, int*, {lambda(int, int)#1})",
          "(anonymous namespace)::f<(anonymous namespace)::T>(int) &&", "unbalanced<int(", "a\0b(int)",
          "operator new(unsigned long)", "ns::f(int)::{lambda()#2}::operator()() const", "plain"]


def test_the_batched_regex_path_is_the_careful_path_name_by_name():
    from polyprof.symbolize import cxxnames as c
    from polyprof.symbolize.demangle import _scheme

    fulls = [r[1] for r in ROWS if _scheme(r[0]) == "itanium"] + TRICKY
    batch = c._simple_fast(fulls)
    assert batch == [c._simple_fast([f])[0] for f in fulls]  # a name's neighbours in the batch never matter
    assert sum(b is not None for b in batch) >= len(fulls) - 3  # the fast path takes nearly all of them
    assert all(b == c._simplify_careful(f, False) for f, b in zip(fulls, batch) if b is not None)
    assert c.simplify_all(fulls, keep_templates=False) == [c._simplify_careful(f, False) for f in fulls]
    assert c.simplify_all(["x\ny<int>(int)"], keep_templates=False) == [c._simplify_careful("x\ny<int>(int)", False)]


def test_demangling_started_ahead_gives_the_same_profile(monkeypatch):  # noqa: ANN001
    from polyprof.symbolize import demangle as d

    p = _profile([(r[0], r[0]) for r in ROWS] + [("kept as the profile says", FOLD), ("a::b<c>(d)", "a::b<c>(d)")])
    for mode, force in (("simple", False), ("simple", True), ("templates", True), ("full", True), ("none", True)):
        monkeypatch.setattr(d, "_DONE", {})
        plain = _names(d.demangle_profile(p, mode, force=force))
        monkeypatch.setattr(d, "_DONE", {})
        ahead = [d.Demangling([r[0] for r in ROWS[: len(ROWS) // 2]], mode)]  # half of them ahead, the rest later
        assert _names(d.demangle_profile(p, mode, force=force, ahead=ahead)) == plain, mode


def test_name_batches_are_written_in_the_background_and_folded(tmp_path, monkeypatch):  # noqa: ANN001
    import sqlite3

    from polyprof.symbolize import cache as c

    monkeypatch.setattr(c, "MAX_BATCHES", 3)
    for run in range(5):  # one process after another: each adds a batch, some overwrite older names
        memo = c.ResultCache(tmp_path)
        assert memo.names("simple:1", ["_Zshared", f"_Zrun{run - 1}"]) == (
            {"_Zshared": f"shared {run - 1}", f"_Zrun{run - 1}": f"run {run - 1}"} if run else {})
        memo.put_names("simple:1", {"_Zshared": f"shared {run}", f"_Zrun{run}": f"run {run}"})
        assert memo.names("simple:1", ["_Zshared"]) == {"_Zshared": f"shared {run}"}  # at once, before the write
        memo.close()  # waits for the background write
    with sqlite3.connect(tmp_path / "symbols.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM demangled").fetchone()[0] <= 3
    last = c.ResultCache(tmp_path)
    assert last.names("simple:1", [f"_Zrun{i}" for i in range(5)]) == {f"_Zrun{i}": f"run {i}" for i in range(5)}
    assert last.names("full:1", ["_Zshared"]) == {}
    last.close()
