"""Calibration table: does a run's data look like the real traces? (issue 13)

One row per statistic: ``statistic | target | source | measured | tolerance | ok``. Every target
is a published number (seed 000 = Reiss et al. / the Google usage paper, seed 002 = the Google
2011 trace analysis, seed 004 = the Azure deployment model) or a figure measured on the real
excerpts in ``../shared/data/real`` (task_events parts 2 and 3 of clusterdata-2011-2); none is the
generator's own output. The measured value comes only from the run's own derived tables and
analysis results, so the same table describes a run on real files.

:func:`calibration_rows` is pure: it takes the loaded tables (:class:`CalibrationInputs`) and
returns the rows; :func:`load_calibration_inputs` reads them from a data directory and
:func:`write_calibration` stores the table as ``results/google-2011/calibration/table.parquet``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.stage_outputs import read_summary, write_stage_outputs

GOOGLE = "google-2011"
AZURE = "azure-2017"
#: seconds: seed 002 Fig. 8 counts executions shorter than 5 minutes
FIVE_MINUTES_S = 300.0
#: cores: seed 000 §3.5, "the great majority" of histograms are 0 beyond 0.30 core
HIST_LIMIT_BIN = 30
#: a k-means centroid is "near zero" when at least half of its mass is below 0.02 core (bins 0, 1):
#: seed 000 Fig. 4 shows three clusters piled on the first bins
NEAR_ZERO_BINS = 2
NEAR_ZERO_MASS = 0.5
#: seed 000 Table 1: share of sets the A-D test rejects at 5%, per tasks per set N
PAPER_AD = {10: 0.991, 20: 0.965, 30: 0.923, 50: 0.784, 100: 0.493, 250: 0.183, 500: 0.087}


@dataclass(frozen=True)
class CalibrationRow:
    """One statistic: its target, where the target comes from, this run's value and the verdict.

    ``low``/``high`` bound the accepted values (inclusive); ``ok`` is None when the run lacks the
    input (the row is then reported, not judged).
    """

    statistic: str
    target: str
    source: str
    measured: float | None
    tolerance: str
    low: float
    high: float

    @property
    def ok(self) -> bool | None:
        if self.measured is None or not math.isfinite(self.measured):
            return None
        return self.low <= self.measured <= self.high


@dataclass(frozen=True)
class CalibrationInputs:
    """The run's tables the calibration reads (any may be None when the stage did not run)."""

    usage_stats: pl.DataFrame | None = None
    histograms: pl.DataFrame | None = None
    task_times: pl.DataFrame | None = None
    usage_by_priority: pl.DataFrame | None = None
    centroids: pl.DataFrame | None = None
    cluster_shares: pl.DataFrame | None = None
    ks_shares: pl.DataFrame | None = None
    ad_table: pl.DataFrame | None = None
    variability: Mapping[str, Any] | None = None
    gaussian_sums: Mapping[str, Any] | None = None
    azure_population: pl.DataFrame | None = None


Measure = Callable[[CalibrationInputs], float | None]


@dataclass(frozen=True)
class _Spec:
    statistic: str
    target: str
    source: str
    tolerance: str
    low: float
    high: float
    measure: Measure


def _long_inst_mean(x: CalibrationInputs) -> float | None:
    if x.usage_stats is None:
        return None
    return _float(x.usage_stats.filter("is_long")["inst_mean"].mean())


def _share_above_030(x: CalibrationInputs) -> float | None:
    if x.histograms is None or x.histograms.height == 0:
        return None
    h = np.asarray(x.histograms["h"].list.to_array(100).to_numpy(), dtype=np.float64)
    return float((h[:, HIST_LIMIT_BIN:].sum(axis=1) > 0).mean())


def _near_zero_share(x: CalibrationInputs) -> float | None:
    if x.centroids is None or x.cluster_shares is None:
        return None
    low = (
        x.centroids.filter(pl.col("bin") < NEAR_ZERO_BINS)
        .group_by("cluster")
        .agg(pl.col("share_of_samples").sum().alias("low"))
    )
    near = low.filter(pl.col("low") >= NEAR_ZERO_MASS)["cluster"]
    shares = x.cluster_shares.filter(pl.col("cluster").is_in(near.implode()))
    return _float(shares["share_of_tasks"].sum())


