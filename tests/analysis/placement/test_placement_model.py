"""The placement stage's lifetime model against Monte Carlo and brute force."""

from __future__ import annotations

import numpy as np
import pytest

from tracelab.analysis.placement.model import (
    LifetimePrior,
    deployment_posteriors,
    expected_remaining_hours,
    las_temporal_cost,
    lava_classes,
    lomax_sample_hours,
)


@pytest.mark.parametrize(
    ("shape", "rate", "horizon"),
    [(2.5, 40.0, 720.0), (0.8, 7.0, 720.0), (1.0, 20.0, 168.0), (3.5, 30.0, np.inf)],
)
def test_expected_remaining_matches_monte_carlo(shape: float, rate: float, horizon: float) -> None:
    prior = LifetimePrior(shape, rate, "test")
    _, life = lomax_sample_hours(prior, 2_000_000, np.random.default_rng(17))
    for age in (0.0, 3.0, 24.0, 100.0):
        alive = life[life > age] - age
        rem = np.minimum(alive, horizon)
        mc = rem.mean()
        se = rem.std() / np.sqrt(rem.size)
        closed = float(expected_remaining_hours(shape, rate, age, horizon))
        assert abs(closed - mc) < 4 * se + 1e-3 * mc, (age, closed, mc, se)


def test_expected_remaining_grows_with_age_and_restriction_converges() -> None:
    ages = np.array([0.0, 1.0, 10.0, 100.0])
    rem = expected_remaining_hours(2.0, 40.0, ages, 720.0)
    assert np.all(np.diff(rem) > 0)
    # (beta + u) / (k - 1) once the horizon is far beyond every lifetime that matters
    far = expected_remaining_hours(3.0, 40.0, ages, 1e9)
    assert far == pytest.approx((40.0 + ages) / 2.0, rel=1e-6)
    assert np.isinf(expected_remaining_hours(0.9, 40.0, 0.0, np.inf))
    # k = 1 is the limit of the general form from both sides
    one = float(expected_remaining_hours(1.0, 40.0, 5.0, 720.0))
    assert one == pytest.approx(45.0 * np.log1p(720.0 / 45.0), rel=1e-12)
    near = expected_remaining_hours(np.array([1.0 - 1e-6, 1.0 + 1e-6]), 40.0, 5.0, 720.0)
    assert near == pytest.approx([one, one], rel=1e-4)


def test_deployment_posteriors_match_a_brute_force_loop() -> None:
    rng = np.random.default_rng(3)
    n = 400
    dep = rng.integers(0, 12, n)
    created = rng.integers(0, 200, n) * 300
    deleted = created + rng.integers(1, 150, n) * 300
    prior = LifetimePrior(1.7, 25.0, "test")
    shape, rate = deployment_posteriors(prior, dep, created, deleted)
    for i in range(n):
        deaths, exposure = 0, 0.0
        for j in range(n):
            if dep[j] != dep[i] or created[j] >= created[i]:
                continue
            if deleted[j] <= created[i]:
                deaths += 1
                exposure += deleted[j] - created[j]
            else:
                exposure += created[i] - created[j]
        assert shape[i] == pytest.approx(1.7 + deaths)
        assert rate[i] == pytest.approx(25.0 + exposure / 3600.0)


def test_buckets_and_classes_follow_the_paper() -> None:
    # LAVA paper §4.2: ΔT = 70 min has temporal cost 2; 0 is cost 0; beyond 168 h the last index
    hours = np.array([0.0, 0.2, 70 / 60, 2.0, 5.0, 200.0, -1.0])
    assert las_temporal_cost(hours).tolist() == [0, 0, 2, 4, 6, 10, 0]
    life = np.array([0.5, 1.0, 9.9, 10.0, 99.0, 500.0, 5000.0])
    assert lava_classes(life).tolist() == [1, 2, 2, 3, 3, 4, 4]
