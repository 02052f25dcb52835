"""A vmtable lake and a params export for the placement tests, written through the real code paths."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.common.fitted_params import FittedParameter, Quantity, write_stage_params
from tracelab.analysis.export.document import params_document, write_params_json


def _gamma(name: str, shape: float, rate: float, unit: str) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution="gamma",
        parameters={"shape": Quantity(shape, ""), "rate": Quantity(rate, unit)},
        method="test",
        n=100,
        stage="priors",
        trace="azure-2017",
    )


def _records() -> list[FittedParameter]:
    def one(name: str, dist: str, param: str, value: float) -> FittedParameter:
        return FittedParameter(
            name=name,
            distribution=dist,
            parameters={param: Quantity(value, "")},
            method="test",
            n=100,
            stage="priors",
            trace="azure-2017",
        )

    out = []
    for sfx in ("", "_marginal"):
        out += [
            _gamma(f"core_lifetime_rate_prior{sfx}", 2.0, 40.0, "hour"),
            _gamma(f"normalised_scaleout_rate_prior{sfx}", 2.5, 4.0, "hour^0.4"),
            _gamma(f"scaleout_size_prior{sfx}", 1.5, 1.0, "1/cores"),
            one(f"scaleout_alpha{sfx}", "constant", "alpha", 0.6),
            one(f"deployment_shutdown{sfx}", "exponential", "rate", 0.04),
        ]
    return out


def write_lake(data: Path, seed: int = 1, deployments: int = 150) -> None:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for d in range(deployments):
        lam = rng.gamma(2.0, 1.0 / 40.0)
        start = int(rng.integers(0, 8000)) * 300
        for k in range(int(rng.integers(1, 8))):
            created = start + k * int(rng.integers(0, 24)) * 300
            life = max(int(rng.exponential(1.0 / lam) * 3600) // 300 * 300, 300)
            cores = int(rng.choice([1, 2, 4]))
            rows.append(
                {
                    "vmid": f"vm{d}-{k}",
                    "subscriptionid": f"s{d % 7}",
                    "deploymentid": f"dep{d}",
                    "vmcreated": created,
                    "vmdeleted": min(created + life, 2_591_700),
                    "maxcpu": 50.0,
                    "avgcpu": 10.0,
                    "p95maxcpu": 40.0,
                    "vmcategory": "Unknown",
                    "vmcorecount": cores,
                    "vmmemory": 1.75 * cores,
                }
            )
    folder = data / "lake" / "azure-2017" / "vmtable"
    folder.mkdir(parents=True)
    pl.DataFrame(rows).write_parquet(folder / "vmtable.parquet")


def write_export(data: Path) -> None:
    write_stage_params(data / "results" / "azure-2017" / "priors", _records())
    doc = params_document(data, created_at=datetime(2026, 1, 1, tzinfo=UTC), version="0.0.0")
    write_params_json(doc, data / "exports" / "params.json")
