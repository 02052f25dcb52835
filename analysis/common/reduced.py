"""What a run's grid reduces relative to the paper's grid, for pages to state."""

from __future__ import annotations

import dataclasses
from typing import Any


def reduced_options(params: Any, paper: Any) -> dict[str, dict[str, Any]]:
    """Per option where ``params`` differs from ``paper`` (same dataclass): both values.

    Values are as ``dataclasses.asdict`` gives them (tuples stay tuples; JSON writes lists).
    """
    run, ref = dataclasses.asdict(params), dataclasses.asdict(paper)
    return {name: {"run": run[name], "paper": ref[name]} for name in run if run[name] != ref[name]}
