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


def _sized(n: int) -> np.ndarray:
    return np.zeros(n, np.int8)


def test_caches_of_one_pool_share_its_budget_least_recently_used_first():
    """Three caches of one pool: room for a new value is made across all of them, the value
    used longest ago first (whichever cache holds it), and never from a ``keep`` cache."""
    from polyprof.web.session import _Pool

    pool = _Pool(3000)
    graphs = _Cache(8, pool=pool, weigh=_array_bytes)
    results = _Cache(8, pool=pool, weigh=_array_bytes)
    shapes = _Cache(8, pool=pool, weigh=_array_bytes, keep=True)
    shapes.get("shape", lambda: _sized(1000))
    results.get("old table", lambda: _sized(500))
    graphs.get("graph", lambda: _sized(1000))
    results.get("old table", lambda: _sized(500))  # used again: now newer than "graph"
    results.get("new table", lambda: _sized(900))  # 3400 > 3000: the graph (least recent) goes
    assert list(graphs.items) == [] and list(results.items) == ["old table", "new table"]
    assert list(shapes.items) == ["shape"]
    graphs.get("graph", lambda: _sized(1000))  # guesses 1000: 2400 + 1000 > 3000, "old table" goes
    assert list(results.items) == ["new table"] and pool.held() == 2900


def test_room_is_made_before_the_value_is_computed():
    """When ``make`` runs, what the pool holds plus the guess (the last value's weight, or the
    given ``guess``) fits the budget: the previous graph is let go before the next is built."""
    cache = _Cache(8, budget=2500, weigh=_array_bytes)
    held_while_making = []

    def make(n: int):  # noqa: ANN202
        held_while_making.append(cache.pool.held())
        return _sized(n)

    for key in "abcd":
        cache.get(key, lambda: make(1000))
    assert held_while_making == [0, 1000, 1000, 1000]  # each time one of 1000 had to go first
    cache.get("small", lambda: make(10), guess=10)  # a small derived value: nothing goes
    assert held_while_making[-1] == 2000 and len(cache.items) == 3
    cache.get("e", lambda: make(1000))  # the guess is still 1000, not the small value's 10
    assert held_while_making[-1] <= 1500
    assert cache.pool.held() <= 2500


def test_a_value_bigger_than_guessed_lets_the_others_go_after_it_is_made():
    cache = _Cache(8, budget=2500, weigh=_array_bytes)
    cache.get("a", lambda: _sized(1000))
    cache.get("b", lambda: _sized(100), guess=0)
    cache.get("huge", lambda: _sized(4000), guess=0)  # over the whole budget: kept alone
    assert list(cache.items) == ["huge"]


def test_a_pinned_value_goes_last_and_stays_pinned_when_made_again():
    cache = _Cache(8, budget=2500, weigh=_array_bytes)
    cache.pinned.add("landing")
    made = []

    def make(key: str, n: int):  # noqa: ANN202
        made.append(key)
        return _sized(n)

    cache.get("landing", lambda: make("landing", 1000))
    cache.get("x", lambda: make("x", 100), guess=100)
    cache.get("y", lambda: make("y", 100), guess=100)
    cache.get("landing", lambda: make("landing", 1000))  # most recent now, still
    cache.get("z", lambda: make("z", 1000))  # 1200 + 1000 fits: nothing goes
    assert set(cache.items) == {"landing", "x", "y", "z"}
    cache.get("w", lambda: make("w", 1000))  # 2200 + 1000: x, y, z go before the pinned landing
    assert set(cache.items) == {"landing", "w"}
    cache.get("v", lambda: make("v", 2000), guess=2000)  # w goes, and then only the landing graph can
    assert set(cache.items) == {"v"}
    cache.get("landing", lambda: make("landing", 1000))  # "back": made again (v goes), pinned as before
    cache.get("u", lambda: make("u", 1000))
    cache.get("t", lambda: make("t", 1000))  # 2000 + 1000: u goes, not the landing graph
    assert set(cache.items) == {"landing", "t"} and made.count("landing") == 2


def test_a_value_is_computed_once_while_several_requests_wait_for_it():
    import threading

    cache = _Cache(4)
    started, release = threading.Event(), threading.Event()
    calls = []

    def make() -> list[int]:
        calls.append(1)
        started.set()
        release.wait(10)
        return [1]

    got = []
    first = threading.Thread(target=lambda: got.append(cache.get("k", make)))
    first.start()
    started.wait(10)  # the first request is computing
    others = [threading.Thread(target=lambda: got.append(cache.get("k", make))) for _ in range(3)]
    for t in others:
        t.start()
    assert cache.get("other", lambda: "free") == "free"  # other keys do not wait for it
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert len(calls) == 1 and len(got) == 4 and all(x is got[0] for x in got)
    assert not cache.flights


