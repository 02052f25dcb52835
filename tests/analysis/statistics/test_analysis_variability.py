"""§2.2: std~mean regression recovers a known line; inst std > avg std; CDF quantiles."""

from __future__ import annotations

import numpy as np
import pytest

from tracelab.analysis.statistics.variability import std_regression, variability

SLOPE, INTERCEPT = 0.36, 0.015  # the paper's inst line, used as the generating truth
AVG_WEIGHT = 0.6


def _tasks(n_tasks: int, length: int, seed: int) -> tuple[np.ndarray, ...]:
    """Per-task numpy statistics of samples whose true std is SLOPE * mean + INTERCEPT.

    avg = (1 - a) mu + a y with y an independent draw: same mean, std a times the inst std.
    """
    rng = np.random.default_rng(seed)
    mu = rng.uniform(0.02, 0.5, n_tasks)
    sd = SLOPE * mu + INTERCEPT
    inst = rng.normal(mu[:, None], sd[:, None], (n_tasks, length))
    avg = (1 - AVG_WEIGHT) * mu[:, None] + AVG_WEIGHT * rng.normal(
        mu[:, None], sd[:, None], (n_tasks, length)
    )
    return inst.mean(1), inst.std(1), avg.mean(1), avg.std(1)


def test_exact_line() -> None:
    mean = np.array([0.1, 0.2, 0.3, 0.4])
    fit = std_regression("inst", mean, 0.5 * mean + 0.02)
    assert (fit.slope, fit.intercept, fit.r_squared, fit.n) == pytest.approx((0.5, 0.02, 1.0, 4))


def test_regression_recovers_generating_line() -> None:
    result = variability(*_tasks(2000, 400, seed=7))
    # slope SE here is ~0.002; the population std of 400 normals is biased by ~-0.2% (0.0007 in
    # slope): 0.01 is ~4 SE plus the bias, while a wrong measure (avg: 0.216) is far outside
    assert result.inst.slope == pytest.approx(SLOPE, abs=0.01)
    assert result.inst.intercept == pytest.approx(INTERCEPT, abs=0.003)
    assert result.avg.slope == pytest.approx(AVG_WEIGHT * SLOPE, abs=0.01)
    assert result.avg.intercept == pytest.approx(AVG_WEIGHT * INTERCEPT, abs=0.003)
    assert result.inst.r_squared > 0.95
    # every task: std(inst) = sd vs std(avg) = 0.6 sd, 400 samples each
    assert result.share_inst_std_above_avg == 1.0


def test_cdf_and_heatmap_shapes() -> None:
    im, isd, am, asd = _tasks(300, 50, seed=8)
    result = variability(im, isd, am, asd, heatmap_bins=10)
    inst_cdf = result.cdf.filter(measure="inst")
    assert inst_cdf.height == 1001
    median = inst_cdf.filter(level=0.5)["std_cores"].item()
    assert median == pytest.approx(float(np.median(isd)))
    assert result.heatmap.filter(measure="avg")["n_tasks"].sum() == 300
    assert result.regression_table().height == 2
