"""The conversion fidelity matrix (tests/fidelity.py): every difference is kept or reported.

Over at least three real files per source format (peer data and the repo's
fixtures), every (source, target) pair of the four protobuf formats is
converted and read back; a difference the loss report does not name fails.
The matrix is printed at the end of the test run and kept in
docs/FIDELITY.md (refreshed with ``pytest --update-goldens``).
"""

from __future__ import annotations

import pytest

import fidelity
import polyprof
from helpers import PEER, REPO

DOC = REPO / "docs" / "FIDELITY.md"
_HEADER = """\
# Conversion fidelity

What survives each conversion between the four protobuf formats, made by
`tests/test_fidelity_matrix.py` (refresh with `pytest --update-goldens`). For
every source file, the profile is written in each target format and read
back; per sample type its name, unit, order, total and the flat/cum of every
function (`polyprof top --nodecount 0`), the default type, labels, times,
pids/tids and thread names are compared with the original. **kept** means no
difference at all; **reported** lists what differed (in how many of the
source files), each difference named by the writer's loss report
(`polyprof convert --format json` prints it). A difference no report names
fails the test.

"""


@pytest.fixture(scope="module")
def cells():
    if not PEER.is_dir():
        pytest.skip(f"peer data not found at {PEER} (set POLYPROF_PEER_DATA)")
    return fidelity.matrix()


def test_at_least_three_real_files_per_source_format() -> None:
    for fmt in fidelity.FORMATS:
        assert sum(s.fmt == fmt for s in fidelity.SOURCES) >= 3, fmt


def test_every_difference_is_kept_or_reported(cells, request) -> None:  # noqa: ANN001
    request.config.stash[fidelity.MATRIX_KEY] = fidelity.render(cells).split("\n\nSource files:")[0]
    unreported = [f"{s} -> {t}, {name}: {x.check} {x.subject}"
                  for (s, t), cell in cells.items() for name, x in cell.unreported()]
    assert not unreported, "differences no loss report names:\n" + "\n".join(unreported)


def test_same_format_round_trips_keep_everything(cells) -> None:  # noqa: ANN001
    for fmt in fidelity.FORMATS:
        assert cells[(fmt, fmt)].summary() == "kept", fmt


def test_docs_show_the_current_matrix(cells, request) -> None:  # noqa: ANN001
    text = _HEADER + fidelity.render(cells)
    if request.config.getoption("--update-goldens") or not DOC.exists():
        DOC.write_text(text)
    assert DOC.read_text() == text, "docs/FIDELITY.md is stale: run pytest --update-goldens"


def test_readme_perfetto_round_trip_shows_the_same_top(cli, tmp_path) -> None:  # noqa: ANN001
    demo = REPO / "examples" / "demo.pb.gz"
    for target in ("perfetto", "simpleperf", "chromium"):
        out = tmp_path / f"demo.{target}"
        assert cli("convert", demo, "-o", out, "--to", target).code == 0
        want, got = cli("top", demo, "--nodecount", "8").out, cli("top", out, "--nodecount", "8").out
        if target == "perfetto":
            assert got == want
        else:  # the same numbers; the header names the renamed type, and inlined frames are frames of their own
            rows = lambda text: [line.removesuffix(" (inline)") for line in text.splitlines()[-8:]]  # noqa: E731
            assert rows(got) == rows(want), target


def test_json_loss_report_names_renamed_types(cli, tmp_path) -> None:  # noqa: ANN001
    import json

    r = cli("convert", REPO / "examples" / "demo.pb.gz", "-o", tmp_path / "x.trace", "--to", "simpleperf",
            "--format", "json")
    report = json.loads(r.out)
    assert report["renamed"] == {"cpu/nanoseconds": "cpu-clock/nanoseconds"}
    assert polyprof.read(tmp_path / "x.trace").sample_types[1] == polyprof.ValueType("cpu-clock", "nanoseconds")



def test_json_loss_report_goes_to_stderr_when_the_profile_goes_to_stdout() -> None:
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "polyprof", "convert", str(REPO / "examples" / "demo.pb.gz"),
                        "-o", "-", "--to", "folded", "--format", "json"], capture_output=True, text=True, check=True)
    assert json.loads(r.stderr)["target"] == "folded"
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in r.stdout.splitlines())
