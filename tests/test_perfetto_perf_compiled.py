"""The compiled perf-counter deltas give exactly the numpy path's deltas, carried state and warnings.

Random chunks (few and many keys, counters that go backwards, values past
2**63, absent rows) are fed in sequence to both, with their state carried
from chunk to chunk; a real traced_perf trace is read with the compiled
kernel and with the numpy path and the profiles compared. Without numba the
compiled side is skipped, visibly.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyprof.formats.perfetto import _perf

compiled = pytest.importorskip("polyprof.formats.perfetto._perf_compiled",
                               reason="numba is not installed: no compiled kernels")

_chunk = st.integers(0, 60).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 5) | st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n),
    st.lists(st.integers(0, 1000) | st.integers(0, 2**64 - 1), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_chunk, min_size=1, max_size=4))
def test_random_chunks_same_deltas_state_and_warnings(chunks: list) -> None:
    prev_np: dict[int, int] = {}
    prev_c: dict[int, int] = {}
    stats_np: Counter = Counter()
    for keys, values, present in chunks:
        k = np.array(keys, dtype=np.int64)
        v = np.array(values, dtype=np.uint64)
        p = np.array(present, dtype=bool)
        want = _perf._deltas_numpy(k, v, p, prev_np, stats_np)
        got, backs = compiled.deltas_compiled(k, v, p, prev_c)
        assert got.tolist() == want.tolist()
        assert prev_c == prev_np
        stats_np["compiled backs"] += backs
    key = "perf counters that went backwards (restarted from their value)"
    assert stats_np["compiled backs"] == stats_np[key]


def test_strided_follower_column() -> None:
    """Follower columns are strided views of the dense (n, width) table."""
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 4, 500).astype(np.int64)
    dense = rng.integers(0, 10_000, (500, 3)).astype(np.uint64)
    present = rng.random(500) > 0.2
    for j in range(3):
        prev_np: dict[int, int] = {1: 5000}
        prev_c = dict(prev_np)
        stats: Counter = Counter()
        want = _perf._deltas_numpy(keys, dense[:, j], present, prev_np, stats)
        got, backs = compiled.deltas_compiled(keys, dense[:, j], present, prev_c)
        assert got.tolist() == want.tolist() and prev_c == prev_np
        assert backs == stats["perf counters that went backwards (restarted from their value)"]


def _read_dumps(path: object, monkeypatch: pytest.MonkeyPatch, use_compiled: bool) -> list[str]:
    import polyprof
    from polyprof.model.dump import dump

    with monkeypatch.context() as m:
        m.setattr(_perf.V, "compiled", lambda: use_compiled)
        profiles = polyprof.read_all(path, format="perfetto")
    return [dump(p) for p in profiles]


def _real_traces() -> list[object]:
    from helpers import PEER

    binary = PEER / "google__perfetto" / "diff_tests_binary" / "parser__profiling__tests"
    return sorted(binary.glob("Profiling__perf_sample*.pftrace")) if binary.is_dir() else []


@pytest.mark.parametrize("use", ["peer", "written"])
def test_real_traces_read_the_same(use: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """Perfetto's own perf-sample traces (followers, timebase counts) and one our writer made."""
    if use == "peer":
        paths = _real_traces()
        if not paths:
            pytest.skip("../shared/peer-data is absent: no Perfetto perf-sample traces")
    else:
        from test_perfetto_flat_compiled import _written_trace

        path = tmp_path / "written.pftrace"  # type: ignore[operator]
        path.write_bytes(_written_trace())
        paths = [path]
    calls = []
    real = compiled.deltas_compiled
    monkeypatch.setattr(compiled, "deltas_compiled", lambda *a: calls.append(1) or real(*a))
    for path in paths:
        assert _read_dumps(path, monkeypatch, True) == _read_dumps(path, monkeypatch, False)
    assert calls  # the compiled side really ran
