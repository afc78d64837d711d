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
