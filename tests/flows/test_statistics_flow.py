"""`tracelab statistics` end to end on a hand-built lake + derived tables (real Prefect, DuckDB, Parquet)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tracelab.analysis.common.fitted_params import read_stage_params
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.statistics.options import StatisticsOptions
from tracelab.flows.cli import main
from tracelab.flows.settings import Settings
from tracelab.flows.statistics import STAGES, statistics_results

TRACE = "google-2011"
WINDOW_US = 300_000_000


def _write_inputs(data: Path, n_tasks: int = 120, seed: int = 0) -> None:
    """A lake of n_tasks long tasks (inst Gamma, avg its smoothed copy) and the derived tables."""
    rng = np.random.default_rng(seed)
    lake = data / "lake" / TRACE / "task_usage"
    derived = data / "derived" / TRACE
    lake.mkdir(parents=True)
    derived.mkdir(parents=True)
    frames = []
    for i in range(n_tasks):
        t = int(rng.integers(24, 160))
        mean = rng.uniform(0.02, 0.3)
        inst = rng.gamma(2.0, mean / 2.0, t)
        avg = 0.5 * mean + 0.5 * rng.gamma(2.0, mean / 2.0, t)
        frames.append(
            pl.DataFrame(
                {
                    "start_time": 600_000_000 + WINDOW_US * rng.permutation(t).astype(np.int64),
                    "job_id": np.full(t, 1000 + i // 10, np.int64),
                    "task_index": np.full(t, i % 10, np.int64),
                    "cpu_rate": avg,
                    "sampled_cpu_usage": inst,
                }
            )
        )
    usage = pl.concat(frames)
    usage.head(usage.height // 2).write_parquet(lake / "part-00000.parquet")
    usage.tail(usage.height - usage.height // 2).write_parquet(lake / "part-00001.parquet")
    stats = (
        usage.group_by("job_id", "task_index")
        .agg(
            n_windows=pl.len(),
            inst_mean=pl.col("sampled_cpu_usage").mean(),
            inst_std=pl.col("sampled_cpu_usage").std(ddof=0),
            avg_mean=pl.col("cpu_rate").mean(),
            avg_std=pl.col("cpu_rate").std(ddof=0),
        )
        .with_columns(is_long=pl.col("n_windows") >= 24)
        .sort("job_id", "task_index")
    )
    stats.write_parquet(derived / "fct_task_usage_stats.parquet")
    hist = (
        usage.group_by("job_id", "task_index")
        .agg(pl.col("sampled_cpu_usage"))
        .sort("job_id", "task_index")
    )
    h = [
        (
            np.bincount(np.minimum((np.asarray(x) * 100).astype(int), 99), minlength=100) / len(x)
        ).tolist()
        for x in hist["sampled_cpu_usage"]
    ]
    hist.select("job_id", "task_index").with_columns(
        n_windows=pl.Series([len(x) for x in hist["sampled_cpu_usage"]]),
        h=pl.Series(h, dtype=pl.Array(pl.Float64, 100)),
    ).write_parquet(derived / "fct_task_usage_histograms.parquet")
    pl.DataFrame(
        {
            "job_id": np.arange(300, dtype=np.int64),
            "task_index": np.zeros(300, np.int64),
            "terminal_event_type": np.where(np.arange(300) % 3 == 0, 5, 4),
            "execution_time_s": rng.gamma(1.5, 600.0, 300),
        }
    ).write_parquet(derived / "fct_task_times.parquet")


def test_analyze_writes_every_stage(tmp_path: Path) -> None:
    _write_inputs(tmp_path)
    settings = Settings(data_dir=tmp_path)
    kwargs = {
        "seed": 3,
        "k": 4,
        "k_range": (2, 4, 6),
        "ad_sizes": (10, 50, 500),
        "ad_realizations": 200,
        "ad_sets": 20,
        "ad_pool": 100,
        "bootstrap": 20,
        "batch_rows": 1000,
    }
    summaries = statistics_results(settings, TRACE, StatisticsOptions(**kwargs))
    assert tuple(summaries) == STAGES
    results = tmp_path / "results" / TRACE
    for stage in STAGES:
        assert read_summary(results / stage)["seconds"] >= 0
    conv = pl.read_parquet(results / "inst_vs_avg" / "convergence.parquet")
    assert conv.filter(k=1)["n_tasks"].item() == 120
    assert conv.filter(k=200)["n_tasks"].item() == 0
    assert read_summary(results / "variability")["inputs"]["long_tasks"] == 120
    shares = pl.read_parquet(results / "time_invariance" / "shares.parquet")
    # Δ = 12 needs 24 records: every task qualifies
    assert shares.filter(delta=12)["n_tested"].item() == 120
    assert pl.read_parquet(results / "clustering" / "labels.parquet").height == 120
    ad = read_summary(results / "gaussian_sums")
    assert ad["skipped_sizes"] == [500]
    assert ad["inputs"]["pool_tasks"] == 100
    records = {
        r.name: r
        for stage in ("clustering", "gaussian_sums", "gamma_fits")
        for r in read_stage_params(results / stage)
    }
    assert records["google_task_execution_time"].n == 200  # FINISH rows only
    assert records["task_inst_histogram_clusters"].distribution == "kmeans-centroids"
    assert records["sum_inst_normality_table"].distribution == "anderson-darling-table"
    # the same seed reproduces every number
    first = pl.read_parquet(results / "time_invariance" / "tests.parquet")
    statistics_results(
        settings, TRACE, StatisticsOptions(**{**kwargs, "stages": ("time_invariance",)})
    )
    assert pl.read_parquet(results / "time_invariance" / "tests.parquet").equals(first)
    # more clusters than tasks: the stage says why it did nothing instead of failing the run
    statistics_results(
        settings, TRACE, StatisticsOptions(**{**kwargs, "stages": ("clustering",), "k": 500})
    )
    assert "only 120 long-task histograms" in read_summary(results / "clustering")["skipped"]
    assert not list((results / "clustering").glob("*.parquet"))
    # no centroids this run: nothing for the params export to keep from an earlier run
    assert not (results / "clustering" / "params.json").exists()
    short = read_summary(results / "clustering")["not_enough_data"]
    assert short["needs"].startswith("≥ 501 long-task usage histograms for k = 500")
    assert short["found"].startswith("120; long tasks: 120 (task_usage: ")


def test_cli_says_to_run_derive_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["statistics", "--data", str(tmp_path), "--trace", TRACE]) == 1
    err = capsys.readouterr().err
    assert "fct_task_usage_stats" in err
    assert "run `tracelab derive --trace google-2011` first" in err


def test_cli_rejects_unknown_stage_and_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["statistics", "--data", str(tmp_path), "--stages", "nope"]) == 1
    assert "--stages nope: must be one of inst_vs_avg" in capsys.readouterr().err
    assert main(["statistics", "--data", str(tmp_path), "--trace", "azure-2017"]) == 1
    assert "tracelab priors" in capsys.readouterr().err
