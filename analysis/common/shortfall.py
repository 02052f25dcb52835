"""A stage (or a part of one) that lacks the data it needs: what it needed and what it found.

A stage without enough data does not fail and draws nothing: its results folder holds only a
``summary.json`` whose ``not_enough_data`` entry says what it needed and found, its page shows
that sentence instead of empty figures, and ``tracelab run`` prints it and goes on with the
stages that can run. A stage that could do part of its work lists what it left out under
``shortfalls`` in its summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracelab.analysis.common.stage_outputs import (
    SUMMARY_FILE,
    read_json_object,
    write_stage_outputs,
)

#: summary.json key of a stage that did not run for lack of data
NOT_ENOUGH_DATA = "not_enough_data"
#: summary.json key listing the parts of a stage left out for lack of data
SHORTFALLS = "shortfalls"
#: result files that must not outlive a run that had no data (the export gathers params.json)
_RESULT_FILES = ("*.parquet", "params.json")


@dataclass(frozen=True)
class Shortfall:
    """``stage: needs <needs>; found <found>``."""

    stage: str
    needs: str
    found: str

    @property
    def text(self) -> str:
        return f"{self.stage}: needs {self.needs}; found {self.found}"

    def to_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "needs": self.needs, "found": self.found, "text": self.text}


def write_shortfall(
    stage_dir: Path, shortfall: Shortfall, extra: Mapping[str, Any] | None = None
) -> Path:
    """Empty ``stage_dir`` of results and write a summary that says what was missing."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for pattern in _RESULT_FILES:
        for stale in stage_dir.glob(pattern):
            stale.unlink()
    summary = {**(extra or {}), NOT_ENOUGH_DATA: shortfall.to_dict()}
    return write_stage_outputs(stage_dir, {}, summary)[-1]


def read_shortfall(stage_dir: Path) -> Shortfall | None:
    """The shortfall a stage recorded in ``stage_dir/summary.json``, or None."""
    entry = _summary(stage_dir).get(NOT_ENOUGH_DATA)
    if not isinstance(entry, dict):
        return None
    return Shortfall(
        str(entry.get("stage", stage_dir.name)),
        str(entry.get("needs", "?")),
        str(entry.get("found", "?")),
    )


def read_shortfalls(stage_dir: Path) -> tuple[str, ...]:
    """The parts a stage left out for lack of data (``shortfalls`` in its summary)."""
    parts = _summary(stage_dir).get(SHORTFALLS)
    return tuple(str(p) for p in parts) if isinstance(parts, list) else ()


def recorded_shortfalls(stage_dirs: Iterable[Path]) -> tuple[str, ...]:
    """Every shortfall the folders record: whole stages first, then the parts left out."""
    dirs = tuple(stage_dirs)
    whole = [s.text for d in dirs if (s := read_shortfall(d)) is not None]
    parts = [p for d in dirs if read_shortfall(d) is None for p in read_shortfalls(d)]
    return (*whole, *parts)


def _summary(stage_dir: Path) -> dict[str, Any]:
    return read_json_object(stage_dir / SUMMARY_FILE)
