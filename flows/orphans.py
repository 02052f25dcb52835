"""No Prefect server outlives the command that started it.

Prefect's embedded temporary server is a child process (uvicorn) stopped by an ``atexit`` hook.
SIGTERM is therefore turned into a normal exit, so the hook runs. SIGKILL cannot be caught: each
command marks its environment with ``TRACELAB_OWNER_PID`` (which the server inherits) and starts a
small watchdog process that the kernel signals when the command dies, however it dies
(``PR_SET_PDEATHSIG``, set from the main thread, which lives as long as the command); the
watchdog then stops every process so marked. The next command also stops any marked process
whose owner no longer exists (a watchdog that was itself killed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

OWNER_VARIABLE = "TRACELAB_OWNER_PID"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h

#: the watchdog: waits for its SIGTERM (the owner died), then stops the owner's marked processes
_WATCHDOG = """
import os, signal, sys
from pathlib import Path
owner, me = sys.argv[1], os.getpid()
mark = sys.argv[2].encode() + b"=" + owner.encode()
def stop(*_):
    for d in Path("/proc").glob("[0-9]*"):
        try:
            marked = mark in (d / "environ").read_bytes().split(b"\\0")
            if marked and int(d.name) not in (me, int(owner)):
                os.kill(int(d.name), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
if os.getppid() != int(owner):  # the owner died before the death signal was armed
    stop()
while True:
    signal.pause()
"""
_watchdog: subprocess.Popen[bytes] | None = None


def mark_owner() -> None:
    """Children started from now on carry this process's pid (a server's environment is inherited)."""
    os.environ[OWNER_VARIABLE] = str(os.getpid())


def death_signal() -> Callable[[], None] | None:
    """A function for ``preexec_fn`` arming SIGTERM on the parent's death (resolved here, in the
    parent: the child between fork and exec must not load libraries); None off Linux."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_watchdog() -> None:
    """Once per process, from the main thread: the watchdog that stops this command's marked
    children (Prefect's temporary server) when the command dies, SIGKILL included."""
    global _watchdog
    arm = death_signal()
    if _watchdog is not None or arm is None or not Path("/proc/self/environ").exists():
        return
    if threading.current_thread() is not threading.main_thread():
        return  # the death signal follows the thread that forks: only the main thread lasts
    _watchdog = subprocess.Popen(
        [sys.executable, "-S", "-c", _WATCHDOG, str(os.getpid()), OWNER_VARIABLE],
        preexec_fn=arm,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )


def stop_watchdog() -> None:
    """Stop this process's watchdog, leaving the marked processes alone (SIGKILL: its SIGTERM
    means the owner died): for a process that runs commands in-process and outlives them."""
    global _watchdog
    if _watchdog is not None:
        _watchdog.kill()
        _watchdog.wait()
        _watchdog = None


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
