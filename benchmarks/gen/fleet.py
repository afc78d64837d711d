"""Generate a realistic fleet of pprof CPU profiles for benchmarks/bench_store.py.

Call-graph shapes come from a real Go CPU profile of the peer data
(google/pprof's ``large.cpu``): its 1,500 hottest stacks (about 10k
functions, depth 23 on average, up to 62) are the code a service runs. Each
generated profile is one "pod-minute" of that service, as the Go runtime
writes it (one sample per distinct stack and label set):

- 5,000 samples: (stack, labels) pairs drawn with the stacks' real weights,
  counts 1..20, cpu = count x 10 ms; 10,000 profiles hold 50M samples;
- sample labels: ``endpoint`` on every sample (8 values), ``tenant`` on a
  fifth (50 values);
- a version (v1..v5): each version moves the leaf of a fixed 5% of stacks to
  a version-specific function (what a diff between versions should find),
  and has its own build id;
- a region (us, eu, asia) and a start time spread over 7 days.

The tables of a version (functions, locations, mapping, strings) are encoded
once with polyprof's pprof writer and gzipped once; a profile is that gzip
member followed by a second one holding its samples, label strings, time and
duration (repeated protobuf fields concatenate, and gzip readers - Go's,
Python's, polyprof's - read every member), both at level 1 as the Go runtime
compresses. Files land in ``OUT/version=vN/region=R/pNNNNN.pb.gz``.

    python benchmarks/gen/fleet.py OUT [--profiles 10000] [--samples 5000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import gzip
import multiprocessing
import sys
from pathlib import Path

import numpy as np

import polyprof
from polyprof.model.builder import ProfileBuilder
from polyprof.formats.pprof._write import encode
from polyprof.wire.encode import varint

VERSIONS = ("v1", "v2", "v3", "v4", "v5")
REGIONS = ("us", "eu", "asia")
ENDPOINTS = ("/api/search", "/api/cart", "/api/login", "/api/feed", "/healthz", "/api/upload", "/api/pay",
             "/api/profile")
DAY = 86_400 * 10**9
START = 1_714_521_600 * 10**9  # 2024-05-01 00:00 UTC

POPULATION = 1500
_UNIVERSE: dict[str, tuple] = {}


def _count_strings(data: bytes) -> int:
    """How many string_table entries (field 6) a profile.proto message holds."""
    i, n = 0, 0

    def read() -> int:
        nonlocal i
        shift = value = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    while i < len(data):
        tag = read()
        if tag & 7 == 2:
            size = read()
            i += size
            n += tag >> 3 == 6
        elif tag & 7 == 0:
            read()
        else:
            raise ValueError(f"unexpected wire type {tag & 7}")
    return n


def _field(number: int, body: bytes) -> bytes:
    return varint((number << 3) | 2) + varint(len(body)) + body


def _universe(version: str, seed_path: str) -> tuple:
    """(static bytes, encoded location ids per population stack, weights, encoded labels) of a version."""
    if version in _UNIVERSE:
        return _UNIVERSE[version]
    p = polyprof.read(seed_path)
    weight = p.samples.values[:, -1]
    hot = np.argsort(-weight, kind="stable")[:POPULATION]
    moved = set(np.random.default_rng(7).choice(POPULATION, size=POPULATION // 20, replace=False).tolist())
    b = ProfileBuilder("pprof")
    b.set_sample_types([("samples", "count"), ("cpu", "nanoseconds")])
    b.meta.period_type, b.meta.period = polyprof.ValueType("cpu", "nanoseconds"), 10_000_000
    mapping = b.mapping(0x400000, 0x2000000, 0, "/app/server", f"build-{version}", 15)
    strs, cache = p.strings, {}

    def location(row: int) -> int:
        if row not in cache:
            lines = []
            for r in p.locations.lines_of(row):
                fn = int(p.lines.function[r])
                name = strs[p.functions.name[fn]]
                lines.append((b.function(name, name, strs[p.functions.filename[fn]]), int(p.lines.line[r]), 0))
            cache[row] = b.location(mapping, int(p.locations.address[row]), lines)
        return cache[row]

    stacks = []
    for k, sample in enumerate(hot.tolist()):
        locs = [location(r) for r in p.callsites.path(int(p.samples.stack[sample]))]
        if k in moved:  # this version's code for that leaf
            name = f"server/{version}.hot{k % 97}"
            locs[0] = b.location(mapping, 0x1f00000 + k, [(b.function(name, name, f"{version}/hot.go"), 10, 0)])
        stacks.append(_field(1, b"".join(varint(loc + 1) for loc in locs)))  # pprof ids are rows + 1
    static = encode(b.finish(check=False))
    base = _count_strings(static)
    extra = ["endpoint", "tenant", *ENDPOINTS, *(str(t) for t in range(1, 51))]
    sid = {text: base + i for i, text in enumerate(extra)}
    static = gzip.compress(static + b"".join(_field(6, text.encode()) for text in extra), compresslevel=1)
    labels = [[_field(3, varint(8) + varint(sid["endpoint"]) + varint(16) + varint(sid[e]))
               + (_field(3, varint(8) + varint(sid["tenant"]) + varint(16) + varint(sid[str(t)])) if t else b"")
               for t in range(51)] for e in ENDPOINTS]
    w = weight[hot].astype(np.float64)
    _UNIVERSE[version] = (static, stacks, w / w.sum(), labels)
    return _UNIVERSE[version]


def _profile(index: int, seed_path: str, samples: int) -> tuple[bytes, str, str]:
    """The gzipped profile.proto of fleet profile ``index``, its version and region."""
    version, region = VERSIONS[index % len(VERSIONS)], REGIONS[(index // len(VERSIONS)) % len(REGIONS)]
    static, stacks, weight, labels = _universe(version, seed_path)
    rng = np.random.default_rng(1000 + index)
    keys = np.zeros(0, dtype=np.int64)
    while keys.size < samples:  # distinct (stack, endpoint, tenant) triples, hot stacks more often
        n = samples * 2
        tenant = np.where(rng.random(n) < 0.2, rng.integers(1, 51, size=n), 0)
        stack = rng.choice(len(stacks), size=n, p=weight)
        draw = (stack * len(ENDPOINTS) + rng.integers(0, len(ENDPOINTS), size=n)) * 51 + tenant
        keys = np.unique(np.concatenate([keys, draw]))
    keys = rng.permutation(keys)[:samples]
    pop, rest = np.divmod(keys, len(ENDPOINTS) * 51)
    endpoint, tenant = np.divmod(rest, 51)
    counts = rng.integers(1, 21, size=samples)
    value = [b""] + [_field(2, varint(c) + varint(c * 10_000_000)) for c in range(1, 21)]
    head: dict[int, bytes] = {}
    parts = []
    for s, e, t, c in zip(pop.tolist(), endpoint.tolist(), tenant.tolist(), counts.tolist()):
        body = (stacks[s], value[c], labels[e][t])
        size = len(body[0]) + len(body[1]) + len(body[2])
        tag = head.get(size)
        if tag is None:
            tag = head[size] = varint((2 << 3) | 2) + varint(size)
        parts += (tag, *body)
    start = START + int(rng.integers(0, 7 * DAY))
    parts.append(varint(9 << 3) + varint(start) + varint(10 << 3) + varint(60 * 10**9))
    return static + gzip.compress(b"".join(parts), compresslevel=1), version, region


def _write(task: tuple[int, str, str, int]) -> int:
    index, out, seed_path, samples = task
    version, region = VERSIONS[index % len(VERSIONS)], REGIONS[(index // len(VERSIONS)) % len(REGIONS)]
    path = Path(out) / f"version={version}" / f"region={region}" / f"p{index:05d}.pb.gz"
    if path.exists():  # files of an interrupted run are kept
        return samples
    data, _, _ = _profile(index, seed_path, samples)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.rename(path)
    return samples


def generate(out: Path, seed_path: Path, profiles: int, samples: int, jobs: int) -> int:
    """Write the fleet (files already there are kept); returns the number of samples."""
    tasks = [(i, str(out), str(seed_path), samples) for i in range(profiles)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        total = 0
        for i, n in enumerate(pool.imap_unordered(_write, tasks, chunksize=16), 1):
            total += n
            if i % 1000 == 0:
                print(f"generated {i}/{profiles} profiles", file=sys.stderr)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "peer-data" /
                    "google__pprof" / "internal" / "proftest" / "testdata" / "large.cpu")
    ap.add_argument("--profiles", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=5_000)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    n = generate(args.out, args.seed, args.profiles, args.samples, args.jobs)
    print(f"{args.profiles} profiles, {n} samples in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
