"""A generation SIGKILLed at any point leaves a partial sample that nothing takes for raw input
(item 1): `run` generates again, ingest refuses the folder in one line.

The kill is real: a child process installs an audit hook that SIGKILLs itself when the generator
opens or renames the chosen file, so the folder is exactly what a kill at that moment leaves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tracelab.analysis.lake.generating import GENERATING_MARKER
from tracelab.analysis.lake.ingest import discover_raw_files, raw_files_present
from tracelab.flows.pipeline import _raw_timings
from tracelab.flows.settings import Settings

SEED = 5

_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    event, needle, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seen = 0

    def hook(name, args):
        global seen
        if name == event and args and needle in str(args[0]):
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    from tracelab.analysis.synthetic import generate_trace
    sys.addaudithook(hook)
    generate_trace(sys.argv[4], Path(sys.argv[5]), seed=int(sys.argv[6]), scale="tiny")
    """
)


def _killed_generation(trace: str, out: Path, event: str, needle: str, nth: int = 1) -> None:
    """Run the generator in a child and SIGKILL it at the ``nth`` ``event`` on ``needle``."""
    argv = [sys.executable, "-c", _CHILD, event, needle, str(nth), trace, str(out), str(SEED)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == -9, proc.stderr  # it was killed where asked, not finished


KILLS = [
    # at the open of the fleet's first part: every batched table already renamed into place
    ("google-2011", "open", "machine_events/_part-00000-of-00001.csv.gz.tmp", 1),
    # at the first rename of a pending part
    ("google-2011", "os.rename", "job_events/_pending-00000.csv.gz", 1),
    # half-way through the renames of the parts
    ("google-2011", "os.rename", "_pending-00000.csv.gz", 3),
    # the Azure sample before its truth
    ("azure-2017", "open", "TRUTH.json", 1),
]


@pytest.mark.parametrize(("trace", "event", "needle", "nth"), KILLS)
def test_a_killed_generation_is_never_taken_for_raw_input(
    tmp_path: Path, trace: str, event: str, needle: str, nth: int
) -> None:
    raw = tmp_path / "raw" / trace
    _killed_generation(trace, raw, event, needle, nth)
    assert (raw / GENERATING_MARKER).is_file()
    # before: already renamed parts and TRUTH_tasks.parquet counted as raw data, so `run`
    # skipped generating and ingested a sample without machine_events (or with half its parts)
    assert not raw_files_present(raw)
    found = discover_raw_files(trace, raw)
    assert found.files == ()
    (problem,) = found.problems
    assert problem.is_error
    assert "partial sample" in problem.reason
    assert "\n" not in problem.reason


def test_run_generates_a_killed_sample_again_and_ingests_every_row(
    prefect_harness: None, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    raw = data / "raw" / "google-2011"
    _killed_generation("google-2011", raw, "os.rename", "_pending-00000.csv.gz", 3)
    settings = Settings(data_dir=data)
    timings = _raw_timings(settings, "google-2011", None, "tiny", SEED)
    assert [(t.stage, t.status) for t in timings] == [("generate", "ok"), ("ingest", "ok")]
    assert not (raw / GENERATING_MARKER).exists()
    truth = json.loads((raw / "TRUTH.json").read_text(encoding="utf-8"))
    for table, entry in truth["tables"].items():
        parts = sorted((data / "lake" / "google-2011" / table).glob("*.parquet"))
        rows = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
        assert rows == entry["rows"], table


def test_ingest_of_a_partial_sample_under_raw_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracelab.flows.cli import main

    raw = tmp_path / "raw"
    _killed_generation("google-2011", raw, "os.rename", "job_events/_pending-00000.csv.gz")
    rc = main(
        ["ingest", "--data", str(tmp_path / "d"), "--trace", "google-2011", "--raw", str(raw)]
    )
    out = capsys.readouterr()
    assert rc == 1
    assert "partial sample" in out.out + out.err
    assert "Traceback" not in out.out + out.err
