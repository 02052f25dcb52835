"""The comparison's intervals against textbook values and a seeded coverage check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracelab.analysis.compare.intervals import (
    poisson_rate,
    quantile_interval,
    step_integrals,
    time_average,
)


def test_median_interval_of_ten_is_the_second_and_ninth_order_statistics() -> None:
    x = np.array([9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0, 10.0])
    e = quantile_interval(x, 0.5)
    # binomial(10, 1/2): P(X <= 1) = 11/1024 < 0.025 <= P(X <= 2) = 56/1024 -> ranks 2 and 9
    assert (e.value, e.low, e.high, e.n) == (5.5, 2.0, 9.0, 10)


def test_too_few_values_have_no_interval_but_keep_the_estimate() -> None:
    e = quantile_interval(np.array([10.0, 20.0, 30.0, 40.0, 50.0]), 0.5)
    assert e.value == 30.0
    assert e.n == 5
    assert math.isnan(e.low)
    assert math.isnan(e.high)


def test_quantile_intervals_cover_the_true_quantile_at_least_95_percent() -> None:
    rng = np.random.default_rng(3)
    true_p90 = -math.log(0.1)  # exponential(1)
    hits = 0
    for _ in range(1000):
        e = quantile_interval(rng.exponential(size=200), 0.9)
        hits += e.low <= true_p90 <= e.high
    # exact coverage is >= 95% by construction; a symmetric-rank bug gives ~80%
    assert 0.94 <= hits / 1000 <= 0.99


def test_step_integrals_by_hand() -> None:
    # 2 on [0, 1), 4 on [1, 3), 1 from 3 on
    t, v = np.array([0.0, 1.0, 3.0]), np.array([2.0, 4.0, 1.0])
    got = step_integrals(t, v, np.array([0.0, 0.5, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(got, [1.0, 1.0 + 4.0, 4.0, 1.0])


def test_time_average_weights_by_duration_not_by_point() -> None:
    # 2 for one hour, then 4 for two hours (the last point only ends the window)
    e = time_average(np.array([0.0, 1.0, 3.0]), np.array([2.0, 4.0, 9.0]), batches=3)
    # batches [0,1] [1,2] [2,3] have means 2, 4, 4
    assert e.value == pytest.approx(10.0 / 3.0)
    half = 4.302652729911275 * np.std([2.0, 4.0, 4.0], ddof=1) / math.sqrt(3)  # t(0.975, 2)
    assert (e.low, e.high) == pytest.approx((10 / 3 - half, 10 / 3 + half))
    assert e.n == 3


def test_poisson_rate_garwood_and_zero_event_bound() -> None:
    e = poisson_rate(10, 2.0)
    # Garwood 95% interval for 10 events: [4.7954, 18.3904]
    assert (e.value, e.n) == (5.0, 10)
    assert (e.low, e.high) == pytest.approx((4.7954 / 2, 18.3904 / 2), rel=1e-4)
    zero = poisson_rate(0, 10.0)
    assert (zero.value, zero.n) == (0.0, 0)
    assert zero.high == pytest.approx(math.log(20.0) / 10.0)
