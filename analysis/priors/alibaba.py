"""Gamma priors from Alibaba cluster-trace-v2018, parallel to google-2011's.

The existing model's Gamma priors (docs/methods.md §2.7, :mod:`analysis.statistics.gamma_fits`)
that this trace supports: the execution time of tasks that ended normally (``Terminated``; the
parallel of google-2011's FINISHed incarnations) from ``fct_alibaba_task_times``, and the per-task
mean CPU (cores) from ``fct_alibaba_task_usage_stats``. Alibaba gives per-instance averages
(``cpu_avg``) and peaks, not 5-minute samples, so the CPU prior is of the tasks' mean *average*
usage (``avg_mean``), not of google-2011's long tasks' mean *inst* usage; there is no std prior
(one figure per instance, no series), and no long-task filter (no window count). Every record
names the trace ``alibaba-2018``.

``tracelab priors --trace alibaba-2018`` (:mod:`flows.priors`) writes them with :func:`alibaba_summary`
to ``DATA/results/alibaba-2018/priors/``, the folder azure-2017's priors use, so ``tracelab
export`` carries them beside the other traces' records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.common.fitted_params import FittedParameter
from tracelab.analysis.common.shortfall import SHORTFALLS, Shortfall
from tracelab.analysis.common.stage_outputs import HEADLINE
from tracelab.analysis.statistics.gamma_fits import (
    DEFAULT_BOOTSTRAP,
    execution_headline,
    fit_gamma_samples,
)
from tracelab.analysis.traces import alibaba2018

TRACE = alibaba2018.ID
#: the results folder and record stage of every trace's priors (azure-2017's too)
STAGE = "priors"
#: the status of a task that ended normally (the parallel of google-2011's FINISH)
TERMINATED = "Terminated"


@dataclass(frozen=True)
class AlibabaFits:
    """The records fitted and the samples that could not be fitted, with why."""

    records: tuple[FittedParameter, ...]
    skipped: tuple[tuple[str, str], ...]


def terminated_execution_times(task_times: pl.DataFrame) -> np.ndarray:
    """``execution_time_s`` (s) of the Terminated tasks of ``fct_alibaba_task_times``."""
    times = task_times.filter(pl.col("terminal_state") == TERMINATED)["execution_time_s"]
    return np.asarray(times.drop_nulls().to_numpy(), dtype=np.float64)


def alibaba_fits(
    task_times: pl.DataFrame,
    task_usage: pl.DataFrame,
    *,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
) -> AlibabaFits:
    """Gamma fits (MLE, location 0, bootstrap CIs) of the Terminated tasks' execution times and
    the tasks' mean average CPU (cores); fit i bootstraps with seed ``seed + i``."""
    samples = (
        ("alibaba_task_execution_time", terminated_execution_times(task_times), "s"),
        (
            "alibaba_task_avg_mean",
            np.asarray(task_usage["avg_mean"].drop_nulls().to_numpy(), dtype=np.float64),
            "cores",
        ),
    )
    fits, skipped = fit_gamma_samples(samples, seed=seed, n_bootstrap=n_bootstrap)
    return AlibabaFits(tuple(f.to_parameter(TRACE, STAGE) for f in fits), skipped)


def alibaba_summary(
    fits: AlibabaFits, task_times: pl.DataFrame, task_usage: pl.DataFrame
) -> dict[str, Any]:
    """``summary.json`` of the stage: which rows each sample holds and what could not be fitted.

    The options it ran with are added as ``parameters`` by the stage (``record_parameters``);
    the entries here are what it derived from them and from the inputs.
    """
    statuses = task_times["terminal_state"].value_counts(sort=True)
    return {
        "trace": TRACE,
        "stage": STAGE,
        "parameters": {"location": 0.0, "terminal_state": TERMINATED},
        "inputs": {
            "fct_alibaba_task_times": task_times.height,
            "fct_alibaba_task_usage_stats": task_usage.height,
            "terminal_states": {
                str(r["terminal_state"] or "not ended"): int(r["count"])
                for r in statuses.iter_rows(named=True)
            },
        },
        SHORTFALLS: [s.text for s in alibaba_shortfalls(fits, task_times, task_usage)],
        "fits": {r.name: r.to_dict() for r in fits.records},
        HEADLINE: execution_headline(
            "alibaba_task_execution_time",
            next((r.n for r in fits.records if r.name == "alibaba_task_execution_time"), 0),
            "Terminated tasks",
        ),
    }


def alibaba_shortfalls(
    fits: AlibabaFits, task_times: pl.DataFrame, task_usage: pl.DataFrame
) -> tuple[Shortfall, ...]:
    """One shortfall per sample that could not be fitted, naming the rows behind it."""
    found = {
        "alibaba_task_execution_time": f"{terminated_execution_times(task_times).size:,} "
        f"Terminated tasks with an execution time among {task_times.height:,} tasks",
        "alibaba_task_avg_mean": f"{task_usage.height:,} tasks in fct_alibaba_task_usage_stats "
        "(built from batch_instance)",
    }
    return tuple(
        Shortfall(f"fit {name}", "2 distinct positive values", found.get(name, why))
        for name, why in fits.skipped
    )
