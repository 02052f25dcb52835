"""What each statistics stage needs of the data, and the shortfall when it is not there.

Most of Janus & Rzadca's statistics (docs/methods.md §2) are over long tasks (T_i ≥ 24 usage
windows), which a few parts of the trace, or a single 5-minute usage window, may not hold at all.
A stage below its minimum does not run (its numbers would be NaN over empty plots); it records
what it needed and found.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from tracelab.analysis.common.datapaths import derived_table
from tracelab.analysis.common.shortfall import Shortfall
from tracelab.analysis.lake.availability import (
    GOOGLE,
    LONG_TASK,
    lake_dir,
    long_task_shortfall,
    long_tasks_found,
    table_found,
)

#: long tasks a stage needs at the least: a least-squares line with standard errors needs 3
#: points; a per-task statistic needs one task
MIN_LONG_TASKS = {"inst_vs_avg": 1, "variability": 3, "time_invariance": 1}
#: what each Gamma fit of ``gamma_fits`` needs two distinct positive values of
_GAMMA_NEEDS = {
    "google_task_inst_mean": f"≥ 2 long tasks ({LONG_TASK} each) with distinct positive inst means",
    "google_task_inst_std": f"≥ 2 long tasks ({LONG_TASK} each) with distinct positive inst stds",
    "google_task_execution_time": "≥ 2 finished tasks with distinct positive execution times",
}


def analysis_shortfall(
    stage: str, data_dir: Path, *, ad_sizes: Sequence[int] = (), k: int = 0
) -> Shortfall | None:
    """The shortfall that keeps ``stage`` from running on ``data_dir``, or None."""
    if stage in MIN_LONG_TASKS:
        return long_task_shortfall(stage, data_dir, MIN_LONG_TASKS[stage])
    if stage == "gaussian_sums":
        # a set of N tasks is drawn from distinct long tasks: the smallest N must fit
        return long_task_shortfall(stage, data_dir, min(ad_sizes, default=1))
    if stage == "clustering":
        return clustering_shortfall(data_dir, k)
    return None


def clustering_shortfall(data_dir: Path, k: int) -> Shortfall | None:
    """k-means with ``k`` clusters needs more than ``k`` long-task histograms."""
    path = derived_table("fct_task_usage_histograms").path(data_dir, GOOGLE)
    n = pl.scan_parquet(path).select(pl.len()).collect().item() if path.is_file() else 0
    if n > k:
        return None
    return Shortfall(
        "clustering",
        f"≥ {k + 1} long-task usage histograms for k = {k} clusters ({LONG_TASK} each)",
        f"{n:,}; long tasks: {long_tasks_found(data_dir)}",
    )


def gamma_fit_shortfalls(
    data_dir: Path, skipped: Sequence[tuple[str, str]], *, n_finished: int
) -> tuple[Shortfall, ...]:
    """One shortfall per Gamma fit the stage could not make, naming the data behind it."""
    out = []
    for name, reason in skipped:
        if name == "google_task_execution_time":
            events = table_found(lake_dir(data_dir, GOOGLE), "task_events")
            found = f"{n_finished:,} finished incarnations ({events})"
        else:
            found = long_tasks_found(data_dir)
        out.append(Shortfall(f"gamma_fits {name}", _GAMMA_NEEDS.get(name, reason), found))
    return tuple(out)


def gamma_fits_shortfall(parts: Sequence[Shortfall]) -> Shortfall:
    """The stage's shortfall when it could fit none of its samples (``parts``: one per fit)."""
    return Shortfall(
        "gamma_fits",
        "2 distinct positive values in one of its samples: the inst means or stds of long tasks "
        f"({LONG_TASK} each), or the execution times of finished tasks",
        "; ".join(dict.fromkeys(p.found for p in parts)),
    )
