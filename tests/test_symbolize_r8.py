"""Java deobfuscation with R8/ProGuard mapping.txt files (``--mapping``).

Real data: simpleperf's own test recording that needs a ProGuard mapping,
and the same recording deobfuscated by simpleperf with that file (AOSP test
data in ../shared/peer-data). Plus an R8 mapping with inline frames and
source files, and maps chosen by package.
"""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import PEER

import polyprof
from polyprof.formats.options import ReadOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.symbolize import Sources, symbolize

AOSP = PEER / "generated" / "simpleperf_from_aosp_testdata"
MAPPING = PEER / "jbeich__platform_system_extras" / "simpleperf" / "testdata" / "proguard_mapping.txt"


def _stacks(p: polyprof.Profile) -> Counter:
    return Counter(tuple(p.function_name(int(p.lines.function[r])) for loc in p.stack_locations(i)
                         for r in p.locations.lines_of(loc)) for i in range(len(p.samples)))


def test_proguard_mapping_gives_what_simpleperf_gives(peer):  # noqa: ANN001
    raw = AOSP / "perf_need_proguard_mapping.trace"
    ours = polyprof.read(raw, options=ReadOptions(java_mappings=(str(MAPPING),), offline=True))
    theirs = polyprof.read(AOSP / "perf_need_proguard_mapping.deobfuscated.trace",
                           options=ReadOptions(symbolize=False))
    assert _stacks(ours) == _stacks(theirs)
    assert "androidx.fragment.app.FragmentActivity.startActivityForResult" in {n for s in _stacks(ours) for n in s}
    assert _stacks(polyprof.read(raw)) != _stacks(theirs)  # it was obfuscated to begin with
    assert ours.extras["symbolization"]["deobfuscated_functions"] == 2


R8 = """\
# compiler: R8
# {"id":"com.android.tools.r8.mapping","version":"2.1"}
com.example.Main -> a:
# {"id":"sourceFile","fileName":"Main.java"}
    1:1:void foo():54:54 -> a
    1:1:void test():50 -> a
    2:2:void bar():59:59 -> a
    2:2:void foo():55 -> a
    2:2:void test():50 -> a
    3:5:void loop(int):70:72 -> b
    void helper() -> c
    void helper(int) -> c
com.example.Other -> b:
    1:1:void com.example.Main.inlinedFromMain():12:12 -> x
    1:1:void run():30 -> x
"""


def _java_profile(frames: list[tuple[str, int]], path: str = "/data/app/com.example-1/base.apk") -> polyprof.Profile:
    b = ProfileBuilder("perfetto")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, path, "")
    locs = [b.location(m, 16 * (i + 1), [(b.function(name), line, 0)]) for i, (name, line) in enumerate(frames)]
    b.add_sample(b.stack(locs), [1])
    return b.finish()


def _chain(p: polyprof.Profile) -> list[list[tuple[str, str, int]]]:
    return [[(p.function_name(int(p.lines.function[r])), p.strings[p.functions.filename[int(p.lines.function[r])]],
              int(p.lines.line[r])) for r in p.locations.lines_of(loc)] for loc in p.stack_locations(0)]


def test_an_r8_mapping_with_inline_frames(tmp_path):  # noqa: ANN001
    path = tmp_path / "mapping.txt"
    path.write_text(R8)
    p = _java_profile([("a.a", 2), ("a.b", 4), ("a.c", 0), ("b.x", 1), ("zz.unknown", 9)])
    q, report = symbolize(p, Sources(mappings=(str(path),), use_env=False, local_paths=False, system_dirs=()))
    assert _chain(q) == [
        [("com.example.Main.bar", "Main.java", 59), ("com.example.Main.foo", "Main.java", 55),
         ("com.example.Main.test", "Main.java", 50)],
        [("com.example.Main.loop", "Main.java", 71)],
        [("com.example.Main.helper", "Main.java", 0)],  # two overloads, one name
        [("com.example.Main.inlinedFromMain", "", 12), ("com.example.Other.run", "", 30)],
        [("zz.unknown", "", 9)],
    ]
    # the obfuscated name stays, as the system name of the physical frame
    fn = int(q.lines.function[q.locations.line_start[q.callsites.location[q.samples.stack[0]] + 1] - 1])
    assert q.strings[q.functions.system_name[fn]] == "a.a"
    assert report.deobfuscated == 4
    assert q.samples.stack.tolist() == p.samples.stack.tolist()


