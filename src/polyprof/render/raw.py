"""Render a RawResult as ``go tool pprof -raw`` text (Go's ``Profile.String()``)."""

from __future__ import annotations

import datetime as _dt

from polyprof.analysis.raw import RawLocation, RawMapping, RawResult, RawSample
from polyprof.model.profile import (
    MAPPING_HAS_FILENAMES,
    MAPPING_HAS_FUNCTIONS,
    MAPPING_HAS_INLINE_FRAMES,
    MAPPING_HAS_LINE_NUMBERS,
)

__all__ = ["go_duration", "go_time", "raw_text"]


def raw_text(r: RawResult, *, columns: bool = False) -> str:
    """pprof's ``-raw`` text, line for line.

    ``columns``: lines as ``file:line:column``, as google/pprof prints them
    since it has line columns (``go tool pprof`` of Go releases before that
    prints ``file:line``)."""
    out = [f"Comment: {c}" for c in r.comments]
    if r.period_type is not None:
        out.append(f"PeriodType: {r.period_type.type} {r.period_type.unit}")
    out.append(f"Period: {r.period}")
    if r.time_nanos:
        out.append(f"Time: {go_time(r.time_nanos)}")
    if r.duration_nanos:
        out.append(f"Duration: {go_duration(r.duration_nanos)[:4]}")  # Go's %.4v cuts the text
    out.append("Samples:")
    out.append(" ".join(f"{vt.type}/{vt.unit}{'[dflt]' if vt.type == r.default_sample_type else ''}"
                        for vt in r.sample_types).strip())
    out.extend(line for s in r.samples for line in _sample(s))
    out.append("Locations")
    out.extend(_location(loc, columns) for loc in r.locations)
    out.append("Mappings")
    out.extend(_mapping(m) for m in r.mappings)
    return "\n".join(out) + "\n"


def _sample(s: RawSample) -> list[str]:
    head = "".join(f" {v:10d}" for v in s.values) + ": " + "".join(f"{i} " for i in s.locations)
    lines = [head]
    if s.labels:
        lines.append(" " * 16 + " ".join(sorted(f"{k}:[{' '.join(v)}]" for k, v in s.labels)))
    if s.num_labels:
        parts = []
        for key, values, units in s.num_labels:
            shown = [f"{v} {u}" for v, u in zip(values, units)] if len(units) == len(values) else map(str, values)
            parts.append(f"{key}:[{' '.join(shown)}]")
        lines.append(" " * 16 + " ".join(sorted(parts)))
    return lines


def _location(loc: RawLocation, columns: bool) -> str:
    head = f"{loc.id:6d}: {loc.address:#x} " + (f"M={loc.mapping} " if loc.mapping else "") + \
        ("[F] " if loc.folded else "")
    if not loc.lines:
        return head
    rows = []
    for ln in loc.lines:
        if ln.start_line < 0:  # a line without a function
            text = "??"
        else:
            text = f"{ln.name} {ln.file}:{ln.line}{f':{ln.column}' if columns else ''} s={ln.start_line}"
            if ln.name != ln.system_name:
                text += f"({ln.system_name})"
        rows.append(head + text)
        head = " " * 13
    return "\n".join(rows)


_BITS = ((MAPPING_HAS_FUNCTIONS, "[FN]"), (MAPPING_HAS_FILENAMES, "[FL]"), (MAPPING_HAS_LINE_NUMBERS, "[LN]"),
         (MAPPING_HAS_INLINE_FRAMES, "[IN]"))


def _mapping(m: RawMapping) -> str:
    bits = "".join(text for bit, text in _BITS if m.flags & bit)
    return f"{m.id}: {m.start:#x}/{m.limit:#x}/{m.offset:#x} {m.file} {m.build_id} {bits}"


def go_time(nanos: int) -> str:
    """Go's ``time.Time.String()`` in UTC: ``2017-09-29 20:57:58.123 +0000 UTC``."""
    t = _dt.datetime.fromtimestamp(nanos // 10**9, tz=_dt.UTC)
    frac = f"{nanos % 10**9:09d}".rstrip("0")
    return t.strftime("%Y-%m-%d %H:%M:%S") + (f".{frac}" if frac else "") + " +0000 UTC"


def go_duration(nanos: int) -> str:
    """Go's ``time.Duration.String()``: ``1.5s``, ``2m0.5s``, ``100ms``, ``1.5µs``, ``0s``."""
    if nanos == 0:
        return "0s"
    sign, u = ("-" if nanos < 0 else ""), abs(nanos)
    if u < 10**9:
        for unit, scale in (("ms", 10**6), ("µs", 10**3)):
            if u >= scale:
                return sign + _frac(u, scale) + unit
        return f"{sign}{u}ns"
    text = _frac(u % (60 * 10**9), 10**9) + "s"
    minutes = u // (60 * 10**9)
    if minutes:
        text = f"{minutes % 60}m" + text
        if minutes // 60:
            text = f"{minutes // 60}h" + text
    return sign + text


def _frac(value: int, scale: int) -> str:
    whole, part = divmod(value, scale)
    digits = f"{part:0{len(str(scale)) - 1}d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)
