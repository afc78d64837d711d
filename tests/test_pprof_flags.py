"""pprof's flags, spelled as pprof users spell them, give go tool pprof's output.

Every entry of ``go_pprof_refs.FLAG_CASES`` runs ``polyprof REPORT FILE
-flag=value ...`` (single-dash pprof spellings, translated by the CLI) and
must equal the stored ``go tool pprof -REPORT -flag=value ... FILE`` byte for
byte; with ``go`` installed the same command also runs live.
"""

from __future__ import annotations

import pytest

import go_pprof_refs as refs
from helpers import PEER

CASES = refs.FLAG_CASES
VERB = {"dot": "graph"}


def _ours(cli, report: str, rel: str, flags: list[str]):  # noqa: ANN001, ANN202
    flags = refs.peer_flags(flags)
    if report == "peek":  # pprof: -peek=REGEX; polyprof: peek FILE REGEX
        regex = next(f.split("=", 1)[1] for f in flags if f.startswith("-peek="))
        return cli("peek", PEER / rel, regex, *[f for f in flags if not f.startswith("-peek=")])
    return cli(VERB.get(report, report), PEER / rel, *flags)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_flag_equals_stored_go_tool_pprof(peer, cli, case):
    name, report, rel, flags = case
    ref = refs.read_ref(refs.FLAGS / f"{name}.txt")
    assert ref is not None, "run python tests/go_pprof_refs.py --flags"
    done = _ours(cli, report, rel, flags)
    assert done.code == 0, done.err
    assert done.out.split("\n") == ref[0].decode("utf-8", errors="replace").split("\n")


@pytest.fixture(scope="module")
def go():
    if not refs.go_available():
        pytest.skip("go tool pprof not available (install Debian golang-go)")
    return refs.Go()


@pytest.mark.parametrize("case", CASES[::4], ids=[c[0] for c in CASES[::4]])
def test_flag_equals_live_go_tool_pprof(peer, cli, go, case):
    name, report, rel, flags = case
    code, text, err = refs.go_flag_run(go, report, rel, flags)
    assert code == 0, err
    assert _ours(cli, report, rel, flags).out == text.decode("utf-8", errors="replace")


def test_double_dash_spellings_mean_the_same(peer, cli):
    pprof = cli("top", PEER / refs.HEAP, "-nodecount=3", "-sample_index=alloc_space", "-cum")
    ours = cli("top", PEER / refs.HEAP, "--nodecount", "3", "--sample-index", "alloc_space", "--cum")
    go_style = cli("top", PEER / refs.HEAP, "--nodecount=3", "--sample_index=alloc_space", "-cum=true")
    assert pprof.code == ours.code == go_style.code == 0
    assert pprof.out == ours.out == go_style.out


def test_report_flag_names_the_verb(peer, cli):
    """``polyprof -top FILE`` as ``go tool pprof -top FILE``; ``-peek=RE``; ``-dot``."""
    assert cli("-top", PEER / refs.SAMPLE).out == cli("top", PEER / refs.SAMPLE).out
    assert cli("-peek=mapassign", PEER / refs.SAMPLE).out == cli("peek", PEER / refs.SAMPLE, "mapassign").out
    assert cli("-dot", PEER / refs.SAMPLE).out.startswith('digraph "sample.bin"')


def test_http_alias_explains_missing_serve(cli, peer):
    r = cli("-http=:8080", PEER / refs.SAMPLE)
    assert r.code == 6 and "serve" in r.err and "Traceback" not in r.err


def test_spelling_translation_is_generic():
    """The alias table, without running a verb: pprof spellings become polyprof's."""
    from polyprof.cli.args import pprof_spellings

    verbs = ["top", "tree", "peek", "graph", "serve"]
    assert pprof_spellings(["-http=:8080", "cpu.pb.gz"], verbs) == ["serve", "--http", ":8080", "cpu.pb.gz"]
    assert pprof_spellings(["top", "f", "-inuse_space", "-lines", "-mean_delay"], verbs) == \
        ["top", "f", "--sample-index=inuse_space", "--granularity=lines", "--sample-index=delay", "--mean"]
    assert pprof_spellings(["-svg", "f"], verbs) == ["graph", "--to", "svg", "f"]
    assert pprof_spellings(["peek", "f", "-cum=false", "--", "-x_y"], verbs) == ["peek", "f", "--", "-x_y"]
    assert pprof_spellings(["top", "f", "-o", "out", "--nodecount", "-5"], verbs) == \
        ["top", "f", "-o", "out", "--nodecount", "-5"]  # short options and numbers stay


def test_symbolize_demangle_spelling_reaches_the_demangler(cli, tmp_path):
    """pprof's -symbolize=demangle=MODE is polyprof's --demangle MODE; -symbolize=none keeps names as stored."""
    import pandas as pd

    import polyprof

    mangled = "_ZN3foo3barIiEEvT_"  # void foo::bar<int>(int)
    df = pd.DataFrame({"frames": [["main", mangled]], "cpu": [5]})
    path = tmp_path / "mangled.pb.gz"
    polyprof.write(polyprof.from_pandas(df, sample_types={"cpu": "count"}), path)

    def leaf(*flags: str) -> str:
        r = cli("top", path, "--nodecount", "1", *flags)
        assert r.code == 0, r.err
        return r.out.splitlines()[-1].split()[-1]

    assert leaf("-symbolize=demangle=none") == mangled
    assert leaf("-symbolize=none") == mangled
    assert leaf("-symbolize=demangle=full") == leaf("--demangle", "full") == "foo::bar<int>(int)"
    assert leaf() == "foo::bar"  # pprof's default: simplified
