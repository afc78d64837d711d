"""pprof's legacy inputs are read as ``go tool pprof`` reads them.

Conformance, at test time from ../shared/peer-data/google__pprof/profile/testdata
(skipped with a reason when absent): for every legacy file ``X`` there,
``polyprof raw --as-parsed X`` equals pprof's own golden ``X.string`` byte for
byte (what pprof's ``TestParse`` requires of ``Profile.String()``), and, where
go is installed, ``polyprof raw``/``top`` equal ``go tool pprof -raw``/``-top``
and go reads our pprof conversion back to the same ``-raw``. Formats the
testdata lacks (Go's mutex/block/goroutine/heap ``debug=1`` pages, memory-map
variants, thread dumps ending without a map, every word size and byte order
of binary CPU profiles) are written here and checked against live go.
Broken inputs fail with one line naming the line or byte.
"""

from __future__ import annotations

import shutil
import struct

import go_pprof_refs as refs
import pytest
from helpers import PEER

from polyprof import api
from polyprof.analysis.raw import raw
from polyprof.formats import pprof_legacy

TESTDATA = PEER / "google__pprof/profile/testdata"
LEGACY = sorted(p for p in TESTDATA.glob("*") if p.suffix != ".string") if TESTDATA.is_dir() else []
GOLDEN = [p for p in LEGACY if p.with_name(p.name + ".string").exists()]
needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed (Debian: golang-go)")


@pytest.fixture(scope="module")
def go():
    return refs.Go()


def test_every_legacy_testdata_file_has_a_golden(peer):
    assert len(LEGACY) >= 14, "pprof's testdata has 14 legacy profiles"
    assert GOLDEN == LEGACY, "each legacy file X has X.string"


@pytest.mark.parametrize("path", GOLDEN, ids=[p.name for p in GOLDEN])
def test_as_parsed_equals_pprofs_golden(cli, path):
    r = cli("raw", "--as-parsed", path)
    assert r.code == 0, r.err
    assert r.out == path.with_name(path.name + ".string").read_text(), "differs from pprof's TestParse golden"


@pytest.mark.parametrize("path", LEGACY, ids=[p.name for p in LEGACY])
def test_detected_and_read(path):
    assert pprof_legacy.sniff(path.read_bytes()[:65536])
    assert api.detect(str(path)).name == "pprof-legacy"
    p = api.read(str(path))
    assert p.source_format == "pprof-legacy" and len(p.samples) > 0


@needs_go
@pytest.mark.parametrize("path", LEGACY, ids=[p.name for p in LEGACY])
def test_raw_top_and_conversion_equal_go(cli, go, path, tmp_path):
    code, go_raw, err = go.run(["-raw"], path)
    assert code == 0, err
    assert cli("raw", path).out == go_raw.decode()
    code, go_top, err = go.run(["-top"], path)
    assert code == 0, err
    assert cli("top", path).out == go_top.decode()
    out = tmp_path / "converted.pb.gz"
    assert cli("convert", path, "-o", out).code == 0
    code, back, err = go.run(["-raw"], out)
    assert code == 0, err
    assert back == go_raw, "go reads our pprof conversion differently from the legacy file"


# ---- formats the testdata lacks, checked against live go ------------------------------------

