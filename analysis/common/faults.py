"""Faults of the machine, not of the input: a full disk, a file-size limit, a read-only folder.

Each becomes one line naming the path that could not be written and what to do, whichever
library met it: Python's ``OSError`` carries its errno and file name; DuckDB, Polars, Arrow and
SQLite put the system's message (``No space left on device``) and the file in their own text.
"""

from __future__ import annotations

import errno
import io
import os
import re
import resource
from pathlib import Path, PurePath

#: errno -> the system's message as libraries quote it
_MESSAGES = {
    errno.ENOSPC: "No space left on device",
    errno.EDQUOT: "Disk quota exceeded",
    errno.EFBIG: "File too large",
    errno.EROFS: "Read-only file system",
}
#: SQLite says neither errno nor file: a full disk or a file-size limit under its database
_SQLITE_FULL = ("database or disk is full", "disk I/O error")
#: below this much free space a file system counts as full (SQLite needs room for its journal)
_FULL_BYTES = 4 << 20
#: what a write adds to a file at most, as far as the limit is concerned (a SQLite transaction)
_SLACK_BYTES = 1 << 20
_QUOTED_PATH = re.compile(r"""["']([^"'\s]*/[^"']*)["']""")


#: where else to write, said when the data directory's disk is full or read-only
DATA_ELSEWHERE = "use a data directory (--data) on a disk with room"


def environment_fault(
    exc: BaseException, data_dir: Path, elsewhere: str = DATA_ELSEWHERE
) -> str | None:
    """One line for ``exc`` when a full disk, a quota, the file-size limit or a read-only file
    system caused it (anywhere in its chain), else None. The path is the file the error names,
    else ``data_dir``; ``elsewhere`` says where else the files could go."""
    for cause in _chain(exc):
        if isinstance(cause, OSError) and cause.errno in _MESSAGES:
            # a rename names its source then its target: the target is what was written
            named = cause.filename2 or cause.filename
            path = Path(str(named)) if named else _written_in(cause) or data_dir
            return _advice(cause.errno, path, elsewhere)
        text = str(cause)
        for code, message in _MESSAGES.items():
            if message.lower() in text.lower():
                return _advice(code, _path_in(text) or data_dir, elsewhere)
        if any(m in text for m in _SQLITE_FULL):
            path = _path_in(text) or data_dir
            return _advice(_sqlite_cause(path), path, elsewhere)
    return None


def _sqlite_cause(path: Path) -> int:
    """SQLite's "disk I/O error" does not say which: what the file system shows, else the
    file-size limit when one is set, else a full disk."""
    found = _storage_cause(path)
    if found is not None:
        return found
    return errno.ENOSPC if file_size_limit() == "unlimited" else errno.EFBIG


def storage_fault(path: Path, elsewhere: str = DATA_ELSEWHERE) -> str | None:
    """One line when the file system of ``path`` cannot take more writes (read-only, full) or
    the file-size limit is as big as the file (with SQLite's journals beside it), else None."""
    code = _storage_cause(path)
    return None if code is None else _advice(code, path, elsewhere)


def _storage_cause(path: Path) -> int | None:
    folder = next((p for p in (path, *path.parents) if p.is_dir()), Path.cwd())
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return errno.EROFS
    if fs.f_bavail * fs.f_frsize < _FULL_BYTES:
        return errno.ENOSPC
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        files = (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-journal"))
        sizes = [f.stat().st_size for f in files if f.is_file()]
        if max(sizes, default=0) + _SLACK_BYTES > soft:
            return errno.EFBIG
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _written_in(exc: BaseException) -> Path | None:
    """The file a failed write was writing, when the error does not name it (a ``write`` or a
    ``flush`` on a full disk): the innermost frame that holds a path method's own path
    (``Path.write_text``) or an open named file."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        owner = frame.f_locals.get("self")
        if isinstance(owner, PurePath):
            return Path(owner)
        for value in frame.f_locals.values():
            name = getattr(value, "name", None) if isinstance(value, io.IOBase) else None
            if isinstance(name, str):
                return Path(name)
    return None


def _path_in(text: str) -> Path | None:
    match = _QUOTED_PATH.search(text)
    return Path(match.group(1)) if match else None


def file_size_limit() -> str:
    """This process's file-size limit as ``ulimit -f`` would set it (bytes), or "unlimited"."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft:,} bytes"


def _advice(code: int, path: Path, elsewhere: str) -> str:
    if code == errno.EFBIG:
        return (
            f"cannot write {path}: the file-size limit ({file_size_limit()}, `ulimit -f`) is "
            "reached; "
            "raise it (`ulimit -f unlimited`) and run again"
        )
    if code == errno.EROFS:
        return (
            f"cannot write {path}: it is on a read-only file system; "
            f"{elsewhere.replace('with room', 'that can be written')}, and run again"
        )
    if code == errno.EDQUOT:
        return f"cannot write {path}: the disk quota is used up; free some of it and run again"
    return (
        f"cannot write {path}: no space left on its file system; free space there "
        f"(`df -h` shows it) or {elsewhere}, and run again"
    )
