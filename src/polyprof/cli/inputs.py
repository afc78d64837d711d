"""Where a verb's profile comes from, as ``go tool pprof`` users expect.

- a file path (any readable format);
- ``-``: standard input;
- an http(s) URL (``http://host:6060/debug/pprof/heap``; a bare
  ``host:port[/path]`` too, as pprof accepts it): fetched with a timeout, a
  size limit and a progress bar on a terminal; ``--seconds N`` asks the
  server for an N-second profile (pprof's ``seconds=`` query parameter), and
  an address without a path gets ``/debug/pprof/profile``;
- several of those: merged as ``go tool pprof`` merges its sources (units
  aligned, samples kept, durations added);
- ``--base``/``--diff-base`` profiles: merged with their values negated, so
  every report shows the difference (``--diff-base`` also labels the base
  samples ``pprof::base`` so percentages are of the base, as pprof does).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import urllib.parse

from polyprof.errors import InputError, OptionsError

__all__ = ["MAX_DOWNLOAD", "fetch_url", "is_url", "read_inputs", "url_for"]

#: Largest download accepted (bytes); POLYPROF_MAX_DOWNLOAD overrides it.
MAX_DOWNLOAD = 1 << 30
_HOST_PORT = re.compile(r"[A-Za-z0-9.\-\[\]:]+:\d+(/.*)?")


def is_url(spec: str) -> bool:
    """Whether ``spec`` names a profile to fetch over HTTP rather than a file."""
    if spec.startswith(("http://", "https://")):
        return True
    return bool(_HOST_PORT.fullmatch(spec)) and not os.path.exists(spec)


def url_for(spec: str, seconds: int | None) -> str:
    """The URL to fetch for ``spec``: scheme and pprof's default path added, ``seconds`` set."""
    url = spec if spec.startswith(("http://", "https://")) else "http://" + spec
    parts = urllib.parse.urlsplit(url)
    path = parts.path if parts.path not in ("", "/") else "/debug/pprof/profile"
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    if seconds:
        query["seconds"] = [str(seconds)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, urllib.parse.urlencode(query, doseq=True),
                                    parts.fragment))


def _timeout(url: str, timeout: float | None) -> float:
    """pprof's rule: the given timeout, else 1.5 x the requested seconds, else 60 s."""
    if timeout:
        return timeout
    seconds = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("seconds", [""])[0]
    return 1.5 * int(seconds) if seconds.isdigit() and int(seconds) > 0 else 60.0


def fetch_url(url: str, env, *, timeout: float | None = None, limit: int | None = None) -> bytes:  # noqa: ANN001
    """The body of ``url`` (status 200 only), refusing more than ``limit`` bytes."""
    import urllib.error
    import urllib.request

    limit = limit or int(os.environ.get("POLYPROF_MAX_DOWNLOAD", MAX_DOWNLOAD))
    wait = _timeout(url, timeout)
    env.note(f"fetching {url} (timeout {wait:g}s)")
    request = urllib.request.Request(url, headers={"User-Agent": "polyprof"})
    try:
        with urllib.request.urlopen(request, timeout=wait) as resp, env.progress(f"fetching {url}") as bar:
            size = int(resp.headers.get("Content-Length") or 0)
            if size > limit:
                raise InputError(f"server sends {size} bytes, more than the {limit}-byte limit "
                                 "(raise POLYPROF_MAX_DOWNLOAD)", path=url)
            chunks, done = [], 0
            while chunk := resp.read(1 << 16):
                done += len(chunk)
                if done > limit:
                    raise InputError(f"more than the {limit}-byte limit (raise POLYPROF_MAX_DOWNLOAD)", path=url)
                chunks.append(chunk)
                if bar is not None:
                    bar(done, max(size, done))
            return b"".join(chunks)
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", errors="replace").strip()
        raise InputError(f"server answered {exc.code} {exc.reason}" + (f": {detail}" if detail else ""),
                         path=url) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"cannot fetch ({reason})", path=url) from None


def _read(spec: str, args: argparse.Namespace, env, options):  # noqa: ANN001, ANN202
    """One input (file, ``-`` or URL) as a Profile."""
    import polyprof

    fmt = getattr(args, "input_format", None)
    if spec == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    elif is_url(spec):
        name = url_for(spec, getattr(args, "seconds", None))
        data = fetch_url(name, env, timeout=getattr(args, "timeout", None))
    else:
        with env.progress(f"reading {spec}") as progress:
            return polyprof.read(spec, format=fmt, options=dataclasses.replace(options, progress=progress))
    try:
        return polyprof.read(data, format=fmt, options=options)
    except InputError as exc:
        exc.path = name if exc.path in (None, "<bytes>") else exc.path
        raise


def read_inputs(args: argparse.Namespace, env, specs: list[str], options):  # noqa: ANN001, ANN201
    """The profile of ``specs`` (merged when several) minus any ``--base``/``--diff-base``."""
    if specs.count("-") > 1:
        raise OptionsError("standard input ('-') can be read only once")
    profile = _merged([_read(s, args, env, options) for s in specs], specs)
    base_specs = getattr(args, "base_profiles", None) or []
    diff_specs = getattr(args, "diff_base_profiles", None) or []
    if base_specs and diff_specs:
        raise OptionsError("--base and --diff-base cannot be used together")
    if base_specs or diff_specs:
        from polyprof.model.merge import subtract

        base = _merged([_read(s, args, env, options) for s in base_specs or diff_specs], base_specs or diff_specs)
        profile = subtract(profile, base, mark_base=bool(diff_specs))
    return profile


def _merged(profiles: list, specs: list[str]):  # noqa: ANN001, ANN202
    if len(profiles) == 1:
        return profiles[0]
    from polyprof.model.merge import merge_as_pprof

    return merge_as_pprof(profiles, specs)