GO_MUTEX = """--- mutex:
cycles/second=2000000000
sampling period=5
12000 3 @ 0x4a1b2c 0x4a1d00 0x45e0a1
#\t0x4a1b2b\tsync.(*Mutex).Unlock+0x6b\t/usr/lib/go/src/sync/mutex.go:212

500 1 @ 0x4a1b2c 0x4a2000 0x45e0a1
"""
GO_BLOCK = "--- contention:\ncycles/second=2000000000\n7000 2 @ 0x4a1b2c 0x45e0a1\n"
GO_GOROUTINE = """goroutine profile: total 3
2 @ 0x43a1c5 0x44b2e1 0x46f0a1
#\t0x43a1c4\truntime.gopark+0x1\t/usr/lib/go/src/runtime/proc.go:398

1 @ 0x43a1c5 0x46f0a1
# labels: {"a":"b"}
"""
GO_HEAP = """heap profile: 2: 2048 [10: 8192] @ heap/1048576
1: 1024 [5: 4096] @ 0x40a1b2 0x40c3d4
#\t0x40a1b1\tmain.alloc+0x31\t/tmp/x.go:10

1: 1024 [5: 4096] @ 0x40a1b2 0x40e000

# runtime.MemStats
# Alloc = 123456
"""
# glog prefix, a non-executable piece, $name substitution, the brief form with
# (@offset) and build id, and an address just below a mapping with an offset
MAPS = """heap profile:    3:  3072 [    3:  3072] @ heap_v2/524288
     1:  1024 [     1:  1024] @ 0x400123 0x7f0000001234
     2:  2048 [     2:  2048] @ 0x400456 0x900000
MAPPED_LIBRARIES:
I0101 12:00:00.000000 1234 heap.cc:99] 00400000-00500000 r-xp 00000000 08:01 1234 /usr/bin/server
00500000-00600000 rw-p 00100000 08:01 1234 /usr/bin/server
libdir=/usr/lib
7f0000000000-7f0000100000: $libdir/libfoo.so (@1000) abcdef0123
901000-905000 r-xp 00002000 08:01 99 /usr/bin/helper
"""
FRAGMENTATION = "heap profile:    1:  10 [    1:  10] @ fragmentationz\n     1:  10 [     1:  10] @ 0x400123\n"
HEAPPROFILE = """heap profile:    2:  100 [    4:  300] @ heapprofile
     2:  100 [     4:  300] @ 0x400123 0x400200
     0:  0 [     2:  200] @ 0x400300
"""
THREADS = """--- threadz 1 ---

--- Thread 1 (name: main/1) stack: ---
  PC: 0x401000 0x401000
  0x402000
--- Thread 2 (name: w/2) stack: ---
  [same as previous thread]
---- no stack trace for 3 threads
"""
WRITTEN = {"go-mutex": GO_MUTEX, "go-block": GO_BLOCK, "go-goroutine": GO_GOROUTINE, "go-heap": GO_HEAP,
           "maps": MAPS, "fragmentation": FRAGMENTATION, "heapprofile": HEAPPROFILE, "threads": THREADS}


@needs_go
@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_written_inputs_equal_go(cli, go, tmp_path, name):
    path = tmp_path / name
    path.write_text(WRITTEN[name])
    code, go_raw, err = go.run(["-raw"], path)
    assert code == 0, err
    assert cli("raw", path).out == go_raw.decode()


def test_written_inputs_hold_what_pprof_computes():
    """The numbers of the written inputs, without go: un-sampling, cycles to ns, maps."""
    mutex = raw(api.read(GO_MUTEX.encode()))
    assert [s.values for s in mutex.samples] == [(15, 30000), (5, 1250)]  # x5 period; 12000 cycles at 2 GHz
    maps = raw(api.read(MAPS.encode()))
    assert [(m.start, m.limit, m.offset, m.file, m.build_id) for m in maps.mappings] == [
        (0x400000, 0x500000, 0, "/usr/bin/server", ""),
        (0x7F0000000000, 0x7F0000100000, 0x1000, "/usr/lib/libfoo.so", "abcdef0123"),
        (0x8FF000, 0x905000, 0, "/usr/bin/helper", "")]  # extended down to the address below it
    threads = raw(api.read(THREADS.encode()))
    assert [s.values for s in threads.samples] == [(2,)]  # the repeated thread counts twice
    assert [loc.address for loc in threads.locations] == [0x401000, 0x401FFF]  # the duplicated leaf is gone


def _words(data: bytes, fmt: str) -> tuple[list[int], bytes]:
    """The header and sample words of a binary CPU profile, and the text after them."""
    size = struct.calcsize(fmt)
    words, pos = list(struct.unpack_from(fmt[0] + "5" + fmt[1], data)), 5 * size
    while True:
        count, depth = struct.unpack_from(fmt[0] + "2" + fmt[1], data, pos)
        record = struct.unpack_from(f"{fmt[0]}{depth + 2}{fmt[1]}", data, pos)
        words += record
        pos += (depth + 2) * size
        if (count, depth) == (0, 1) and record[2] == 0:
            return words, data[pos:]


@pytest.mark.parametrize("fmt", ["<I", ">I", ">Q"])
def test_binary_cpu_in_every_word_size_and_byte_order(cli, peer, tmp_path, fmt):
    source = TESTDATA / "go.crc32.cpu"  # 64-bit little-endian, addresses below 4 GiB
    words, tail = _words(source.read_bytes(), "<Q")
    path = tmp_path / f"crc32{fmt.replace('<', '-le').replace('>', '-be')}.cpu"
    path.write_bytes(struct.pack(f"{fmt[0]}{len(words)}{fmt[1]}", *words) + tail)
    assert cli("raw", path).out == cli("raw", source).out
    if shutil.which("go"):
        code, go_raw, err = refs.Go().run(["-raw"], path)
        assert code == 0 and cli("raw", path).out == go_raw.decode(), err


# ---- broken inputs: one line, the place, exit 4 ----------------------------------------------

def _one_line_error(r, code: int = 4) -> str:
    assert r.code == code, (r.code, r.err)
    assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    return r.err


