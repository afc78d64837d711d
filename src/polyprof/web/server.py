"""The HTTP server: the standard library's ThreadingHTTPServer moving bytes for :class:`App`.

Why the standard library (docs/ARCHITECTURE.md has the measurement): one
user on loopback asks for a page, a dozen assets and a few JSON answers at a
time; answers are CPU-bound numpy work that an event loop would not speed
up; and nothing needs installing. A thread per connection (HTTP/1.1
keep-alive) answers small requests in well under a millisecond each.

:func:`accepted_hosts` gives the Host header values the server answers to
(the DNS-rebinding check), :func:`make_server` binds (IPv4 or IPv6), and
:func:`run` serves until interrupted, closing the socket on the way out.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from polyprof.web.app import App

__all__ = ["accepted_hosts", "is_loopback", "make_server", "run", "url_of"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only reaches this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def accepted_hosts(host: str, port: int) -> set[str]:
    """Host header values naming this server: the loopback names, the bound address, and, when
    bound to every interface or a public name, this machine's names and addresses. Each with
    ``:port``, and bare when the port is HTTP's default."""
    names = set(LOOPBACK_NAMES) | {_bracket(host.lower())}
    if not is_loopback(host):
        try:
            hostname = socket.gethostname()
            names |= {hostname.lower(), socket.getfqdn().lower()}
            names |= {_bracket(a) for a in socket.gethostbyname_ex(hostname)[2]}
        except OSError:
            pass
    names.discard("[::]")
    names.discard("0.0.0.0")
    out = {f"{n}:{port}" for n in names}
    if port == 80:
        out |= names
    return out


def url_of(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else _bracket(host))
    return f"http://{shown}:{port}/"


def _handler(app: App, quiet: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out in two writes: without TCP_NODELAY, Nagle and delayed
        # ACKs hold each keep-alive answer for 40 ms
        disable_nagle_algorithm = True
        server_version = "polyprof"
        sys_version = ""

        def _answer(self) -> None:
            resp = app.handle(self.command, self.path, dict(self.headers.items()))
            self.send_response(resp.status)
            for name, value in resp.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(resp.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(resp.body)

        do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _answer

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            if not quiet:
                super().log_message(format, *args)

    return Handler


def make_server(app: App, host: str, port: int, *, quiet: bool = True) -> ThreadingHTTPServer:
    """A bound (not yet serving) server; port 0 picks a free port (``server.server_port``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        allow_reuse_address = True

    return Server((host.strip("[]"), port), _handler(app, quiet))


def run(server: ThreadingHTTPServer, ready: Callable[[], None] | None = None) -> None:
    """Serve until KeyboardInterrupt (re-raised after the socket is closed)."""
    try:
        if ready:
            ready()
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