def _cluster_share(pick: str) -> Measure:
    def measure(x: CalibrationInputs) -> float | None:
        if x.cluster_shares is None:
            return None
        col = x.cluster_shares["share_of_tasks"]
        return _float(col.max() if pick == "max" else col.min())

    return measure


def _regression(measure_name: str, key: str) -> Measure:
    def measure(x: CalibrationInputs) -> float | None:
        if x.variability is None:
            return None
        return _float(x.variability["regressions"][measure_name][key])

    return measure


def _ks_share(x: CalibrationInputs) -> float | None:
    if x.ks_shares is None:
        return None
    row = x.ks_shares.filter(pl.col("delta") == 12)
    return _float(row["share_rejected"].item()) if row.height else None


def _p999_error_small_n(x: CalibrationInputs) -> float | None:
    if x.ad_table is None:
        return None
    row = x.ad_table.filter(pl.col("n_tasks_per_set") == x.ad_table["n_tasks_per_set"].min())
    return _float(row["median_rel_error_p999"].item()) if row.height else None


def _ad_rate(n: int) -> Measure:
    def measure(x: CalibrationInputs) -> float | None:
        if x.ad_table is None:
            return None
        row = x.ad_table.filter(pl.col("n_tasks_per_set") == n)
        return _float(row["rejection_rate"].item()) if row.height else None

    return measure


def _submissions_ratio(x: CalibrationInputs) -> float | None:
    # one fct_task_times row per SUBMIT seen (incarnation >= 1); new submissions = tasks
    if x.task_times is None or x.task_times.height == 0:
        return None
    tasks = x.task_times.select("job_id", "task_index").unique().height
    return x.task_times.height / tasks


def _same_us_pairs(x: CalibrationInputs) -> float | None:
    # SUBMIT and SCHEDULE at one microsecond inside the window (time 0 = "before the window")
    if x.task_times is None:
        return None
    t = x.task_times.filter((pl.col("submit_time") > 0) & pl.col("schedule_time").is_not_null())
    if t.height == 0:
        return None
    return float((t["schedule_time"] == t["submit_time"]).sum())


def _scheduling_median(x: CalibrationInputs) -> float | None:
    if x.task_times is None:
        return None
    return _float(x.task_times["scheduling_time_s"].drop_nulls().median())


def _short_executions(x: CalibrationInputs) -> float | None:
    if x.task_times is None:
        return None
    ex = x.task_times["execution_time_s"].drop_nulls()
    return float((ex < FIVE_MINUTES_S).mean()) if ex.len() else None  # type: ignore[arg-type]


def _resubmitted_after(event_type: int) -> Measure:
    def measure(x: CalibrationInputs) -> float | None:
        if x.task_times is None:
            return None
        t = x.task_times.sort("job_id", "task_index", "incarnation").with_columns(
            resubmitted=pl.col("incarnation").shift(-1).over("job_id", "task_index").is_not_null()
        )
        ended = t.filter(pl.col("terminal_event_type") == event_type)
        return float(ended["resubmitted"].mean()) if ended.height else None  # type: ignore[arg-type]

    return measure


def _production_task_share(x: CalibrationInputs) -> float | None:
    if x.task_times is None:
        return None
    per_task = x.task_times.group_by("job_id", "task_index").agg(pl.col("is_production").last())
    return _float(per_task["is_production"].mean())


def _production_usage_share(column: str) -> Measure:
    def measure(x: CalibrationInputs) -> float | None:
        if x.usage_by_priority is None:
            return None
        by = x.usage_by_priority.group_by("priority_class").agg(pl.col(column).sum())
        total = by[column].sum()
        prod = by.filter(pl.col("priority_class") == "production")[column].sum()
        return float(prod / total) if total else None

    return measure


def _azure_shutdown_share(x: CalibrationInputs) -> float | None:
    p = x.azure_population
    if p is None or p.height == 0 or not p["deployments_died_in_window"].item():
        return None
    return float(p["deployments_shut_down"].item() / p["deployments_died_in_window"].item())


def _azure_cores_per_deployment(x: CalibrationInputs) -> float | None:
    p = x.azure_population
    if p is None or p.height == 0 or not p["deployments_in_window"].item():
        return None
    return float(p["cores_in_window"].item() / p["deployments_in_window"].item())


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
