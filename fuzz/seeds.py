"""Seed corpora, built from the repository's own fixtures (never from peer files).

Each target starts from small valid inputs: a compact profile with every
feature the model has (inline frames, labels, several sample types, times,
threads) written by each of polyprof's writers, the
Chromium text fixtures, binary CPU profiles and the texts of pprof's legacy
reader tests, the Breakpad symbol fixtures, the symbolization tests' C program
compiled by gcc (when installed), the small hostile
inputs of ``cases.py``, and -- when the test helpers can be imported (they
need the ``perfetto`` package of the test extra) -- the Perfetto traces the
reader tests build. Built at run time into a work directory; nothing here
is committed as binary.
"""

from __future__ import annotations

import gzip
import io
import struct
import sys
from pathlib import Path

import cases
from polyprof.formats import registry
from polyprof.formats.options import WriteOptions
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile

__all__ = ["seeds"]

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"


def compact_profile() -> Profile:
    """A few samples touching every column and table of the model."""
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    b.meta.period, b.meta.time_nanos, b.meta.duration_nanos = 10_000_000, 1_700_000_000_000_000_000, 10**9
    m = b.mapping(0x1000, 0x9000, 0, "/usr/lib/libdemo.so", "abcdef0123")
    main, work, inner = (b.function(n, f"_Z{n}", "demo.cc", i) for i, n in enumerate(("main", "work", "inner")))
    root = b.location(m, 0x1100, [(main, 10, 1)])
    mid = b.location(m, 0x1200, [(inner, 30, 0), (work, 20, 2)])  # an inlined frame
    leaf = b.location(-1, 0xdead, [])  # an unsymbolized address
    stacks = [b.stack([leaf, mid, root]), b.stack([mid, root]), b.stack([root])]
    for i in range(6):
        labels = [Label("thread", str=f"t{i % 2}"), Label("bytes", num=64 * i, unit="bytes")] if i % 3 else []
        b.add_sample(stacks[i % 3], [1, 10_000_000 * (i + 1)], labels=labels, time=1_000 + i, pid=7, tid=7 + i % 2)
    return b.finish()


def _written(p: Profile) -> dict[str, bytes]:
    out = {}
    for spec in registry.available():
        if spec.can_read and spec.can_write:
            buf = io.BytesIO()
            try:
                spec.load().write(p, buf, WriteOptions())
            except Exception:  # noqa: BLE001 - a writer that cannot take this profile gives no seed
                continue
            out[spec.name] = buf.getvalue()
    return out


def _chromium_fixtures() -> dict[str, bytes]:
    from google.protobuf import text_format

    from polyprof.formats.chromium.schema import messages

    kinds = {"sampled": "SampledProfile", "callstack": "CallStackProfile"}
    out = {}
    for path in sorted((TESTS / "fixtures" / "chromium").glob("*.textproto")):
        kind = kinds.get(path.name.split(".")[-2], "ChromeUserMetricsExtension")
        out[path.stem] = text_format.Parse(path.read_text(), messages()[kind]()).SerializeToString()
    return out


def _perfetto_traces() -> dict[str, bytes]:
    sys.path.insert(0, str(TESTS))
    try:
        import test_perfetto_reader as t
    except Exception:  # noqa: BLE001 - pytest or the perfetto package missing: no such seeds
        return {}
    finally:
        sys.path.remove(str(TESTS))
    return {name: getattr(t, name)() for name in ("perf_trace", "heap_trace", "chrome_trace") if hasattr(t, name)}


def _legacy_cpu(word: str = "<Q") -> bytes:
    """A gperftools binary CPU profile: header, three stacks, end marker, memory map."""
    records = [0, 3, 0, 10_000, 0, 5, 3, 0x401010, 0x402020, 0x403030, 2, 2, 0x401010, 0x403030, 0, 1, 0]
    maps = "00400000-00500000 r-xp 00000000 08:01 1234 /usr/bin/server\n"
    return struct.pack(f"{word[0]}{len(records)}{word[1]}", *records) + maps.encode()


def _legacy_texts() -> dict[str, bytes]:
    sys.path.insert(0, str(TESTS))
    try:
        import test_pprof_legacy as t
    except Exception:  # noqa: BLE001 - pytest missing: no such seeds
        return {}
    finally:
        sys.path.remove(str(TESTS))
    broken = {f"broken-{name}": text for name, (text, _) in t.BROKEN_TEXT.items()}
    return {name: text.encode() for name, text in (t.WRITTEN | broken).items()}


def _elf_programs() -> dict[str, bytes]:
    """The symbolization tests' C program, compiled small (with and without -g) when gcc is here."""
    import shutil
    import subprocess
    import tempfile

    gcc = shutil.which("gcc")
    if gcc is None:
        return {}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in (("hot-O1", ["-O1"]), ("hot-g", ["-O1", "-g1"]), ("hot-pie-s", ["-Os", "-pie", "-fPIE"])):
            exe = Path(tmp) / name
            done = subprocess.run([gcc, *flags, "-o", str(exe), str(TESTS / "fixtures" / "symbolize" / "hot.c")],
                                  capture_output=True, timeout=120)
            if done.returncode == 0:
                out[name] = exe.read_bytes()
    return out


def seeds(target: str) -> dict[str, bytes]:
    """name -> bytes of every seed of ``target``."""
    if target == "elf":
        return _elf_programs()
    if target == "breakpad":
        syms = sorted((TESTS / "fixtures" / "chromium" / "symbols").rglob("*.sym"))
        return {p.name: p.read_bytes() for p in syms} | {"tiny": b"MODULE Linux x86_64 0 a\nFUNC 10 8 0 f\n10 4 7 0\n"}
    written = _written(compact_profile())
    by_format: dict[str, dict[str, bytes]] = {
        "pprof": {"compact": written.get("pprof", b""), "compact-raw": gzip.decompress(written["pprof"]),
                  "labels": gzip.decompress(cases.pprof_labels(3, 3)),
                  "unpacked": gzip.decompress(cases.pprof_unpacked_ids(5)),
                  "deep": gzip.decompress(cases.pprof_deep_stack(40)),
                  "bad-label": cases.pprof_bad_label_string()},
        "perfetto": {"compact": written.get("perfetto", b""), "alloc": cases.perfetto_alloc_count(),
                     **_perfetto_traces()},
        "simpleperf": {"compact": written.get("simpleperf", b""), "event": cases.simpleperf_event_type(2)},
        "chromium": {"compact": written.get("chromium", b""), "count": cases.chromium_sample_count(),
                     **_chromium_fixtures()},
        "pprof-legacy": {"cpu-le64": _legacy_cpu(), "cpu-be32": _legacy_cpu(">I"), **_legacy_texts()},
    }
    if target == "sniff":
        return {f"{fmt}-{name}": data[:4096] for fmt, group in by_format.items() for name, data in group.items()}
    return {k: v for k, v in by_format[target].items() if v}
