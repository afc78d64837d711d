"""Symbolization with Breakpad symbol files: debug ids, .sym parsing, lookup, the store, profiles."""

from __future__ import annotations

import shutil

import pytest
from helpers import small_peer_profiles
from test_chromium_support import SYMBOLS, fixture_bytes

import polyprof
from polyprof.errors import MalformedInputError, OptionsError
from polyprof.formats.options import ReadOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.profile import MAPPING_HAS_FUNCTIONS, MAPPING_HAS_INLINE_FRAMES
from polyprof.model.validate import check
from polyprof.symbolize import SymbolStore, symbolize
from polyprof.symbolize.breakpad import parse, parse_lines
from polyprof.symbolize.debugid import candidates, elf_debug_id

LINUX_SYM = SYMBOLS / "chrome" / "C215077FF8866CB110E4AD349CDA3B9B0" / "chrome.sym"
WIN_SYM = SYMBOLS / "chrome.dll.pdb" / "16B2A4281DED442E9A36FCE8CBD29726A" / "chrome.dll.sym"


# ---- debug ids (spec 4.4; Chromium module_cache_unittest) ----------------------

def test_elf_build_id_to_breakpad_debug_id() -> None:
    assert elf_debug_id("7F0715C286F8B16C10E4AD349CDA3B9B56C7A773") == "C215077FF8866CB110E4AD349CDA3B9B0"
    assert elf_debug_id("7f0715c286f8b16c10e4ad349cda3b9b56c7a773") == "C215077FF8866CB110E4AD349CDA3B9B0"


def test_short_build_id_is_padded_with_zeros() -> None:
    # an 8-byte build id: the first 16 bytes, zero padded, then swapped
    assert elf_debug_id("0011223344556677") == "33221100554477660000000000000000" + "0"


def test_uma_elf_id_with_age_suffix_converts() -> None:
    assert candidates("7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730")[0] == "C215077FF8866CB110E4AD349CDA3B9B0"


def test_windows_decimal_age_becomes_hex() -> None:
    assert candidates("16B2A4281DED442E9A36FCE8CBD2972610")[0] == "16B2A4281DED442E9A36FCE8CBD29726A"
    assert "16B2A4281DED442E9A36FCE8CBD297261" in candidates("16B2A4281DED442E9A36FCE8CBD297261")


def test_breakpad_id_is_tried_as_is() -> None:
    assert candidates("C215077FF8866CB110E4AD349CDA3B9B0")[0] == "C215077FF8866CB110E4AD349CDA3B9B0"
    assert candidates("") == []


# ---- .sym parsing and lookup ---------------------------------------------------

@pytest.fixture(scope="module")
def linux() -> object:
    return parse(str(LINUX_SYM))


def test_module_record(linux) -> None:  # noqa: ANN001
    assert (linux.os, linux.arch, linux.debug_id, linux.name) == \
        ("Linux", "x86_64", "C215077FF8866CB110E4AD349CDA3B9B0", "chrome")


def test_func_and_line_records(linux) -> None:  # noqa: ANN001
    assert linux.lookup(0x1000) == [("ChromeMain", "../../chrome/app/chrome_main.cc", 52)]
    assert linux.lookup(0x103F) == [("ChromeMain", "../../chrome/app/chrome_main.cc", 60)]
    assert linux.lookup(0x1210) == [("base::RunLoop::Run(base::Location const&)", "../../base/run_loop.cc", 140)]


def test_inline_records_give_inner_frames_first(linux) -> None:  # noqa: ANN001
    outer = ("content::BrowserMainLoop::RunMainMessageLoop()", "../../content/browser/browser_main_loop.cc", 1024)
    add_ref = ("scoped_refptr<base::SequencedTaskRunner>::AddRef()", "../../base/memory/scoped_refptr.h", 118)
    impl = ("base::subtle::RefCountedThreadSafeBase::AddRefImpl() const", "../../base/memory/ref_counted.h", 40)
    assert linux.lookup(0x1124) == [add_ref, outer]
    assert linux.lookup(0x112A) == [impl, add_ref, outer]
    assert linux.lookup(0x1130) == [("content::BrowserMainLoop::RunMainMessageLoop()",
                                     "../../content/browser/browser_main_loop.cc", 1024)]


