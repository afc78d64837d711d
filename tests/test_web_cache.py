"""The web session's caches: results weighed by the bytes of their arrays, evicted by a byte budget."""

from __future__ import annotations

import numpy as np

from polyprof.web.session import _array_bytes, _Cache


def test_array_bytes_counts_each_array_once():
    big = np.zeros(1000, np.int64)
    value = ({"a": big, "b": big[10:20]}, [big], (np.ones(10, np.int32), "name", 3))
    assert _array_bytes(value) == 8000 + 40
    assert _array_bytes({"rows": ["x", "y"], "n": 2}) == 0


def test_a_byte_budget_lets_the_least_recently_used_go_first():
    cache = _Cache(16, budget=2500, weigh=_array_bytes)
    made = []

    def make(n: int):  # noqa: ANN202
        made.append(n)
        return np.zeros(n, np.int8)

    for key, n in (("a", 1000), ("b", 1000), ("a", 0), ("c", 1000)):
        cache.get(key, lambda n=n: make(n))
    assert list(cache.items) == ["a", "c"]  # "b" was the least recently used when "c" needed room
    cache.get("b", lambda: make(1000))
    assert made == [1000, 1000, 1000, 1000]
