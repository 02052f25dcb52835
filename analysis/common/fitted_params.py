"""Fitted parameters: the frozen records every fitting stage produces.

A stage writes its records to ``DATA/results/<trace>/<stage>/params.json`` with
:func:`write_stage_params`; ``tracelab export`` gathers every stage's records into the one
versioned params document, and later stages read only that document.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tracelab.analysis.common.atomic import atomic_write_text
from tracelab.analysis.common.errors import TracelabError

STAGE_PARAMS_FILE = "params.json"


@dataclass(frozen=True)
class Quantity:
    """A number with its unit (``"1/hour"``, ``"cores"``, ``"fraction of machine"``, ``""``).

    A count (k clusters, R realizations) is an ``int`` and stays one in the export."""

    value: float | int
    unit: str = ""


@dataclass(frozen=True)
class Interval:
    """A confidence interval (bootstrap percentile unless ``method`` says otherwise)."""

    low: float
    high: float
    level: float = 0.95
    method: str = "bootstrap percentile"


@dataclass(frozen=True)
class FittedParameter:
    """One fitted distribution or estimated quantity, with how it was obtained.

    ``parameters`` maps a parameter name (``shape``, ``rate``, ``mean`` …) to its value and unit;
    ``ci`` maps the same names to their intervals. ``values`` carries array-valued results
    (k-means centroids, the Anderson–Darling table) as plain lists.
    """

    name: str
    distribution: str
    parameters: dict[str, Quantity]
    method: str
    n: int
    stage: str
    trace: str
    log_likelihood: float | None = None
    ks_distance: float | None = None
    ci: dict[str, Interval] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    notes: str = ""

    def frozen(self) -> Any:
        """The fitted distribution as a ``scipy.stats`` frozen distribution, in the units of
        its parameters (a Gamma with rate in 1/s draws seconds).

        ``gamma`` (shape, rate) is ``gamma(a=shape, scale=1/rate)``; ``exponential`` (rate) is
        ``expon(scale=1/rate)``; ``poisson`` (rate) is ``poisson(mu=rate)``, the count per unit
        of time of the rate. Other records (constants, k-means centroids, tables) are not
        distributions, and a failed fit's parameter is null: both raise a one-line error.
        """
        from scipy import stats

        if self.distribution not in _SCIPY_PARAMETERS:
            raise TracelabError(
                f"params record {self.name} is a {self.distribution}, not a distribution scipy "
                f"can draw from (those are: {', '.join(sorted(_SCIPY_PARAMETERS))})"
            )
        values = [self._positive(p) for p in _SCIPY_PARAMETERS[self.distribution]]
        if self.distribution == "gamma":
            return stats.gamma(a=values[0], scale=1.0 / values[1])
        if self.distribution == "exponential":
            return stats.expon(scale=1.0 / values[0])
        return stats.poisson(mu=values[0])

    def _positive(self, parameter: str) -> float:
        quantity = self.parameters.get(parameter)
        value = None if quantity is None else quantity.value
        if isinstance(value, int | float) and math.isfinite(value) and value > 0:
            return float(value)
        raise TracelabError(
            f"params record {self.name}: {parameter} is {value!r}, not a positive number, so "
            "scipy cannot draw from it; re-run the stage that fits it and `tracelab export`"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (non-finite floats become None)."""
        return _finite(asdict(self))  # type: ignore[no-any-return]

    @staticmethod
    def from_dict(d: dict[str, Any]) -> FittedParameter:
        return FittedParameter(
            name=d["name"],
            distribution=d["distribution"],
            parameters={k: Quantity(**v) for k, v in d["parameters"].items()},
            method=d["method"],
            n=int(d["n"]),
            stage=d["stage"],
            trace=d["trace"],
            log_likelihood=d.get("log_likelihood"),
            ks_distance=d.get("ks_distance"),
            ci={k: Interval(**v) for k, v in d.get("ci", {}).items()},
            values=dict(d.get("values", {})),
            notes=d.get("notes", ""),
        )


#: the distributions :meth:`FittedParameter.frozen` knows, with the parameters each needs
_SCIPY_PARAMETERS: dict[str, tuple[str, ...]] = {
    "gamma": ("shape", "rate"),
    "exponential": ("rate",),
    "poisson": ("rate",),
}


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_stage_params(stage_dir: Path, records: list[FittedParameter]) -> Path:
    """Atomically write a stage's records to ``stage_dir/params.json``; returns the path."""
    doc = {"parameters": [r.to_dict() for r in records]}
    return atomic_write_text(
        stage_dir / STAGE_PARAMS_FILE, json.dumps(doc, indent=2, sort_keys=True)
    )


def read_stage_params(stage_dir: Path) -> list[FittedParameter]:
    """The records a stage wrote with :func:`write_stage_params`."""
    doc = json.loads((stage_dir / STAGE_PARAMS_FILE).read_text(encoding="utf-8"))
    return [FittedParameter.from_dict(d) for d in doc["parameters"]]
