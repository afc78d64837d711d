"""Benchmark: ``polyprof serve`` on the large benchmark profiles — API answer times, page time, memory.

For each input (the large pprof of bench_pprof.py: ~900k samples, 43 MB raw;
the Perfetto trace of bench_perfetto.py) it starts ``polyprof serve`` in its
own process and measures:

- start-up: from launch until the URL is printed (reading once, then the
  landing page's flame graph computed);
- each API answer's server-side time (the ``Server-Timing`` header), for
  what a user does, asked as the page asks (tables: every row): the landing page (flame + top), a sandwich, a search, a
  zoom, an expanded call-tree node, the timeline, and a filter change (flame
  + top with ``focus``), each asked twice (computed, then cached);
- what a user clicks next, each building a graph of its own: the inverted flame
  graph and call tree, a sandwich at full resolution (``min_fraction=0``), a hide
  filter, the labels panel, the flame graph grouped by the first label key
  (``tagroot``), its top table, the sandwich of its widest function and its
  inverted graph, and a diff (the input against itself as base: ``b=0``; the
  same work as against another file of the same size);
- the page: from navigation start until the flame graph is drawn, in
  Debian's Chromium driven by Playwright (skipped without them);
- the server's peak RSS after all of that, against ``polyprof top`` on the
  same file (peak RSS of a separate run), as a ratio.

Also the HTTP stack's own cost per request (``--only stack``).

    .venv/bin/python benchmarks/bench_serve.py [--only stack|pprof|perfetto] [--trace PATH]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def peak_rss(pid: int, field: str = "VmHWM") -> int:
    """VmHWM (or another size field of /proc/PID/status: VmRSS) of a live process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def ask(port: int, path: str) -> tuple[float, float, dict]:
    """(server ms, client ms, JSON answer) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    client = 1000 * (time.perf_counter() - started)
    if resp.status != 200:
        raise SystemExit(f"{path}: {resp.status} {body[:300]!r}")
    server = float(re.search(r"dur=([\d.]+)", resp.getheader("Server-Timing")).group(1))
    return server, client, json.loads(body)


def page_time(url: str, big: bool = False) -> float | None:
    """Milliseconds from navigation start until the landing page's flame graph is drawn
    (``big``: also a 100,000-frame slice, for the canvas's own drawing time)."""
    if not os.path.exists(CHROMIUM):
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.wait_for_selector("canvas[data-frames]", state="attached", timeout=600_000)
        ms = page.evaluate("performance.now()")
        draw = page.evaluate("document.querySelector('canvas').dataset.drawMs")
        frames = page.evaluate("document.querySelector('canvas').dataset.frames")
        print(f"  page: flame graph drawn {ms:.0f} ms after navigation start ({frames} frames, canvas draw {draw} ms)")
        if big:
            page.goto(url + "?min_fraction=0&max_nodes=100000")
            page.wait_for_selector("canvas[data-frames]", state="attached", timeout=600_000)
            draws = []
            for _ in range(3):  # redraws of the same data: the canvas's own cost
                page.set_viewport_size({"width": 1200 + 40 * len(draws), "height": 900})
                page.wait_for_timeout(300)
                draws.append(float(page.evaluate("document.querySelector('canvas').dataset.drawMs")))
            frames = page.evaluate("document.querySelector('canvas').dataset.frames")
            print(f"  canvas: {frames} frames drawn in {min(draws):.0f} ms (best of {len(draws)} redraws)")
        browser.close()
    return ms


def serve(path: Path) -> tuple[subprocess.Popen, int, float]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "polyprof", "serve", str(path), "--no-browser", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line.startswith("Serving"):
        proc.kill()
        raise SystemExit(f"serve did not start on {path}")
    return proc, int(line.strip().rstrip("/").rsplit(":", 1)[1]), time.perf_counter() - started


def top_peak(path: Path) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "polyprof", "top", str(path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss * 1024


def bench(name: str, path: Path) -> None:
    print(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    top_s, top_rss = top_peak(path)
    proc, port, startup = serve(path)
    try:
        print(f"  start-up (read + landing flame graph): {startup:.1f} s; polyprof top: {top_s:.1f} s; "
              f"peak {peak_rss(proc.pid) / 2**20:.0f} MB")
        page = page_time(f"http://127.0.0.1:{port}/")
        if page is not None:
            print(f"  page time to flame graph: {page / 1000:.2f} s (target < 2 s)")
        _, _, top = ask(port, "/api/top?nodecount=1")
        hot = top["rows"][0]["name"]
        fn = urllib.parse.quote(hot, safe="")
        _, _, flame = ask(port, "/api/flame")
        child = max((i for i, p in enumerate(flame["nodes"]["parent"]) if p == 0),
                    key=lambda i: flame["nodes"]["width"][i], default=0)
        focus = urllib.parse.quote(re.escape(hot.split("(")[0][-40:]), safe="")
        steps = [("landing flame", "/api/flame?min_fraction=0.0002"), ("landing top", "/api/top?nodecount=0&nodefraction=0"),
                 ("sandwich", f"/api/sandwich?fn={fn}"), ("search", f"/api/flame?search={fn}"),
                 ("zoom", f"/api/flame?root={flame['nodes']['id'][child]}"), ("call tree node", "/api/calltree?id=0"),
                 ("timeline", "/api/timeline"), ("filter: flame", f"/api/flame?focus={focus}"),
                 ("filter: top", f"/api/top?nodecount=0&nodefraction=0&focus={focus}"),
                 ("filter: sandwich", f"/api/sandwich?fn={fn}&focus={focus}")]
        print(f"  {'answer':<18} {'first ms':>9} {'again ms':>9} {'bytes':>10} {'peak MB':>8} {'RSS MB':>7}")
        print("  (peak MB: the server's peak so far, VmHWM; RSS MB: what it holds after the step, VmRSS)")
        worst = answers(port, proc.pid, steps)
        print(f"  slowest first answer: {worst / 1000:.2f} s (target < 1 s)")
        page = page_time(f"http://127.0.0.1:{port}/", big=True)
        if page is not None:
            print(f"  page time to flame graph after the filter changes: {page / 1000:.2f} s")
        rss = peak_rss(proc.pid)
        print(f"  memory: serve peak {rss / 2**20:.0f} MB, polyprof top peak {top_rss / 2**20:.0f} MB, "
              f"ratio {rss / top_rss:.2f}x (target <= 1.5x)")
        # what a user clicks next: the views and filters that build a graph of their own (after
        # the memory line above, whose answers it has always covered; their peak is printed apart)
        steps = []
        _, _, labels = ask(port, "/api/labels")
        key = urllib.parse.quote(labels["keys"][0]["key"], safe="") if labels["keys"] else ""
        hide = urllib.parse.quote(re.escape(top["rows"][0]["name"]), safe="")
        steps += [("inverted flame", "/api/flame?inverted=1"), ("inverted tree", "/api/calltree?id=0&inverted=1"),
                  ("sandwich all", f"/api/sandwich?fn={fn}&min_fraction=0"),
                  ("hide: flame", f"/api/flame?hide={hide}"),
                  ("hide: top", f"/api/top?nodecount=0&nodefraction=0&hide={hide}"),
                  ("labels", "/api/labels?nodecount=0"),
                  ("diff: flame", "/api/flame?b=0"), ("diff: table", "/api/diff?b=0")]
        if key:  # the page asks the top table of the grouped view too
            steps += [("group by label", f"/api/flame?tagroot={key}"),
                      ("group by: top", f"/api/top?nodecount=0&nodefraction=0&tagroot={key}")]
        worst = answers(port, proc.pid, steps)
        if key:  # under the group by: the sandwich of its widest function (a click on it) and the inverted view
            _, _, grouped = ask(port, f"/api/flame?tagroot={key}")
            cols = grouped["nodes"]
            widest = max((i for i, d in enumerate(cols["depth"]) if d >= 2), key=lambda i: cols["width"][i], default=0)
            grouped_fn = urllib.parse.quote(grouped["names"][cols["name"][widest]], safe="")
            worst = max(worst, answers(port, proc.pid, [
                ("group by: sandwich", f"/api/sandwich?fn={grouped_fn}&tagroot={key}"),
                ("group by: inverted", f"/api/flame?inverted=1&tagroot={key}")]))
        print(f"  slowest of these first answers: {worst / 1000:.2f} s (target < 1 s)")
        rss = peak_rss(proc.pid)
        print(f"  memory after these too: serve peak {rss / 2**20:.0f} MB, ratio {rss / top_rss:.2f}x")
        worst = answers(port, proc.pid, filter_kinds(port, focus, labels, top["rows"][0]["name"]))
        print(f"  slowest first answer of the other filter kinds: {worst / 1000:.2f} s (target < 1 s)")
        rss = peak_rss(proc.pid)
        print(f"  memory after the other filter kinds too: serve peak {rss / 2**20:.0f} MB, ratio {rss / top_rss:.2f}x "
              f"(target <= 1.5x)")
    finally:
        proc.terminate()
        proc.wait()


def filter_kinds(port: int, focus: str, labels: dict, hot: str) -> list[tuple[str, str]]:
    """A flame graph and a top table for every other kind of filter the page sets (each a
    filter change): ignore, show, show_from, prune_from on the hot function, a tagfocus on
    the first label key's heaviest value, the first half of the timeline."""
    kinds = [("ignore", focus), ("show", focus), ("show_from", focus),
             ("prune_from", urllib.parse.quote(re.escape(hot.split("(")[0]), safe=""))]
    if labels["keys"] and labels["keys"][0]["values"]:
        key = labels["keys"][0]
        value = max(key["values"], key=lambda v: abs(v["weight"]))
        spec = f"{key['key']}={value['value']}" if value.get("numeric") else f"{key['key']}={re.escape(value['value'])}"
        kinds.append(("tagfocus", urllib.parse.quote(spec, safe="")))
    _, _, line = ask(port, "/api/timeline")
    if line.get("has_time"):  # relative ns, as the page's brush sets it
        start, end = int(line["start"]), int(line["end"])
        kinds.append(("time_range", urllib.parse.quote(f"{start}:{(start + end) // 2}", safe="")))
    steps = []
    for name, value in kinds:
        steps += [(f"{name}: flame", f"/api/flame?{name}={value}"),
                  (f"{name}: top", f"/api/top?nodecount=0&nodefraction=0&{name}={value}")]
    return steps


def answers(port: int, pid: int, steps: list[tuple[str, str]]) -> float:
    """Ask each step twice (computed, then cached), print the times; the slowest first, in ms."""
    worst = 0.0
    for label, url in steps:
        first, _, body = ask(port, url)
        again, _, _ = ask(port, url)
        worst = max(worst, first)
        print(f"  {label:<18} {first:9.0f} {again:9.0f} {len(json.dumps(body)):10d} {peak_rss(pid) / 2**20:8.0f} "
              f"{peak_rss(pid, 'VmRSS') / 2**20:7.0f}")
    return worst


def http_stack(repeat: int = 400) -> None:
    """What the standard library's server costs per request: static asset and small JSON
    answers on one keep-alive connection, and 8 connections at once (a page loading)."""
    import statistics
    import threading

    proc, port, _ = serve(HERE.parent / "examples" / "demo.pb.gz")
    try:
        for path in ("/static/style.css", "/api/session"):
            conn = http.client.HTTPConnection("127.0.0.1", port)
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                conn.request("GET", path)
                conn.getresponse().read()
                times.append(time.perf_counter() - t0)
            print(f"  {path:<18} one connection: median {1000 * statistics.median(times):.2f} ms, "
                  f"{repeat / sum(times):.0f} requests/s")

        def client(n: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for _ in range(n):
                conn.request("GET", "/static/main.js")
                conn.getresponse().read()

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(repeat // 8,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"  8 connections at once: {repeat / (time.perf_counter() - t0):.0f} requests/s")
    finally:
        proc.terminate()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=("stack", "pprof", "perfetto"), action="append")
    ap.add_argument("--trace", help="Perfetto trace (default: bench_perfetto.py's benchmarks/out/perf_common.pftrace, "
                                    "generated when missing)")
    args = ap.parse_args()
    which = args.only or ["stack", "pprof", "perfetto"]
    from bench_pprof import byte_compile

    byte_compile()
    if "stack" in which:
        print("HTTP stack (standard library ThreadingHTTPServer), demo profile:")
        http_stack()
    if "pprof" in which:
        from bench_pprof import build

        bench("pprof (large)", build("large"))
    if "perfetto" in which:
        trace = Path(args.trace) if args.trace else HERE / "out" / "perf_common.pftrace"  # bench_perfetto's largest
        if not trace.exists():  # generated in a process of its own: a child forked from a process that
            # held the generator's 1.7 GB would report that as its peak (ru_maxrss survives fork and exec)
            code = f"import bench_perfetto as b; b.generate({str(trace)!r}, *b.TRACES['common'])"
            trace.parent.mkdir(exist_ok=True)
            subprocess.run([sys.executable, "-c", code], cwd=HERE, check=True)
        bench("perfetto (bench_perfetto.py)", trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
