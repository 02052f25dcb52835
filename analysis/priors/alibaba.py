"""Gamma priors from Alibaba cluster-trace-v2018 (issue 27, step 4), parallel to google-2011's.

The existing model's Gamma priors (docs/methods.md §2.7, :mod:`analysis.statistics.gamma_fits`)
that this trace supports: the execution time of tasks that ended normally (``Terminated``; the
parallel of google-2011's FINISHed incarnations) from ``fct_alibaba_task_times``, and the per-task
mean CPU (cores) from ``fct_alibaba_task_usage_stats``. Alibaba gives per-instance averages
(``cpu_avg``) and peaks, not 5-minute samples, so the CPU prior is of the tasks' mean *average*
usage (``avg_mean``), not of google-2011's long tasks' mean *inst* usage; there is no std prior
(one figure per instance, no series), and no long-task filter (no window count). Every record
names the trace ``alibaba-2018``.

Not yet a stage: nothing writes these records to ``DATA/results/alibaba-2018/<stage>/params.json``,
so ``tracelab export`` does not carry them (docs/derive.md says what remains).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelab.analysis.export.params import FittedParameter
from tracelab.analysis.statistics.gamma_fits import DEFAULT_BOOTSTRAP, gamma_fit

TRACE = "alibaba-2018"
STAGE = "alibaba_fits"
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
    records: list[FittedParameter] = []
    skipped: list[tuple[str, str]] = []
    for i, (name, sample, unit) in enumerate(samples):
        try:
            fit = gamma_fit(name, sample, unit=unit, seed=seed + i, n_bootstrap=n_bootstrap)
        except ValueError as exc:
            skipped.append((name, str(exc)))
            continue
        records.append(fit.to_parameter(TRACE, STAGE))
    return AlibabaFits(tuple(records), tuple(skipped))
