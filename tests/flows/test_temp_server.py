"""`tracelab ingest` starts Prefect's temporary server before its imports, and never imports
Prefect's server package itself (issue #29: ~2.5 CPU-s of its fixed cost)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from repo_paths import REPO

from tracelab.flows import temp_server

LINE = "600000000,,6251812952,0,351618647,1,userA,2,9,0.0625,0.03,0.0001,0\n"

#: runs the real command line in a fresh interpreter, then reports what it imported and
#: whether the server it started is still running
_PROBE = """
import os, sys
from tracelab.flows import temp_server
from tracelab.flows.cli import main
code = main(sys.argv[1:])
process = temp_server._started[0] if temp_server._started else None
print("EXIT", code)
print("SERVER_MODULE", "prefect.server.api.server" in sys.modules)
print("API", os.environ.get("PREFECT_API_URL", ""))
print("PID", process.pid if process else 0)
"""


def _run_ingest(tmp_path: Path) -> dict[str, str]:
    raw = tmp_path / "raw" / "task_events"
    raw.mkdir(parents=True)
    (raw / "part-00000-of-00001.csv").write_text(LINE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "300"  # a loaded machine
    argv = ["ingest", "--trace", "google-2011", "--raw", str(raw.parent)]
    argv += ["--data", str(tmp_path / "data"), "--no-progress"]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pairs = (x.split(" ", 1) for x in done.stdout.splitlines() if x.split(" ")[0].isupper())
    return {k: v for k, v in pairs if k in ("EXIT", "SERVER_MODULE", "API", "PID")}


@pytest.mark.slow
def test_ingest_runs_its_flow_on_the_early_server(tmp_path: Path) -> None:
    out = _run_ingest(tmp_path)
    assert out["EXIT"] == "0"
    # the flow ran against the server started before Prefect was imported ...
    assert out["API"].startswith("http://127.0.0.1:")
    # ... so the command never imported Prefect's server package to start one
    assert out["SERVER_MODULE"] == "False"
    lake = pl.read_parquet(tmp_path / "data/lake/google-2011/task_events")
    assert lake.height == 1
    assert lake["job_id"].to_list() == [6251812952]
    # and the server is gone once the command has exited (atexit)
    assert out["PID"] != "0"
    assert not Path(f"/proc/{out['PID']}").exists()


def test_not_started_when_prefect_is_configured_already(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import prefect  # noqa: F401  (a caller, e.g. this test session, has configured Prefect)

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert temp_server.start_early(tmp_path / "server.log") is False
    assert "PREFECT_API_URL" not in os.environ
    temp_server.wait_until_ready()  # nothing started: returns at once


def test_not_started_when_a_server_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.delitem(sys.modules, "prefect", raising=False)
    assert temp_server.start_early(tmp_path / "server.log") is False


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_the_forked_server_dies_with_a_killed_command(tmp_path: Path) -> None:
    """The server is a fork of the command (the same command line, so no orphan scan can tell
    it): the kernel's death signal must stop it when the command is SIGKILLed."""
    from tracelab.flows.lock import data_dir_lock

    raw = tmp_path / "raw" / "task_events"
    raw.mkdir(parents=True)
    (raw / "part-00000-of-00001.csv").write_text(LINE)
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    argv = [
        "-m",
        "tracelab.flows.cli",
        "ingest",
        "--trace",
        "google-2011",
        "--raw",
        str(raw.parent),
    ]
    # the test holds the data directory: the command starts its server, then waits for the lock
    with data_dir_lock(data, "test"):
        process = subprocess.Popen(
            [sys.executable, *argv, "--data", str(data), "--wait", "600", "--no-progress"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        own_cmdline = None
        server = 0
        deadline = time.monotonic() + 240
        while not server and time.monotonic() < deadline:
            time.sleep(0.2)
            own_cmdline = own_cmdline or Path(f"/proc/{process.pid}/cmdline").read_bytes()
            forks = [p for p in _children(process.pid) if _cmdline(p) == own_cmdline]
            server = forks[0] if forks else 0
        assert server, "no forked server appeared"
        process.kill()
        process.wait(timeout=30)
        assert _gone(server, 10), "SIGKILL left the forked Prefect server running"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.2)
    return False