def test_public_records_and_misses(linux) -> None:  # noqa: ANN001
    assert linux.lookup(0x2010)[0][0].startswith("base::sequence_manager::internal::ThreadController")
    assert linux.lookup(0x3100) == [("__libc_start_call_main", "", 0)]
    assert linux.lookup(0x1050) is None  # past ChromeMain, no PUBLIC below
    assert linux.lookup(0x10) is None


def test_old_inline_format_with_origin_file_ids() -> None:
    win = parse(str(WIN_SYM))
    assert win.lookup(0x4055) == [
        ("logging::CheckError::~CheckError()", "c:\\b\\s\\w\\ir\\cache\\builder\\src\\base\\check.h", 12),
        ("ChromeMain", "c:\\b\\s\\w\\ir\\cache\\builder\\src\\chrome\\app\\chrome_main.cc", 31)]
    assert win.lookup(0x5010) == [("_purecall", "", 0)]


def test_public_does_not_cover_a_func_above_it() -> None:
    sym = parse_lines(["PUBLIC 100 0 pub", "FUNC 200 10 0 f", "FUNC 400 10 0 g"])
    assert sym.lookup(0x150) == [("pub", "", 0)]
    assert sym.lookup(0x205) == [("f", "", 0)]
    assert sym.lookup(0x300) is None  # nearest FUNC below (f) is above the PUBLIC


def test_only_wanted_funcs_are_kept() -> None:
    sym = parse(str(LINUX_SYM), addresses=[0x1210])
    assert [f.name for f in sym.funcs] == ["base::RunLoop::Run(base::Location const&)"]
    assert sym.lookup(0x1210)[0][1] == "../../base/run_loop.cc"
    assert sym.lookup(0x2010) is not None  # PUBLIC records are always kept


def test_unknown_record_kinds_are_counted_and_skipped() -> None:
    sym = parse_lines(["MODULE Linux x86 ABC0 m", "FUTURE_THING 1 2 3", "FUNC 10 10 0 f", "10 10 3 0"])
    assert sym.skipped_records == 1
    assert sym.lookup(0x12) == [("f", "", 3)]


@pytest.mark.parametrize("lines, where", [
    (["FUNC zz 10 0 f"], "line 1"),
    (["FUNC 10 10 0"], "line 1"),
    (["MODULE Linux x86"], "line 1"),
    (["FILE x name"], "line 1"),
    (["MODULE Linux x86 ABC0 m", "10 10 3 0"], "line 2"),
    (["FUNC 10 10 0 f", "10 10 3"], "line 2"),
    (["FUNC 10 10 0 f", "10 10 -3 0"], "line 2"),
    (["FUNC 10 10 0 f", "INLINE 0 1 0 10"], "line 2"),
    (["INLINE 0 1 0 10 2"], "line 1"),
    (["INLINE_ORIGIN 1"], "line 1"),
    (["PUBLIC 10 zz name"], "line 1"),
    (["FUNC 10 10 0 f", "not a record at all"], "line 2"),
    (["FUNC 10000000000000000 10 0 f"], "line 1"),
])
def test_malformed_symbol_lines(lines: list[str], where: str) -> None:
    with pytest.raises(MalformedInputError, match=where) as info:
        parse_lines(lines, "bad.sym")
    assert "\n" not in str(info.value) and str(info.value).startswith("bad.sym: breakpad:")


# ---- the store ----------------------------------------------------------------

def test_store_finds_by_name_and_uma_build_id() -> None:
    store = SymbolStore(SYMBOLS)
    found = store.find("chrome", "7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730")
    assert found == (str(LINUX_SYM), "chrome", "C215077FF8866CB110E4AD349CDA3B9B0")
    assert store.find("chrome", "00") is None


def test_store_finds_by_name_hash_placeholder() -> None:
    from polyprof.formats.chromium.names import module_name_hash, module_placeholder

    store = SymbolStore(SYMBOLS)
    placeholder = module_placeholder(module_name_hash("chrome.dll.pdb"))
    found = store.find(placeholder, "16B2A4281DED442E9A36FCE8CBD2972610")
    assert found[0] == str(WIN_SYM) and found[1] == "chrome.dll.pdb"
    assert store.names() == ["chrome", "chrome.dll.pdb"]


