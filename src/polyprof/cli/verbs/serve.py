"""polyprof serve: the interactive web view (flame graph, top, sandwich, call tree, timeline, labels, diff)."""

from __future__ import annotations

import argparse
import os
import re
import sys

from polyprof.cli import common

NAME = "serve"
HELP = "interactive web view on this machine: flame graph, top, sandwich, call tree, timeline, labels, diff"
EXAMPLES = """\
examples:
  polyprof serve cpu.pb.gz                       # opens http://127.0.0.1:8080/ in a browser
  polyprof serve trace.perfetto-trace --no-browser --port 9000
  polyprof serve new.pb.gz --base old.pb.gz      # diff view: flame coloured by change
  polyprof serve a.pb.gz b.pb.gz c.pb.gz         # a picker over the three; --merge makes them one
  polyprof serve heap.pb.gz --http :8081 --sample-index inuse_space --focus 'json'
  polyprof serve --store fleet/ --where "version = '120'"   # a fleet store: cohort picker on every view
The page reads its state from the URL (view, filters, zoom, selection), so a
link reopens the same view. Analysis and filter flags set the page's starting
state. Scripts can use the JSON API the page uses: GET /api lists the
endpoints; their parameters are the option names (focus, sample_index, ...).
The server binds 127.0.0.1 unless told otherwise and answers only requests
that name it in their Host header. Ctrl-C stops it (exit status 130)."""

DEFAULT_PORT = 8080


def _http(text: str) -> tuple[str | None, int]:
    m = re.fullmatch(r"(?:(\[[0-9a-fA-F:.]+\]|[^:\[\]]*):)?(\d{1,5})", text.strip())
    if not m or int(m.group(2)) > 65535:
        raise argparse.ArgumentTypeError(f"expected [HOST]:PORT (e.g. :8080 or localhost:8080), got {text!r}")
    return (m.group(1) or None), int(m.group(2))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="*", metavar="FILE", help="profile files (any readable format; gzip is fine)")
    p.add_argument("--base", "--diff-base", metavar="BASE",
                   help="profile to compare against: turns on the diff view (pprof's -base and -diff_base)")
    g = p.add_argument_group("server")
    g.add_argument("--host", default=None, metavar="ADDR",
                   help="address to bind (default 127.0.0.1; anything else is reachable from other machines)")
    g.add_argument("--port", type=int, default=None, metavar="N",
                   help=f"port (default {DEFAULT_PORT}, or a free one when it is taken; 0 = any free port)")
    g.add_argument("--http", type=_http, metavar="[HOST]:PORT", help="pprof's spelling of --host and --port")
    g.add_argument("--no-browser", action="store_true", help="do not open a browser, just print the URL")
    _store_flags(p)
    common.add_analysis_flags(p, nodecount=None)
    common.add_report_flags(p)  # pprof's report flags set the page's starting state, as on pprof -http
    common.add_filter_flags(p)
    common.add_input_flags(p)


def _store_flags(p: argparse.ArgumentParser) -> None:
    from polyprof.cli.verbs.store import add_cohort_flags

    p.add_argument("--store", metavar="STORE", help="serve a fleet store (polyprof store ingest) instead of "
                   "files: the page picks a cohort (--where, --from/--to, label facets) for every view")
    add_cohort_flags(p)


def _address(args: argparse.Namespace) -> tuple[str, int | None]:
    host, port = args.host, args.port
    if args.http is not None:
        host, port = args.http[0] or host, args.http[1]
    return (host or "127.0.0.1").strip("[]"), port


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.web import server
    from polyprof.web.app import App

    from polyprof.web import memory

    host, port = _address(args)
    memory.tune()
    session = _session(args, env)
    memory.give_back()  # the readers' buffers
    _compile_later_views(session)
    with env.status("preparing the flame graph"):
        _warm(session)
    app = App(session, ())
    httpd = _bind(app, host, port)
    app.hosts = server.accepted_hosts(host, httpd.server_port)
    url = server.url_of(host, httpd.server_port)
    if not server.is_loopback(host):
        env.note(f"warning: serving on {host}: anyone who can reach this machine on port "
                 f"{httpd.server_port} can read these profiles")

    def ready() -> None:
        env.out(f"Serving web UI on {url}")
        env.stdout.flush()
        env.note("press Ctrl-C to stop")
        if not args.no_browser:
            _open_browser(url, env)

    server.run(httpd, ready)  # until Ctrl-C: KeyboardInterrupt -> "interrupted", exit 130 (cli.main)
    return 0


def _compile_later_views(session) -> None:  # noqa: ANN001
    """Start compiling the kernels of the views after the landing page (sandwich, filters,
    inverted) in the background, for large inputs: the first run after an install then
    compiles them while the landing graph is built and read, not on the first click."""
    from polyprof.web import warmup

    warmup.start(max((len(x.profile.callsites) for x in session.inputs if x.profile is not None), default=0))


