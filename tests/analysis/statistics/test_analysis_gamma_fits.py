"""§2.7: Gamma MLE recovers a known shape/rate; CI, log-likelihood, KS, zeros, export record."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from tracelab.analysis.statistics.gamma_fits import gamma_fit

SHAPE, RATE, N = 2.5, 4.0, 5000


def _standard_errors(shape: float, rate: float, n: int) -> tuple[float, float]:
    # inverse Fisher information of Gamma(shape, rate): I = n [[trigamma(a), -1/b], [-1/b, a/b^2]]
    info = n * np.array([[special.polygamma(1, shape), -1 / rate], [-1 / rate, shape / rate**2]])
    cov = np.linalg.inv(info)
    return float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1]))


def test_recovers_known_shape_and_rate() -> None:
    sample = np.random.default_rng(42).gamma(SHAPE, 1 / RATE, N)
    fit = gamma_fit("x", sample, unit="cores", seed=1, n_bootstrap=100)
    se_shape, se_rate = _standard_errors(SHAPE, RATE, N)
    assert fit.shape == pytest.approx(SHAPE, abs=3 * se_shape)
    assert fit.rate == pytest.approx(RATE, abs=3 * se_rate)
    # the bootstrap interval has about the asymptotic width (2 * 1.96 SE) and covers the estimate
    assert fit.shape_ci[0] < fit.shape < fit.shape_ci[1]
    assert fit.shape_ci[1] - fit.shape_ci[0] == pytest.approx(2 * 1.96 * se_shape, rel=0.35)
    assert fit.rate_ci[1] - fit.rate_ci[0] == pytest.approx(2 * 1.96 * se_rate, rel=0.35)
    # the MLE maximises the likelihood: at least the truth's
    truth_ll = stats.gamma(SHAPE, scale=1 / RATE).logpdf(sample).sum()
    assert truth_ll <= fit.log_likelihood < truth_ll + 10
    # KS distance of a correct model over 5,000 points: ~ 1/sqrt(n) scale
    assert fit.ks_distance < 1.63 / np.sqrt(N)
    assert fit.n == N
    assert fit.n_dropped == 0


def test_wrong_family_has_large_ks_distance() -> None:
    sample = np.random.default_rng(3).uniform(1.0, 2.0, 4000)
    fit = gamma_fit("x", sample, unit="s", n_bootstrap=0)
    assert fit.ks_distance > 1.63 / np.sqrt(4000)
    assert np.isnan(fit.shape_ci[0])


def test_nonpositive_values_dropped_and_record() -> None:
    sample = np.concatenate(
        [np.random.default_rng(5).gamma(1.5, 2.0, 500), [0.0, 0.0, -1.0, np.nan]]
    )
    fit = gamma_fit("google_task_execution_time", sample, unit="s", seed=2, n_bootstrap=20)
    assert (fit.n, fit.n_dropped) == (500, 3)
    record = fit.to_parameter("google-2011")
    assert record.distribution == "gamma"
    assert record.stage == "gamma_fits"
    assert record.parameters["rate"].unit == "1/s"
    assert record.parameters["shape"].unit == ""
    assert record.ci["shape"].low < record.parameters["shape"].value < record.ci["shape"].high
    again = gamma_fit("google_task_execution_time", sample, unit="s", seed=2, n_bootstrap=20)
    assert again == fit


def test_degenerate_sample_is_an_error() -> None:
    with pytest.raises(ValueError, match="positive values"):
        gamma_fit("x", [0.0, 0.3, 0.3], unit="cores")


def test_mean_interval_is_the_bootstrap_of_the_ratio() -> None:
    # Gamma(2, rate 0.5): mean 4, sd 2*sqrt(2); the mean's 95% interval at n = 2,000 is about
    # 4 +- 1.96 * 2.83 / sqrt(2000) = 4 +- 0.124 (width ~0.25). The ratio of the shape and rate
    # intervals' ends, which ignores their correlation, would be about 0.9 wide.
    x = stats.gamma(2.0, scale=2.0).rvs(size=2_000, random_state=np.random.default_rng(5))
    fit = gamma_fit("m", x, unit="s", seed=3, n_bootstrap=200)
    low, high = fit.mean_ci
    # this sample's mean (the MLE's shape / rate) is 4.118, 1.9 standard errors above 4: a 95%
    # interval around it may miss 4 by a hair, so it is checked against the sample's mean
    assert fit.shape / fit.rate == pytest.approx(x.mean(), rel=1e-6)
    assert (low + high) / 2 == pytest.approx(x.mean(), abs=0.03)
    assert 0.17 < high - low < 0.35
    assert low < fit.shape / fit.rate < high
    record = fit.to_parameter("google-2011")
    assert (record.ci["mean"].low, record.ci["mean"].high) == (low, high)
    assert "mean" not in gamma_fit("m", x, unit="s", n_bootstrap=0).to_parameter("x").ci


def test_the_order_of_the_sample_changes_no_bit() -> None:
    # a table read in another row order gives the same fit: before, the bootstrap drew by position
    # and the likelihood's sums ran in the read order, so the intervals moved
    sample = np.random.default_rng(8).gamma(1.5, 2.0, 700)
    shuffled = np.random.default_rng(9).permutation(sample)
    assert not np.array_equal(sample, shuffled)
    fit = gamma_fit("x", sample, unit="s", seed=4, n_bootstrap=30)
    assert gamma_fit("x", shuffled, unit="s", seed=4, n_bootstrap=30) == fit
