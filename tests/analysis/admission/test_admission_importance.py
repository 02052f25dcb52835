"""Importance sampling (Cluster Admission App. D): the badness measure, Prop. D.2's weights, unbiasedness."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from admission_helpers import PRIORS as TEST_PRIORS

from tracelab.analysis.admission.importance import (
    CANTELLI_K,
    badness_measure,
    importance_scheme,
    redraw_until_kept,
    sampling_probabilities,
)
from tracelab.analysis.admission.sim import ClusterConfig, pilot_badness, sample_run


def test_sampling_probabilities_match_hand_computation() -> None:
    # two buckets: bucket 0 kept with P0 (1 - r0) per round, a round redraws with P0 r0, so
    # Q0 = 0.7 * 0.5 / (1 - 0.35) and Q1 = 0.3 / 0.65 (the geometric series of the proof)
    q = sampling_probabilities((0.7, 0.3), (0.5, 0.0))
    assert q == pytest.approx((0.35 / 0.65, 0.3 / 0.65), rel=1e-12)
    # three buckets P = (0.6, 0.3, 0.1), r = (0.5, 0.5, 0). Floor 1: buckets 1, 2 with 0.75, 0.25;
    # A1(1) = 0.375 / (1 - 0.375) = 0.6, A1(2) = 0.4. Floor 0: A0(0) = 0.3 / (1 - 0.3) = 3/7,
    # A0(1) = (0.15 + 0.15 * 0.6) / 0.7 = 12/35, A0(2) = (0.1 + 0.15 * 0.4) / 0.7 = 8/35
    q = sampling_probabilities((0.6, 0.3, 0.1), (0.5, 0.5, 0.0))
    assert q == pytest.approx((3 / 7, 12 / 35, 8 / 35), rel=1e-12)


def test_redraw_loop_samples_the_importance_distribution_of_prop_d2() -> None:
    """The redraw loop on a tiny discrete distribution, 1e5 kept draws: each outcome's frequency is
    q(x) = p(x) Q(B) / P(B) within 4 SE; so p(x) / q(x) = P(B) / Q(B) is the right weight."""
    p = np.array([0.35, 0.25, 0.15, 0.1, 0.1, 0.05])
    bucket_of_x = [0, 0, 0, 1, 1, 2]
    nominal = (0.75, 0.2, 0.05)
    redraw = (0.6, 0.3, 0.0)
    rng = np.random.default_rng(12)
    n = 100_000
    xs = rng.choice(len(p), size=40 * n, p=p).tolist()
    coins = rng.random(40 * n).tolist()
    pos = iter(range(40 * n))
    used = [0]

    def draw(_: int) -> int:
        used[0] = next(pos)
        return int(xs[used[0]])

    kept = [
        redraw_until_kept(draw, bucket_of_x.__getitem__, lambda: coins[used[0]], redraw)[0]
        for _ in range(n)
    ]
    freq = np.bincount(kept, minlength=len(p)) / n
    q_bucket = sampling_probabilities(nominal, redraw)
    want = np.array([p[x] * q_bucket[b] / nominal[b] for x, b in enumerate(bucket_of_x)])
    se = np.sqrt(want * (1 - want) / n)
    assert np.all(np.abs(freq - want) < 4 * se), (freq, want)
    # the scheme really moves mass to the top bucket (so the check above can tell)
    assert q_bucket[2] > 2 * nominal[2]


def test_badness_measure_of_a_hand_made_run() -> None:
    half = math.log(2.0) / 730.0  # half the initial cores survive a month
    lam = np.array([2 * half, half, half, half, half, half])
    times = np.array([10.0, 20.0, 30.0, 40.0, 800.0, 900.0])
    cores = np.array([6.0, 5.0, 3.0, 1.0, 2.0, 1.0])
    rate = np.array([0.0, 0.0, 0.01, 0.0, 0.0, 0.002])
    size = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.5])
    max_life = np.array([5000.0, 5000.0, 100.0, 5000.0, 5000.0, 10000.0])
    bm = badness_measure(times, cores, lam, rate, size, max_life, 10.0, 2190.0)
    k = CANTELLI_K
    # month 0, C = 10: 6 cores in (room 4), 5 do not fit, 3 fit (room 1), 1 fits exactly (room 0).
    # Month 1: the 3-core one left (its maximal lifetime ended in month 0); the 6-core one keeps
    # a quarter of its cores on average (Binomial(6, 1/4)), the 1-core one half (Binomial(1, 1/2))
    load1 = (1.5 + k * math.sqrt(6 * 0.25 * 0.75)) + (0.5 + k * math.sqrt(0.25))
    assert 8.0 < load1 < 9.0  # room 1-2: the 2-core arrival does not fit, the 1-core one does
    # month 2: ages 1460 h for the first two, 730 h for the one admitted in month 1, which scales
    # out at 0.002/h with 1 + Poisson(0.5) cores: mean r (1+s)(1-q)/lam, variance
    # r [(1+s)(1-q)/lam + (s^2+2s)(1-q^2)/(2 lam)] on top of its Binomial(1, 1/2) initial core
    new_mean = 0.002 * 1.5 * 0.5 / half
    new_var = 0.002 * (1.5 * 0.5 / half + 1.25 * 0.75 / (2 * half))
    load2 = (
        (6 / 16 + k * math.sqrt(6 * (1 / 16) * (15 / 16)))
        + (0.25 + k * math.sqrt(0.25 * 0.75))
        + (0.5 + new_mean + k * math.sqrt(0.25 + new_var))
    )
    assert bm == pytest.approx(max(load1, load2) / 10.0, rel=1e-12)
    assert load2 > load1


PRIORS = replace(TEST_PRIORS, arrival_rate_per_hour=1.0)
FIRST = 3


def _first_growth(rate: np.ndarray, size: np.ndarray, lam: np.ndarray) -> float:
    """Run-level statistic: stationary scale-out cores r (1+s) / lam of the first 3 deployments
    (they enter the BM's month 0, so the statistic and BM are correlated)."""
    return float((rate[:FIRST] * (1.0 + size[:FIRST]) / lam[:FIRST]).sum())


@pytest.mark.slow
def test_importance_weighted_mean_is_unbiased() -> None:
    # generator truth: E[rho] E[lam^(alpha-1)] (1 + E[s]) per deployment, Gamma moments
    p = PRIORS
    e_lam = math.exp(
        math.lgamma(p.lifetime_shape + p.alpha - 1)
        - math.lgamma(p.lifetime_shape)
        + (1 - p.alpha) * math.log(p.lifetime_rate)
    )
    truth = FIRST * p.scaleout_shape / p.scaleout_rate * e_lam * (1 + p.size_shape / p.size_rate)
    cfg = ClusterConfig(p, 20, 1460.0, "accept-all", 1.0)
    pilot_n, n = 3000, 1200
    pilot = np.array([pilot_badness(cfg, (3, 2, i)) for i in range(pilot_n)])
    imp = importance_scheme(pilot, (0.8, 0.95), (0.9, 0.7))
    assert imp.nominal == pytest.approx((0.8, 0.15, 0.05), abs=1e-3)
    cfg = replace(cfg, importance=imp)
    x, w, bucket = np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64)
    for i in range(n):
        arr, bucket[i], w[i], _ = sample_run(cfg, (3, 0, i))
        x[i] = _first_growth(arr.rate, arr.size, arr.lam)
    # the pilot's P(B) estimate adds the variance of a plain mean of E[x | B] over the pilot
    cond = np.array([x[bucket == b].mean() for b in range(3)])
    pilot_var = float(np.sum(np.asarray(imp.nominal) * (cond - cond @ imp.nominal) ** 2))
    se = math.sqrt((w * x).var() / n + pilot_var / pilot_n)
    assert abs((w * x).mean() - truth) < 4 * se, ((w * x).mean(), truth, se)
    # unweighted, the redraws bias the mean: the weights are what makes it right
    assert x.mean() - truth > 6 * x.std() / math.sqrt(n)
    assert np.bincount(bucket)[2] > 3 * 0.05 * n
