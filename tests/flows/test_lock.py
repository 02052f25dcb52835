"""Two runs on one data directory never interleave; a killed run's lock is recovered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.flows.lock import LOCK_NAME, data_dir_lock

_HOLD = """
import sys, time
from pathlib import Path
from tracelab.flows.lock import data_dir_lock
with data_dir_lock(Path(sys.argv[1]), "test holder"):
    print("locked", flush=True)
    time.sleep(60)
"""


def _start_holder(data: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(data)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_run_exits_with_the_holders_pid(tmp_path: Path) -> None:
    proc = _start_holder(tmp_path)
    try:
        with (
            pytest.raises(TracelabError, match=f"in use by pid {proc.pid} \\(test holder"),
            data_dir_lock(tmp_path, "second"),
        ):
            pytest.fail("the second run must not get the lock")
    finally:
        proc.kill()
        proc.wait()


def test_second_run_waits_for_the_first(tmp_path: Path) -> None:
    proc = _start_holder(tmp_path)
    start = time.monotonic()
    # the holder is killed after ~1 s; a waiting run then proceeds
    killer = subprocess.Popen(["sh", "-c", f"sleep 1; kill -TERM {proc.pid}"])
    with data_dir_lock(tmp_path, "waiter", wait_seconds=30):
        waited = time.monotonic() - start
    killer.wait()
    proc.wait()
    assert 0.8 <= waited < 30


def test_lock_left_by_sigkilled_run_is_recovered(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    proc = _start_holder(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert str(proc.pid) in (tmp_path / LOCK_NAME).read_text()  # the dead run's record stays
    with data_dir_lock(tmp_path, "after crash"):
        pass
    err = capfd.readouterr().err
    assert f"stale lock on {tmp_path} left by pid {proc.pid}" in err
    assert (tmp_path / LOCK_NAME).read_text() == ""  # released cleanly this time


def test_cli_reports_the_lock_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracelab.flows.cli import main

    proc = _start_holder(tmp_path)
    try:
        assert main(["derive", "--data", str(tmp_path)]) == 1
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("tracelab derive: error:")
    assert f"pid {proc.pid}" in err[0]


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_lock_stays_held_when_its_file_is_deleted_or_replaced(tmp_path: Path, how: str) -> None:
    # before: the lock was on the file, so a new file meant a new, free lock
    proc = _start_holder(tmp_path)
    try:
        (tmp_path / LOCK_NAME).unlink()
        if how == "replaced":
            (tmp_path / LOCK_NAME).write_text("{}", encoding="utf-8")
        with pytest.raises(TracelabError, match="is in use by"), data_dir_lock(tmp_path, "second"):
            pass
    finally:
        proc.kill()
        proc.wait()
    with data_dir_lock(tmp_path, "after the holder died"):
        assert (tmp_path / LOCK_NAME).is_file()
