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


def test_a_value_marked_weak_is_shared_while_held_and_made_again_after():
    import gc

    class Box:  # a plain object: weakly referable
        pass

    cache = _Cache(4, weak=lambda value: True)
    made = []

    def make() -> Box:
        made.append(1)
        return Box()

    held = cache.get("k", make)
    assert cache.get("k", make) is held and len(made) == 1  # shared while a request holds it
    del held
    gc.collect()
    cache.get("k", make)
    assert len(made) == 2  # let go once nobody held it


def test_an_oversized_filtered_copy_is_not_kept_after_its_answer():
    """A filtered copy that remade the stacks and whose own arrays outweigh half the input
    (hide on the benchmark pprof: 100 MB of its own from a 92 MB input) is held weakly: let go
    once its answer is made. The demo's copies are small, so the input's weight is set to two
    bytes to make them big; a copy that only selects samples is kept whatever it weighs."""
    import gc
    import weakref

    from helpers import REPO
    from web_support import app, get

    from polyprof.web.session import FILTER_FIELDS

    a = app(REPO / "examples" / "demo.pb.gz")
    s = a.session
    get(a, "/api/top?focus=main")  # selects samples only: kept
    s._input_bytes = 2
    tree = get(a, "/api/tree?hide=runtime")  # (a top table of a hide remakes no stacks: ReshapeView)
    gc.collect()
    by = {k[1][FILTER_FIELDS.index("hide")] + k[1][FILTER_FIELDS.index("focus")]: v[0]
          for k, v in s._filtered.items.items()}
    assert isinstance(by["'runtime'None"], weakref.ref) and by["'runtime'None"]() is None
    assert not isinstance(by["None'main'"], weakref.ref)
    assert get(a, "/api/tree?hide=runtime") == tree  # made again, the same
