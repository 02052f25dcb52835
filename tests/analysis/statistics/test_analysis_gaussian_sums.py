"""§2.5: vectorised A–D equals scipy; rejection falls with N; ~5% for normal tasks; Figure 6."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tracelab.analysis.statistics.gaussian_sums import (
    ad_critical_value,
    ad_rejection_table,
    ad_statistics,
    realization_pool,
)
from tracelab.analysis.statistics.task_samples import task_sample_batch


def test_ad_statistic_and_decision_equal_scipy() -> None:
    rng = np.random.default_rng(0)
    samples = np.concatenate(
        [rng.normal(size=(20, 300)), rng.gamma(2.0, size=(20, 300)), rng.uniform(size=(20, 300))]
    )
    a2 = ad_statistics(samples)
    for row, value in zip(samples, a2, strict=True):
        ref = stats.anderson(row, "norm", method="interpolate")
        assert value == pytest.approx(ref.statistic, rel=1e-9)
        assert (value > ad_critical_value(300)) == (ref.pvalue < 0.05)
    assert np.isnan(ad_statistics(np.ones((1, 10))))[0]


def _pool(kind: str, n_tasks: int, length: int, realizations: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        inst = [
            rng.normal(rng.uniform(0.2, 0.4), rng.uniform(0.02, 0.05), length)
            for _ in range(n_tasks)
        ]
    else:  # skewed, as the trace's tasks: exponential-like usage
        inst = [rng.exponential(rng.uniform(0.02, 0.06), length) for _ in range(n_tasks)]
    batch = task_sample_batch([(1, i) for i in range(n_tasks)], inst)
    return inst, realization_pool(
        [batch], n_tasks_total=n_tasks, pool_size=n_tasks, realizations=realizations, seed=seed
    )


def test_pool_resamples_each_tasks_own_values() -> None:
    inst, pool = _pool("skewed", 30, 50, 200, seed=1)
    assert pool.realizations.shape == (30, 200)
    for i in range(30):
        assert np.all(np.isin(pool.realizations[i], inst[i].astype(np.float32)))
        assert pool.mean[i] == pytest.approx(inst[i].mean())
        assert pool.std[i] == pytest.approx(inst[i].std())
    _, again = _pool("skewed", 30, 50, 200, seed=1)
    np.testing.assert_array_equal(pool.realizations, again.realizations)


def test_pool_subsamples_across_batches() -> None:
    rng = np.random.default_rng(2)
    batches = [
        task_sample_batch([(b, i) for i in range(10)], [rng.random(5) for _ in range(10)])
        for b in range(5)
    ]
    pool = realization_pool(batches, n_tasks_total=50, pool_size=12, realizations=7, seed=3)
    assert pool.size == 12
    assert len(set(zip(pool.job_id.tolist(), pool.task_index.tolist(), strict=True))) == 12


def test_rejection_falls_with_n_for_skewed_tasks() -> None:
    _, pool = _pool("skewed", 600, 200, 1000, seed=4)
    result = ad_rejection_table(pool, sizes=(10, 50, 500), sets=60, seed=5)
    rate = {r.n_tasks_per_set: r.rejection_rate for r in result.rows}
    # a sum of N exponentials has skewness ~2/sqrt(N): 0.63 at N=10 is rejected by A-D with 1,000
    # values almost surely, 0.09 at N=500 only sometimes
    assert rate[10] > 0.9
    assert rate[10] >= rate[50] >= rate[500]
    assert rate[500] < rate[10] - 0.3
    # E[mu_j] = N * mean task mean; sets of 500 of 600 tasks leave little room for error
    row = result.rows[2]
    assert row.mean_mu_cores == pytest.approx(500 * pool.mean.mean(), rel=0.01)
    assert result.sets.height == 180


def test_normal_tasks_rejected_near_level_and_percentiles_match() -> None:
    sets = 400
    _, pool = _pool("normal", 200, 2000, 500, seed=6)
    result = ad_rejection_table(pool, sizes=(10,), sets=sets, seed=7)
    row = result.rows[0]
    # sums of resampled near-normal tasks are normal: A-D rejects at its level, 5% +- binomial
    # noise of 400 sets (sd 0.011); 4 sd each side
    assert row.rejection_rate == pytest.approx(0.05, abs=4 * np.sqrt(0.05 * 0.95 / sets))
    # the fitted normal's percentiles equal the empirical ones up to the noise of 500 values
    assert abs(row.median_rel_error_p95) < 0.01
    assert abs(row.median_rel_error_p99) < 0.02


def test_sizes_above_pool_are_skipped_and_record_written() -> None:
    _, pool = _pool("normal", 20, 50, 100, seed=8)
    result = ad_rejection_table(pool, sizes=(10, 50), sets=5, seed=0)
    assert result.skipped_sizes == (50,)
    record = result.to_parameter("google-2011")
    assert record.distribution == "anderson-darling-table"
    assert record.values["n_tasks_per_set"] == [10]


def test_pool_when_stream_is_shorter_than_announced() -> None:
    rng = np.random.default_rng(9)
    batch = task_sample_batch([(1, i) for i in range(10)], [rng.random(5) for _ in range(10)])
    # 10 tasks streamed, 1,000 announced: the pool keeps only the chosen ordinals that arrived
    pool = realization_pool([batch], n_tasks_total=1000, pool_size=500, realizations=3, seed=1)
    assert pool.realizations.shape[0] == pool.size == pool.mean.size
    assert pool.size <= 10


def test_figure5_examples_are_one_sets_totals_with_its_fitted_normal() -> None:
    r = 2000
    _, pool = _pool("normal", 200, 500, r, seed=9)
    result = ad_rejection_table(pool, sizes=(10, 100), sets=3, seed=1)
    ex = result.examples
    assert ex.height == 2 * r
    for n in (10, 100):
        one = ex.filter(ex["n_tasks_per_set"] == n)
        assert one["realization"].to_list() == list(range(r))
        mu, sigma = one["mu_cores"][0], one["sigma_cores"][0]
        # the set is the first of that N in sets.parquet: same fitted normal
        first = result.sets.filter(
            (result.sets["n_tasks_per_set"] == n) & (result.sets["set"] == 0)
        )
        assert (first["mu_cores"][0], first["sigma_cores"][0]) == (mu, sigma)
        # totals of resampled tasks have mean mu (4 standard errors) and std sigma (~10%)
        totals = one["total_cores"].to_numpy()
        assert totals.mean() == pytest.approx(mu, abs=4 * sigma / np.sqrt(r))
        assert totals.std() == pytest.approx(sigma, rel=0.1)