def test_store_finds_by_id_when_the_name_differs() -> None:
    store = SymbolStore(SYMBOLS)
    assert store.find("/opt/google/chrome/chrome-renamed", "7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730")


def test_missing_symbol_directory_is_an_options_error(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(OptionsError, match="symbol directory"):
        SymbolStore(tmp_path / "nope")


# ---- symbolizing profiles -------------------------------------------------------

def frames_of(p: polyprof.Profile, sample: int) -> list[list[str]]:
    out = []
    for loc in p.stack_locations(sample):
        names = [p.function_name(int(p.lines.function[r])) for r in p.locations.lines_of(loc)]
        out.append(names)
    return out


def test_symbolize_a_uma_profile() -> None:
    p = polyprof.read_all(fixture_bytes("uma_log.textproto"))[0]
    q, stats = symbolize(p, SYMBOLS)
    check(q)
    assert frames_of(q, 0) == [
        ["base::subtle::RefCountedThreadSafeBase::AddRefImpl() const",
         "scoped_refptr<base::SequencedTaskRunner>::AddRef()", "content::BrowserMainLoop::RunMainMessageLoop()"],
        ["base::RunLoop::Run(base::Location const&)"], ["ChromeMain"], []]
    assert frames_of(q, 3)[2] == []  # 0x1050: no symbol, stays an address frame
    assert (stats.frames, stats.symbolized) == (7, 5)
    assert [(m.file, m.build_id) for m in stats.missing] == [("libc.so.6", "5A0C2A7C1E6F4E2B8D9E0F1A2B3C4D5E6F7081920")]
    assert stats.missing[0].looked_for[:2] == [".build-id/5a/0c2a7c1e6f4e2b8d9e0f1a2b3c4d5e6f708192.debug", "libc.so.6"]
    assert q.extras["symbolization"]["share"] == "71.4%"
    assert any("no symbols for 1 module" in w for w in q.warnings)
    chrome = next(m for m in range(len(q.mappings)) if q.mapping_file(m) == "chrome")
    assert int(q.mappings.flags[chrome]) & MAPPING_HAS_FUNCTIONS
    assert int(q.mappings.flags[chrome]) & MAPPING_HAS_INLINE_FRAMES
    assert q.samples.values.tolist() == p.samples.values.tolist()
    assert q.labelsets[int(q.samples.labelset[1])] == p.labelsets[int(p.samples.labelset[1])]


def test_symbolize_replaces_a_placeholder_name() -> None:
    from polyprof.formats.chromium.names import module_name_hash, module_placeholder

    # a module whose name the reader could not resolve: only its name hash is known
    b = ProfileBuilder("chromium")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, module_placeholder(module_name_hash("chrome.dll.pdb")),
                  "16B2A4281DED442E9A36FCE8CBD2972610")
    b.add_sample(b.stack([b.location(m, 0x4055)]), [1])
    q, stats = symbolize(b.finish(), SymbolStore(SYMBOLS))
    assert q.mapping_file(0) == "chrome.dll.pdb"
    assert frames_of(q, 0) == [["logging::CheckError::~CheckError()", "ChromeMain"]]


def test_symbolize_a_pprof_style_profile_with_a_load_address() -> None:
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0x7F0000000000, 0x7F0000100000, 0, "/opt/google/chrome/chrome",
                  "7f0715c286f8b16c10e4ad349cda3b9b56c7a773")  # raw ELF build id, as perf/pprof write it
    b.add_sample(b.stack([b.location(m, 0x7F0000001010)]), [5])
    q, stats = symbolize(b.finish(), SYMBOLS)
    assert frames_of(q, 0) == [["ChromeMain"]]
    assert stats.symbolized == 1


def test_read_option_symbols_applies_to_every_profile() -> None:
    profiles = polyprof.read_all(fixture_bytes("uma_log.textproto"), options=ReadOptions(symbols=str(SYMBOLS)))
    assert [p.extras["symbolization"]["symbolized"] for p in profiles] == [5, 1, 3]
    heap = profiles[2]
    assert frames_of(heap, 0) == [["base::RunLoop::Run(base::Location const&)"], ["ChromeMain"]]


