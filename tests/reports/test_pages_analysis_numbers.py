"""The numbers each google-2011 analysis page states, from a few hand-made result rows; every
expected value is worked out by hand in the test."""

from __future__ import annotations

import polars as pl
import pytest

from tracelab.reports.model import InputsMissing
from tracelab.reports.pages.analysis import (
    _centroid_range,
    clustering_numbers,
    gamma_fits_numbers,
    gaussian_sums_numbers,
    inst_vs_avg_numbers,
    time_invariance_numbers,
    variability_numbers,
)


def _convergence(n_tasks: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "k": [5, 1, 2],
            "n_tasks": n_tasks,
            "q1": [-0.1, -0.9, -0.2],
            "median": [0.0, 0.5, 0.01],
            "q3": [0.05, 0.9, 0.3],
            "whisker_low": [-0.2, -1.0, -0.4],
            "whisker_high": [0.1, 1.0, 0.5],
            "mean": [0.0, 0.4, 0.02],
        }
    )


def test_inst_vs_avg_first_and_last_k_with_tasks() -> None:
    nums = inst_vs_avg_numbers(_convergence([8, 0, 10]))
    # k = 1 has no tasks: the first k shown is 2
    assert (nums.k_first, nums.median_first) == (2, 0.01)
    assert nums.iqr_first == pytest.approx(0.3 - (-0.2))
    assert (nums.k_last, nums.n_tasks_last, nums.median_last) == (5, 8, 0.0)
    assert nums.iqr_last == pytest.approx(0.05 - (-0.1))
    assert [b.k for b in nums.boxes] == [1, 2, 5]  # the table lists every k
    assert [b.k for b in nums.shown] == [2, 5]


def test_inst_vs_avg_without_tasks_is_missing_input() -> None:
    with pytest.raises(InputsMissing, match="no k with tasks"):
        inst_vs_avg_numbers(_convergence([0, 0, 0]))


def test_variability_regressions_by_measure() -> None:
    reg = pl.DataFrame(
        {
            "measure": ["avg", "inst"],
            "n": [40, 40],
            "slope": [0.31, 0.36],
            "intercept": [0.010, 0.015],
            "r_squared": [0.7, 0.8],
        }
    )
    nums = variability_numbers(reg)
    assert (nums.inst.n, nums.inst.slope, nums.inst.intercept, nums.inst.r_squared) == (
        40.0,
        0.36,
        0.015,
        0.8,
    )
    assert (nums.avg.slope, nums.avg.intercept) == (0.31, 0.010)
    with pytest.raises(InputsMissing, match="inst or avg"):
        variability_numbers(reg.filter(pl.col("measure") == "inst"))


def test_time_invariance_shares_sorted_by_window_length() -> None:
    df = pl.DataFrame(
        {
            "delta": [200, 50],
            "n_tested": [120, 300],
            "share_rejected": [0.33, 0.21],
            "share_stderr": [0.04, 0.02],
        }
    )
    nums = time_invariance_numbers(df)
    assert [(s.delta, s.n_tested, s.share_rejected) for s in nums.shares] == [
        (50, 300.0, 0.21),
        (200, 120.0, 0.33),
    ]


def test_clustering_k_tasks_and_extreme_shares() -> None:
    shares = pl.DataFrame(
        {"cluster": [2, 0, 1], "n_tasks": [10, 30, 60], "share_of_tasks": [0.1, 0.3, 0.6]}
    )
    nums = clustering_numbers(shares)
    assert (nums.k, nums.tasks) == (3, 10 + 30 + 60)
    assert (nums.largest_share, nums.smallest_share) == (0.6, 0.1)
    assert nums.clusters == (0, 1, 2)
    assert nums.shares == (0.3, 0.6, 0.1)


def test_gaussian_sums_rates_with_the_papers_for_the_same_n() -> None:
    table = pl.DataFrame(
        {
            "n_tasks_per_set": [50, 10, 7],
            "n_sets": [40, 40, None],
            "rejection_rate": [0.5, 0.95, 1.0],
            "mean_mu_cores": [2.5, 0.5, None],
        }
    )
    nums = gaussian_sums_numbers(table)
    assert [r.n_tasks_per_set for r in nums.rows] == [7, 10, 50]
    assert [r.rejection_rate for r in nums.rows] == [1.0, 0.95, 0.5]
    # the paper's Table 1 has N = 10 (0.991) and N = 50 (0.784), not N = 7
    assert [r.paper_rejection_rate for r in nums.rows] == [None, 0.991, 0.784]
    assert (nums.rows[0].n_sets, nums.rows[0].mean_mu_cores) == (None, None)


def test_gamma_fits_keep_the_files_order_and_missing_intervals() -> None:
    fits = pl.DataFrame(
        {
            "name": ["b_fit", "a_fit"],
            "unit": ["s", "cores"],
            "n": [2000, 400],
            "shape": [0.8, 2.0],
            "rate": [0.001, 40.0],
            "log_likelihood": [-15000.0, None],
            "ks_distance": [0.05, 0.03],
            "shape_low": [0.75, None],
            "shape_high": [0.85, None],
            "rate_low": [0.0009, None],
            "rate_high": [0.0011, None],
        }
    )
    nums = gamma_fits_numbers(fits)
    assert [f.name for f in nums.fits] == ["b_fit", "a_fit"]
    b, a = nums.fits
    assert (b.unit, b.n, b.shape, b.rate, b.ks_distance) == ("s", 2000.0, 0.8, 0.001, 0.05)
    assert (b.shape_low, b.shape_high) == (0.75, 0.85)
    assert (a.log_likelihood, a.shape_low, a.rate_high) == (None, None, None)


def test_centroids_are_drawn_on_the_range_that_holds_their_mass() -> None:
    """Cluster 0 has all its mass in bins 0-3, cluster 1 99.6% in bins 0-9 and 0.4% in bin 60:
    the range ends 2 bins past bin 9 (0.11 core), rounded up to 0.15 core; a tail under 0.5%
    does not stretch the axis to 0.61."""
    rows = [(0, b, 0.25) for b in range(4)]
    rows += [(1, b, 0.0996) for b in range(10)] + [(1, 60, 0.004)]
    cent = pl.DataFrame(rows, schema=["cluster", "bin", "share_of_samples"], orient="row")
    assert _centroid_range(cent) == pytest.approx(0.15)
    # mass near zero only: never narrower than 0.1 core
    assert _centroid_range(cent.filter(pl.col("cluster") == 0)) == pytest.approx(0.1)
