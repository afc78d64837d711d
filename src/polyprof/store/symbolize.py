"""Late symbolization of a store's frames, on :func:`polyprof.symbolize.symbolize`.

The address-only frames (a mapping, an address, no lines) are put into a
small profile (one location and one sample per frame), that profile is
symbolized by the symbolization layer (whatever sources it supports), and
the lines it found are written back into the same frame rows: frame ids, and
so every callsite id and stack, stay as they were. Functions it found get
content-hash ids as at ingest; a mapping whose placeholder name the
symbolizer replaced keeps its id with the new file name.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from polyprof.model.builder import ProfileBuilder
from polyprof.model.profile import Profile
from polyprof.store import ids
from polyprof.store.layout import Manifest, schema, write_parquet
from polyprof.store.rows import function_ids

__all__ = ["symbolize_frames"]


def _frames_profile(frames: Any, mappings: dict[int, dict]) -> Profile:
    b = ProfileBuilder("store")
    b.set_sample_types([("frames", "count")])
    rows: dict[int, int] = {}
    for mid, r in mappings.items():
        rows[mid] = b.mapping(r["start"] % 2**64, r["limit"] % 2**64, r["offset"] % 2**64, r["filename"],
                              r["build_id"], r["flags"])
    for mid, addr in zip(frames.column("mapping").to_pylist(), frames.column("address").to_pylist()):
        b.add_sample(b.stack([b.location(rows[mid], addr % 2**64)]), [1])
    return b.finish()


def symbolize_frames(m: Manifest, symbols: str) -> dict[str, Any]:
    """Symbolize in place (new data files, manifest updated but not published); returns a summary
    with ``changed`` (whether anything must be published)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from polyprof.symbolize import symbolize

    if not m.files["frames"]:
        return {"changed": False, "frames": 0, "symbolized": 0}
    frames = pq.read_table(m.paths("frames"))
    todo = np.flatnonzero(((pc.list_value_length(frames.column("lines")).fill_null(0).to_numpy() == 0)
                           & (frames.column("mapping").to_numpy() != 0)))
    if not todo.size:
        return {"changed": False, "frames": 0, "symbolized": 0}
    maps = pq.read_table(m.paths("mappings"))
    by_id = {r["id"]: r for r in maps.to_pylist()}
    cand = frames.take(todo)
    prof = _frames_profile(cand, {mid: by_id[mid] for mid in set(cand.column("mapping").to_pylist())})
    out, stats = symbolize(prof, symbols)
    new_lines, fn_rows, filled = _lines_of(out)
    if not filled:
        return {"changed": False, "frames": int(todo.size), "symbolized": 0, "missing": _missing(stats)}
    lines = frames.column("lines").to_pylist()
    for k, frame_row in enumerate(todo.tolist()):
        if new_lines[k]:
            lines[frame_row] = new_lines[k]
    updated = frames.set_column(frames.schema.get_field_index("lines"), "lines",
                                pa.array(lines, type=schema("frames").field("lines").type))
    _replace(m, "frames", updated)
    existing = set(pq.read_table(m.paths("functions"), columns=["id"]).column(0).to_pylist()) \
        if m.files["functions"] else set()
    fresh = fn_rows.filter(pa.array([i not in existing for i in fn_rows.column("id").to_pylist()]))
    if fresh.num_rows:
        rel = m.new_file("functions")
        write_parquet(fresh, os.path.join(m.root, rel))
        m.files["functions"].append(rel)
    renamed = _renamed_mappings(prof, out, by_id)
    if renamed:
        rows = maps.to_pylist()
        for r in rows:
            r["filename"] = renamed.get(r["id"], r["filename"])
        _replace(m, "mappings", pa.Table.from_pylist(rows, schema=schema("mappings")))
    return {"changed": True, "frames": int(todo.size), "symbolized": filled, "missing": _missing(stats)}


def _missing(report: Any) -> list[dict[str, Any]]:
    """The modules no symbols were found for, as plain data (JSON output): file, build id, frames,
    the places looked in."""
    return [{"file": m.file, "build_id": m.build_id, "frames": m.frames, "looked_for": list(m.looked_for)}
            for m in report.missing]


def _lines_of(out: Profile) -> tuple[list[list[dict]], Any, int]:
    """Per sample of ``out`` (one per frame): its lines with store function ids; the function rows."""
    import pyarrow as pa

    strs = out.strings
    f = out.functions
    sh = ids.hash_strings(strs)
    fid = function_ids(sh[f.name], sh[f.system_name], sh[f.filename], f.start_line)
    lines: list[list[dict]] = []
    filled = 0
    for stack in out.samples.stack.tolist():
        loc = int(out.callsites.location[stack])
        rng = out.locations.lines_of(loc)
        got = [{"function": int(fid[out.lines.function[r]]) if out.lines.function[r] >= 0 else 0,
                "line": int(out.lines.line[r]), "column": int(out.lines.column[r])} for r in rng]
        filled += bool(got)
        lines.append(got)
    rows = pa.table({"id": fid, "name": [strs[i] for i in f.name.tolist()],
                     "system_name": [strs[i] for i in f.system_name.tolist()],
                     "filename": [strs[i] for i in f.filename.tolist()], "start_line": f.start_line},
                    schema=schema("functions"))
    return lines, rows, filled


def _renamed_mappings(before: Profile, after: Profile, by_id: dict[int, dict]) -> dict[int, str]:
    """Store mapping id -> new file name, for mappings the symbolizer renamed."""
    renamed = {}
    for sb, sa in zip(before.samples.stack.tolist(), after.samples.stack.tolist()):  # one sample per frame
        mb = int(before.locations.mapping[before.callsites.location[sb]])
        ma = int(after.locations.mapping[after.callsites.location[sa]])
        if mb < 0 or ma < 0:
            continue
        old, new = before.mapping_file(mb), after.mapping_file(ma)
        if old != new:
            renamed.update({mid: new for mid, r in by_id.items() if r["filename"] == old})
    return renamed


def _replace(m: Manifest, table: str, rows: Any) -> None:
    rel = m.new_file(table)
    write_parquet(rows, os.path.join(m.root, rel))
    m.files[table] = [rel]
