"""The JSON API of ``polyprof serve``: one endpoint per analysis, parameters = the Options fields.

Each endpoint is declared once in :data:`ENDPOINTS` with its own parameters
and a line of help (``GET /api`` lists them; the README documents them).
Every analysis endpoint also takes the fields of
:class:`~polyprof.analysis.options.Options` by name (see
:mod:`polyprof.web.params`) and ``p``, the input to show (``GET
/api/session`` lists the inputs). Answers are the analyses' results as the
CLI's ``--format json`` writes them (``top``, ``tree``, ``peek``,
``traces``, ``diff`` are identical to ``polyprof VERB --format json``
with the same options), plus display text (:mod:`polyprof.web.present`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from polyprof import __version__
from polyprof.analysis import diff as diff_mod
from polyprof.analysis import filters
from polyprof.analysis.info import info as info_analysis
from polyprof.analysis.nodes import GRANULARITIES
from polyprof.analysis.reshape_view import ReshapeView, top_source
from polyprof.analysis.tags_report import tag_report
from polyprof.analysis.timeline import GROUPS
from polyprof.analysis.timeline import timeline as timeline_analysis
from polyprof.analysis.top import top as top_analysis
from polyprof.analysis.top import top_root_labels
from polyprof.analysis.traces import traces as traces_analysis
from polyprof.analysis.tree import peek as peek_analysis
from polyprof.analysis.tree import tree as tree_analysis
from polyprof.errors import OptionsError
from polyprof.formats import registry
from polyprof.formats.options import WriteOptions
from polyprof.render.tags import tags_json
from polyprof.render.traces import traces_json
from polyprof.render.tree import tree_json
from polyprof.web import present, warmup
from polyprof.web.params import OPTION_NAMES, Param, Query
from polyprof.web.session import Session

__all__ = ["COHORT", "ENDPOINTS", "Download", "Endpoint", "describe"]


@dataclass(frozen=True)
class Download:
    """A file answer (the download endpoint)."""

    body: bytes
    filename: str
    content_type: str = "application/octet-stream"


@dataclass(frozen=True)
class Endpoint:
    name: str
    run: Callable[[Session, Query], Any]
    help: str
    params: dict[str, Param] = field(default_factory=dict)
    options: bool = True   # takes the Options fields


ENDPOINTS: dict[str, Endpoint] = {}

P = {"p": Param("int", None, "input index (GET /api/session lists them; default: the first that is not --base)")}
B = {"b": Param("int", None, "base input for a diff (default: the --base input; none: no diff)")}
FLAME = {
    "root": Param("int", 0, "node id to zoom into (ids of the whole graph, as answers give them)"),
    "inverted": Param("bool", False, "callers above callees: leaf functions at the root (bottom-up)"),
    "search": Param("str", "", "regular expression on node names: matching nodes and the matched share"),
    "min_fraction": Param("float", 1 / 4000, "leave out (merge into the parent's 'hidden') nodes narrower "
                                             "than this fraction of the root"),
    "max_nodes": Param("int", 40_000, "at most this many nodes, the widest (0 = no cap)"),
}


#: With ``--store``: the cohort every endpoint that takes ``p`` shows instead of an input.
COHORT = {
    "where": Param("str", "", "--store only: SQL predicate on the profiles table (as polyprof store --where)"),
    "from": Param("str", "", "--store only: only samples at or after this time (ISO date/time or 1714550400s)"),
    "to": Param("str", "", "--store only: only samples before this time"),
    "base_where": Param("str", "", "--store only: the cohort a diff compares against (as --base-where)"),
}


def endpoint(name: str, help: str, params: dict[str, Param] | None = None, *, options: bool = True):
    def register(fn: Callable[[Session, Query], Any]) -> Callable[[Session, Query], Any]:
        ENDPOINTS[name] = Endpoint(name, fn, help, dict(params or {}), options)
        return fn
    return register


def describe() -> dict[str, Any]:
    """Every endpoint with its parameters (what ``GET /api`` answers)."""
    return {"endpoints": {e.name: {"help": e.help, "params": {k: {"type": v.kind, "default": v.default,
                                                                   "help": v.help} for k, v in e.params.items()},
                                   "options": list(OPTION_NAMES) if e.options else []}
                          for e in ENDPOINTS.values()}}


def _p(s: Session, q: Query) -> int:
    if s.store is not None:
        return s.cohort(q.get("where"), q.get("from"), q.get("to"))
    p = q.get("p")
    if p is None:
        return s.default_new()
    s.input(p)  # raises for a bad index
    return p


def _b(s: Session, q: Query) -> int | None:
    if s.store is not None:
        where = q.get("base_where")
        return s.cohort(where, q.get("from"), q.get("to"), is_base=True) if where.strip() else None
    b = q.get("b")
    if b is None or b < 0:
        return s.base if b is None else None
    s.input(b, "b")
    return b


# ---------------------------------------------------------------- endpoints

@endpoint("session", "the inputs, their sample types, writable formats and the page's starting state",
          options=False)
def session_info(s: Session, q: Query) -> dict[str, Any]:
    writable = [{"name": f.name, "extension": f.extensions[0], "help": f.help}
                for f in registry.available() if f.can_write]
    common = {"version": __version__, "writable": writable, "granularities": list(GRANULARITIES),
              "normalize": list(diff_mod.NORMALIZE), "defaults": s.defaults}
    if s.store is not None:
        return {**common, **_store_info(s)}
    inputs = []
    for i, x in enumerate(s.inputs):
        p = s.profile(i)
        inputs.append({"index": i, "name": x.name, "file": os.path.basename(x.path), "format": p.source_format,
                       "is_base": x.is_base, "samples": len(p.samples),
                       "sample_types": [{"type": vt.type, "unit": vt.unit} for vt in p.sample_types],
                       "default_sample_type": p.sample_types[p.sample_index(None)].type if p.sample_types else ""})
    return {**common, "inputs": inputs, "default_input": s.default_new(), "base": s.base,
            "options": list(OPTION_NAMES), "store": None}


def _store_info(s: Session) -> dict[str, Any]:
    """The store as the page's one input, and what its cohort picker offers."""
    facets = s.store_call(lambda store: store.facets().to_json())
    types = s.store_call(lambda store: store.sql(
        "SELECT sample_type, any_value(sample_unit) AS unit FROM profiles GROUP BY sample_type "
        "ORDER BY sample_type").to_pylist())
    name = os.path.basename(os.path.normpath(s.store.path))
    only = {"index": 0, "name": name, "file": name, "format": "store", "is_base": False,
            "samples": None, "sample_types": [{"type": t["sample_type"], "unit": t["unit"] or ""} for t in types],
            "default_sample_type": ""}
    return {"inputs": [only], "default_input": 0, "base": None,
            "options": [*OPTION_NAMES, *COHORT], "store": {"name": name, "facets": facets}}


