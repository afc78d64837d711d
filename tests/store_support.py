"""Helpers for the store tests: small synthetic profiles and comparable answers."""

from __future__ import annotations

import random
from pathlib import Path

import polyprof
from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Label

FUNCS = ["main", "serve", "handle", "parse", "encode", "compress", "alloc", "lock", "read", "write"]


def synthetic(seed: int, samples: int = 40, *, time_s: int = 1_700_000_000, labels: bool = True,
              threads: bool = False) -> polyprof.Profile:
    """A small CPU-like profile: random stacks over a shared call graph, optional labels/threads."""
    rnd = random.Random(seed)
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    meta = b.meta
    meta.time_nanos, meta.duration_nanos = time_s * 10**9 + seed, 10 * 10**9
    meta.period_type, meta.period = polyprof.ValueType("cpu", "nanoseconds"), 10_000_000
    m = b.mapping(0x400000, 0x800000, 0, "/bin/server", "abc123", 15)
    locs = [b.frame(f, f"{f}.go", 10 + i, mapping=m, address=0x400000 + 16 * i) for i, f in enumerate(FUNCS)]
    for _ in range(samples):
        depth = rnd.randint(1, 6)
        stack = [locs[0]] + [rnd.choice(locs[1:]) for _ in range(depth - 1)]
        n = rnd.randint(1, 5)
        labs = [Label("tenant", str=str(rnd.randint(1, 3)))] if labels and rnd.random() < 0.5 else []
        kw = {"tid": rnd.choice([11, 12]), "pid": 7} if threads else {}
        b.add_sample(b.stack(list(reversed(stack))), [n, n * 10_000_000], labels=labs, **kw)
    return b.finish()


def write_fleet(directory: Path, count: int, *, samples: int = 40, start_seed: int = 0) -> list[Path]:
    """``count`` synthetic pprof files in ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        path = directory / f"p{start_seed + i:03d}.pb.gz"
        polyprof.write(synthetic(start_seed + i, samples, time_s=1_700_000_000 + 86_400 * (i % 2)), path)
        out.append(path)
    return out


def top_rows(result) -> list:  # noqa: ANN001
    """What a top answer is: rows, total and node count (comparable across runs)."""
    return [result.total, result.node_count, [(r.name, r.flat, r.cum, r.inline) for r in result.rows]]


def traces_answer(result) -> list:  # noqa: ANN001
    """A traces answer as a sorted list of (stack, labels, value)."""
    return sorted((tuple(f.name for f in result.stacks[s]), repr(result.labels[lab]), int(v))
                  for s, lab, v in zip(result.sample_stack.tolist(), result.sample_labels.tolist(),
                                       result.sample_value.tolist()))


def answers(store) -> list:  # noqa: ANN001
    """Several query answers of a store at once (for 'never changes an answer' properties)."""
    return [top_rows(store.top(nodecount=0)), top_rows(store.top(nodecount=0, sample_index="samples")),
            top_rows(store.top(nodecount=0, where="time < TIMESTAMP '2023-11-15'")),
            top_rows(store.top(nodecount=0, tagfocus="tenant=2")), traces_answer(store.traces())]
