"""§2.3: vectorised KS equals scipy; rejection share matches the design (null and shifting tasks)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from tracelab.analysis.statistics.task_samples import task_sample_batch
from tracelab.analysis.statistics.time_invariance import (
    ks_exact_pvalues,
    ks_statistics_equal_n,
    random_window_pairs,
    time_invariance,
)


@pytest.mark.parametrize("n", [12, 36])
def test_statistic_and_pvalue_equal_scipy_with_ties(n: int) -> None:
    rng = np.random.default_rng(n)
    a = np.round(rng.exponential(0.1, (300, n)), 2)
    b = np.round(rng.exponential(0.13, (300, n)), 2)
    a[:40] = 0.0  # idle windows: many exact ties
    b[20:60, : n // 2] = 0.0
    counts = ks_statistics_equal_n(a, b)
    table = ks_exact_pvalues(n)
    for i in range(300):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = stats.ks_2samp(a[i], b[i])
        assert counts[i] / n == pytest.approx(ref.statistic, abs=1e-12)
        assert table[counts[i]] == pytest.approx(ref.pvalue, rel=1e-9)


def test_window_pairs_distinct_and_uniform() -> None:
    n = np.full(60_000, 4, np.int64)
    w1, w2 = random_window_pairs(n, np.random.default_rng(0))
    assert np.all(w1 != w2)
    assert w1.max() == 3
    assert w2.max() == 3
    # 12 ordered pairs, each 1/12: 5,000 expected, binomial sd ~ 68
    counts = np.bincount(w1 * 4 + w2, minlength=16)[
        [i * 4 + j for i in range(4) for j in range(4) if i != j]
    ]
    assert np.all(np.abs(counts - 5000) < 5 * 68)


def _batch(n_tasks: int, length: int, shift_share: float, shift_block: int, delta: int, seed: int):
    rng = np.random.default_rng(seed)
    shifting = rng.random(n_tasks) < shift_share
    inst = []
    for s in shifting:
        x = rng.uniform(0.0, 0.2, length)
        if s:
            # after the shift the support is disjoint: D = 1 whenever the windows straddle it
            x[shift_block * delta :] = rng.uniform(0.5, 0.7, length - shift_block * delta)
        inst.append(x)
    return task_sample_batch([(1, i) for i in range(n_tasks)], inst), shifting


def test_null_rejection_near_level() -> None:
    batch, _ = _batch(4000, 8 * 12, 0.0, 0, 12, seed=1)
    result = time_invariance([batch], deltas=(12,), seed=2)
    share = result.shares[0]
    # continuous data, same distribution: P(reject) is the exact test's size, the largest
    # attainable p-value below 5% (0.0314 for 12 vs 12), so "near 5%" and never above it
    assert 0.02 < share.null_rejection_probability <= 0.05
    se = np.sqrt(share.null_rejection_probability * (1 - share.null_rejection_probability) / 4000)
    assert share.share_rejected == pytest.approx(share.null_rejection_probability, abs=4 * se)


def test_rejection_matches_known_shift_share() -> None:
    delta, blocks, shift_block, share_true = 12, 8, 3, 0.3
    batch, shifting = _batch(4000, blocks * delta, share_true, shift_block, delta, seed=3)
    result = time_invariance([batch], deltas=(delta,), seed=4)
    s = result.shares[0]
    alpha0 = s.null_rejection_probability
    # windows on opposite sides of the shift: 2 b (B - b) / (B (B - 1)) of ordered pairs; those
    # reject surely (disjoint supports); all other pairs reject with the null probability
    straddle = 2 * shift_block * (blocks - shift_block) / (blocks * (blocks - 1))
    p_shift = straddle + (1 - straddle) * alpha0
    realised = shifting.mean()
    expected = realised * p_shift + (1 - realised) * alpha0
    se = np.sqrt(expected * (1 - expected) / 4000)
    assert s.share_rejected == pytest.approx(expected, abs=4 * se)
    assert s.n_tested == 4000
    assert s.n_too_short == 0


def test_short_tasks_counted_not_tested() -> None:
    rng = np.random.default_rng(5)
    batch = task_sample_batch([(1, 0), (1, 1)], [rng.random(23), rng.random(24)])
    result = time_invariance([batch], deltas=(12, 24), seed=0)
    by_delta = {s.delta: s for s in result.shares}
    assert (by_delta[12].n_tested, by_delta[12].n_too_short) == (1, 1)
    assert (by_delta[24].n_tested, by_delta[24].n_too_short) == (0, 2)
    assert result.tests.height == 1
