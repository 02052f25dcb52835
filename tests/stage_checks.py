"""Running a stage the way `tracelab` does (through the registry's flow) and checking its record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracelab.analysis.common.stage_api import option_values
from tracelab.analysis.common.stage_outputs import json_ready, read_summary
from tracelab.flows.registry import STAGES, stage_runner
from tracelab.flows.settings import Settings


def run_through_registry(stage: str, data_dir: Path, trace: str, params: object) -> Path:
    """Run ``stage`` as its command does (the registry's Prefect flow); its results folder."""
    stage_runner(next(s for s in STAGES if s.name == stage))(
        Settings(data_dir=data_dir), trace, params
    )
    return data_dir / "results" / trace / stage


def recorded_parameters(folder: Path, params: object, derived: set[str]) -> dict[str, Any]:
    """summary.json's ``parameters``, checked: every option with the value it ran with
    (defaults included), and beside them exactly the entries the stage derives."""
    recorded: dict[str, Any] = read_summary(folder)["parameters"]
    options = json_ready(option_values(params))
    assert {k: recorded[k] for k in options} == options
    assert set(recorded) - set(options) == derived
    return recorded
