"""Profiles for the viewer tests: random ones (hypothesis) and one with hostile names.

They have two sample types, inlined frames, unsymbolized frames in a
mapping, empty stacks, zero and negative values, and samples on a few
threads (tid/pid columns, thread-name labels).
"""

from __future__ import annotations

from hypothesis import strategies as st

from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label, Profile

__all__ = ["HOSTILE", "expected_names", "hostile_profile", "random_profile"]

NAMES = ["main", "run", "f;g", "héllo", "<x>"]


def random_profile(data: st.DataObject) -> Profile:
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    lib = b.mapping(0x1000, 0x9000, 0, "/system/lib/libfoo.so")
    fns = [b.function(n, filename="src.c") for n in NAMES]
    locs = [b.location(lib, 0x1000 + 16 * i, [(fns[i], 10 + i, 0)]) for i in range(len(NAMES))]
    locs.append(b.location(lib, 0x2000, [(fns[1], 7, 0), (fns[0], 3, 0)]))  # run inlined into main
    locs.append(b.location(lib, 0x3000))  # no symbol
    threads = [(100, 100, "main"), (100, 101, "worker"), (200, 201, "other")]
    for _ in range(data.draw(st.integers(1, 25))):
        stack = data.draw(st.lists(st.integers(0, len(locs) - 1), max_size=6))
        pid, tid, name = threads[data.draw(st.integers(0, len(threads) - 1))]
        value = data.draw(st.integers(-5, 2000))
        b.add_sample(b.stack([locs[i] for i in stack]) if stack else -1, [1, value], pid=pid, tid=tid,
                     labels=(Label("thread_name", str=name),))
    return b.finish()


def expected_names(p: Profile, sample: int) -> list[str]:
    """Frame names of a sample, root first, inlined functions expanded (outermost first)."""
    out = []
    for loc in reversed(p.stack_locations(sample)):
        rows = list(p.locations.lines_of(loc))
        if not rows:
            out.append(f"libfoo.so+0x{int(p.locations.address[loc]):x}")
        for r in reversed(rows):
            out.append(p.function_name(int(p.lines.function[r])))
    return out


# Names that try to close elements, start scripts, break attributes, inject entities and
# comments, and carry code points that are not legal in XML (controls, lone surrogates).
HOSTILE = [
    "<script>alert(1)</script>",
    "</script><img src=x onerror=alert(2)>",
    "\"double\" 'single' `back`",
    "a & b &amp; c &#60; &lt;",
    "ctl\x00\x01\x08\x1b[31m\x7f end",
    "lone \ud800 and \udfff surrogates",
    "]]><!-- comment --><![CDATA[x]]>",
    "line\nbreak\rand\ttab",
    "\u2028line sep\u2029 \ufffe\uffff",
    "<!DOCTYPE x><?xml version='1.0'?>",
    "{{template}} ${js} <%= erb %>",
]


def hostile_profile() -> Profile:
    b = ProfileBuilder("test")
    b.set_sample_types([("cpu", "nanoseconds")])
    main = b.frame("main")
    for k, name in enumerate(HOSTILE):
        b.add_sample(b.stack([b.frame(name), main]), [1000 * (k + 1)])
    return b.finish()
