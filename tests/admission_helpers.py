"""Params documents for the admission tests, written through the real export code path."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tracelab.analysis.admission.model import AdmissionPriors
from tracelab.analysis.common.fitted_params import FittedParameter, Quantity, write_stage_params
from tracelab.analysis.export.document import params_document, write_params_json

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

#: the population model of write_params' defaults, for tests that skip the params document
PRIORS = AdmissionPriors(
    lifetime_shape=3.0,
    lifetime_rate=40.0,
    scaleout_shape=2.5,
    scaleout_rate=4.0,
    alpha=0.6,
    size_shape=1.5,
    size_rate=1.0,
    shutdown_per_lifetime=0.05,
    arrival_rate_per_hour=2.0,
    records=("test",),
)


def _gamma(name: str, shape: float, rate: float) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution="gamma",
        parameters={"shape": Quantity(shape, ""), "rate": Quantity(rate, "hour")},
        method="hand-made for a test",
        n=100,
        stage="priors",
        trace="azure-2017",
    )


def _scalar(name: str, distribution: str, parameter: str, value: float) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution=distribution,
        parameters={parameter: Quantity(value, "")},
        method="hand-made for a test",
        n=100,
        stage="priors",
        trace="azure-2017",
    )


def write_params(
    data_dir: Path,
    *,
    lifetime: tuple[float, float] = (3.0, 40.0),
    scaleout: tuple[float, float] = (2.5, 4.0),
    size: tuple[float, float] = (1.5, 1.0),
    alpha: float = 0.6,
    shutdown: float = 0.05,
    arrival: float = 2.0,
    two_stage_lifetime: tuple[float, float] = (1.5, 20.0),
) -> Path:
    """Write ``data_dir/exports/params.json`` with both the marginal and two-stage records."""
    records = [
        _gamma("core_lifetime_rate_prior_marginal", *lifetime),
        _gamma("normalised_scaleout_rate_prior_marginal", *scaleout),
        _gamma("scaleout_size_prior_marginal", *size),
        _scalar("scaleout_alpha_marginal", "constant", "alpha", alpha),
        _scalar("deployment_shutdown_marginal", "exponential", "rate", shutdown),
        _gamma("core_lifetime_rate_prior", *two_stage_lifetime),
        _gamma("normalised_scaleout_rate_prior", *scaleout),
        _gamma("scaleout_size_prior", *size),
        _scalar("scaleout_alpha", "constant", "alpha", alpha),
        _scalar("deployment_shutdown", "exponential", "rate", shutdown),
        _scalar("deployment_arrival_rate", "poisson", "rate", arrival),
    ]
    write_stage_params(data_dir / "results" / "azure-2017" / "priors", records)
    doc = params_document(data_dir, created_at=WHEN, version="9.9.9")
    return write_params_json(doc, data_dir / "exports" / "params.json")
