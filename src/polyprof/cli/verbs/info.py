"""polyprof info: what a profile file holds."""

from __future__ import annotations

import argparse
import json

from polyprof.cli import common

NAME = "info"
HELP = "summarise a profile: format, sample types, totals, sizes, time, losses, warnings"
EXAMPLES = """\
examples:
  polyprof info cpu.pb.gz
  polyprof info trace.perfetto-trace --format json | jq .extras
  polyprof info trace.perfetto-trace --profile 2       # one profile of a trace holding several
An input holding several profiles is listed profile by profile, numbered for
--profile N, each with the selectors that pick it; analyses merge those with
the same sample types."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="profile file")
    common.add_filter_flags(p)
    common.add_input_flags(p)
    common.add_output_format(p)


def run(args: argparse.Namespace, env) -> int:  # noqa: ANN001
    from polyprof.analysis.info import info
    from polyprof.selection import Choice

    if args.merge:
        listed = [Choice(1, common.load(args, env).profile)]
    else:  # an input holding several profiles is described profile by profile, numbered for --profile
        listed = common.load_all(args, env)
    summaries = [info(c.profile) for c in listed]
    if len(summaries) > 1:
        for c, s in zip(listed, summaries):
            s["profile"], s["selectors"] = c.number, list(c.selectors)
    if args.format == "json":
        body = summaries[0] if len(summaries) == 1 else {"profiles": summaries, "count": len(summaries)}
        env.out(json.dumps(body, indent=1, sort_keys=True))
    elif len(summaries) == 1:
        env.out(render(summaries[0]).rstrip("\n"))
    else:
        env.out(f"{args.input} holds {len(summaries)} profiles; analyses merge those with the same sample "
                "types, or pick with the selectors shown (--merge combines different kinds):")
        for c, s in zip(listed, summaries):
            env.out("\n" + c.line())
            env.out(render(s).rstrip("\n"))
    return 0


def symbolized_lines(rows: list[dict]) -> list[str]:
    """"Symbolized:" lines, one per mapping: share now, and before polyprof symbolized it."""
    out = []
    for r in rows:
        before = f" (before: {r['before']})" if r.get("before") is not None else ""
        ident = f"{r['mapping']} ({r['build_id']})" if r["build_id"] else r["mapping"]
        out.append(f"Symbolized:   {r['symbolized']}/{r['frames']} frames {r['share']}{before}  {ident}")
    return out


def render(s: dict) -> str:
    from polyprof.render.units import label

    lines = [f"Format:       {s['format']}"]
    for vt in s["sample_types"]:
        mark = " (default)" if vt["default"] else ""
        lines.append(f"Sample type:  {vt['type']}/{vt['unit']}{mark}  total {label(vt['total'], vt['unit'])}"
                     + (f" ({vt['total']})" if label(vt['total'], vt['unit']) != str(vt['total']) else ""))
    lines.append(f"Samples:      {s['samples']}  ({s['stacks']} distinct stacks, max depth {s['max_depth']})")
    lines.append(f"Tables:       {s['functions']} functions, {s['locations']} locations, "
                 f"{s['mappings']} mappings, {s['callsites']} callsites")
    if s["period_type"] or s["period"]:
        lines.append(f"Period:       {s['period']} {s['period_type'] or ''}".rstrip())
    if s["time_nanos"]:
        import datetime as dt
        t = dt.datetime.fromtimestamp(s["time_nanos"] / 1e9, tz=dt.timezone.utc)
        lines.append(f"Time:         {t.isoformat(timespec='seconds')}")
    if s["duration_nanos"]:
        lines.append(f"Duration:     {label(s['duration_nanos'], 'nanoseconds')}")
    for c in s["comments"]:
        lines.append(f"Comment:      {c}")
    for key in ("drop_frames", "keep_frames", "doc_url"):
        if s[key]:
            lines.append(f"{key + ':':<13} {s[key]}")
    if s["labels"]:
        lines.append("Labels:       " + ", ".join(f"{k} ({n} samples)" for k, n in s["labels"].items()))
    for name, r in s["columns"].items():
        lines.append(f"Column {name + ':':<6} {r['min']} .. {r['max']} ({r['distinct']} distinct)")
    for key, value in sorted(s["extras"].items()):
        if key != "symbolization":  # shown per mapping below
            lines.append(f"{key}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    lines.extend(symbolized_lines(s.get("symbolized", [])))
    for w in s["warnings"]:
        lines.append(f"Warning:      {w}")
    return "\n".join(lines) + "\n"
