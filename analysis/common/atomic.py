"""The one way tracelab writes a file: to a temporary name beside it, then an atomic rename.

A reader (or a run killed half-way) never sees a half-written file: it finds the old file or the
new one. Temporary names are ``.<name>.tmp`` in the same folder (same file system, so
``os.replace`` is atomic), and the ``*.tmp`` sweeps of ingest and report clean what a kill left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path


def temp_path(path: Path) -> Path:
    """The temporary name ``path`` is written under before the rename."""
    return path.with_name(f".{path.name}.tmp")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on error it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def atomic_write_with(path: Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` (e.g. ``frame.write_parquet``), then move it to ``path`` atomically."""
    with atomic_path(path) as tmp:
        write(tmp)
    return path
