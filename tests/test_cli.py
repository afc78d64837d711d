"""The command line as a user meets it: help, verbs, errors, exit codes, outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import polyprof
from polyprof.cli.main import build_parser
from polyprof.model.dump import dump

from helpers import REPO

DEMO = REPO / "examples" / "demo.pb.gz"


def test_help_lists_verbs_with_examples(cli):
    r = cli("--help")
    assert r.code == 0
    for verb in ("info", "top", "convert", "dump", "formats"):
        assert verb in r.out
    assert "exit codes" in r.out
    for verb in ("info", "top", "convert", "dump"):
        sub = cli(verb, "--help")
        assert sub.code == 0 and "example" in sub.out.lower(), verb


def test_help_does_not_import_numpy_or_protobuf():
    code = ("import sys; from polyprof.cli.main import main; "
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'google')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_python_dash_m_works():
    out = subprocess.run([sys.executable, "-m", "polyprof", "top", str(DEMO), "--nodecount", "3"],
                         capture_output=True, text=True, check=True).stdout
    assert "flat%" in out and "crypto/sha256.block" in out


def test_top_json_shape(cli):
    r = cli("top", DEMO, "--format", "json", "--nodecount", "0", "--nodefraction", "0")
    assert r.code == 0
    data = json.loads(r.out)
    assert {"sample_type", "unit", "total", "rows"} <= set(data)
    assert data["node_count"] == len(data["rows"]) and data["granularity"] == "functions"
    assert (data["sample_type"], data["unit"]) == ("cpu", "nanoseconds")
    profile = polyprof.read(DEMO)
    assert data["total"] == profile.totals()[1]
    assert sum(row["flat"] for row in data["rows"]) == data["total"]
    assert all({"name", "flat", "cum"} <= set(row) for row in data["rows"])


def test_top_sample_index_by_name_and_number(cli):
    by_name = json.loads(cli("top", DEMO, "--format", "json", "--sample-index", "samples").out)
    by_number = json.loads(cli("top", DEMO, "--format", "json", "--sample-index", "0").out)
    assert by_name == by_number and by_name["unit"] == "count"


def test_unknown_sample_index_is_one_line(cli):
    r = cli("top", DEMO, "--sample-index", "nope")
    assert r.code == 6
    assert r.err.count("\n") == 1 and "samples, cpu" in r.err


def test_info_text_and_json(cli):
    text = cli("info", DEMO)
    assert text.code == 0 and "cpu/nanoseconds (default)" in text.out and "worker" in text.out
    data = json.loads(cli("info", DEMO, "--format", "json").out)
    assert data["format"] == "pprof" and data["samples"] == len(polyprof.read(DEMO).samples)


def test_dump_equals_library_dump(cli):
    assert cli("dump", DEMO).out == dump(polyprof.read(DEMO))


def test_formats_lists_the_registry(cli):
    data = json.loads(cli("formats", "--format", "json").out)
    assert {"pprof", "simpleperf"} <= {f["name"] for f in data}


def test_convert_round_trip_and_report(cli, tmp_path):
    out = tmp_path / "copy.pb.gz"
    r = cli("convert", DEMO, "-o", out)
    assert r.code == 0 and "wrote" in r.err
    assert dump(polyprof.read(out)) == dump(polyprof.read(DEMO))
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600


@pytest.mark.parametrize("argv,code,needle", [
    (["top", "/nonexistent/file.pb.gz"], 2, "no such file"),
    (["top", "{repo}"], 2, "is a directory"),
    (["top", "{readme}"], 3, "not a profile format"),
    (["convert", "{demo}", "-o", "{tmp}/x.unknownext"], 6, "cannot tell the output format"),
    (["convert", "{demo}", "-o", "{tmp}/x.pb.gz", "--to", "nope"], 6, "cannot write format"),
])
def test_errors_are_one_line_with_documented_codes(cli, tmp_path, argv, code, needle):
    argv = [a.format(repo=REPO, readme=REPO / "pyproject.toml", demo=DEMO, tmp=tmp_path) for a in argv]
    r = cli(*argv)
    assert r.code == code, r.err
    assert needle in r.err and r.err.startswith("polyprof: error: ")
    assert r.err.count("\n") == 1 and "Traceback" not in r.err


def test_corrupt_input_leaves_no_output_file(cli, tmp_path):
    bad = tmp_path / "bad.pb.gz"
    bad.write_bytes(DEMO.read_bytes()[:200])
    out = tmp_path / "out.pb.gz"
    r = cli("convert", bad, "-o", out)
    assert r.code == 4 and str(bad) in r.err
    assert not out.exists() and os.listdir(tmp_path) == ["bad.pb.gz"]


def test_failing_writer_leaves_no_partial_file(tmp_path, monkeypatch):
    from polyprof.formats import pprof

    def explode(profile, out, options):
        out.write(b"partial")
        raise polyprof.PolyprofError("boom")

    monkeypatch.setattr(pprof, "write", explode)
    with pytest.raises(polyprof.PolyprofError):
        polyprof.write(polyprof.read(DEMO), tmp_path / "out.pb.gz")
    assert os.listdir(tmp_path) == []


def test_parser_builds_without_running(tmp_path):
    args = build_parser().parse_args(["top", "x.pb.gz", "--nodecount", "5", "--time-range", "1s:2.5s"])
    assert (args.nodecount, args.time_range) == (5, (10**9, 25 * 10**8))


def test_convert_passes_writer_options(cli, tmp_path):
    plain, named = tmp_path / "a.folded", tmp_path / "b.folded"
    assert cli("convert", DEMO, "-o", plain).code == 0
    assert cli("convert", DEMO, "-o", named, "--option", "drop_leaf").code == 0
    # dropping each sample's leaf frame changes the stacks but not the total weight
    total = lambda path: sum(int(line.rsplit(" ", 1)[1]) for line in path.read_text().splitlines())  # noqa: E731
    assert plain.read_text() != named.read_text() and total(plain) >= total(named) > 0


def test_input_flags_reach_the_readers(cli):
    args = build_parser().parse_args(["info", "x", "--offcpu", "off", "--module-names", "names.txt"])
    from polyprof.cli.common import read_options

    assert read_options(args).extra == {"offcpu": "off", "module_names": "names.txt"}


def test_progress_bar_on_a_terminal_only(tmp_path, peer):
    import io

    from polyprof.cli.env import Env
    from polyprof.cli.main import main

    trace = next(peer.glob("google__perfetto/diff_tests_binary/**/Profiling__perf_sample_counter_set.pftrace"))
    for interactive in (True, False):
        out, err = io.StringIO(), io.StringIO()
        assert main(["top", str(trace)], Env(out, err, interactive=interactive)) == 0
        assert ("100%" in err.getvalue()) is interactive  # the bar reached the end, on a TTY only
        assert "flat%" in out.getvalue() and "\r" not in out.getvalue()
