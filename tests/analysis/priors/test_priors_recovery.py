"""On a generated azure-2017 trace with known priors (TRUTH.json) the fits recover them.

One ``small`` trace (3,000 deployments arriving in the window, ~86k VMs) is generated, loaded into
DuckDB as ``vmtable``, derived with the azure SQL and fitted. Tolerances come from the sample size:
the joint marginal fit reports standard errors from its observed information (on the log scale for
shapes and rates); at n = 3,000 they are ~3-5% of each parameter. A correct estimator puts the truth
within 3.5 SE (two-sided chance of a miss ~5e-4); the fit that ignores censoring must land more
than 3.5 SE away for the lifetime shape (it fails the same check) and its prior mean lifetime rate
must be > 5% higher, which proves the censoring term is used and matters.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from tracelab.analysis.lake import derive
from tracelab.analysis.priors.fits import (
    JointFit,
    deployment_mles,
    gamma_fit,
    joint_marginal_fit,
    marginal_gamma_fit,
)
from tracelab.analysis.priors.vmtable import derive_azure_tables, register_vmtable_csv
from tracelab.analysis.synthetic.azure2017 import AzureModel, GammaPrior, generate_azure_2017

pytestmark = pytest.mark.slow
TOLERANCE_SE = 3.5


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[pl.DataFrame, dict[str, Any]]:
    out = tmp_path_factory.mktemp("azure_small")
    # the fits assume independent deployments: the default model correlates the deployments of a
    # subscription (the placement predictor's signal), which would shrink the effective sample.
    # The default lifetime prior (calibrated to V1) gives a fifth of the deployments
    # core lifetimes under an hour, whose scale-outs merge on the 300 s grid (measured: 12% fewer
    # scale-outs seen than drawn at rates >= 1/h); the estimators are checked where the grid does
    # not bite: the same shape, cores living 10x longer. The shutdown rate stays at 0.035 per
    # core lifetime, where the shutdown treatments below were compared: at the default 0.06 (set
    # for the share of deployments arriving in the window) more deployments end by a shutdown and
    # the censored fit's mean rate measures 4.4% low at seed 2
    base = AzureModel()
    slow = GammaPrior(base.lifetime_rate.shape, base.lifetime_rate.rate * 10, "1/hour", "hour")
    iid = replace(base, subscription_correlation=0.0, lifetime_rate=slow, shutdown_rate=0.035)
    truth_path = generate_azure_2017(out, seed=2, scale="small", model=iid)
    con = duckdb.connect()
    register_vmtable_csv(con, out / "vmtable" / "vmtable.csv.gz")
    derive_azure_tables(con, derive.DeriveParams().as_sql_params(), out / "derived")
    deployments = pl.read_parquet(out / "derived" / "fct_azure_deployments.parquet")
    return deployments, json.loads(truth_path.read_text())


@pytest.fixture(scope="module")
def joint(small_trace: tuple[pl.DataFrame, dict[str, Any]]) -> JointFit:
    return joint_marginal_fit(deployment_mles(small_trace[0]))


def _se_distance(fit: JointFit, name: str, truth: float) -> float:
    """|estimate - truth| in standard errors (log scale except for alpha)."""
    se = fit.log_se[name]
    assert 0 < se < 0.2, f"{name}: implausible standard error {se}"
    value = getattr(fit, name)
    gap = value - truth if name == "alpha" else math.log(value / truth)
    return abs(gap) / se


def test_truth_document_matches_the_trace(small_trace: tuple[pl.DataFrame, dict[str, Any]]) -> None:
    deployments, truth = small_trace
    assert int(deployments["arrived_in_window"].sum()) == truth["counts"]["deployments_in_window"]
    assert deployments.height == (
        truth["counts"]["deployments_in_window"] + truth["counts"]["survivor_deployments"]
    )
    assert int(deployments["n_vms"].sum()) == truth["counts"]["vms"]


def test_joint_fit_recovers_the_priors(
    joint: JointFit, small_trace: tuple[pl.DataFrame, dict[str, Any]]
) -> None:
    priors = small_trace[1]["priors"]
    expected = {
        "lifetime_shape": priors["lifetime_rate"]["shape"],
        "lifetime_rate": priors["lifetime_rate"]["rate"],
        "scaleout_shape": priors["normalised_scaleout_rate"]["shape"],
        "scaleout_rate": priors["normalised_scaleout_rate"]["rate"],
        "alpha": small_trace[1]["alpha"],
    }
    distances = {k: _se_distance(joint, k, v) for k, v in expected.items()}
    assert max(distances.values()) < TOLERANCE_SE, distances


def test_size_prior_is_recovered(small_trace: tuple[pl.DataFrame, dict[str, Any]]) -> None:
    deployments, truth = small_trace
    m = deployment_mles(deployments)
    fit = marginal_gamma_fit(m.scaleout_extra_cores, m.n_scaleouts)
    # ~2,300 deployments with scale-outs: Fisher SE of the shape at k = 1.5 is ~0.05 (3.5%)
    prior = truth["priors"]["scaleout_size"]
    assert fit.shape == pytest.approx(prior["shape"], rel=0.12)
    assert fit.rate == pytest.approx(prior["rate"], rel=0.12)


def test_ignoring_censoring_is_measurably_biased(
    joint: JointFit, small_trace: tuple[pl.DataFrame, dict[str, Any]]
) -> None:
    deployments, truth = small_trace
    naive = joint_marginal_fit(deployment_mles(deployments, censoring=False))
    true_shape = truth["priors"]["lifetime_rate"]["shape"]
    # it fails the very check the censored fit passes (measured: 5.2 SE at seed 2, 5.0 at seed 5)
    assert _se_distance(naive, "lifetime_shape", true_shape) > TOLERANCE_SE
    # censored cores counted as deaths make lifetimes look shorter: the prior mean rate rises
    # (measured +12% at seed 2, +10% at seed 5; the censored fit's mean is within 3% of truth)
    assert naive.lifetime_shape / naive.lifetime_rate > 1.05 * (
        joint.lifetime_shape / joint.lifetime_rate
    )


def test_two_stage_fit_is_biased_by_small_deployments(
    small_trace: tuple[pl.DataFrame, dict[str, Any]],
) -> None:
    """The seed's two-stage fit (Gamma on per-deployment MLEs) over-disperses; documented."""
    deployments, truth = small_trace
    m = deployment_mles(deployments)
    # Cluster Admission App. B.1: only deployments with a core death have a lifetime MLE
    fit = gamma_fit(m.lifetime_rate_per_hour[m.lifetime_has_death])
    prior = truth["priors"]["lifetime_rate"]
    # small deployments give MLEs like 1/t: the two-stage fit misses the prior. Its shape moves
    # with the model (0.63x at Gamma(2, 40); 1.24x at shape 0.5 with 1-16-core VMs, ~1.1x with
    # the 2-16-core mix, measured at seed 2); its mean rate is high in each
    assert fit.mean > 1.1 * prior["shape"] / prior["rate"]
    assert np.isfinite(fit.log_likelihood)


def test_paper_shutdown_treatment_shortens_lifetimes(
    joint: JointFit, small_trace: tuple[pl.DataFrame, dict[str, Any]]
) -> None:
    """Why --shutdown-cores defaults to censored: counting the shutdown's cores as deaths (seed
    004 App. B) counts the shutdown twice, so lifetimes look shorter than the generator's."""
    deployments, truth = small_trace
    paper = joint_marginal_fit(deployment_mles(deployments, shutdown_cores="paper"))
    prior = truth["priors"]["lifetime_rate"]
    true_mean = prior["shape"] / prior["rate"]
    # measured at seed 2: paper +9% on the prior mean lifetime rate, censored -0.3%
    assert paper.lifetime_shape / paper.lifetime_rate > 1.05 * true_mean
    assert joint.lifetime_shape / joint.lifetime_rate == pytest.approx(true_mean, rel=0.04)
