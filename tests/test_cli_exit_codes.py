"""The README's exit-code table holds for every verb, and argument errors look the same
everywhere: exit 6, the verb's own usage, a "did you mean" for close names."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from polyprof.cli.main import _verb_names

REPO = Path(__file__).resolve().parents[1]
DEMO = str(REPO / "examples" / "demo.pb.gz")


def _argv(verb: str, src: str, out: str) -> list[str]:
    """A valid command line of ``verb`` reading ``src`` (and writing ``out``)."""
    return {
        "peek": [verb, src, "."], "list": [verb, src, "."], "disasm": [verb, src, "."],
        "diff": [verb, src, src], "merge": [verb, src, "-o", out + ".pb.gz"],
        "convert": [verb, src, "-o", out + ".pb.gz"], "symbolize": [verb, src, "-o", out + ".pb.gz", "--symbols", "/"],
        "flame": [verb, src, "-o", out + ".svg"],
        "graph": [verb, src, "-o", out + ".dot"], "formats": [verb],
        "store": [verb, "ingest", out + ".store", src],  # the store verb reads inputs when it ingests them
    }.get(verb, [verb, src])


def _readme_codes() -> dict[str, int]:
    text = (REPO / "README.md").read_text()
    m = re.search(r"Exit codes: (.*?)\n\n", text, re.DOTALL)
    assert m, "README lists the exit codes"
    return {" ".join(name.split()): int(code) for code, name in
            re.findall(r"(\d+) ([^,]+?)(?:,|\.$|$)", " ".join(m.group(1).split()))}


VERBS = _verb_names()
INPUT_VERBS = [v for v in VERBS if v != "formats"]


def test_readme_table_is_the_one_we_test():
    codes = _readme_codes()
    assert codes["unreadable input"] == 2 and codes["unknown format"] == 3
    assert codes["malformed input"] == 4 and codes["unsupported feature"] == 5 and codes["bad option"] == 6
    assert codes["cannot write output"] == 7


@pytest.mark.parametrize("verb", VERBS)
def test_unknown_flag_exits_6_with_the_verbs_usage(cli, tmp_path, verb):
    r = cli(*_argv(verb, DEMO, str(tmp_path / "out")), "--no-such-flag")
    assert r.code == 6, r.err
    assert f"usage: polyprof {verb}" in r.err
    assert "unrecognized arguments: --no-such-flag" in r.err


@pytest.mark.parametrize("verb", [v for v in INPUT_VERBS if v not in ("formats",)])
def test_exit_codes_per_verb(cli, tmp_path, verb):
    out = str(tmp_path / "out")
    assert cli(*_argv(verb, str(tmp_path / "missing.pb.gz"), out)).code == 2  # unreadable input
    text = tmp_path / "notes.json"
    text.write_text('{"not": "a profile"}\n')
    assert cli(*_argv(verb, str(text), out)).code == 3  # unknown format
    broken = tmp_path / "broken.pb.gz"
    broken.write_bytes(gzip.compress(gzip.decompress(Path(DEMO).read_bytes())[:3000]))
    assert cli(*_argv(verb, str(broken), out)).code == 4  # malformed input
    future = tmp_path / "future.trace"
    future.write_bytes(b"SIMPLEPERF" + (99).to_bytes(2, "little") + bytes(4))
    assert cli(*_argv(verb, str(future), out)).code == 5  # unsupported feature (a format version to come)
    assert cli(*_argv(verb, DEMO, out), "--time-range", "5:abc").code == 6  # bad option


@pytest.mark.parametrize("verb", ["merge", "convert", "flame", "graph", "top", "raw", "tags"])
def test_cannot_write_output_exits_7(cli, tmp_path, verb):
    argv = _argv(verb, DEMO, str(tmp_path / "out"))
    target = str(tmp_path / "no" / "such" / "dir" / ("out.pb.gz" if verb in ("merge", "convert") else "out.svg"))
    argv = argv[:argv.index("-o") + 1] + [target] if "-o" in argv else argv + ["-o", target]
    assert cli(*argv).code == 7


@pytest.mark.parametrize("argv", [
    ["top", DEMO, "--granularity", "bogus"], ["top", DEMO, "--format", "xml"], ["top", DEMO, "--pid", "abc"],
    ["flame", DEMO], ["diff", DEMO], ["top", DEMO, "--nodecount", "-5"], ["top", DEMO, "--sample-index", "nope"],
    ["tree", DEMO, "--nodefraction", "2"], ["top"], ["bogusverb"],
], ids=lambda a: " ".join(a[:1] + a[2:]) or "none")
def test_bad_options_exit_6(cli, argv):
    r = cli(*argv)
    assert r.code == 6, (r.code, r.err)
    assert "Traceback" not in r.err


def test_did_you_mean(cli):
    r = cli("top", DEMO, "--nodecunt", "5")
    assert r.code == 6 and "did you mean --nodecount?" in r.err
    r = cli("tpo", DEMO)
    assert r.code == 6 and "did you mean 'top'?" in r.err
    r = cli("top", DEMO, "--granularity", "line")
    assert r.code == 6 and "did you mean 'lines'?" in r.err
    r = cli("graph", DEMO, "--format", "dot")  # a value of another option: that option named
    assert r.code == 6 and "did you mean --to dot?" in r.err
    r = cli("top", DEMO, "--format", "jsn")  # close to the option's own choices, not another's
    assert r.code == 6 and "did you mean 'json'?" in r.err


def test_top_unit_takes_its_value(cli):
    """``top --unit ms FILE`` once read "ms" as the input."""
    r = cli("top", "--unit", "ms", DEMO)
    assert r.code == 0 and r.out.splitlines()[7].split()[0].endswith("ms")