def test_broken_symbol_file_is_reported_with_its_path(tmp_path) -> None:  # noqa: ANN001
    root = tmp_path / "syms"
    shutil.copytree(SYMBOLS, root)
    sym = root / "chrome" / "C215077FF8866CB110E4AD349CDA3B9B0" / "chrome.sym"
    sym.write_text(sym.read_text().replace("1200 20 140 0", "1200 20 one-forty 0"))
    with pytest.raises(MalformedInputError, match="chrome.sym: breakpad: line 23") as info:
        polyprof.read_all(fixture_bytes("uma_log.textproto"), options=ReadOptions(symbols=str(root)))
    assert "\n" not in str(info.value)


def test_symbolizing_twice_changes_nothing() -> None:
    p = polyprof.read_all(fixture_bytes("uma_log.textproto"))[0]
    once, _ = symbolize(p, SYMBOLS)
    twice, _ = symbolize(once, SYMBOLS)
    assert dump(twice) == dump(once)


# ---- fuzzing the .sym parser ------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TOKENS = st.sampled_from(["FUNC", "PUBLIC", "INLINE", "INLINE_ORIGIN", "FILE", "MODULE", "m", "10", "ff",
                           "-1", "0", "zz", "name", "1a2b", "STACK", "CFI", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_TOKENS, max_size=7).map(" ".join), max_size=12),
       st.lists(st.integers(0, 0x3000), max_size=4))
def test_any_symbol_text_parses_or_raises_malformed(lines: list[str], addresses: list[int]) -> None:
    try:
        sym = parse_lines(lines, "fuzz.sym")
    except MalformedInputError as exc:
        assert str(exc).startswith("fuzz.sym: breakpad: line ")
        return
    for a in addresses:
        frames = sym.lookup(a)
        assert frames is None or all(isinstance(f[0], str) for f in frames)


def test_symbolize_without_matching_symbols_keeps_every_profile_intact(peer) -> None:  # noqa: ANN001
    from polyprof.symbolize import Sources

    only_these = Sources(paths=(str(SYMBOLS),), use_env=False, local_paths=False, system_dirs=(), cache=False)
    checked = 0
    for f, p in small_peer_profiles(peer):
        q, stats = symbolize(p, only_these, demangle="none")
        check(q)
        assert not any(m.source for m in stats.mappings)
        q.extras.pop("symbolization")
        assert dump(q) == dump(p), f
        checked += 1
    assert checked >= 3


def test_golden_symbolized_dumps(golden) -> None:  # noqa: ANN001
    for name in ("uma_log.textproto", "windows.sampled.textproto"):
        profiles = polyprof.read_all(fixture_bytes(name), options=ReadOptions(symbols=str(SYMBOLS)))
        text = "".join(dump(p) for p in profiles).replace(str(SYMBOLS), "<symbols>")  # where found, portably
        golden(f"chromium/{name.replace('.textproto', '')}.symbolized.dump", text)


def test_the_readme_example_is_the_fixture() -> None:
    from helpers import REPO

    # examples/uma_unsymbolized.pb is this fixture's serialization (regenerate it the same way)
    assert (REPO / "examples" / "uma_unsymbolized.pb").read_bytes() == fixture_bytes("uma_log.textproto")


def test_async_backtraces_are_symbolized_like_stacks() -> None:
    import json

    from polyprof.model.profile import Label

    b = ProfileBuilder("chromium")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, "chrome", "7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730")
    backtrace = json.dumps([["chrome", "7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730", 0x1010],
                            ["chrome", "7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730", 0x1050],  # no symbol there
                            ["", "", 77]])
    b.add_sample(b.stack([b.location(m, 0x1010)]), [1], labels=[Label("async_backtrace", str=backtrace)])
    q, _ = symbolize(b.finish(), SYMBOLS)
    (label,) = q.labelsets[int(q.samples.labelset[0])]
    frames = json.loads(label.str)
    assert frames[0][3] == "ChromeMain" and frames[0][4][-1][0] == "ChromeMain"
    assert frames[1] == ["chrome", "7F0715C286F8B16C10E4AD349CDA3B9B56C7A7730", 0x1050]
    assert frames[2] == ["", "", 77]
    assert frames_of(q, 0) == [["ChromeMain"]]
