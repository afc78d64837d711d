"""The serve warm-up compiles the kernels the later views call, with the types they pass."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO

_APP = '''app = App(Session([Input("demo", sys.argv[1], p)]), ("127.0.0.1",))
def ask(path):
    resp = app.handle("GET", path, {"Host": "127.0.0.1"})
    assert resp.status == 200, (path, resp.body[:300])
    return json.loads(resp.body)
'''  # a session on argv[1]'s profile p and a GET through the app

_VIEWS = """
import json
import polyprof
from polyprof.model import _tree_compiled as k
from polyprof.web import warmup
from polyprof.web.app import App
from polyprof.web.session import Input, Session

covered = warmup.KERNELS
assert warmup.compile_kernels(10)
after_warmup = {name: set(getattr(k, name).signatures) for name in covered}
from polyprof.analysis import _sandwich_compiled as v
view_signatures = set(v._view.signatures)
p = polyprof.read(sys.argv[1])
{app}hot = ask("/api/top?nodecount=1")["rows"][0]["name"]
for path in ("/api/flame", f"/api/sandwich?fn={hot}", "/api/flame?inverted=1", "/api/flame?focus=main",
             "/api/top?focus=main", f"/api/sandwich?fn={hot}&focus=main", f"/api/sandwich?fn={hot}&min_fraction=0&max_nodes=3"):
    ask(path)
new = {name: sorted(map(str, set(getattr(k, name).signatures) - after_warmup[name])) for name in covered}
new["_view"] = sorted(map(str, set(v._view.signatures) - view_signatures))
used = [name for name in covered if getattr(k, name).signatures] + (["_view"] if view_signatures else [])
print(json.dumps({"new": new, "used": used}))
""".replace("{app}", _APP)


def test_the_warm_up_compiles_what_the_views_call():
    """After :func:`compile_kernels`, a session's sandwich, inverted graph and filtered graph
    and table (compiled kernels forced on the demo) compile nothing more: the warm-up passes the
    views' argument types."""
    import json

    out = subprocess.run([sys.executable, "-c", "import sys\n" + _VIEWS, str(REPO / "examples" / "demo.pb.gz")],
                         capture_output=True, text=True, check=True, timeout=600,
                         env={"POLYPROF_KERNELS": "compiled", "PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["new"] == {name: [] for name in got["new"]}
    assert {"_reversed_paths", "_path_sums", "_compact", "_view"} <= set(got["used"])


def test_no_warm_up_without_the_compiled_kernels_loaded():
    """Small inputs stay on numpy: the warm-up loads nothing (no numba import for the demo)."""
    code = ("import sys\nfrom polyprof.web import warmup\nassert not warmup.compile_kernels(100_000)\n"
            "assert 'numba' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})


def test_the_cache_check_sees_the_compiled_kernels():
    """After a compile the warm-up's check finds every kernel in numba's cache (so later
    runs skip the warm-up), and the names it checks are the module's dispatchers."""
    code = ("from polyprof.web import warmup\nfrom polyprof.model import _tree_compiled as k\n"
            "assert warmup.compile_kernels(10)\nassert warmup.cached(k)\n"
            "assert all(hasattr(getattr(k, n), 'signatures') for n in warmup.KERNELS)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600,
                   env={"POLYPROF_KERNELS": "compiled", "PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})


_LABELS = """
import json
import polyprof
from polyprof.analysis import _labels_compiled as k
from polyprof.web.app import App
from polyprof.web.session import Input, Session

names = ("_marks", "_by_node", "_rows", "_layout")
p = polyprof.read(sys.argv[1])
{app}key = ask("/api/labels")["keys"][0]["key"]
import threading
for t in threading.enumerate():
    if t.name == "polyprof-warm-labels":
        t.join()
loaded = {name: set(getattr(k, name).signatures) for name in names}
ask(f"/api/flame?tagroot={key}")
print(json.dumps({"loaded": [n for n in names if loaded[n]],
                  "new": {n: sorted(map(str, set(getattr(k, n).signatures) - loaded[n])) for n in names}}))
""".replace("{app}", _APP)


def test_the_labels_panel_loads_the_group_by_kernel():
    """Asking for the labels panel loads the group-by-label kernels in the background with the
    argument types the group by passes: its first answer then loads nothing more."""
    import json

    out = subprocess.run([sys.executable, "-c", "import sys\n" + _LABELS, str(REPO / "examples" / "demo.pb.gz")],
                         capture_output=True, text=True, check=True, timeout=600,
                         env={"POLYPROF_KERNELS": "compiled", "PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == ["_marks", "_by_node", "_rows", "_layout"]
    assert got["new"] == {name: [] for name in got["new"]}