@endpoint("info", "what the input holds (polyprof info --format json)", P, options=False)
def info(s: Session, q: Query) -> dict[str, Any]:
    return info_analysis(s.profile(_p(s, q))).as_dict()


@endpoint("top", "flat and cum per node (polyprof top --format json) with display text", P)
def top(s: Session, q: Query) -> dict[str, Any]:
    p = _p(s, q)

    def make() -> dict[str, Any]:
        o = q.options
        if o.tagroot and s.input(p).profile is not None:  # a group by: the table without label frames, and theirs
            plain = s.filtered(p, filters.without(o, "tagroot"))
            if (got := top_root_labels(plain, o)) is not None:
                table, hit = got
                return {**present.top_payload(table), "unmatched": ([] if hit else ["tagroot"]) + plain.unmatched()}
        # a hide or prune_from: from the (cached) samples of the other filters, stacks not remade
        src = (top_source(o, lambda x: s.filtered(p, x)) if s.input(p).profile is not None
               else s.filtered(p, o))  # (store cohorts: the store's filtered copy)
        fr = src.result if isinstance(src, ReshapeView) else src
        return {**present.top_payload(top_analysis(src, o)), "unmatched": fr.unmatched()}

    return s.result("top", p, q.options, make)


@endpoint("tree", "every node with its callers and callees (polyprof tree --format json)", P)
def tree(s: Session, q: Query) -> dict[str, Any]:
    return tree_json(tree_analysis(s.filtered(_p(s, q), q.options), q.options))


@endpoint("peek", "callers and callees of the nodes matching regex (polyprof peek --format json)",
          {**P, "regex": Param("str", "", "regular expression on node names")})
def peek(s: Session, q: Query) -> dict[str, Any]:
    if not q.get("regex"):
        raise OptionsError("{regex} is required: the nodes to peek at", options=("regex",))
    return tree_json(peek_analysis(s.filtered(_p(s, q), q.options), q.get("regex"), q.options))


@endpoint("traces", "every distinct stack with its weight and labels (polyprof traces --format json)", P)
def traces(s: Session, q: Query) -> dict[str, Any]:
    return traces_json(traces_analysis(s.filtered(_p(s, q), q.options), q.options))


