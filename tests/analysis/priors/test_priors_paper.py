"""Cluster Admission App. B as the paper wrote it: exclusions, the CvM calibration, alpha, shutdown cores."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from test_priors_mle import FIVE, WINDOW_HOURS

from tracelab.analysis.priors.fits import (
    azure_priors,
    calibrate_zero_event_probabilities,
    deployment_mles,
    gamma_fit,
    size_cvm_distance,
)
from tracelab.analysis.priors.paper import (
    P_GRID,
    alpha_by_min_mad_paper,
    discrete_cvm_distance,
)


def _population(n: int, seed: int) -> pl.DataFrame:
    """``n`` in-window deployments with known counts; every fourth one has no core death."""
    rng = np.random.default_rng(seed)
    vms = rng.integers(1, 6, n)
    cores = vms * 2
    deaths = np.where(np.arange(n) % 4 == 0, 0, rng.integers(1, 3, n) * 2)
    deaths = np.minimum(deaths, cores)
    so = rng.poisson(2.0, n)
    extra = rng.poisson(1.5 * so)
    hours = rng.uniform(5.0, 200.0, n)
    return pl.DataFrame(
        {
            "deploymentid": [f"d{i:04d}" for i in range(n)],
            "arrived_in_window": [True] * n,
            "n_cores": cores + so + extra,
            "n_vms": vms,
            "n_scaleouts": so,
            "scaleout_extra_cores": extra,
            "observed_hours": hours,
            "core_deaths": deaths,
            "core_exposure_hours": hours * cores * rng.uniform(0.3, 1.0, n),
            "vm_deaths": deaths // 2,
            "vm_exposure_hours": hours * vms * 0.5,
            "lifetime_hours": hours,
            "shut_down": rng.uniform(size=n) < 0.2,
            "arrival_cores": cores,
            "cores_ended": deaths,
            "n_vms_ending_last": np.ones(n, dtype=np.int64),
        }
    )


def test_lifetime_fit_leaves_out_deployments_without_a_core_death() -> None:
    d = _population(400, seed=1)
    p = azure_priors(d, window_hours=WINDOW_HOURS, n_boot=0, alpha=0.5, zero_event_probability=0.5)
    deaths = d["core_deaths"].to_numpy().astype(float)
    exposure = d["core_exposure_hours"].to_numpy()
    has = deaths > 0
    expected = gamma_fit(deaths[has] / exposure[has])
    assert p.lifetime_rate.n == int(has.sum()) == 300
    assert p.lifetime_rate.shape == pytest.approx(expected.shape, rel=1e-9)
    assert p.lifetime_rate.rate == pytest.approx(expected.rate, rel=1e-9)
    # the old rule (substitute -ln(0.5)/exposure) would have given a different prior
    substituted = np.where(has, deaths, 0.0) / exposure
    substituted[~has] = math.log(2.0) / exposure[~has]
    assert abs(gamma_fit(substituted).shape - expected.shape) > 0.05
    # the normalised-rate and shutdown fits need a lifetime: the same 300 deployments
    assert p.normalised_scaleout_rate.n == 300
    assert p.shutdown.n == 300


def test_discrete_cvm_distance_by_hand() -> None:
    data = np.array([1.0, 1.0, 2.0, 4.0])
    model = np.array([1.0, 2.0, 2.0, 3.0])
    # support 1, 2, 3, 4: F_data .5 .75 .75 1; F_model .25 .75 1 1; p_model .25 .5 .25 0
    expected = 0.25**2 * 0.25 + 0.0 + 0.25**2 * 0.25 + 0.0
    assert discrete_cvm_distance(data, model) == pytest.approx(expected, rel=1e-12)
    assert discrete_cvm_distance(data, data) == 0.0


def test_cvm_calibration_picks_the_brute_force_minimum() -> None:
    m = deployment_mles(_population(300, seed=2))
    grid = {
        (pr, ps): size_cvm_distance(m, pr, ps, alpha=None, seed=0) for pr in P_GRID for ps in P_GRID
    }
    best = min(grid, key=lambda k: grid[k])
    c = calibrate_zero_event_probabilities(m, alpha=None, seed=0)
    assert (c.p_rate, c.p_size) == best
    assert c.distance == pytest.approx(grid[best], rel=1e-12)
    # the criterion must discriminate: not every p gives the same distance
    assert max(grid.values()) > 1.05 * min(grid.values())  # measured 1.12


def test_calibrated_p_is_used_and_recorded() -> None:
    p = azure_priors(
        _population(300, seed=2), window_hours=WINDOW_HOURS, n_boot=0, seed=0, alpha=0.5
    )
    assert p.calibration is not None
    assert (p.mles.p_rate, p.mles.p_size) == (p.calibration.p_rate, p.calibration.p_size)
    rec = {r.name: r for r in p.records()}["zero_event_probability"]
    assert rec.parameters["p_rate"].value == p.calibration.p_rate
    assert rec.values["cvm_distance"] == p.calibration.distance


def test_alpha_is_the_paper_mad_minimum_in_hours() -> None:
    rng = np.random.default_rng(7)
    lam = rng.gamma(2.0, 1 / 0.5, 300)  # mean lifetimes around 0.25-2 hours
    rate = 0.3 * lam**0.8 * rng.gamma(20.0, 1 / 20.0, 300)
    alpha = alpha_by_min_mad_paper(rate, lam)
    grid = np.linspace(-3.0, 3.0, 6001)
    mad = [float(np.abs(v - v.mean()).mean()) for v in (rate * lam ** (-g) for g in grid)]
    assert alpha == pytest.approx(float(grid[int(np.argmin(mad))]), abs=2e-3)
    # the criterion depends on the unit: the same lifetimes in minutes give another alpha
    in_minutes = alpha_by_min_mad_paper(rate / 60.0, lam / 60.0)
    assert abs(in_minutes - alpha) > 0.05


def test_shutdown_cores_paper_counts_them_as_deaths_by_hand() -> None:
    censored = deployment_mles(FIVE)
    paper = deployment_mles(FIVE, shutdown_cores="paper")
    # B (shut down, 6 cores, 1 own death, 4 VMs ending at the shutdown): 1 vs 6 core deaths
    assert censored.core_deaths.tolist() == [3, 1, 1, 0]
    assert paper.core_deaths.tolist() == [3, 6, 1, 0]
    assert paper.vm_deaths.tolist() == [2, 5, 1, 0]
    # the core-hours are the same either way; B's rate rises from 1/30 to 6/30 per hour
    np.testing.assert_array_equal(paper.core_exposure_hours, censored.core_exposure_hours)
    assert paper.lifetime_rate_per_hour[1] == pytest.approx(6 / 30, rel=1e-12)
    # so the shutdown exposure (age in mean core lifetimes, age x lambda) changes by hand
    kwargs = {"window_hours": WINDOW_HOURS, "n_boot": 0, "alpha": 0.5}
    fits = {
        sc: azure_priors(
            pl.concat([FIVE] * 3), zero_event_probability=0.5, shutdown_cores=sc, **kwargs
        ).shutdown
        for sc in ("censored", "paper")
    }
    age = np.array([2_588_100 / 3600, 8.0, 1 / 12])
    for sc, lam in (("censored", [0.5, 1 / 30, 12.0]), ("paper", [0.5, 6 / 30, 12.0])):
        assert fits[sc].rate == pytest.approx(3 / (3 * float(np.sum(age * lam))), rel=1e-12)
    assert fits["paper"].rate < fits["censored"].rate
    with pytest.raises(ValueError, match="shutdown_cores"):
        deployment_mles(FIVE, shutdown_cores="other")
