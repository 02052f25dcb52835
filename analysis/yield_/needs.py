"""What ``tracelab yield`` needs beyond its input files (its declaration's ``needs``)."""

from __future__ import annotations

from pathlib import Path

from tracelab.analysis.common.shortfall import Shortfall
from tracelab.analysis.lake.availability import trace_requests_shortfall
from tracelab.analysis.yield_.options import YieldParams


def yield_needs(data_dir: Path, trace: str, params: YieldParams) -> Shortfall | None:
    """Yield without the paper's instances runs on the trace's alone, which need their tables."""
    if "paper" in params.sources:
        return None
    return trace_requests_shortfall("yield", data_dir, trace)
