"""`export --out` writes only a regular file outside the data directory's managed folders (issue
28, item 4): before, the atomic rename replaced whatever was at the path: `--out /dev/full`
replaced the device node, `--out DATA/results/azure-2017/priors/params.json` a stage input."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from admission_helpers import write_params

from tracelab.flows.cli import main


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_params(root)
    return root


def _refused(data: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export", "--data", str(data), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    return err[0]


def test_a_fifo_is_not_replaced(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a FIFO stands in for /dev/full: a special file the rename would have replaced
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "is not a regular file" in _refused(data, fifo, capsys)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_folder_and_a_symlink_are_refused(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    assert "is not a regular file" in _refused(data, folder, capsys)
    assert folder.is_dir()
    target = tmp_path / "target.json"
    target.write_text("{}", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert "is a symlink" in _refused(data, link, capsys)
    assert link.is_symlink()
    assert target.read_text(encoding="utf-8") == "{}"


@pytest.mark.parametrize(
    "relative",
    ["results/azure-2017/priors/params.json", "lake/params.json", "tracelab.duckdb", "state/x"],
)
def test_a_managed_path_of_the_data_directory_is_refused(
    data: Path, capsys: pytest.CaptureFixture[str], relative: str
) -> None:
    out = data / relative
    before = out.read_bytes() if out.exists() else None
    assert "which the data directory manages" in _refused(data, out, capsys)
    assert (out.read_bytes() if out.exists() else None) == before


def test_a_regular_file_outside_is_written(
    prefect_harness: None, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "elsewhere" / "params.json"
    assert main(["export", "--data", str(data), "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["records"]
    inside = data / "exports" / "copy.json"
    assert main(["export", "--data", str(data), "--out", str(inside)]) == 0
    assert inside.is_file()


def _refused_csv(data: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export", "--data", str(data), "--format", "csv", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    return err[0]


def test_the_file_written_beside_out_passes_the_same_checks(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: the schema copy beside --out replaced a FIFO there, and a symlink
    folder = tmp_path / "out"
    folder.mkdir()
    fifo = folder / "params.schema.json"
    os.mkfifo(fifo)
    out = folder / "params.json"
    message = _refused(data, out, capsys)
    assert (
        f"error: --out {out}: its schema copy {fifo} exists and is not a regular file (a folder, "
        "device, FIFO or socket); give the path of a file to write"
    ) in message, message
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert not out.exists()
    target = tmp_path / "target.csv"
    target.write_text("x\n", encoding="utf-8")
    (folder / "p_values.csv").symlink_to(target)
    message = _refused_csv(data, folder / "p.csv", capsys)
    assert f"its values table {folder / 'p_values.csv'} is a symlink" in message, message
    assert (folder / "p_values.csv").is_symlink()
    assert target.read_text(encoding="utf-8") == "x\n"


def test_out_may_not_be_the_name_of_the_file_beside_it(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "params.schema.json"
    assert "export writes its schema copy to that name beside it" in _refused(data, out, capsys)
    assert not out.exists()
