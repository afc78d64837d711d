"""Canonical dumps of every Perfetto and simpleperf peer file, against goldens.

The safety net for reader rewrites (issue #16 vectorized them): any change to
what a reader makes of a real file shows up here as a readable diff. Large
dumps are kept up to ``_MAX_DUMP`` characters followed by their length and
digest (a change past the cut still fails); goldens are refreshed with
``pytest --update-goldens``.
"""

from __future__ import annotations

import hashlib

import pytest

import polyprof
from helpers import peer_files, peer_id
from polyprof.model.dump import dump

_MAX_DUMP = 120_000  # characters: bigger dumps are not kept as goldens

TRACES = peer_files("google__perfetto/diff_tests_binary/**/*.pftrace")
SIMPLEPERF = [p for p in peer_files("**/*") if p.is_file() and p.suffix in (".trace", ".proto_data", ".data")
              and p.stat().st_size < 400_000]


def _text(path) -> str:  # noqa: ANN001
    try:
        profiles = polyprof.read_all(path)
    except polyprof.PolyprofError as exc:
        return f"error: {type(exc).__name__}: {exc.message}\n"
    warnings = "".join(f"warning: {w}\n" for p in profiles[:1] for w in p.warnings)
    return warnings + "".join(dump(p) for p in profiles)


def _check(path, golden, kind: str) -> None:  # noqa: ANN001
    text = _text(path)
    if len(text) > _MAX_DUMP:
        digest = hashlib.sha256(text.encode()).hexdigest()
        text = text[:_MAX_DUMP] + f"\n... cut: {len(text)} characters in all, sha256 {digest}\n"
    golden(f"{kind}/peer/{peer_id(path).replace('/', '__')}.dump.txt", text)


@pytest.mark.parametrize("path", TRACES, ids=[peer_id(p) for p in TRACES])
def test_perfetto_peer_trace_dumps(path, golden):
    _check(path, golden, "perfetto")


@pytest.mark.parametrize("path", SIMPLEPERF, ids=[peer_id(p) for p in SIMPLEPERF])
def test_simpleperf_peer_file_dumps(path, golden):
    if polyprof.detect(path).name != "simpleperf":
        pytest.skip(f"{peer_id(path)} is not a simpleperf file")
    _check(path, golden, "simpleperf")


@pytest.mark.parametrize("path", TRACES[::4], ids=[peer_id(p) for p in TRACES[::4]])
def test_aggregate_mode_keeps_the_totals(path):
    """Aggregated reads sum samples: same totals per profile, no more rows than samples."""
    from polyprof.formats.options import ReadOptions

    aggregate = ReadOptions(extra={"aggregate": True})
    try:
        full = polyprof.read_all(path)
    except polyprof.PolyprofError as exc:  # unreadable either way, with the same message
        with pytest.raises(type(exc)) as agg_exc:
            polyprof.read_all(path, options=aggregate)
        assert agg_exc.value.message == exc.message
        return
    agg = polyprof.read_all(path, options=aggregate)
    assert [list(p.totals()) for p in full] == [list(p.totals()) for p in agg]
    assert all(len(a.samples) <= len(f.samples) for f, a in zip(full, agg))
