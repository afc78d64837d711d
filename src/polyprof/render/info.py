"""Render ``info`` for people: counts, durations and times in words, no raw blobs.

The summary dict (``polyprof.analysis.info``) keeps every value for
``--format json``; this page shows each in a readable form: units on totals,
sample times relative to the profile start (and as wall-clock time when the
clock is the epoch), long lists as counts with a few examples, nested
per-format facts as indented lines.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from polyprof.render.units import label

__all__ = ["info_text", "profile_heading", "symbolized_lines"]

_LIST_SHOWN = 5
_KEYS_SHOWN = 12
# Times after 2001 in nanoseconds since the epoch: a wall clock, not a boot clock.
_EPOCH_NS = 10**18


def info_text(s: dict) -> str:
    """The human page of one profile's summary."""
    lines = [f"Format:       {s['format']}"]
    for vt in s["sample_types"]:
        mark = " (default)" if vt["default"] else ""
        shown = label(vt["total"], vt["unit"])
        exact = f" ({vt['total']:,})" if shown != str(vt["total"]) else ""
        lines.append(f"Sample type:  {vt['type']}/{vt['unit']}{mark}  total {shown}{exact}")
    lines.append(f"Samples:      {s['samples']:,}  ({s['stacks']:,} distinct stacks, max depth {s['max_depth']})")
    lines.append(f"Tables:       {s['functions']:,} functions, {s['locations']:,} locations, "
                 f"{s['mappings']:,} mappings, {s['callsites']:,} callsites")
    if s["period_type"] or s["period"]:
        lines.append(f"Period:       {s['period']:,} {s['period_type'] or ''}".rstrip())
    if s["time_nanos"]:
        lines.append(f"Time:         {_wall(s['time_nanos'])}")
    if s["duration_nanos"]:
        lines.append(f"Duration:     {label(s['duration_nanos'], 'nanoseconds')}")
    lines += [f"Comment:      {c}" for c in s["comments"]]
    for key in ("drop_frames", "keep_frames", "doc_url"):
        if s[key]:
            lines.append(f"{key + ':':<13} {s[key]}")
    if s["labels"]:
        lines.append("Labels:       " + ", ".join(f"{k} ({n:,} samples)" for k, n in s["labels"].items()))
    for name, r in s["columns"].items():
        lines.append(_column(name, r))
    if s["extras"]:
        lines.append("Format facts:")
        for key, value in sorted(s["extras"].items()):
            lines.extend(_fact(key, value, "  "))
    lines += symbolized_lines(s.get("symbolized", []))
    lines += [f"Warning:      {w}" for w in s["warnings"]]
    return "\n".join(lines) + "\n"


def symbolized_lines(rows: list[dict]) -> list[str]:
    """"Symbolized:" lines, one per mapping: the share now, and before polyprof symbolized it."""
    out = []
    for r in rows:
        before = f" (before: {r['before']})" if r.get("before") is not None else ""
        ident = f"{r['mapping']} ({r['build_id']})" if r["build_id"] else r["mapping"]
        out.append(f"Symbolized:   {r['symbolized']}/{r['frames']} frames {r['share']}{before}  {ident}")
    return out


def _wall(nanos: int) -> str:
    t = _dt.datetime.fromtimestamp(nanos / 1e9, tz=_dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


def _column(name: str, r: dict) -> str:
    head = f"{name + ':':<13} "
    if name == "time":
        origin = r.get("origin", r["min"])
        span = f"+{label(r['min'] - origin, 'nanoseconds')} .. +{label(r['max'] - origin, 'nanoseconds')}"
        text = f"{head}samples from {span} after the start ({r['distinct']:,} distinct times)"
        if origin >= _EPOCH_NS:
            text += f"; first {_wall(r['min'])}, last {_wall(r['max'])}"
        return text
    if r["min"] == r["max"]:
        return f"{head}{r['min']} (all samples)"
    return f"{head}{r['distinct']:,} distinct, {r['min']} .. {r['max']}"


def _fact(key: str, value: Any, indent: str) -> list[str]:
    """One extras entry as readable lines (nested dicts indented, long lists counted)."""
    head = f"{indent}{key}: "
    if isinstance(value, dict):
        if not value:
            return [head + "none"]
        if all(not isinstance(v, (dict, list)) for v in value.values()) and len(value) <= 6:
            return [head + ", ".join(f"{k} {_scalar(k, v)}" for k, v in value.items())]
        out = [head.rstrip()]
        items = list(value.items())
        for k, v in items[:_KEYS_SHOWN]:
            out.extend(_fact(str(k), v, indent + "  "))
        if len(items) > _KEYS_SHOWN:
            out.append(f"{indent}  ... {len(items) - _KEYS_SHOWN} more (info --format json lists all)")
        return out
    if isinstance(value, list) and len(value) > 3 and not all(isinstance(v, str) and v.startswith("0x")
                                                           for v in value):
        out = [f"{head}{len(value):,}"]  # one per line: the items are often long (thread names)
        out += [f"{indent}  {_list(key, [v])}" for v in value[:_LIST_SHOWN]]
        if len(value) > _LIST_SHOWN:
            out.append(f"{indent}  ... {len(value) - _LIST_SHOWN:,} more (info --format json lists all)")
        return out
    if isinstance(value, list):
        return [head + _list(key, value)]
    return [head + _scalar(key, value)]


def _list(key: str, values: list) -> str:
    if not values:
        return "none"
    if key == "threads" and all(isinstance(v, list) and len(v) == 3 for v in values):
        shown = [f"{name or '?'} (tid {tid}, pid {pid})" for tid, pid, name in values[:_LIST_SHOWN]]
    elif all(isinstance(v, str) and v.startswith("0x") for v in values):
        noun = "address" if len(values) == 1 else "addresses"
        return f"{len(values):,} {noun} ({', '.join(values[:3])}{', ...' if len(values) > 3 else ''})"
    else:
        shown = [" ".join(map(str, v)) if isinstance(v, list) else _scalar(key, v) for v in values[:_LIST_SHOWN]]
    more = f", ... ({len(values):,} in all)" if len(values) > _LIST_SHOWN else ""
    return ", ".join(shown) + more


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, float) and ("ratio" in key or "share" in key) and 0 <= value <= 1:
        return f"{value * 100:.2f}%"
    if isinstance(value, int) and key.endswith(("_ns", "_nanos")):
        return label(value, "nanoseconds")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return _list(key, value)
    return str(value)


def profile_heading(labels: dict, n: int) -> str:
    """How ``info`` names one of several profiles of an input: its labels, times in seconds."""
    parts = [f"{k}={_seconds(v) if k.endswith('time') and isinstance(v, int) else v}" for k, v in labels.items()]
    return " ".join(parts) or f"profile {n}"


def _seconds(nanos: int) -> str:
    return f"{nanos / 1e9:.3f}s"
