"""Faults of the machine (file-size limit, full disk) are one line naming the path, never a
traceback on screen; the real command runs in a subprocess under a real ``RLIMIT_FSIZE``."""

from __future__ import annotations

import errno
import logging
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tracelab.analysis.common.faults import environment_fault
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.cli import _LogFileHandler


def _limited(limit_bytes: int):  # type: ignore[no-untyped-def]
    """preexec_fn: the child's files may not grow beyond ``limit_bytes``. SIGXFSZ is left at
    its default (the kernel kills the writer): the command must ignore it itself."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return limit


def _tracelab(
    args: list[str], env: dict[str, str], limit_bytes: int
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracelab.flows.cli", *args],
        env=env,
        preexec_fn=_limited(limit_bytes),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(changes)
    return env


@pytest.mark.slow
def test_an_ingest_beyond_the_file_size_limit_names_each_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    generate_trace("google-2011", data / "raw" / "google-2011", seed=3, scale="tiny")
    done = _tracelab(["ingest", "--data", str(data), "--trace", "google-2011"], _env(), 200_000)
    # exit 1, not death by SIGXFSZ (-25)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stdout.splitlines() if line.startswith("error ")]
    assert errors, done.stdout
    lake = data / "lake" / "google-2011"
    for line in errors:  # each failed file: where it could not write
        assert f"cannot write {lake}" in line, line
    # and what to do (the summary wraps long reasons)
    assert "ulimit -f" in " ".join(done.stdout.split())


@pytest.mark.slow
def test_a_report_beyond_the_file_size_limit_is_one_line(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect.settings import PREFECT_API_URL

    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    limit = 4096
    # a log file already at the limit: every record the log handler writes fails too
    log = data / "logs" / "tracelab.log"
    log.write_bytes(b"-" * limit)
    # the harness's server was started without the limit: only the command's own files meet it
    env = _env(PREFECT_API_URL=str(PREFECT_API_URL.value()))
    done = _tracelab(["report", "--data", str(data)], env, limit)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "Logging error" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"tracelab report: error: cannot write {data}/site/")
    assert f"the file-size limit ({limit:,} bytes, `ulimit -f`)" in lines[0]
    assert log.stat().st_size == limit


def test_a_log_file_on_a_full_disk_is_given_up_quietly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger("tracelab")
    handler = _LogFileHandler("/dev/full", encoding="utf-8")  # every write: ENOSPC
    logger.addHandler(handler)
    try:
        for _ in range(3):
            logger.error("stage failed")
        assert handler not in logger.handlers
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err == ""


def _write_to_a_full_disk() -> OSError:
    with Path("/dev/full").open("wb", buffering=0) as fh:  # every write: ENOSPC
        try:
            fh.write(b"x")
        except OSError as exc:
            return exc
    raise AssertionError("/dev/full took a write")


def test_a_full_disk_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    failed = _write_to_a_full_disk()
    assert failed.errno == errno.ENOSPC
    assert failed.filename is None  # a write does not say which file: its frame does
    assert environment_fault(failed, tmp_path) == (
        "cannot write /dev/full: no space left on its file system; free space there (`df -h` "
        "shows it) or use a data directory (--data) on a disk with room, and run again"
    )
    renamed = OSError(errno.ENOSPC, "No space left on device", "a/src", None, "b/dst")
    assert (environment_fault(renamed, tmp_path) or "").startswith("cannot write b/dst: ")
    # another library's text: DuckDB names the file in quotes
    duck = RuntimeError('IO Error: Could not write file "d/x.parquet": No space left on device')
    assert (environment_fault(duck, tmp_path) or "").startswith("cannot write d/x.parquet: ")
    assert environment_fault(ValueError("bad row"), tmp_path) is None


def test_a_stage_of_a_run_on_a_full_disk_fails_with_the_same_line(tmp_path: Path) -> None:
    from tracelab.flows.pipeline import stage_timing

    def stage() -> None:
        raise _write_to_a_full_disk()

    timing = stage_timing("report", "all", stage, tmp_path)
    assert timing.status == "failed"
    assert timing.note.startswith("cannot write /dev/full: no space left on its file system")