BROKEN_TEXT = {
    "heap-junk-line": ("heap profile: 1: 2 [1: 2] @ heap_v2/1\n1: 2 [1: 2] @ 0x10\nthis is junk\n", "line 3"),
    "heap-count-too-large": ("heap profile: 1: 2 [1: 2] @ heap_v2/1\n99999999999999999999: 2 [1: 2] @ 0x10\n",
                             "line 2"),
    "heap-zero-count": ("heap profile: 1: 2 [1: 2] @ heap_v2/1\n0: 2 [1: 2] @ 0x10\n", "count was 0"),
    "address-over-64-bits": ("heap profile: 1: 2 [1: 2] @ heap_v2/1\n1: 2 [1: 2] @ 0x1ffffffffffffffff\n",
                             "line 2"),
    "goroutine-junk": ("goroutine profile: total 1\n1 @ 0x10\nnot a stack\n", "line 3"),
    "contention-junk": ("--- contentionz 1 ---\ncycles/second = 10\n5 1 @ 0x10\nnot a sample\n", "line 4"),
    "contention-count-overflow": ("--- mutex:\nsampling period=4611686018427387904\n1 4 @ 0x10\n", "line 3"),
    "thread-without-map": ("--- threadz 1 ---\n--- Thread 1 (name: a/1) stack: ---\n  0x10\n", "memory map"),
    "java-heap-without-resolution": ("--- heapz 1 ---\nformat = java\n  10  1 @ 0x1\n 0x1 f (F.java:1)\n",
                                     "sample types"),
}


@pytest.mark.parametrize("name", sorted(BROKEN_TEXT))
def test_broken_text_is_one_line_with_its_place(cli, tmp_path, name):
    text, where = BROKEN_TEXT[name]
    path = tmp_path / name
    path.write_text(text)
    err = _one_line_error(cli("top", path))
    assert str(path) in err and "pprof-legacy" in err and where in err, err


@pytest.mark.parametrize("cut", [43, 200, 1001, 4000])
def test_truncated_binary_cpu_names_the_byte(cli, peer, tmp_path, cut):
    data = (TESTDATA / "cppbench.cpu").read_bytes()
    path = tmp_path / "cut.cpu"
    path.write_bytes(data[:cut])
    err = _one_line_error(cli("top", path))
    assert "at byte" in err, err


def test_binary_cpu_cut_between_records_warns(peer):
    words, _ = _words((TESTDATA / "go.crc32.cpu").read_bytes(), "<Q")
    data = struct.pack(f"<{len(words) - 3}Q", *words[:-3])  # without the end marker
    p = api.read(data)
    assert any("no end-of-data marker" in w for w in p.warnings)


def test_hostile_depth_fails_at_once(cli, tmp_path):
    path = tmp_path / "deep.cpu"
    path.write_bytes(struct.pack("<7Q", 0, 3, 0, 10000, 0, 1, 1 << 62) + bytes(64))
    assert "at byte 40" in _one_line_error(cli("top", path))


@needs_go
@pytest.mark.parametrize("name", sorted(BROKEN_TEXT))
def test_what_go_refuses_we_refuse(cli, go, tmp_path, name):
    path = tmp_path / name
    path.write_text(BROKEN_TEXT[name][0])
    code, _, _ = go.run(["-raw"], path)
    ours = cli("raw", path).code
    assert ours == 4 and (code != 0 or name == "contention-count-overflow"), \
        "go wraps the overflowing count; every other case go refuses too"


# ---- detection ----------------------------------------------------------------------------

PLAIN = [b"hello world\n", b"main;foo;bar 10\nmain;baz 3\n", b"# a heading\n\nsome words\n",
         b'{"traceEvents": []}\n', b"a,b,c\n1,2,3\n", b"import os\nprint(os.getcwd())\n",
         b"heap profile is what this note is about\n", b"--- notes ---\nthread profile: soon\n",
         b"\x00\x00\x00\x00\x03\x00\x00\x00"]


@pytest.mark.parametrize("head", PLAIN, ids=range(len(PLAIN)))
def test_plain_text_is_not_claimed(head):
    assert not pprof_legacy.sniff(head)


def test_other_formats_are_not_claimed(peer):
    import gzip

    others = [p for p in sorted(peer.rglob("*")) if p.is_file() and p.suffix in (".gz", ".pb", ".trace",
              ".pftrace", ".perfetto-trace", ".json", ".pprof") and p.stat().st_size < 2_000_000][:40]
    assert others
    for path in others:
        data = path.read_bytes()
        head = gzip.decompress(data)[:65536] if data[:2] == b"\x1f\x8b" else data[:65536]
        assert not pprof_legacy.sniff(head), path