def _bind(app, host: str, port: int | None):  # noqa: ANN001, ANN202
    from polyprof.errors import OptionsError
    from polyprof.web import server

    try:
        return server.make_server(app, host, DEFAULT_PORT if port is None else port)
    except OSError as exc:
        if port is None:  # the default port is taken: any free one will do
            return server.make_server(app, host, 0)
        raise OptionsError(f"cannot serve on {host}:{port}: {exc.strerror or exc}; choose another {{port}}",
                           options=("port",)) from None


def _session(args: argparse.Namespace, env):  # noqa: ANN001, ANN202
    from polyprof.errors import OptionsError
    from polyprof.web.session import Input, Session

    if args.store:
        if args.inputs or args.base:
            raise OptionsError("serve either FILEs or --store STORE, not both (a store's cohorts replace "
                               "--base: the diff view takes a base --where)", options=("store",))
        import polyprof.store

        return Session([], store=polyprof.store.open(args.store), defaults=_defaults(args))
    if not args.inputs:
        raise OptionsError("nothing to serve: give profile FILEs or --store STORE", options=("inputs",))
    if args.where or args.time_from or args.time_to:
        raise OptionsError("--where, --from and --to select a cohort of a --store", options=("where",))
    reading = argparse.Namespace(**{**vars(args), "time_range": None})  # a filter here, as in every verb
    read = [(path, common.read_profile(reading, env, path)) for path in args.inputs]
    if args.merge and len(read) > 1:
        from polyprof.model.merge import align_sample_types, merge
        from polyprof.model.profile import Label

        paths = [path for path, _ in read]
        merged = merge(align_sample_types([p for _, p in read], paths),
                       [[Label("input", str=os.path.basename(path))] for path in paths])
        inputs = [Input(f"{len(paths)} files merged", paths[0], merged)]
    else:
        inputs = [Input(os.path.basename(path), path, p) for path, p in read]
    if args.base:
        inputs.append(Input(os.path.basename(args.base) + " (base)", args.base,
                            common.read_profile(reading, env, args.base), is_base=True))
    return Session(inputs, defaults=_defaults(args))


def _defaults(args: argparse.Namespace) -> dict[str, str]:
    """The command line's analysis, report and filter flags as the page's URL parameters
    (those that differ from the library's defaults: the page's tables show every node
    unless --nodefraction asks otherwise)."""
    from polyprof.analysis.options import Options

    out: dict[str, str] = {}
    options, plain = common.analysis_options(args), vars(Options())
    for name, value in vars(options).items():
        if value is None or value is False or name == "nodecount" or value == plain[name]:
            continue
        if isinstance(value, frozenset):
            value = ",".join(str(v) for v in sorted(value))
        elif isinstance(value, tuple):
            value = ":".join("" if v is None else str(v) for v in value)
        elif value is True:
            value = "1"
        out[name] = str(value)
    if args.nodecount is not None:  # trims the tables, as pprof -http's -nodecount does
        out["nodecount"] = str(args.nodecount)
    for flag, param in (("where", "where"), ("time_from", "from"), ("time_to", "to")):
        if getattr(args, flag, None):
            out[param] = str(getattr(args, flag))
    return out


def _warm(session) -> None:  # noqa: ANN001
    """Compute what the landing page asks first (the flame graph, kept for good, and the top
    table), and the timeline's thread of every sample, so they open at once."""
    from polyprof.web.params import Query

    from polyprof.errors import PolyprofError

    from polyprof.web.api import ENDPOINTS

    from polyprof.web.api import COHORT

    cohort = {k: [session.defaults[k]] for k in COHORT if k in session.defaults}
    raw = {k: [v] for k, v in session.defaults.items() if k not in COHORT}
    try:
        index = session.default_new()
        if session.store is not None:
            index = session.cohort(*(session.defaults.get(k, "") for k in ("where", "from", "to")))
        session.flame(index, Query(raw, {}).options, base=session.base, pin=True)
        top = ENDPOINTS["top"]  # as the page asks for it (api.js tableParams): every node
        table = {"nodecount": ["0"], "nodefraction": ["0"], **raw}
        top.run(session, Query({**table, **cohort}, {**top.params, **(COHORT if session.store else {})}))
        if session.store is None:  # the threads of every sample: the timeline tab then bins at once
            line = ENDPOINTS["timeline"]  # as view_timeline.js asks for it
            line.run(session, Query({**raw, "bins": ["400"]}, line.params))
    except PolyprofError:  # a bad starting filter: the page shows the message
        pass


def _open_browser(url: str, env) -> None:  # noqa: ANN001
    import webbrowser

    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        env.note("no display found: open the URL above in a browser")
        return
    if not webbrowser.open(url):
        env.note("could not start a browser: open the URL above")
