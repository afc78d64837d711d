"""Requests to answers, with no sockets: routing, the Host check, headers, errors.

:meth:`App.handle` takes a method, a request target and the headers and
returns a :class:`Response`, so tests call it in-process and
:mod:`polyprof.web.server` only moves bytes. Routes:

- ``/`` the page; ``/static/NAME`` its assets, looked up by exact name in
  the package's ``static`` folder, listed once at start (no path from a
  request ever reaches the file system);
- ``/api`` the endpoint list; ``/api/NAME?...`` one endpoint
  (:mod:`polyprof.web.api`).

Security (the server binds loopback by default):

- the ``Host`` header must name this server (DNS rebinding: a page on
  ``evil.example`` whose name was re-pointed to 127.0.0.1 sends
  ``Host: evil.example`` and is refused), and an ``Origin`` header, when
  sent, must be this server's;
- no CORS headers, so other sites' scripts cannot read answers;
- a Content-Security-Policy that allows only this server's own scripts,
  styles and connections (no inline script, nothing remote), plus
  ``nosniff``, no referrer, no framing;
- GET and HEAD only; a bad parameter is a 400 with the message, an
  unexpected failure a 500 that says so (and the traceback goes to the
  terminal, never to the page).
"""

from __future__ import annotations

import importlib.resources
import json
import sys
import time
import traceback
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from polyprof.errors import OptionsError, PolyprofError
from polyprof.web.api import COHORT, ENDPOINTS, Download, describe
from polyprof.web.params import Query
from polyprof.web.session import Session

__all__ = ["CSP", "App", "Response"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_COMMON = (("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
           ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
           ("Cross-Origin-Opener-Policy", "same-origin"), ("Cross-Origin-Resource-Policy", "same-origin"))
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8"}


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def json(self) -> object:
        return json.loads(self.body)


def _static_files() -> dict[str, tuple[bytes, str]]:
    """Name -> (content, type) of every asset, read once from package data."""
    root = importlib.resources.files("polyprof.web") / "static"
    out = {}
    for item in root.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1] if "." in item.name else ""
        if item.is_file() and suffix in _TYPES:
            out[item.name] = (item.read_bytes(), _TYPES[suffix])
    return out


class App:
    """The web view's request handler for ``session``; ``hosts`` are the accepted Host values."""

    def __init__(self, session: Session, hosts: Iterable[str], *, log=None) -> None:  # noqa: ANN001
        self.session = session
        self.hosts = {h.lower() for h in hosts}
        self.static = _static_files()
        self.log = log or (lambda text: sys.stderr.write(text + "\n"))

    def handle(self, method: str, target: str, headers: Mapping[str, str]) -> Response:
        """The answer to one request."""
        refused = self._refused(headers)
        if refused:
            return _error(403, refused)
        if method not in ("GET", "HEAD"):
            resp = _error(405, f"method {method} not allowed: this server only answers GET")
            resp.headers.append(("Allow", "GET, HEAD"))
            return resp
        url = urllib.parse.urlsplit(target)
        path = url.path
        if path in ("/", "/index.html"):
            return self._asset("index.html")
        if path == "/favicon.ico":
            return Response(204, b"", [("Cache-Control", "max-age=86400"), *_COMMON])
        if path.startswith("/static/"):
            return self._asset(path[len("/static/"):])
        if path in ("/api", "/api/"):
            return _json(200, describe())
        if path.startswith("/api/"):
            started = time.perf_counter()
            resp = self._api(path[len("/api/"):], url.query)
            # the server's own time (browsers' developer tools and the benchmark read it)
            resp.headers.append(("Server-Timing", f"app;dur={1000 * (time.perf_counter() - started):.1f}"))
            return resp
        return _error(404, f"no such page: {path[:200]}")

    def _refused(self, headers: Mapping[str, str]) -> str | None:
        lower = {k.lower(): v for k, v in headers.items()}
        host = (lower.get("host") or "").strip().lower()
        if host not in self.hosts:
            return (f"Host {host[:100]!r} is not this server (requests must name it as "
                    f"{sorted(self.hosts)[0]}; refused to protect against DNS rebinding)")
        origin = lower.get("origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in self.hosts}:
            return f"cross-origin request from {origin[:100]!r} refused"
        return None

    def _asset(self, name: str) -> Response:
        found = self.static.get(name)
        if found is None:
            return _error(404, f"no such asset: {name[:200]}")
        body, kind = found
        return Response(200, body, [("Content-Type", kind), ("Cache-Control", "no-cache"), *_COMMON])

    def _api(self, name: str, query: str) -> Response:
        ep = ENDPOINTS.get(name)
        if ep is None:
            return _error(404, f"no endpoint {name[:100]!r}; endpoints: {', '.join(sorted(ENDPOINTS))}")
        try:
            raw = urllib.parse.parse_qs(query, keep_blank_values=True, max_num_fields=200)
        except ValueError as exc:  # more fields than any endpoint takes
            return _json(400, {"error": str(exc)})
        try:
            params = {**ep.params, **COHORT} if self.session.store is not None and "p" in ep.params else ep.params
            answer = ep.run(self.session, Query(raw, params, options=ep.options))
        except OptionsError as exc:
            return _json(400, {"error": str(exc), "options": list(exc.options)})
        except PolyprofError as exc:
            return _json(422, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - the page gets a message, the terminal the traceback
            self.log(f"polyprof serve: internal error on /api/{name}?{query[:500]}\n{traceback.format_exc()}")
            return _json(500, {"error": f"internal error, please report: {type(exc).__name__}: {exc}"})
        if isinstance(answer, Download):
            return Response(200, answer.body, [("Content-Type", answer.content_type),
                                               ("Content-Disposition", f'attachment; filename="{answer.filename}"'),
                                               ("Cache-Control", "no-store"), *_COMMON])
        return _json(200, answer)


def _json(status: int, obj: object) -> Response:
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    # <, > and & only occur inside JSON strings: escaped, no answer can ever read as markup
    body = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode("ascii")
    return Response(status, body, [("Content-Type", "application/json"), ("Cache-Control", "no-store"), *_COMMON])


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message})
