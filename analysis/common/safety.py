"""Checks and clean-ups at the edge: ids that become paths, and what a killed run leaves behind."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError

#: a run id names a folder under DATA/site/runs: letters, digits, ``.``, ``_`` and ``-`` only, not
#: starting with a dot, so it can never climb out of that folder or hide as a temp folder
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def checked_run_id(run_id: str) -> str:
    """``run_id`` itself when it is a safe folder name, else a one-line :class:`TracelabError`."""
    if not _RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise TracelabError(
            f"--run-id {run_id!r} is not a valid run id: use 1-64 letters, digits, '.', '_' or "
            "'-', starting with a letter or digit (e.g. 20261122T163000Z)"
        )
    return run_id


def remove_stale_temp_dirs(folder: Path) -> list[Path]:
    """Delete the ``.<name>.tmp`` folders killed builds left in ``folder``; returns them.

    Call it only under the data-directory lock: a temp folder then belongs to no live build.
    """
    removed: list[Path] = []
    if folder.is_dir():
        for path in sorted(folder.glob(".*.tmp")):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
                removed.append(path)
    return removed
