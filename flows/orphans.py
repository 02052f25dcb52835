"""No Prefect server outlives the command that started it.

Prefect's embedded temporary server is a child process (uvicorn) stopped by an ``atexit`` hook.
SIGTERM is therefore turned into a normal exit, so the hook runs. SIGKILL cannot be caught: each
command marks its environment with ``TRACELAB_OWNER_PID`` (which the server inherits), and the next
command stops any process so marked whose owner no longer exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

OWNER_VARIABLE = "TRACELAB_OWNER_PID"


def mark_owner() -> None:
    """Children started from now on carry this process's pid (a server's environment is inherited)."""
    os.environ[OWNER_VARIABLE] = str(os.getpid())


def exit_on_sigterm() -> None:
    """SIGTERM becomes ``SystemExit(143)``: ``finally`` blocks and ``atexit`` hooks still run."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def _owner_of(pid_dir: Path) -> int | None:
    try:
        environ = (pid_dir / "environ").read_bytes()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(OWNER_VARIABLE.encode() + b"="):
            value = entry.split(b"=", 1)[1]
            return int(value) if value.isdigit() else None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def orphaned_children(proc: Path = Path("/proc")) -> list[int]:
    """Pids of processes marked by a tracelab command that has died (Linux ``/proc``; else [])."""
    me = os.getpid()
    out: list[int] = []
    for pid_dir in proc.glob("[0-9]*"):
        pid = int(pid_dir.name)
        if pid == me:
            continue
        owner = _owner_of(pid_dir)
        if owner is not None and owner != pid and not _alive(owner):
            out.append(pid)
    return sorted(out)


def stop_orphans() -> list[int]:
    """SIGTERM every orphaned child of an earlier, killed tracelab command; their pids."""
    stopped = []
    for pid in orphaned_children():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            stopped.append(pid)
    return stopped
