"""No Prefect server outlives a killed command, whether by SIGTERM or SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracelab.flows.orphans import OWNER_VARIABLE, orphaned_children, stop_orphans


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_orphans_are_the_marked_processes_whose_owner_is_gone(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    for pid, owner in ((101, dead), (102, alive), (103, None)):
        (tmp_path / str(pid)).mkdir()
        env = [b"PATH=/bin"] + ([f"{OWNER_VARIABLE}={owner}".encode()] if owner else [])
        (tmp_path / str(pid) / "environ").write_bytes(b"\0".join(env) + b"\0")
    assert orphaned_children(tmp_path) == [101]


def _server_child(owner: int) -> int | None:
    for pid in orphaned_children() + _children_marked(owner):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"prefect" in cmdline and b"server" in cmdline:
            return pid
    return None


def _children_marked(owner: int) -> list[int]:
    out = []
    for pid_dir in Path("/proc").glob("[0-9]*"):
        try:
            env = (pid_dir / "environ").read_bytes()
        except OSError:
            continue
        if f"{OWNER_VARIABLE}={owner}".encode() in env.split(b"\0") and int(pid_dir.name) != owner:
            out.append(int(pid_dir.name))
    return out


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.5)
    return False


def _start_run_and_wait_for_its_server(data: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.pop(OWNER_VARIABLE, None)
    command = [
        sys.executable,
        "-m",
        "tracelab.flows.cli",
        "run",
        "--scale",
        "tiny",
        "--data",
        str(data),
    ]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        server = _server_child(process.pid)
        if server is not None:
            return process, server
        assert process.poll() is None, "the run ended before its Prefect server was seen"
        time.sleep(0.5)
    process.kill()
    raise AssertionError("no Prefect server child appeared")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_sigterm_and_sigkill_both_stop_the_server(tmp_path: Path) -> None:
    process, server = _start_run_and_wait_for_its_server(tmp_path / "a")
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    assert _gone(server, 60), "SIGTERM left the Prefect server running"

    process, server = _start_run_and_wait_for_its_server(tmp_path / "b")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    # nothing can catch SIGKILL, but the kernel signals the command's watchdog, which stops the
    # server at once (before: it lived on for ~9 s, or until the next command)
    assert _gone(server, 3), "SIGKILL left the Prefect server running"
    assert server not in stop_orphans()
    assert not _children_marked(process.pid)  # the watchdog went too