def test_maps_are_chosen_by_package(tmp_path):  # noqa: ANN001
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("com.one.Thing -> a:\n    void go() -> a\n")
    two.write_text("com.two.Thing -> a:\n    void go() -> a\n")
    sources = Sources(mappings=(f"com.one={one}", f"com.two={two}"), use_env=False, local_paths=False,
                      system_dirs=())
    for package, expected in (("com.one", "com.one.Thing.go"), ("com.two", "com.two.Thing.go")):
        q, _ = symbolize(_java_profile([("a.a", 0)], f"/data/app/~~xyz==/{package}-AbC==/base.apk"), sources)
        assert _chain(q) == [[(expected, "", 0)]]


def test_a_missing_mapping_file_is_a_clear_error(tmp_path):  # noqa: ANN001
    with pytest.raises(polyprof.PolyprofError, match="cannot read mapping file .*nope.txt"):
        symbolize(_java_profile([("a.a", 1)]), Sources(mappings=(str(tmp_path / "nope.txt"),)))


OUTLINED = """\
# compiler: R8
# {"id":"com.android.tools.r8.mapping","version":"2.0"}
com.example.Outlines -> o:
# {"id":"sourceFile","fileName":"Outlines.java"}
    1:3:int outline0(int) -> a
# {"id":"com.android.tools.r8.outline"}
com.example.Caller -> c:
# {"id":"sourceFile","fileName":"Caller.java"}
    1:1:void com.example.Helper.check(int):7:7 -> r
    1:1:int compute(int):40 -> r
    2:2:int compute(int):41:41 -> r
    9:9:int compute(int):0:0 -> r
# {'id':'com.android.tools.r8.outlineCallsite','positions':{'1':2,'2':1},'outline':'Lo;a(I)I'}
    10:10:int compute(int):45:45 -> r
com.example.App -> m:
    3:3:void main():12:12 -> m
"""


def test_r8_outline_frames_fold_into_their_call_site(tmp_path):  # noqa: ANN001
    from polyprof.model.validate import check

    path = tmp_path / "mapping.txt"
    path.write_text(OUTLINED)
    b = ProfileBuilder("perfetto")
    b.set_sample_types([("samples", "count")])
    m = b.mapping(0, 0, 0, "/data/app/com.example-1/base.apk", "")
    frames = {key: b.location(m, 16 * (i + 1), [(b.function(key[0]), key[1], 0)])
              for i, key in enumerate([("o.a", 1), ("o.a", 2), ("c.r", 9), ("c.r", 10), ("m.m", 3)])}
    for stack in ([("o.a", 1), ("c.r", 9), ("m.m", 3)], [("o.a", 2), ("c.r", 9), ("m.m", 3)],
                  [("o.a", 1), ("c.r", 10), ("m.m", 3)], [("c.r", 9), ("m.m", 3)]):
        b.add_sample(b.stack([frames[f] for f in stack]), [1])
    p = b.finish()
    q, _ = symbolize(p, Sources(mappings=(str(path),), use_env=False, local_paths=False, system_dirs=()))
    check(q)

    def chain(i: int) -> list[tuple[str, str, int]]:
        return [(q.function_name(int(q.lines.function[r])), q.strings[q.functions.filename[int(q.lines.function[r])]],
                 int(q.lines.line[r])) for loc in q.stack_locations(i) for r in q.locations.lines_of(loc)]

    main = ("com.example.App.main", "", 12)
    # outline line 1 -> the call site's line 2: one frame instead of the outline and its caller
    assert chain(0) == [("com.example.Caller.compute", "Caller.java", 41), main]
    # outline line 2 -> line 1, where R8 had inlined a helper: an inline chain
    assert chain(1) == [("com.example.Helper.check", "Caller.java", 7), ("com.example.Caller.compute", "Caller.java", 40),
                        main]
    # a caller line that is no outline call site keeps both frames
    assert chain(2) == [("com.example.Outlines.outline0", "Outlines.java", 1),
                        ("com.example.Caller.compute", "Caller.java", 45), main]
    assert chain(3) == [("com.example.Caller.compute", "Caller.java", 9), main]  # no outline below: unchanged
    # nothing renumbered: the same stacks, callsites and values; the original locations are all kept
    assert q.samples.stack.tolist() == p.samples.stack.tolist() and len(q.callsites) == len(p.callsites)
    assert len(q.locations) == len(p.locations) + 2
