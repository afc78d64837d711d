"""The library front door: ``import polyprof`` gives the analyses, keyword options,
results as plain data (records, pandas, Arrow), short reprs, option-named errors."""

from __future__ import annotations

import builtins
import dataclasses
import pickle
import subprocess
import sys

import pytest

import polyprof
from helpers import REPO

DEMO = REPO / "examples" / "demo.pb.gz"

# The public surface, exactly (httpx style): adding or removing a name is a
# decision, made here and in docs/API.md.
EXPORTED = {
    "DecompressionLimitError", "InputError", "Label", "LossReport", "MalformedInputError", "MissingDependencyError",
    "Options", "OptionsError", "OutputError", "PolyprofError", "PolyprofWarning", "Profile", "ProfileBuilder",
    "ReadOptions", "StoreError", "UnrecognizedFormatError", "UnsupportedFeatureError", "ValueType", "WriteOptions",
    "__version__",
    "convert", "detect", "diff", "dump", "filter", "flame", "from_arrow", "from_pandas", "info", "merge", "peek",
    "read", "read_all", "top", "traces", "tree", "validate", "write",
}


def test_all_is_exactly_the_documented_surface():
    assert set(polyprof.__all__) == EXPORTED
    assert polyprof.__all__ == sorted(polyprof.__all__)
    assert set(dir(polyprof)) == EXPORTED


def test_every_error_class_is_exported():
    import polyprof.errors as errors

    assert set(errors.__all__) <= set(polyprof.__all__)
    for name in errors.__all__:
        assert getattr(polyprof, name) is getattr(errors, name)


