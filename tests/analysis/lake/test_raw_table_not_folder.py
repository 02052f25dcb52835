"""A table folder that is not a folder is an error, never a table silently left out: a
`task_usage` replaced by a dangling symlink, a symlink loop, a FIFO or a plain file must not lose
its rows with exit 0 and vanish from the summary."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tracelab.analysis.lake.ingest import discover_raw_files
from tracelab.analysis.synthetic import generate_trace

TRACE = "google-2011"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample") / TRACE
    generate_trace(TRACE, root, seed=5, scale="tiny")
    return root


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere")


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _plain(path: Path) -> None:
    path.write_bytes(b"not a folder\n")


REPLACEMENTS: dict[str, Callable[[Path], None]] = {
    "a dangling symlink": _dangling,
    "a symlink loop": _loop,
    "a FIFO, socket or device": _fifo,
    "a plain file": _plain,
}


def _with_task_usage_replaced(sample: Path, dest: Path, make: Callable[[Path], None]) -> Path:
    raw = dest / TRACE
    shutil.copytree(sample, raw)
    shutil.rmtree(raw / "task_usage")
    make(raw / "task_usage")
    return raw


@pytest.mark.parametrize("kind", sorted(REPLACEMENTS))
def test_a_table_folder_that_is_not_a_folder_is_an_error(
    sample: Path, tmp_path: Path, kind: str
) -> None:
    raw = _with_task_usage_replaced(sample, tmp_path, REPLACEMENTS[kind])
    found = discover_raw_files(TRACE, raw)
    errors = [p for p in found.problems if p.is_error]
    assert [p.path for p in errors] == ["task_usage"]
    assert kind in errors[0].reason
    assert "replace it by the folder" in errors[0].reason
    # the other tables are still found: the error is the one table's, and it fails the ingest
    assert {f.table for f in found.files} == {
        "job_events",
        "machine_attributes",
        "machine_events",
        "task_constraints",
        "task_events",
    }


def test_ingest_exits_1_naming_the_table(
    prefect_harness: None, sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracelab.flows.cli import main

    raw = _with_task_usage_replaced(sample, tmp_path, _dangling)
    rc = main(["ingest", "--data", str(tmp_path / "d"), "--trace", TRACE, "--raw", str(raw)])
    out = capsys.readouterr()
    assert rc == 1
    assert "table folder 'task_usage' is a dangling symlink" in out.out + out.err
    assert "Traceback" not in out.out + out.err