@endpoint("flame", "a slice of the complete flame graph: the subtree of root at a resolution, search share",
          {**P, **B, **FLAME})
def flame(s: Session, q: Query) -> dict[str, Any]:
    p, b = _p(s, q), _b(s, q)
    index = s.flame(p, q.options, base=b, inverted=q.get("inverted"))
    cut = index.slice(q.get("root"), min_fraction=q.get("min_fraction"), max_nodes=q.get("max_nodes"),
                      search=q.get("search") or None)
    return present.slice_json(cut, index, index.tree.sample_type)


@endpoint("node", "one flame graph node: numbers with display text, path, identity fields",
          {**P, **B, "id": Param("int", 0, "node id"), "inverted": FLAME["inverted"]})
def node(s: Session, q: Query) -> dict[str, Any]:
    index = s.flame(_p(s, q), q.options, base=_b(s, q), inverted=q.get("inverted"))
    return present.node_json(index, q.get("id"), index.tree.sample_type)


@endpoint("calltree", "children of one node of the flame graph, widest first (the expandable call tree)",
          {**P, "id": Param("int", 0, "node id (0 = the root)"), "inverted": FLAME["inverted"]})
def calltree(s: Session, q: Query) -> dict[str, Any]:
    index = s.flame(_p(s, q), q.options, inverted=q.get("inverted"))
    parent = q.get("id")
    vt = index.tree.sample_type
    node = present.node_json(index, parent, vt)  # (no such node: an error)
    rows = [present.node_json(index, c, vt, path=False) for c in index.children(parent)]
    return {"id": parent, "sample_type": vt.type, "unit": vt.unit, "rows": rows, "node": node}


@endpoint("sandwich", "callers and callees of one function as two flame graphs, and its direct callers/callees",
          {**P, "fn": Param("str", "", "the function (a node name, as top lists it)"),
           "side": Param("str", "", "with id: callers or callees (node details of one side's graph)"),
           "id": Param("int", -1, "with side: a node of that graph"),
           "min_fraction": FLAME["min_fraction"], "max_nodes": FLAME["max_nodes"]})
def sandwich(s: Session, q: Query) -> dict[str, Any]:
    if not q.get("fn"):
        raise OptionsError("{fn} is required: the function whose callers and callees to show", options=("fn",))
    found, callers, callees = s.sandwich(_p(s, q), q.options, q.get("fn"), q.get("min_fraction"), q.get("max_nodes"))
    vt = found.callers.sample_type
    if q.get("side"):
        if q.get("side") not in ("callers", "callees"):
            raise OptionsError(f"{{side}}={q.get('side')!r}: choose callers or callees", options=("side",))
        return present.node_json(callers if q.get("side") == "callers" else callees, q.get("id"), vt)
    cut = {"min_fraction": 0, "max_nodes": q.get("max_nodes")}  # built at min_fraction already

    def direct(index: Any) -> list[dict[str, Any]]:  # the function's children in one graph
        t = index.tree
        kids = index.children(1) if len(index) > 1 else []
        at = [index.check(k) for k in kids]
        return [{"name": t.names[k], "weight": int(t.total[k]), "text": present.value_text(int(t.total[k]), vt.unit),
                 "percent": present.pct(int(t.total[k]), found.total)} for k in at]

    return {"name": found.name, "flat": found.flat, "cum": found.cum, "total": found.total,
            "text": {"flat": present.value_text(found.flat, vt.unit), "flat_percent": present.pct(found.flat, found.total),
                     "cum": present.value_text(found.cum, vt.unit), "cum_percent": present.pct(found.cum, found.total)},
            "callers": present.slice_json(callers.slice(0, **cut), callers, vt),
            "callees": present.slice_json(callees.slice(0, **cut), callees, vt),
            "callers_list": direct(callers), "callees_list": direct(callees)}


@endpoint("diff", "new (p) against base (b) by function and stack (polyprof diff --format json)",
          {**P, **B, "normalize": Param("str", "none", "none, total or rate (as polyprof diff)"),
           "by": Param("str", "function", "function, stack or both")})
