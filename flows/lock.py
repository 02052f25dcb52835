"""One writer per data directory: an advisory lock that a killed run cannot leave stuck.

The lock is ``fcntl.flock`` on the data directory itself (an open directory descriptor), so
deleting or replacing ``DATA/.tracelab.lock`` cannot let a second writer in; that file only names
the holder. The kernel drops a flock when its process dies (SIGKILL included), so a lock from a
killed run is never held; the file still names that run's pid, which is how a stale lock is
recognised and reported.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError

LOCK_NAME = ".tracelab.lock"
#: the longest wait for another run's lock: a day (inf or nan would wait for ever)
WAIT_MAX_S = 86_400.0


@dataclass(frozen=True)
class LockHolder:
    """Who wrote the lock file last."""

    pid: int
    host: str
    command: str
    started_at: str

    @property
    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return True  # cannot tell for another host: assume it runs
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _read_holder(path: Path) -> LockHolder | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8") or "{}")
        return LockHolder(
            int(doc["pid"]), str(doc["host"]), str(doc["command"]), str(doc["started_at"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextmanager
def data_dir_lock(data_dir: Path, command: str, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the data directory's write lock for the block.

    Waits up to ``wait_seconds`` for another run to finish, then raises :class:`TracelabError`
    naming the holder. A lock file left by a dead process is reported on stderr and taken over.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_NAME
    # the lock is on the directory itself, which cannot be deleted while it holds data: deleting
    # or replacing the lock file (which only names the holder) cannot let a second writer in
    fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(path)
                    who = (
                        f"pid {holder.pid} ({holder.command}, since {holder.started_at})"
                        if holder
                        else "another process"
                    )
                    raise TracelabError(
                        f"{data_dir} is in use by {who}; wait for it to finish "
                        f"(or pass --wait SECONDS), or use another --data directory"
                    ) from None
                time.sleep(0.2)
        previous = _read_holder(path)
        if previous is not None and previous.pid != os.getpid() and not previous.alive:
            print(
                f"tracelab: recovered a stale lock on {data_dir} left by pid {previous.pid} "
                f"({previous.command}, started {previous.started_at}), which is no longer running",
                file=sys.stderr,
            )
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _write_holder(path, json.dumps(record))
        try:
            yield
        finally:
            # an empty file means "released cleanly"; a pid left behind means the holder died
            _write_holder(path, "")
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _write_holder(path: Path, text: str) -> None:
    """(Re)write the holder file; it is recreated when someone deleted it."""
    holder_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(holder_fd, 0)
        os.pwrite(holder_fd, text.encode(), 0)
    except OSError as exc:  # a full disk: the error names the file (pwrite's does not)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        os.close(holder_fd)
