"""`tracelab generate` on the command line (real Prefect flow under the session harness)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracelab.analysis.lake.schemas import GOOGLE_2011
from tracelab.flows.cli import main


def test_generate_writes_the_default_raw_folder_with_truth(
    prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    code = main(["generate", "--data", str(data), "--seed", "5", "--scale", "tiny", "--quiet"])
    assert code == 0
    root = data / "raw" / "google-2011"
    truth = json.loads((root / "TRUTH.json").read_text())
    assert truth["seed"] == 5
    assert truth["scale"] == "tiny"
    assert (root / "TRUTH_tasks.parquet").is_file()
    for name in GOOGLE_2011:
        assert sorted(p.name for p in (root / name).iterdir()) == [
            Path(f).name for f in truth["tables"][name]["files"]
        ]
    out = capsys.readouterr().out
    assert f"task_usage {truth['tables']['task_usage']['rows']:,}" in out


def test_generate_out_and_rerun_replaces_parts(prefect_harness: None, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    big = ["generate", "--out", str(out), "--scale", "tiny", "--target-mb", "20", "--quiet"]
    assert main(big) == 0
    first = json.loads((out / "TRUTH.json").read_text())
    assert first["batches"] >= 5
    assert main(["generate", "--out", str(out), "--seed", "1", "--scale", "tiny", "--quiet"]) == 0
    second = json.loads((out / "TRUTH.json").read_text())
    assert second["batches"] == 4
    # the parts of the bigger first run are gone: only the 4 new ones remain
    names = sorted(p.name for p in (out / "task_usage").iterdir())
    assert names == [f"part-{i:05d}-of-00004.csv.gz" for i in range(4)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trace", "google-2099"], "invalid choice: 'google-2099'"),
        (["--scale", "huge"], "invalid choice: 'huge'"),
        (["--target-mb", "-3"], "argument --target-mb: -3: must be at least 0"),
        (["--target-mb", "0"], "--target-mb must be positive"),
    ],
)
def test_bad_arguments_give_a_one_line_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    code = main(["generate", "--out", str(tmp_path / "o"), "--quiet", *argv])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[-1].startswith("tracelab generate: error: ")
    assert message in err[-1]


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--trace", "--out", "--seed", "--scale", "--target-mb"):
        assert flag in text


def test_generate_into_another_data_dir_takes_its_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: only --data's lock was taken, so a run in the other data directory could ingest
    # the sample while it was being written
    from tracelab.flows.lock import data_dir_lock

    other = tmp_path / "other"
    out = other / "raw" / "google-2011"
    with data_dir_lock(other, "tracelab run (held by the test)"):
        code = main(["generate", "--data", str(tmp_path / "mine"), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1
    assert f"{other} is in use by pid" in err[0]
    assert "tracelab run (held by the test)" in err[0]
    assert not out.exists()
