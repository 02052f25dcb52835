"""The pure functions behind each analyze stage's summary.json and tables, on hand-made results."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tracelab.analysis.statistics.clustering import (
    HistogramClusters,
    KScan,
    clustering_skipped_summary,
    clustering_summary,
    clustering_tables,
    histogram_matrix,
    kmeans_thread_limit,
    too_few_histograms,
)
from tracelab.analysis.statistics.gamma_fits import (
    GammaFit,
    GoogleGammaFits,
    finished_execution_times,
    gamma_fits_summary,
    gamma_fits_table,
    google_gamma_fits,
)
from tracelab.analysis.statistics.gaussian_sums import ADRow, GaussianSums, gaussian_sums_summary
from tracelab.analysis.statistics.inst_vs_avg import (
    BoxStats,
    InstAvgConvergence,
    inst_vs_avg_summary,
)
from tracelab.analysis.statistics.time_invariance import (
    KSShare,
    TimeInvariance,
    time_invariance_summary,
)
from tracelab.analysis.statistics.variability import (
    StdRegression,
    Variability,
    long_task_stats,
    variability_summary,
)


def _box(q1: float, median: float, q3: float) -> BoxStats:
    return BoxStats(
        n=4, mean=median, q1=q1, median=median, q3=q3, whisker_low=q1, whisker_high=q3, n_outliers=0
    )


def test_inst_vs_avg_summary_keys_medians_by_k_and_iqr() -> None:
    result = InstAvgConvergence(
        ks=(1, 5),
        boxes=(_box(-0.25, 0.5, 0.75), _box(-0.125, 0.0, 0.125)),
        n_tasks=7,
        n_zero_avg=2,
        seed=9,
    )
    summary = inst_vs_avg_summary(result, batch_rows=50)
    assert summary == {
        "parameters": {"seed": 9, "ks": [1, 5], "batch_rows": 50, "long_only": True},
        "inputs": {"long_tasks_with_samples": 7},
        "n_zero_avg_tasks": 2,
        "median_by_k": {"1": 0.5, "5": 0.0},
        # q3 - q1: 0.75 + 0.25 and 0.125 + 0.125 (exact in binary)
        "iqr_by_k": {"1": 1.0, "5": 0.25},
        # _box's boxes hold 4 tasks each
        "headline": {
            "key": "median_last",
            "condition": "k = 5 inst samples per task, 4 long tasks",
        },
    }


def _regression(measure: str, slope: float) -> StdRegression:
    return StdRegression(measure, 3, slope, 0.5, 0.9, 0.01, 0.02)


def test_variability_summary_carries_both_regressions_and_figure_3_lines() -> None:
    empty = pl.DataFrame()
    result = Variability(
        inst=_regression("inst", 2.0),
        avg=_regression("avg", 1.0),
        cdf=empty,
        heatmap=empty,
        share_inst_std_above_avg=0.75,
    )
    summary = variability_summary(result, n_long=3)
    assert summary["inputs"] == {"long_tasks": 3}
    assert summary["parameters"] == {"long_only": True, "std": "population"}
    assert summary["regressions"]["inst"]["slope"] == 2.0
    assert summary["regressions"]["avg"] == {
        "measure": "avg",
        "n": 3,
        "slope": 1.0,
        "intercept": 0.5,
        "r_squared": 0.9,
        "slope_stderr": 0.01,
        "intercept_stderr": 0.02,
    }
    assert summary["share_inst_std_above_avg_std"] == 0.75
    # Janus & Rzadca §3.3: "steeper slope (0.36 vs. 0.31) and higher intercept (0.015 vs. 0.010)"
    assert summary["paper"] == {
        "inst": {"slope": 0.36, "intercept": 0.015},
        "avg": {"slope": 0.31, "intercept": 0.010},
    }


def test_long_task_stats_keeps_only_long_tasks_and_asked_columns() -> None:
    stats = pl.LazyFrame(
        {
            "job_id": [1, 2, 3, 4],
            "inst_mean": [0.1, 0.2, 0.3, 0.4],
            "inst_std": [0.0, 0.1, 0.2, 0.3],
            "is_long": [True, False, True, False],
        }
    )
    long = long_task_stats(stats, ("inst_mean", "job_id"))
    assert long.columns == ["inst_mean", "job_id"]
    assert long["job_id"].to_list() == [1, 3]
    assert long["inst_mean"].to_list() == [0.1, 0.3]


def _share(delta: int, n_tested: int, n_too_short: int) -> KSShare:
    return KSShare(delta, n_tested, 1, n_too_short, 1 / n_tested, 0.1, 0.04)


def test_time_invariance_summary_counts_tested_plus_too_short_tasks() -> None:
    result = TimeInvariance(
        alpha=0.01,
        seed=4,
        shares=(_share(12, 5, 3), _share(24, 2, 6)),
        tests=pl.DataFrame(),
    )
    summary = time_invariance_summary(result, deltas=(12, 24), batch_rows=10)
    assert summary["parameters"] == {"seed": 4, "deltas": [12, 24], "alpha": 0.01, "batch_rows": 10}
    # 5 tested + 3 too short at the first Δ
    assert summary["inputs"] == {"long_tasks_with_samples": 8}
    assert [s["delta"] for s in summary["shares"]] == [12, 24]
    assert summary["shares"][1]["n_too_short"] == 6
    assert summary["shares"][0]["share_rejected"] == pytest.approx(0.2)
    assert summary["paper"] == {"share_rejected": 0.30}


def test_time_invariance_summary_without_shares_has_no_tasks() -> None:
    result = TimeInvariance(alpha=0.05, seed=0, shares=(), tests=pl.DataFrame())
    summary = time_invariance_summary(result, deltas=(), batch_rows=10)
    assert summary["inputs"] == {"long_tasks_with_samples": 0}
    assert summary["shares"] == []


@pytest.mark.parametrize("as_list", [False, True])
def test_histogram_matrix_from_array_or_list_column(as_list: bool) -> None:
    rows = [[0.0] * 100, [0.0] * 100]
    rows[0][0] = 1.0
    rows[1][99] = 0.25
    rows[1][3] = 0.75
    dtype = pl.List(pl.Float64) if as_list else pl.Array(pl.Float64, 100)
    h = histogram_matrix(pl.Series("h", rows, dtype=dtype))
    assert h.dtype == np.float32
    assert h.shape == (2, 100)
    assert h[0, 0] == 1.0
    assert h[1, 3] == 0.75
    assert h[1, 99] == 0.25
    assert h.sum() == 2.0


def test_clustering_guards_and_thread_limit() -> None:
    assert too_few_histograms(4, 4) == "only 4 long-task histograms for k=4 clusters"
    assert too_few_histograms(5, 4) is None
    assert kmeans_thread_limit(0) is None
    assert kmeans_thread_limit(3) == 3
    assert clustering_skipped_summary(k=16, n_histograms=4, reason="why") == {
        "parameters": {"k": 16},
        "inputs": {"long_task_histograms": 4},
        "skipped": "why",
    }


def test_clustering_summary_and_tables_from_hand_made_fit() -> None:
    chosen = HistogramClusters(
        k=2,
        seed=5,
        algorithm="KMeans",
        n_tasks=4,
        inertia=1.5,
        centroids=np.array([[1.0, 0.0], [0.0, 1.0]]),
        shares=np.array([0.75, 0.25]),
        labels=np.array([0, 1, 0, 0], dtype=np.int64),
    )
    scan = KScan(
        ks=(2, 3), inertia=(1.5, 0.5), silhouette=(0.6, 0.4), silhouette_sample=4, n_tasks=4
    )
    summary = clustering_summary(
        chosen,
        scan,
        k_range=(2, 3),
        n_init=1,
        minibatch_threshold=100,
        silhouette_sample=50,
        scan_sample=60,
        kmeans_threads=0,
    )
    assert summary["parameters"] == {
        "k": 2,
        "k_range": [2, 3],
        "silhouette_sample": 50,
        "scan_sample": 60,
        "seed": 5,
        "n_init": 1,
        "minibatch_threshold": 100,
        "kmeans_threads": 0,
    }
    assert summary["inputs"] == {"long_task_histograms": 4, "k_scan_tasks": 4}
    assert summary["algorithm"] == "KMeans"
    assert summary["inertia"] == 1.5
    assert summary["largest_cluster_share"] == 0.75
    assert summary["smallest_cluster_share"] == 0.25
    # Janus & Rzadca Figure 4: clusters (c) 17.62% and (a) 1.42%
    assert summary["paper"] == {"largest_cluster_share": 0.1762, "smallest_cluster_share": 0.0142}

    tasks = pl.DataFrame({"job_id": [7, 7, 8, 9], "task_index": [0, 1, 0, 0], "h": [0, 0, 0, 0]})
    tables = clustering_tables(tasks, chosen, scan)
    assert set(tables) == {"centroids", "shares", "labels", "k_scan"}
    assert tables["labels"].columns == ["job_id", "task_index", "cluster"]
    assert tables["labels"].filter(cluster=1).select("job_id", "task_index").row(0) == (7, 1)
    assert tables["shares"]["n_tasks"].to_list() == [3, 1]
    assert tables["k_scan"]["k"].to_list() == [2, 3]
    assert tables["centroids"].height == 4  # 2 clusters × 2 bins


def _row(n: int, rate: float) -> ADRow:
    return ADRow(n, 20, rate, 0.05, 0.1 * n, 0.01, 0.02, 0.03)


def _sums() -> GaussianSums:
    return GaussianSums(
        realizations=200,
        sets_per_size=20,
        pool_size=90,
        seed=3,
        level=0.05,
        rows=(_row(10, 0.8), _row(50, 0.25)),
        sets=pl.DataFrame(),
        skipped_sizes=(500,),
    )


def test_gaussian_sums_summary_rates_by_n_and_table_1() -> None:
    result = _sums()
    summary = gaussian_sums_summary(
        result, sizes=(10, 50, 500), realizations=200, pool_size=100, n_long=120, pool_tasks=90
    )
    assert summary["parameters"] == {
        "seed": 3,
        "sizes": [10, 50, 500],
        "realizations": 200,
        "sets": 20,
        "pool_size": 100,
        "level": 0.05,
    }
    assert summary["inputs"] == {"long_tasks": 120, "pool_tasks": 90}
    assert summary["skipped_sizes"] == [500]
    assert summary["rejection_rate_by_n"] == {"10": 0.8, "50": 0.25}
    # Janus & Rzadca Table 1
    assert summary["paper"]["n"] == [10, 20, 30, 50, 100, 250, 500]
    assert summary["paper"]["rejection_rate"][0] == 0.991
    assert summary["paper"]["rejection_rate"][-1] == 0.087
    assert summary["paper"]["mean_mu"][-1] == 13.69
    assert len(summary["paper"]["mean_mu"]) == len(summary["paper"]["rejection_rate"]) == 7


def test_gaussian_sums_summary_without_rows_is_empty() -> None:
    result = GaussianSums(
        realizations=10,
        sets_per_size=0,
        pool_size=0,
        seed=0,
        level=0.05,
        rows=(),
        sets=pl.DataFrame(),
        skipped_sizes=(10,),
    )
    summary = gaussian_sums_summary(
        result, sizes=(10,), realizations=10, pool_size=5, n_long=0, pool_tasks=0
    )
    assert summary["rejection_rate_by_n"] == {}


def test_finished_execution_times_keeps_finish_events_only() -> None:
    times = pl.LazyFrame(
        {
            "terminal_event_type": [4, 5, 4, 2, 4],
            "execution_time_s": [10.0, 20.0, 30.0, 40.0, 0.0],
        }
    )
    assert finished_execution_times(times).tolist() == [10.0, 30.0, 0.0]


def _fit(name: str) -> GammaFit:
    return GammaFit(
        name=name,
        unit="s",
        n=5,
        n_dropped=1,
        shape=2.0,
        rate=0.5,
        log_likelihood=-3.0,
        ks_distance=0.1,
        shape_ci=(1.5, 2.5),
        rate_ci=(0.25, 0.75),
        n_bootstrap=10,
        seed=7,
    )


def test_gamma_fits_table_splits_the_intervals() -> None:
    table = gamma_fits_table((_fit("a"), _fit("b")))
    assert table.height == 2
    assert "shape_ci" not in table.columns
    row = table.row(1, named=True)
    assert row["name"] == "b"
    assert (row["shape_low"], row["shape_high"]) == (1.5, 2.5)
    assert (row["rate_low"], row["rate_high"]) == (0.25, 0.75)
    assert row["n_dropped"] == 1


def test_gamma_fits_summary_lists_fits_and_skips() -> None:
    result = GoogleGammaFits(
        fits=(_fit("google_task_inst_mean"),),
        skipped=(("google_task_inst_std", "too few"),),
        seed=2,
        n_bootstrap=10,
        n_long_tasks=6,
        n_finished_incarnations=9,
    )
    assert gamma_fits_summary(result) == {
        "parameters": {"seed": 2, "n_bootstrap": 10, "location": 0.0},
        "inputs": {"long_tasks": 6, "finished_incarnations": 9},
        "fits": {"google_task_inst_mean": {"shape": 2.0, "rate": 0.5, "n": 5}},
        "skipped": {"google_task_inst_std": "too few"},
        # no execution-time fit: no value behind the headline
        "headline": {
            "key": "google_task_execution_time_shape",
            "condition": "MLE with location 0 over the execution times of 0 FINISHed incarnations",
        },
    }


def test_google_gamma_fits_skips_a_constant_sample_and_seeds_by_position() -> None:
    rng = np.random.default_rng(1)
    mean = rng.gamma(2.0, 0.05, 200)
    execution = rng.gamma(1.5, 600.0, 150)
    # every task constant: std 0 is not in the Gamma's support, so nothing is left to fit
    result = google_gamma_fits(mean, np.zeros(200), execution, seed=10, n_bootstrap=5)
    assert [f.name for f in result.fits] == ["google_task_inst_mean", "google_task_execution_time"]
    assert dict(result.skipped).keys() == {"google_task_inst_std"}
    assert "at least 2 distinct positive values" in dict(result.skipped)["google_task_inst_std"]
    # the execution-time fit is the third sample: seed + 2 even though the second was skipped
    assert [f.seed for f in result.fits] == [10, 12]
    assert [f.unit for f in result.fits] == ["cores", "s"]
    assert (result.n_long_tasks, result.n_finished_incarnations) == (200, 150)
    # shape 2 / rate 20 and shape 1.5 / rate 1/600 within sampling error of 200 and 150 values
    assert result.fits[0].shape / result.fits[0].rate == pytest.approx(0.1, rel=0.15)
    assert result.fits[1].shape / result.fits[1].rate == pytest.approx(900.0, rel=0.2)


def test_each_summary_names_its_headline_number_and_condition() -> None:
    """The index's headline: the key of the number the page leads with and what it is of,
    from the results (the Δ and N asked for when run, else the first)."""
    ti = TimeInvariance(
        alpha=0.01, seed=4, shares=(_share(6, 9, 0), _share(12, 5, 3)), tests=pl.DataFrame()
    )
    assert time_invariance_summary(ti, deltas=(6, 12), batch_rows=10)["headline"] == {
        "key": "share_rejected_12",
        "condition": "two-sample KS at α = 0.01 on windows of Δ = 12, 5 long tasks tested",
    }
    no_12 = TimeInvariance(alpha=0.05, seed=4, shares=(_share(24, 7, 0),), tests=pl.DataFrame())
    assert time_invariance_summary(no_12, deltas=(24,), batch_rows=10)["headline"]["key"] == (
        "share_rejected_24"
    )
    sums = replace(_sums(), realizations=1200, rows=(_row(50, 0.25), _row(10, 0.8)))
    assert gaussian_sums_summary(
        sums, sizes=(10, 50), realizations=1200, pool_size=100, n_long=120, pool_tasks=90
    )["headline"] == {
        "key": "rejection_rate_10",
        "condition": "Anderson–Darling at level 0.05, 20 sets of 10 tasks, 1,200 realizations each",
    }
    boxes = InstAvgConvergence(
        ks=(1, 5, 50),
        boxes=(_box(-0.25, 0.5, 0.75), _box(-0.125, 0.0, 0.125), replace(_box(0, 0, 0), n=0)),
        n_tasks=7,
        n_zero_avg=0,
        seed=9,
    )
    # k = 50 has no task: the page leads with the largest k that has some (5, its 4 tasks)
    assert inst_vs_avg_summary(boxes, batch_rows=5)["headline"] == {
        "key": "median_last",
        "condition": "k = 5 inst samples per task, 4 long tasks",
    }
    fits = GoogleGammaFits(
        fits=(
            GammaFit(
                "google_task_inst_mean",
                "cores",
                300,
                0,
                2.0,
                10.0,
                0.0,
                0.05,
                (1, 3),
                (9, 11),
                10,
                0,
            ),
            GammaFit(
                "google_task_execution_time",
                "s",
                1234,
                66,
                0.5,
                0.01,
                0.0,
                0.05,
                (0, 1),
                (0, 1),
                10,
                1,
            ),
        ),
        skipped=(),
        seed=0,
        n_bootstrap=10,
        n_long_tasks=300,
        n_finished_incarnations=1300,
    )
    assert gamma_fits_summary(fits)["headline"] == {
        "key": "google_task_execution_time_shape",
        # the fit's n (positive values), not the incarnations counted
        "condition": "MLE with location 0 over the execution times of 1,234 FINISHed incarnations",
    }


def test_table_1_stores_each_rejection_rate_with_its_interval_over_the_sets() -> None:
    """16 of 20 sets rejected: the exact interval's beta quantiles; none of 20: the one-sided
    bound 1 − 0.05^(1/20)."""
    table = replace(_sums(), rows=(_row(10, 0.8), _row(50, 0.0))).table()
    first, second = table.iter_rows(named=True)
    assert (first["rejections"], first["n_sets"]) == (16, 20)
    assert first["rejection_rate_low"] == pytest.approx(stats.beta.ppf(0.025, 16, 5))
    assert first["rejection_rate_high"] == pytest.approx(stats.beta.ppf(0.975, 17, 4))
    assert first["rejection_rate_method"] == "Clopper–Pearson"
    assert (second["rejections"], second["rejection_rate_low"]) == (0, 0.0)
    assert second["rejection_rate_high"] == pytest.approx(1 - 0.05 ** (1 / 20))