def diff(s: Session, q: Query) -> dict[str, Any]:
    p, b = _p(s, q), _b(s, q)
    if b is None:
        raise OptionsError("a diff needs a base: pass {b}=INPUT or start polyprof serve with --base",
                           options=("b",))
    if q.get("by") not in ("function", "stack", "both"):
        raise OptionsError(f"{{by}}={q.get('by')!r}: choose function, stack or both", options=("by",))

    def make() -> dict[str, Any]:
        base, new = s.filtered(b, q.options), s.filtered(p, q.options)
        result = diff_mod.diff(base, new, q.options, normalize=q.get("normalize"), stacks=q.get("by") != "function")
        rows = 25 if q.options.nodecount is None else q.options.nodecount  # polyprof diff's default
        return present.diff_payload(result, nodecount=rows, by=q.get("by"))

    return s.result("diff", p, q.options, make, b, q.get("normalize"), q.get("by"))  # the table: plain data


@endpoint("timeline", "weight over time per thread or process (the whole axis: time_range is drawn, not applied)",
          {**P, "bins": Param("int", 300, "time bins"), "group": Param("str", "thread", " or ".join(GROUPS)),
           "rows": Param("int", 24, "groups with their own row (the heaviest); 0 = all")})
def timeline(s: Session, q: Query) -> dict[str, Any]:
    window = q.options.time_range
    o = dataclasses.replace(q.options, time_range=None)
    p = _p(s, q)
    r = s.result("timeline", p, o, lambda: timeline_analysis(s.filtered(p, o), o, bins=q.get("bins"),
                                                               samples=s.timed(p, o, q.get("group"))),
                 q.get("bins"), q.get("group"))
    unit = r.sample_type.unit
    shown = r.counts if q.get("rows") <= 0 else r.counts[:q.get("rows")]
    return {"sample_type": r.sample_type.type, "unit": unit, "group": r.group, "total": r.total,
            "has_time": r.has_time, "origin": r.origin, "start": r.start, "end": r.end, "bin_nanos": r.bin_nanos,
            "untimed": r.untimed, "window": list(window) if window else None,
            "threads": [{**dataclasses.asdict(t), "label": t.label,
                         "text": {"weight": present.value_text(t.weight, unit), "percent": present.pct(t.weight, r.total)}}
                        for t in r.threads],
            "counts": shown.tolist(), "peak": int(shown.max(initial=0))}


@endpoint("labels", "label keys with their values' weights and shares (polyprof tags --format json), "
          "and the tagfocus expression that selects each value", P)
def labels(s: Session, q: Query) -> dict[str, Any]:
    p = _p(s, q)
    out = s.result("labels", p, q.options, lambda: tags_json(tag_report(s.filtered(p, q.options, labels=True),
                                                                              q.options)))
    unit = out["unit"]
    for key in out["keys"]:
        key["text"] = present.value_text(key["total"], unit)
        for v in key["values"]:
            v["text"] = present.value_text(v["weight"], unit)
            v["percent"] = present.pct(v["weight"], key["total"])
            # string values select exactly; numeric ones are shown scaled, so they are not offered
            v["focus"] = None if v.get("numeric") else f"{key['key']}=^{re.escape(v['value'])}$"
    if out["keys"] and (profile := s.input(p).profile) is not None:  # its group by is the next click
        warmup.start_labels(len(profile.callsites))
    return {**out, "group_by": "tagroot"}


@endpoint("download", "the current (filtered) profile in a writable format; dry=1 lists what it cannot keep",
          {**P, "format": Param("str", "pprof", "a writable format (GET /api/session lists them)"),
           "dry": Param("bool", False, "answer with the loss report instead of the file")})
def download(s: Session, q: Query) -> Any:
    spec = registry.by_name(q.get("format"))
    if spec is None or not spec.can_write:
        raise OptionsError(f"cannot write {{format}}={q.get('format')!r}; writable: "
                           f"{', '.join(registry.names(writable=True))}", options=("format",))
    p = _p(s, q)
    fr = s.filtered(p, q.options)
    out = io.BytesIO()
    report = spec.load().write(fr.profile, out, WriteOptions(sample_index=q.options.sample_index))
    report.target = spec.name
    if q.get("dry"):
        return {"format": spec.name, "bytes": len(out.getvalue()), "not_kept": report.lines(),
                "filename": _filename(s.input(p).path, spec, fr.active)}
    return Download(out.getvalue(), _filename(s.input(p).path, spec, fr.active))


def _filename(path: str, spec: registry.FormatSpec, active: list[str]) -> str:
    stem = os.path.basename(path)
    for ext in sorted((e for f in registry.FORMATS for e in f.extensions), key=len, reverse=True):
        if stem.lower().endswith(ext):
            stem = stem[:-len(ext)]
            break
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "profile"
    return f"{stem}{'.filtered' if active else ''}{spec.extensions[0]}"

