"""Conformance with go tool pprof on every pprof file in ../shared/peer-data.

The references in generated/go_tool_pprof_exact are `go tool pprof -top
-nodecount=25 -nodefraction=0 -sample_index=TYPE` with values in the type's
own unit; our `top --exact` text must equal them line for line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import polyprof
from polyprof.analysis.options import Options
from polyprof.analysis.top import top
from polyprof.render.top import top_text

from helpers import PEER, peer_files, peer_id

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
    result = top(profile, Options(sample_index=sample_type, nodecount=25, nodefraction=0, edgefraction=0))
    expected = ref.read_bytes().decode("utf-8", errors="replace").splitlines()
    # A few references were made without -unit (pprof's "minimum" unit); the
    # header's total tells which rendering pprof used.
    exact = f" {result.total}" in next((ln for ln in expected if ln.startswith("Showing nodes")), "")
    assert top_text(result, exact=exact).splitlines() == expected


RAW = "generated/go_tool_pprof/"


def _raw_cases() -> list[tuple[Path, Path]]:
    out = []
    for ref in peer_files(RAW + "**/*.raw.txt"):
        source = PEER / str(ref.relative_to(PEER / RAW))[: -len(".raw.txt")]
        if source.exists():
            out.append((ref, source))
    return out


RAW_CASES = _raw_cases()


def _parse_raw(text: str) -> tuple[list[tuple[list[int], list[str], list[str]]], dict[str, str]]:
    """Samples (values, location ids, label strings) and location id -> address."""
    lines = text.splitlines()
    samples: list[tuple[list[int], list[str], list[str]]] = []
    addresses: dict[str, str] = {}
    section = None
    for line in lines:
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Samples:" and ":" in line and line.strip()[0].isdigit() or \
                section == "Samples:" and line.strip().startswith("-"):
            values, _, locs = line.partition(":")
            if values.strip().lstrip("-").replace(" ", "").replace("-", "").isdigit():
                samples.append(([int(v) for v in values.split()], locs.split(), []))
                continue
        if section == "Samples:" and samples and line.startswith("                ") and ":[" in line:
            samples[-1][2].append(line.strip())
        elif section == "Locations" and line[:6].strip().isdigit() and ": 0x" in line:
            ident, _, rest = line.partition(":")
            addresses[ident.strip()] = rest.split()[0]
    return samples, addresses


@pytest.mark.parametrize("ref,source", RAW_CASES, ids=[peer_id(c[0]) for c in RAW_CASES])
def test_samples_equal_go_tool_pprof_raw(ref, source):
    """Per (stack addresses, label keys): summed values equal pprof -raw.

    pprof merges samples with equal stacks and labels before printing -raw and
    omits samples without locations or without any non-zero value, so both
    sides are aggregated and filtered alike.
    """
    expected_samples, addresses = _parse_raw(ref.read_bytes().decode("utf-8", errors="replace"))
    expected: dict[tuple, list[int]] = {}
    for values, locs, labels in expected_samples:
        keys = sorted(k for lab in labels for k in re.findall(r"(\S+?):\[", lab))
        key = (tuple(addresses[x] for x in locs), tuple(keys))
        expected[key] = [a + b for a, b in zip(expected.get(key, [0] * len(values)), values)]
    profile = polyprof.read(source)
    ours: dict[tuple, list[int]] = {}
    for i in range(len(profile.samples)):
        stack = tuple(f"0x{int(profile.locations.address[loc]):x}" for loc in profile.stack_locations(i))
        if not stack:
            continue
        keys = tuple(sorted({lb.key for lb in profile.labelsets[profile.samples.labelset[i]]}))
        values = profile.samples.values[i].tolist()
        ours[(stack, keys)] = [a + b for a, b in zip(ours.get((stack, keys), [0] * len(values)), values)]
    nonzero = lambda d: {k: v for k, v in d.items() if any(v)}  # noqa: E731
    assert nonzero(ours) == nonzero(expected)
