"""63-bit content-hash ids: the same content gets the same id on any worker.

Every row of the store's dictionaries (functions, mappings, frames,
callsites, label sets) and every profile is named by a hash of what it is,
never by a counter, so

- workers ingest in parallel without coordinating,
- re-ingesting a file produces the ids already stored (idempotence),
- late symbolization fills a frame's names in place, keeping its id (the id
  is the hash of the frame as it was first ingested), so no stack is
  renumbered.

Strings are hashed with BLAKE2b (8 bytes); numbers and ids are combined with
a SplitMix64-style mixer, vectorized over numpy arrays. Ids are positive
int64 (63 bits, never 0): 0 means "none" in the store's id columns (the
empty stack, no mapping, no parent, no labels). With n distinct rows the
chance of any collision is about n^2 / 2^64 (below 1e-3 for 10^8 rows).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["K1", "TAGS", "combine", "finish", "hash_strings", "hash_text", "mix"]

_MASK63 = np.uint64(2**63 - 1)
K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xBF58476D1CE4E5B9)
_K3 = np.uint64(0x94D049BB133111EB)

#: One seed per kind of row, so a function and a frame never share an id.
TAGS = {name: np.uint64(int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little"))
        for name in ("function", "mapping", "frame", "line", "callsite", "labelset", "label", "profile")}


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of uint64 that spreads every input bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * _K2
    x = x ^ (x >> np.uint64(27))
    x = x * _K3
    return x ^ (x >> np.uint64(31))


def combine(h: np.ndarray | np.uint64, value: np.ndarray | int | np.integer) -> np.ndarray:
    """Fold ``value`` (int64/uint64 array or scalar, reinterpreted as uint64) into hash ``h``.

    Works on arrays (at least one dimension): numpy wraps array arithmetic
    silently, where numpy scalars would warn about the intended overflow.
    """
    v = np.atleast_1d(np.asarray(value))
    v = v.astype(np.int64, copy=False).view(np.uint64) if v.dtype != np.uint64 else v
    return mix((np.atleast_1d(np.asarray(h, dtype=np.uint64)) * K1) ^ v)


def finish(h: np.ndarray | np.uint64) -> np.ndarray:
    """Hashes as store ids: int64 in [1, 2^63)."""
    out = (np.asarray(h, dtype=np.uint64) & _MASK63).astype(np.int64)
    out[out == 0] = 1
    return out


def hash_text(text: str) -> int:
    """The uint64 hash of one string (BLAKE2b, 8 bytes)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def hash_strings(strings: list[str], cache: dict[str, int] | None = None) -> np.ndarray:
    """uint64 hash of every string; ``cache`` (string -> hash) is reused across calls.

    Workers keep one cache for all the files they ingest: fleet profiles share
    most of their function and file names.
    """
    if cache is None:
        cache = {}
    got = list(map(cache.get, strings))
    for i, h in enumerate(got):
        if h is None:
            got[i] = cache[strings[i]] = hash_text(strings[i])
    return np.array(got, dtype=np.uint64)
