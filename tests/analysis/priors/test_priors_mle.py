"""Per-deployment MLEs and the small fits, checked against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.priors.fits import (
    alpha_by_min_mad,
    azure_priors,
    censored_exponential_fit,
    deployment_mles,
    gamma_fit,
    marginal_gamma_fit,
    priors_summary,
)

WINDOW_HOURS = 2_591_700 / 3600

# The five deployments of tests/azure_queries/*/five_deployments, as fct_azure_deployments has
# them (A: one censored core; B: shut down; C: survivor; D: one 300 s VM; E: every core censored).
FIVE = pl.DataFrame(
    {
        "deploymentid": ["A", "B", "C", "D", "E"],
        "arrived_in_window": [True, True, False, True, True],
        "n_cores": [4, 6, 2, 1, 9],
        "n_vms": [3, 5, 2, 1, 3],
        "n_scaleouts": [1, 2, 1, 0, 1],
        "scaleout_extra_cores": [0, 1, 0, 0, 0],
        "observed_hours": [2_588_100 / 3600, 8.0, 4.0, 1 / 12, 1.0],
        "core_deaths": [3, 1, 2, 1, 0],
        "core_exposure_hours": [6.0, 30.0, 3.0, 1 / 12, 8 + 11 / 12],
        "vm_deaths": [2, 1, 2, 1, 0],
        "vm_exposure_hours": [5.0, 25.0, 3.0, 1 / 12, 2 + 11 / 12],
        "lifetime_hours": [2_588_100 / 3600, 8.0, 4.0, 1 / 12, 1.0],
        "shut_down": [False, True, False, False, False],
        # A: 3 + 1 cores; B: 3 + (1 + 2); C: 1 + 1; D: 1; E: 8 + 1
        "arrival_cores": [3, 3, 1, 1, 8],
        # every core not alive at the end: B's 5 shutdown cores count here
        "cores_ended": [3, 6, 2, 1, 0],
        "n_vms_ending_last": [1, 4, 1, 1, 3],
    }
)
LN2 = math.log(2.0)


def test_mles_of_the_five_deployments_by_hand() -> None:
    m = deployment_mles(FIVE, zero_event_probability=0.5)
    # the survivor C is left out; order A, B, D, E
    assert m.deploymentid == ("A", "B", "D", "E")
    # lifetime: deaths / core-hours; E saw no death: left out (NaN), not substituted (App. B.1)
    np.testing.assert_allclose(m.lifetime_rate_per_hour[:3], [3 / 6, 1 / 30, 12.0], rtol=1e-12)
    assert math.isnan(m.lifetime_rate_per_hour[3])
    assert m.lifetime_has_death.tolist() == [True, True, True, False]
    # scale-outs: count / observed hours; D never scaled out in 5 minutes -> ln 2 / (1/12 h)
    np.testing.assert_allclose(
        m.scaleout_rate_per_hour, [3600 / 2_588_100, 2 / 8, 12 * LN2, 1.0], rtol=1e-12
    )
    assert m.scaleout_rate_replaced.tolist() == [False, False, True, False]
    # size: extra cores / scale-outs; A and E added single cores only -> ln 2 / 1; D undefined
    np.testing.assert_allclose(m.scaleout_size_param[[0, 1, 3]], [LN2, 0.5, LN2], rtol=1e-12)
    assert math.isnan(m.scaleout_size_param[2])
    assert m.scaleout_size_replaced.tolist() == [True, False, False, True]


def test_ignoring_censoring_counts_censored_cores_as_deaths() -> None:
    m = deployment_mles(FIVE, censoring=False)
    # E's censored cores are deaths here, so it has a lifetime MLE
    np.testing.assert_allclose(
        m.lifetime_rate_per_hour, [4 / 6, 6 / 30, 12.0, 9 / (8 + 11 / 12)], rtol=1e-12
    )


def test_zero_event_probability_changes_the_substitute() -> None:
    m = deployment_mles(FIVE, zero_event_probability=0.1)
    # D never scaled out in 1/12 hour: -ln(0.1) / (1/12)
    assert m.scaleout_rate_per_hour[2] == pytest.approx(12 * math.log(10), rel=1e-12)
    m = deployment_mles(FIVE, zero_event_probability=0.1, size_probability=0.2)
    # A's one scale-out added no extra core: -ln(0.2) / 1
    assert m.scaleout_size_param[0] == pytest.approx(math.log(5), rel=1e-12)
    with pytest.raises(ValueError, match="zero_event_probability"):
        deployment_mles(FIVE, zero_event_probability=1.0)


def test_shutdown_and_arrival_rate_by_hand() -> None:
    p = azure_priors(
        pl.concat([FIVE] * 3),
        window_hours=WINDOW_HOURS,
        n_boot=0,
        alpha=0.5,
        zero_event_probability=0.5,
    )
    # E has no core death: no lifetime MLE, so it is not in the shutdown fit either
    lam = np.array([0.5, 1 / 30, 12.0])
    age = np.array([2_588_100 / 3600, 8.0, 1 / 12])
    exposure = 3 * float(np.sum(age * lam))
    assert p.shutdown.n == 9
    assert p.shutdown.rate == pytest.approx(3 / exposure, rel=1e-12)
    assert p.shutdown.log_likelihood == pytest.approx(3 * math.log(3 / exposure) - 3, rel=1e-12)
    assert p.arrival_rate_per_hour == pytest.approx(12 / WINDOW_HOURS, rel=1e-12)
    rec = {r.name: r for r in p.records()}["deployment_arrival_rate"]
    # exact (Garwood) 95% interval for 12 events: 6.2006 to 20.9617 arrivals
    assert rec.ci["rate"].low * WINDOW_HOURS == pytest.approx(6.2006, abs=1e-3)
    assert rec.ci["rate"].high * WINDOW_HOURS == pytest.approx(20.9617, abs=1e-3)
    # the index's headline: the recommended fit's deployments, with its window and censoring
    assert priors_summary(p)["headline"] == {
        "key": "recommended_n",
        "condition": "deployments of the joint marginal core-lifetime fit over the 719.917 h "
        "window, lifetimes right-censored at the window's end",
    }


def test_censored_exponential_fit_by_hand() -> None:
    fit = censored_exponential_fit(np.array([2.0, 3.0, 5.0]), np.array([True, False, True]))
    assert fit.rate == pytest.approx(2 / 10)
    assert fit.log_likelihood == pytest.approx(2 * math.log(0.2) - 0.2 * 10)


def test_no_deployment_in_window_is_a_clear_error() -> None:
    with pytest.raises(TracelabError, match="no deployment arrived inside the window"):
        deployment_mles(FIVE.filter(pl.col("deploymentid") == "C"))


def test_missing_column_is_a_clear_error() -> None:
    with pytest.raises(TracelabError, match="lacks column"):
        deployment_mles(FIVE.drop("vm_deaths"))


def test_alpha_recovers_an_exact_power_law() -> None:
    rng = np.random.default_rng(3)
    lam = rng.gamma(2.0, 1 / 40, 500)
    rate = 0.7 * lam**0.6  # normalised rate constant at alpha = 0.6: zero deviation there
    assert alpha_by_min_mad(rate, lam) == pytest.approx(0.6, abs=1e-4)


def test_gamma_fit_recovers_a_known_gamma() -> None:
    rng = np.random.default_rng(11)
    n, shape, rate = 4000, 3.0, 2.0
    fit = gamma_fit(rng.gamma(shape, 1 / rate, n))
    # Fisher SE of the shape: sqrt(k / (n (k psi'(k) - 1))) = 0.084 at k = 3, n = 4000
    assert fit.shape == pytest.approx(shape, abs=4 * 0.084)
    assert fit.mean == pytest.approx(shape / rate, rel=4 * (1 / math.sqrt(shape * n)))
    assert 0 < fit.ks_distance < 0.03


def test_gamma_fit_refuses_zeros() -> None:
    with pytest.raises(TracelabError, match="positive"):
        gamma_fit(np.array([0.0, 1.0, 2.0]))


def test_marginal_fit_recovers_a_gamma_poisson_population() -> None:
    rng = np.random.default_rng(5)
    n, shape, rate = 3000, 2.0, 40.0
    lam = rng.gamma(shape, 1 / rate, n)
    exposure = rng.uniform(10.0, 400.0, n)
    events = rng.poisson(lam * exposure).astype(float)
    fit = marginal_gamma_fit(events, exposure)
    # with ~10 events per unit the shape SE is close to the direct fit's 0.05; allow 4 SE
    assert fit.shape == pytest.approx(shape, abs=0.25)
    assert fit.mean == pytest.approx(shape / rate, rel=0.05)
    # the two-stage fit on the same counts must break on the zero counts
    assert (events == 0).any()