def test_import_is_lazy():
    code = ("import sys, polyprof; polyprof.Options; "
            "print(sorted(m for m in ('numpy', 'google.protobuf', 'pandas', 'pyarrow') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def demo():
    return polyprof.read(DEMO)


def test_keyword_options_equal_an_options_object(demo):
    by_kw = polyprof.top(demo, nodecount=5, focus="sha256")
    by_obj = polyprof.top(demo, polyprof.Options(nodecount=5, focus="sha256"))
    assert by_kw.rows == by_obj.rows and len(by_kw.rows) == 5
    assert by_kw.active_filters == ["focus=sha256"]
    # keywords override the fields of an options object
    assert len(polyprof.top(demo, polyprof.Options(nodecount=5), nodecount=2).rows) == 2
    from polyprof.analysis.options import resolve

    assert resolve(pid=[2, 1], tid=7, time_range=[0, None]) == polyprof.Options(
        pid=frozenset({1, 2}), tid=frozenset({7}), time_range=(0, None))


def test_unknown_keyword_is_a_clear_options_error(demo):
    with pytest.raises(polyprof.OptionsError, match=r"unknown option\(s\) nodecont \(did you mean nodecount\?\)"):
        polyprof.top(demo, nodecont=3)
    with pytest.raises(polyprof.OptionsError, match="options must be an Options"):
        polyprof.top(demo, {"nodecount": 3})


def _results(p):
    return {
        "top": polyprof.top(p, nodecount=10),
        "tree": polyprof.tree(p, nodecount=10),
        "peek": polyprof.peek(p, "sha256"),
        "traces": polyprof.traces(p),
        "flame": polyprof.flame(p),
        "diff": polyprof.diff(p, p),
        "validate": polyprof.validate(p),
        "info": polyprof.info(p),
    }


def _holds_profile(value, seen=None) -> bool:
    seen = seen if seen is not None else set()
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, polyprof.Profile):
        return True
    if dataclasses.is_dataclass(value):
        return any(_holds_profile(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return any(_holds_profile(v, seen) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_profile(v, seen) for v in value[:50])
    return False


@pytest.mark.parametrize("kind", ["top", "tree", "peek", "traces", "flame", "diff", "validate", "info"])
def test_results_are_plain_data(demo, kind):
    r = _results(demo)[kind]
    assert not _holds_profile(r), f"{kind} result refers to the profile"
    assert len(pickle.dumps(r)) < 2_000_000
    text = repr(r)
    assert len(text) < 200 and "\n" not in text and text.startswith(type(r).__name__ + "(")
    records = r.to_records()
    assert isinstance(records, list) and records and all(isinstance(x, dict) for x in records)
    df = r.to_pandas()
    table = r.to_arrow()
    assert list(df.columns) == list(records[0]) == table.column_names
    assert len(df) == len(records) == table.num_rows
    assert table.to_pylist() == records


def test_top_rows_carry_separate_fields(demo):
    r = polyprof.top(demo, nodecount=0, granularity="lines")
    row = next(x for x in r.rows if x.function == "crypto/sha256.block")
    assert row.name == f"{row.function} {row.file}:{row.line}"  # the display name joins the fields
    assert row.file.endswith("sha256block_amd64.s") and row.line > 0 and row.module.endswith("/main")
    assert row.flat_percent == pytest.approx(100 * row.flat / r.total)
    assert r.rows[-1].sum_percent == pytest.approx(100 * sum(x.flat for x in r.rows) / r.total)
    by_addr = polyprof.top(demo, nodecount=3, granularity="addresses")
    assert all(x.address > 0 and x.name.startswith(f"{x.address:016x}") for x in by_addr.rows)


def test_top_pandas_matches_the_cli_json(demo, cli):
    import json

    rows = json.loads(cli("top", DEMO, "--format", "json", "--nodecount", "0").out)["rows"]
    df = polyprof.top(demo, nodecount=0).to_pandas()
    assert df["name"].tolist() == [x["name"] for x in rows]
    assert df["flat"].tolist() == [x["flat"] for x in rows] and df["cum"].tolist() == [x["cum"] for x in rows]
    assert df["file"].tolist() == [x["file"] for x in rows]


def test_tree_tables_nodes_and_edges(demo):
    r = polyprof.tree(demo, nodecount=0)
    edges = r.to_records("edges")
    assert len(edges) == sum(len(n.callees) for n in r.nodes) > 0
    assert sum(len(n.callers) for n in r.nodes) == len(edges)
    with pytest.raises(polyprof.OptionsError, match="has no table 'bogus'; tables: nodes, edges"):
        r.to_records("bogus")


def test_diff_tables_hold_every_number(demo):
    r = polyprof.diff(demo, demo, normalize="total")
    f = r.to_records("functions")[0]
    assert f["delta_flat"] == 0 and f["base_flat_raw"] == f["new_flat_raw"] > 0 and f["function"]
    s = r.to_pandas("stacks")
    assert (s["share_delta"] == 0).all() and len(s) == len(r.stacks)


def test_flame_table_is_columnar(demo):
    r = polyprof.flame(demo)
    df = r.to_pandas()
    assert df["total"].iloc[0] == r.root_total and df["parent"].iloc[0] == -1
    assert (df.loc[df["name"] == "crypto/sha256.block", "file"].str.endswith(".s")).all()


def test_traces_table_one_row_per_sample(demo):
    r = polyprof.traces(demo)
    df = r.to_pandas()
    assert len(df) == len(r) and df["value"].sum() == int(r.sample_value.sum())
    assert df["frames"].iloc[0] == [f.name for f in r.stacks[int(r.sample_stack[0])]]
    assert df["worker"].notna().any() and "labels" not in df.columns


@pytest.mark.parametrize("module,extra", [("pandas", "pandas"), ("pyarrow", "arrow")])
def test_missing_extra_names_it(demo, monkeypatch, module, extra):
    real_import = builtins.__import__

    def blocked(name, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"blocked {name}")
        return real_import(name, *args, **kwargs)

    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(builtins, "__import__", blocked)
    r = polyprof.top(demo, nodecount=3)
    call = r.to_pandas if module == "pandas" else r.to_arrow
    with pytest.raises(polyprof.MissingDependencyError, match=rf"pip install 'polyprof\[{extra}\]'") as info:
        call()
    assert isinstance(info.value, ImportError) and info.value.extra == extra
    assert r.to_records()  # records need neither
    with pytest.raises(polyprof.MissingDependencyError, match=rf"pip install 'polyprof\[{extra}\]'"):
        demo.to_pandas() if module == "pandas" else demo.to_arrow()


def test_library_errors_name_options_and_the_cli_names_flags(demo, cli):
    with pytest.raises(polyprof.OptionsError) as info:
        polyprof.top(demo, show_from="((")
    assert str(info.value).startswith("bad regular expression show_from='(('")
    assert info.value.options == ("show_from",)
    r = cli("top", DEMO, "--show-from", "((")
    assert r.code == 6 and r.err.startswith("polyprof: error: bad regular expression --show-from='(('")
    with pytest.raises(polyprof.OptionsError, match="unknown sample type sample_index='nope'"):
        polyprof.top(demo, sample_index="nope")
    assert "unknown sample type --sample-index='nope'" in cli("top", DEMO, "--sample-index", "nope").err


def test_mixed_profiles_error_names_options_and_flags(tmp_path, cli):
    from test_chromium_support import fixture_bytes

    path = tmp_path / "log.uma"
    path.write_bytes(fixture_bytes("uma_log.textproto"))
    with pytest.raises(polyprof.OptionsError) as info:
        polyprof.read(path)
    text = str(info.value)
    assert "(or combine them into one with merge=True)" in text and "(select with profiles=[3])" in text
    assert set(info.value.options) == {"profiles", "pid", "heap", "merge"}
    r = cli("top", path)
    assert r.code == 6 and "(or combine them into one with --merge)" in r.err and "(select with --profile 3)" in r.err
    with pytest.raises(polyprof.OptionsError, match=r"profiles=\[7\]: the input holds 3 profile\(s\)"):
        polyprof.read(path, options=polyprof.ReadOptions(profiles=[7]))
    assert "--profile 7: the input holds 3 profile(s)" in cli("top", path, "--profile", "7").err


# ---------------------------------------------------------------- inputs and reprs

def test_every_input_kind_reads_the_same(demo):
    import io

    data = DEMO.read_bytes()
    with open(DEMO, "rb") as fh:
        inputs = [str(DEMO), DEMO, data, bytearray(data), memoryview(data), io.BytesIO(data), fh]
        profiles = [polyprof.read(x) for x in inputs]
    from polyprof.model.dump import dump

    assert {dump(p) for p in profiles} == {dump(demo)}


def test_bad_inputs_get_clear_errors(tmp_path):
    import io

    with pytest.raises(polyprof.InputError, match="open it in binary mode"):
        with open(DEMO) as fh:
            polyprof.read(fh)
    with pytest.raises(polyprof.UnrecognizedFormatError, match=r"^<BytesIO>: not a profile format"):
        polyprof.read(io.BytesIO(b"not a profile"))
    with pytest.raises(TypeError, match="pass a path, bytes or a binary file object"):
        polyprof.read(42)


def test_reads_from_a_pipe():
    """sys.stdin.buffer of a process fed through a pipe: not seekable."""
    code = "import sys, polyprof; print(repr(polyprof.read(sys.stdin.buffer)))"
    with open(DEMO, "rb") as fh:
        done = subprocess.run([sys.executable, "-c", code], input=fh.read(),
                              capture_output=True, text=False, check=True)
    assert done.stdout.decode().startswith("Profile(pprof, 446 samples of [samples/count, cpu/nanoseconds*]")


def test_reads_an_http_response():
    import http.server
    import threading
    import urllib.request

    body = DEMO.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # keep test output clean
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/profile", timeout=10) as response:
            assert not response.seekable()
            p = polyprof.read(response)
    finally:
        server.shutdown()
        server.server_close()
    assert len(p.samples) == 446 and p.totals() == polyprof.read(DEMO).totals()


def test_reprs_are_short(peer):
    p = polyprof.read(peer / "google__pprof/internal/proftest/testdata/large.cpu")
    texts = [repr(p), repr(p.samples), repr(p.functions), repr(p.callsites), repr(p.locations)]
    assert all(len(t) < 200 for t in texts), texts
    assert texts[0].startswith("Profile(pprof, 20430 samples of [samples/count, cpu/nanoseconds*]")
    labelled = polyprof.read(DEMO)
    repr(labelled), repr(labelled.samples)
    assert labelled.samples.is_deferred("labelset")  # a repr never decodes deferred labels
    assert len(repr(polyprof.top(p))) < 200 and len(repr(polyprof.filter(p, focus="runtime"))) < 200


def test_pprof_reports_are_tables_too(demo):
    """tags, raw, list and disasm (#15's reports) answer to_records/to_pandas/to_arrow like the rest."""
    from polyprof.analysis.disasm import DisasmResult, Instruction, Symbol
    from polyprof.analysis.raw import raw
    from polyprof.analysis.source import source_listing
    from polyprof.analysis.tags_report import tag_report

    tags = tag_report(demo)
    assert {(r["key"], r["value"]) for r in tags.to_records()} == {("worker", "sorter"), ("worker", "hasher")}
    assert tags.to_pandas()["weight"].sum() == sum(r.weight for r in tags.rows)
    rw = raw(demo)
    assert rw.to_arrow().num_rows == len(rw.samples) and rw.to_arrow("locations").num_rows == len(rw.locations)
    assert rw.to_records()[0]["locations"] == list(rw.samples[0].locations)
    listing = source_listing(demo, "sha256")
    routines = listing.to_pandas("routines")
    assert list(routines["function"]) == [r.function for r in listing.routines] and "lines" not in routines
    assert len(listing.to_records()) == sum(len(r.lines) for r in listing.routines)
    sym = Symbol(["f", "f_alias"], "/bin/x", 0x10, 0x20, 3, 5,
                 [Instruction(0x10, "nop", "f", "x.c", 1, 1, 2), Instruction(0x11, "ret", "f", "x.c", 2, 2, 3)])
    dis = DisasmResult(rw.sample_types[0], 10, [sym])
    assert [(r["symbol"], r["address"], r["cum"]) for r in dis.to_records()] == [("f", 0x10, 2), ("f", 0x11, 3)]
    assert dis.to_arrow("symbols").column_names == ["names", "binary", "start", "end", "flat", "cum"]
    for r in (tags, rw, listing, dis):
        assert "\n" not in repr(r) and len(repr(r)) < 200 and not _holds_profile(r)
