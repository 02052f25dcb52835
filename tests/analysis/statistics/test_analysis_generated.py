"""generate → ingest → derive → analyze on a tiny generated trace, checked against TRUTH.

Every expectation comes from the generator's truth (TRUTH.json, TRUTH_tasks.parquet), not from
the analysis code's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import adjusted_rand_score

from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.statistics.time_invariance import ks_exact_pvalues
from tracelab.flows.cli import main

TRACE = "google-2011"
FAMILIES = 5  # mostly_zero, exponential, uniform, bimodal, gamma (idle tasks are dropped)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> Path:
    data = tmp_path_factory.mktemp("generated")
    raw = data / "raw" / TRACE
    steps = [
        [
            "generate",
            "--trace",
            TRACE,
            "--out",
            str(raw),
            "--seed",
            "1",
            "--scale",
            "tiny",
            "--quiet",
        ],
        ["ingest", "--trace", TRACE],
        ["derive", "--trace", TRACE],
        [
            "statistics",
            "--trace",
            TRACE,
            "--seed",
            "2",
            "--k",
            str(FAMILIES),
            "--k-range",
            "4,5,6",
            "--ad-sizes",
            "10,100",
            "--ad-pool",
            "400",
            "--bootstrap",
            "50",
        ],
    ]
    for argv in steps:
        assert main([argv[0], "--data", str(data), *argv[1:]]) == 0, argv[0]
    return data


def _truth(data: Path) -> tuple[dict, pl.DataFrame]:
    raw = data / "raw" / TRACE
    return json.loads((raw / "TRUTH.json").read_text()), pl.read_parquet(
        raw / "TRUTH_tasks.parquet"
    )


def _results(data: Path) -> Path:
    return data / "results" / TRACE


def test_regression_matches_truth(analyzed: Path) -> None:
    truth, _ = _truth(analyzed)
    summary = read_summary(_results(analyzed) / "variability")
    for measure in ("inst", "avg"):
        fit = summary["regressions"][measure]
        true = truth["regression"][measure]
        # same task population (TRUTH: long, non-failed, not all-zero); the estimated stds and
        # means scatter around the true ones, which the slope's standard error already carries
        assert fit["n"] == true["n"]
        assert fit["slope"] == pytest.approx(true["slope"], abs=4 * fit["slope_stderr"])
        assert fit["intercept"] == pytest.approx(true["intercept"], abs=4 * fit["intercept_stderr"])
    # the generator's avg is a (1-a)/a blend with a in [0.5, 0.8]: std(avg) = a std(inst)
    assert summary["regressions"]["inst"]["slope"] > summary["regressions"]["avg"]["slope"]
    assert summary["share_inst_std_above_avg_std"] > 0.9


def test_clusters_recover_families(analyzed: Path) -> None:
    _, tasks = _truth(analyzed)
    labels = pl.read_parquet(_results(analyzed) / "clustering" / "labels.parquet").join(
        tasks.select("job_id", "task_index", "family"), on=["job_id", "task_index"]
    )
    assert labels["family"].n_unique() == FAMILIES
    # the generator's families have near-disjoint histogram supports; a k-means that merges two
    # of five families scores ~0.78, so 0.8 separates a correct clustering from a failed one
    assert adjusted_rand_score(labels["family"], labels["cluster"]) >= 0.8


def _rejection_bounds(n_windows: int, shift: int | None, delta: int) -> tuple[float, float]:
    """P(KS rejects) for one task, bounded from the generator's shift (disjoint supports).

    Block j (records jΔ..jΔ+Δ−1) holds m_j post-shift records. Two blocks whose m differ by at
    least the critical count c (smallest D·Δ with p < 5%) reject surely (D ≥ |m_i − m_j|/Δ on
    disjoint supports); two blocks on one side reject at most with the exact test's size α0
    (ties only lower it); anything else lies in [0, 1].
    """
    p = np.asarray(ks_exact_pvalues(delta))
    alpha0 = float(p[p < 0.05].max())
    crit = int(np.argmax(p < 0.05))
    blocks = n_windows // delta
    start = np.arange(blocks) * delta
    after = delta - np.clip((shift if shift is not None else n_windows) - start, 0, delta)
    lo = hi = 0.0
    for i in range(blocks):
        for j in range(blocks):
            if i == j:
                continue
            if abs(after[i] - after[j]) >= crit:
                lo, hi = lo + 1, hi + 1
            elif after[i] == after[j] and after[i] in (0, delta):
                hi += alpha0
            else:
                hi += 1
    pairs = blocks * (blocks - 1)
    return lo / pairs, hi / pairs


def test_ks_share_matches_generated_shifts(analyzed: Path) -> None:
    _, tasks = _truth(analyzed)
    tests = pl.read_parquet(_results(analyzed) / "time_invariance" / "tests.parquet").join(
        tasks.select("job_id", "task_index", "n_windows", "shifts", "shift_window"),
        on=["job_id", "task_index"],
    )
    for delta in (12, 24):
        t = tests.filter(delta=delta)
        bounds = np.array(
            [
                _rejection_bounds(n, s, delta)
                for n, s in zip(t["n_windows"], t["shift_window"], strict=True)
            ]
        )
        shifting = t["shifts"].to_numpy()
        for subset in (shifting, ~shifting):
            observed = t["rejected"].to_numpy()[subset].mean()
            lo, hi = bounds[subset, 0].mean(), bounds[subset, 1].mean()
            # Poisson-binomial standard error at the upper bound; 4 of them each side
            se = np.sqrt(np.sum(bounds[subset, 1] * (1 - bounds[subset, 1]))) / subset.sum()
            assert lo - 4 * se <= observed <= hi + 4 * se, (delta, observed, lo, hi, se)
        # tasks that never change are rejected near (at most) the 5% level
        assert t["rejected"].to_numpy()[~shifting].mean() < 0.05 + 0.03


def test_sums_become_gaussian_and_means_converge(analyzed: Path) -> None:
    table = pl.read_parquet(_results(analyzed) / "gaussian_sums" / "table.parquet")
    rate = dict(zip(table["n_tasks_per_set"], table["rejection_rate"], strict=True))
    se = table["rejection_stderr"].max()
    assert rate[10] > rate[100] + 4 * se
    conv = pl.read_parquet(_results(analyzed) / "inst_vs_avg" / "convergence.parquet")
    iqr = (conv["q3"] - conv["q1"]).to_numpy()[conv["n_tasks"].to_numpy() > 0]
    # mean(avg) = mean(inst) by construction: the spread shrinks with k, the median tends to 0
    assert np.all(np.diff(iqr) < 0)
    assert abs(conv.filter(k=100)["median"].item()) < 0.02


def test_gamma_fits_exported(analyzed: Path) -> None:
    from tracelab.analysis.common.fitted_params import read_stage_params

    stats = pl.read_parquet(analyzed / "derived" / TRACE / "fct_task_usage_stats.parquet")
    records = {r.name: r for r in read_stage_params(_results(analyzed) / "gamma_fits")}
    assert records["google_task_inst_mean"].n == stats.filter("is_long").height
    for record in records.values():
        assert record.parameters["shape"].value > 0
        assert record.ci["rate"].low < record.parameters["rate"].value < record.ci["rate"].high
