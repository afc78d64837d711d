"""A debuginfod client: debug files by build id over HTTP, cached on disk.

For each server (``$DEBUGINFOD_URLS``, space-separated, then ``--debuginfod``
URLs) it asks ``/buildid/<id>/debuginfo`` and, when that is missing,
``/buildid/<id>/executable``, as elfutils' client does. Downloads are
bounded: a size limit (refused from ``Content-Length`` before reading, and
while reading when the server does not say) and a time limit for the whole
transfer (a server trickling bytes is cut off too). What arrives goes to
``<cache>/debuginfod/<build id>/<kind>`` through a temporary file, so a
second run reads the cache and never contacts the server; a build id no
server had is remembered for a day (``.missing``). Offline, only the cache
is read.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from polyprof.symbolize.elf import build_id_of

__all__ = ["Debuginfod", "DEFAULT_MAX_BYTES", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 2 << 30
_MISS_TTL = 24 * 3600
_CHUNK = 1 << 20
_HEX = re.compile(r"[0-9a-f]{8,}")


class Debuginfod:
    """Fetches debug files by build id from a list of servers, through the cache."""

    def __init__(self, urls: list[str], cache: Path, *, timeout: float = DEFAULT_TIMEOUT,
                 max_bytes: int = DEFAULT_MAX_BYTES, offline: bool = False) -> None:
        self.urls = [u.rstrip("/") for u in urls if u.strip()]
        self.root = cache / "debuginfod"
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.offline = offline
        self.requests = 0  # HTTP requests made (tests check the cache saves them)
        self.problems: list[str] = []

    def _cached(self, build_id: str) -> Path | None:
        for kind in ("debuginfo", "executable"):
            path = self.root / build_id / kind
            if path.is_file():
                return path
        return None

    def _known_missing(self, build_id: str) -> bool:
        marker = self.root / build_id / ".missing"
        try:
            return time.time() - marker.stat().st_mtime < _MISS_TTL
        except OSError:
            return False

    def fetch(self, build_id: str) -> tuple[str, str] | None:
        """(local path, where it came from) of the debug file of ``build_id``, or None."""
        build_id = build_id.lower()
        if not _HEX.fullmatch(build_id):
            return None
        cached = self._cached(build_id)
        if cached is not None:
            return str(cached), f"debuginfod cache {cached}"
        if self.offline or not self.urls or self._known_missing(build_id):
            return None
        for url in self.urls:
            for kind in ("debuginfo", "executable"):
                got = self._download(url, build_id, kind)
                if got is not None:
                    return str(got), f"{url}/buildid/{build_id}/{kind}"
        self._remember_missing(build_id)
        return None

    def _remember_missing(self, build_id: str) -> None:
        if any("timed out" in p or "larger than" in p for p in self.problems):
            return  # a transient failure is no proof the server lacks it
        try:
            (self.root / build_id).mkdir(parents=True, exist_ok=True)
            (self.root / build_id / ".missing").touch()
        except OSError:
            pass

    def _download(self, url: str, build_id: str, kind: str) -> Path | None:
        import urllib.error  # imported on use: urllib.request brings http, ssl and email (~60 ms),
        import urllib.request  # and every read imports this module (symbolize.after_read)

        target = self.root / build_id / kind
        request = urllib.request.Request(f"{url}/buildid/{build_id}/{kind}",
                                         headers={"User-Agent": "polyprof"})
        self.requests += 1
        deadline = time.monotonic() + self.timeout
        tmp = target.with_name(f".{kind}.{os.getpid()}.part")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                size = resp.headers.get("Content-Length")
                if size is not None and size.isdigit() and int(size) > self.max_bytes:
                    self.problems.append(f"{url}: {kind} of {build_id} is larger than the limit "
                                         f"({int(size)} > {self.max_bytes} bytes); skipped")
                    return None
                target.parent.mkdir(parents=True, exist_ok=True)
                if not self._copy(resp, tmp, deadline, f"{url}: {kind} of {build_id}"):
                    return None
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                self.problems.append(f"{url}: HTTP {exc.code} for {kind} of {build_id}")
            return None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            timed_out = isinstance(reason, TimeoutError) or "timed out" in str(reason)
            self.problems.append(f"{url}: {'timed out' if timed_out else reason} fetching {kind} of {build_id}")
            tmp.unlink(missing_ok=True)
            return None
        if build_id_of(str(tmp)) != build_id:
            self.problems.append(f"{url}: the {kind} served for {build_id} is not an ELF file with that build id")
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, target)
        return target

    def _copy(self, resp, tmp: Path, deadline: float, what: str) -> bool:  # noqa: ANN001
        total = 0
        with open(tmp, "wb") as out:
            while True:
                if time.monotonic() > deadline:
                    self.problems.append(f"{what}: timed out after {self.timeout:g} s")
                    break
                chunk = resp.read1(_CHUNK)  # one receive: a trickling server meets the deadline
                if not chunk:
                    return True
                total += len(chunk)
                if total > self.max_bytes:
                    self.problems.append(f"{what} is larger than the limit ({self.max_bytes} bytes); skipped")
                    break
                out.write(chunk)
        tmp.unlink(missing_ok=True)
        return False