def test_answers_are_the_same_when_the_budget_lets_everything_go():
    """A session whose budget holds nothing makes every graph and table again on each request
    (the pinned landing graph too): the answers are those of a session that keeps them."""
    import urllib.parse

    from helpers import REPO
    from web_support import app, get

    from polyprof.analysis.options import Options

    kept, starved = app(REPO / "examples" / "demo.pb.gz"), app(REPO / "examples" / "demo.pb.gz")
    for a in (kept, starved):
        a.session.flame(0, Options(), pin=True)
    starved.session._pool.limit = lambda: 1  # type: ignore[method-assign]
    hot = urllib.parse.quote(get(kept, "/api/top?nodecount=1")["rows"][0]["name"], safe="")
    urls = ["/api/flame", "/api/top?nodecount=0&nodefraction=0", "/api/flame?focus=main", f"/api/sandwich?fn={hot}",
            f"/api/sandwich?fn={hot}&min_fraction=0", "/api/flame?inverted=1", "/api/flame?hide=runtime",
            "/api/top?hide=runtime", "/api/flame", "/api/diff?b=0", "/api/flame?b=0", "/api/calltree?id=0&inverted=1",
            "/api/flame?root=1"]
    for url in urls:
        assert get(starved, url) == get(kept, url), url
    held = [w for c in starved.session._pool.caches if not c.keep for _, w, _ in c.items.values() if w > 0]
    assert len(held) <= 1  # at most the value just made


def test_the_diff_table_is_computed_once_per_options(monkeypatch):
    from helpers import REPO
    from web_support import app, get

    from polyprof.analysis import diff as diff_mod

    calls = []
    real = diff_mod.diff
    monkeypatch.setattr(diff_mod, "diff", lambda *a, **k: calls.append(1) or real(*a, **k))
    a = app(REPO / "examples" / "demo.pb.gz")
    first = get(a, "/api/diff?b=0")
    assert get(a, "/api/diff?b=0") == first and len(calls) == 1
    assert get(a, "/api/diff?b=0&by=stack") != first and len(calls) == 2  # another table: computed


def test_the_budget_is_a_share_of_what_the_process_holds_once_the_inputs_are_read(monkeypatch):
    from helpers import REPO
    from web_support import session

    from polyprof.web import memory, session as session_mod

    monkeypatch.setattr(memory, "resident", lambda: 2**30)
    assert session(REPO / "examples" / "demo.pb.gz")._pool.budget == session_mod.CACHE_BUDGET * 2**30
    monkeypatch.setattr(memory, "resident", lambda: None)  # no /proc: a multiple of the inputs' arrays
    s = session(REPO / "examples" / "demo.pb.gz")
    assert s._pool.budget == max(session_mod.MIN_CACHE_BUDGET, session_mod.CACHE_BUDGET_OF_ARRAYS * s._input_bytes)


def test_resident_grows_with_what_the_process_touches():
    import sys

    import pytest

    from polyprof.web import memory

    if not sys.platform.startswith("linux"):
        pytest.skip("/proc/self/statm is Linux's")
    before = memory.resident()
    block = np.ones(64 * 2**20, np.uint8)  # touched: resident
    after = memory.resident()
    assert before and after and after - before >= 48 * 2**20
    del block


def test_the_budget_is_never_below_what_one_view_needs():
    """Where the landing graph and the name trees alone outweigh the budget (the worst benchmark
    pprof: 297 + 84 MB against 265), a small value made beside them (a sandwich, a search) does
    not let the landing graph go: the limit is at least the name trees, a graph as big as the
    pinned one and the spare room of a filtered copy."""
    from polyprof.web.session import _Pool

    pool = _Pool(1000)
    pool.spare = 100
    graphs = _Cache(8, pool=pool, weigh=_array_bytes)
    shapes = _Cache(2, pool=pool, weigh=_array_bytes, keep=True)
    results = _Cache(8, pool=pool, weigh=_array_bytes)
    shapes.get("shape", lambda: _sized(400))
    graphs.pinned.add("landing")
    graphs.get("landing", lambda: _sized(900))
    assert pool.limit() == 400 + 900 + 100
    results.get("sandwich", lambda: _sized(50))
    results.get("table", lambda: _sized(50))
    assert set(graphs.items) == {"landing"} and set(results.items) == {"sandwich", "table"}
    graphs.get("filtered graph", lambda: _sized(900))  # guessed as the landing graph: it goes first
    assert set(graphs.items) == {"filtered graph"} and pool.held() <= pool.limit()
