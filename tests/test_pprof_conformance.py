"""Conformance with go tool pprof on every pprof file in ../shared/peer-data.

The references in generated/go_tool_pprof_exact are `go tool pprof -top
-nodecount=25 -nodefraction=0 -sample_index=TYPE` with values in the type's
own unit; our `top --exact` text must equal them line for line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polyprof
from polyprof.analysis.options import Options
from polyprof.analysis.top import top
from polyprof.render.top import top_text

from conftest import PEER, peer_files, peer_id

EXACT = "generated/go_tool_pprof_exact/"


def _cases() -> list[tuple[Path, Path, str]]:
    cases = []
    for ref in peer_files(EXACT + "**/*.top.txt"):
        rel = str(ref.relative_to(PEER / EXACT))[: -len(".top.txt")]
        source, sample_type = rel.rsplit(".", 1)
        cases.append((ref, PEER / source, sample_type))
    return cases


CASES = _cases()


def test_there_are_references(peer):
    assert len(CASES) >= 60, "expected the exact top references of peer-data"


@pytest.mark.parametrize("ref,source,sample_type", CASES, ids=[peer_id(c[0]) for c in CASES])
def test_top_equals_go_tool_pprof(ref, source, sample_type):
    profile = polyprof.read(source)
    result = top(profile, Options(sample_index=sample_type, nodecount=25))
    expected = ref.read_bytes().decode("utf-8", errors="replace").splitlines()
    # A few references were made without -unit (pprof's "minimum" unit); the
    # header's total tells which rendering pprof used.
    exact = f" {result.total}" in next((ln for ln in expected if ln.startswith("Showing nodes")), "")
    assert top_text(result, exact=exact).splitlines() == expected
