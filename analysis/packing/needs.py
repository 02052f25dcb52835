"""What ``tracelab packing`` needs beyond its input files (its declaration's ``needs``)."""

from __future__ import annotations

from pathlib import Path

from tracelab.analysis.common.shortfall import Shortfall
from tracelab.analysis.lake.availability import long_task_shortfall
from tracelab.analysis.packing.options import PackingParams


def packing_needs(data_dir: Path, trace: str, params: PackingParams) -> Shortfall | None:
    """Packing draws its instances from the long tasks (unless it reads the params export)."""
    if params.source != "trace":
        return None
    return long_task_shortfall("packing", data_dir)
