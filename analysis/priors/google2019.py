"""Gamma priors from Google's v3 trace of 2019, parallel to google-2011's.

The existing model's priors that this trace supports are the Gamma fits of docs/methods.md §2.7
(:mod:`analysis.statistics.gamma_fits`, the same fitter): v3 has google-2011's quantities under
other names, so all three are fitted, as google-2011's ``gamma_fits`` fits them:

* the execution time (SCHEDULE to the end, s) of the incarnations that ended with FINISH (v3 event
  type 6; google-2011's 4) in ``fct_task_times``;
* the per-instance mean and population std of inst CPU usage (``random_sample_usage.cpus``, one
  sampled second per 5-minute window, as 2011's sampled CPU usage) of the long instances
  (``is_long``) in ``fct_task_usage_stats``, which keeps, as 2011's table does, only the
  instances that never failed, were evicted, killed or lost.

Usage is in v3's NCU (normalized compute units, the proto's unit), not google-2011's cores
normalised to the largest machine, so the CPU records' rate is per NCU. The Azure deployment model
(§2.6) is not fitted: it is defined on deployments of VMs with whole cores (vmtable), and v3 has
neither (a collection is a job whose instances arrive with it; requests are fractions of an NCU).

Every record names the trace ``google-2019``; ``tracelab priors --trace google-2019`` writes them to
``DATA/results/google-2019/priors/``, beside alibaba-2018's and azure-2017's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracelab.analysis.common.fitted_params import FittedParameter
from tracelab.analysis.common.shortfall import SHORTFALLS, Shortfall
from tracelab.analysis.common.stage_outputs import HEADLINE
from tracelab.analysis.lake.availability import lake_dir, table_found, table_rows
from tracelab.analysis.priors.alibaba import STAGE as STAGE  # every trace's priors folder
from tracelab.analysis.statistics.gamma_fits import (
    DEFAULT_BOOTSTRAP,
    execution_headline,
    finished_execution_times,
    fit_gamma_samples,
)
from tracelab.analysis.statistics.variability import long_task_stats
from tracelab.analysis.traces import google2019

TRACE = google2019.ID
#: v3's FINISH event type (clusterdata_trace_format_v3.proto; google-2011's FINISH is 4)
FINISH = 6
#: the unit of v3's CPU usage (the proto: "Normalized GCUs (NCUs)")
CPU_UNIT = "NCU"
#: v3 marks times before and after the trace's window with 0 and 2^63 - 1 (not times)
_AFTER_WINDOW = 2**63 - 1
INSTANCE_TIMES = "fct_task_times"
USAGE_STATS = "fct_task_usage_stats"
EXECUTION = "g2019_instance_execution_time"
INST_MEAN = "g2019_instance_inst_mean"
INST_STD = "g2019_instance_inst_std"
#: the lake tables each prior is computed from (what a shortfall names)
LAKE_TABLES: dict[str, tuple[str, ...]] = {
    EXECUTION: ("instance_events",),
    INST_MEAN: ("instance_usage", "instance_events"),
    INST_STD: ("instance_usage", "instance_events"),
}


@dataclass(frozen=True)
class Google2019Fits:
    """The records fitted, the samples that could not be fitted (with why), and sample sizes."""

    records: tuple[FittedParameter, ...]
    skipped: tuple[tuple[str, str], ...]
    n_finished: int
    n_long: int


def google2019_fits(
    instance_times: pl.LazyFrame,
    usage_stats: pl.LazyFrame,
    *,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
) -> Google2019Fits:
    """Gamma fits (MLE, location 0, bootstrap CIs) of the FINISHed incarnations' execution times
    and the long instances' inst mean and std (NCU); fit i bootstraps with seed ``seed + i``."""
    execution = finished_execution_times(instance_times, FINISH)
    long = long_task_stats(usage_stats, ("inst_mean", "inst_std"))
    samples = (
        (EXECUTION, execution, "s"),
        (INST_MEAN, long["inst_mean"].to_numpy(), CPU_UNIT),
        (INST_STD, long["inst_std"].to_numpy(), CPU_UNIT),
    )
    fits, skipped = fit_gamma_samples(samples, seed=seed, n_bootstrap=n_bootstrap)
    return Google2019Fits(
        records=tuple(f.to_parameter(TRACE, STAGE) for f in fits),
        skipped=skipped,
        n_finished=int(execution.size),
        n_long=long.height,
    )


def fitted_window_hours(instance_times: pl.LazyFrame) -> tuple[float, float] | None:
    """First SCHEDULE and last end (hours from the trace start) of the FINISHed incarnations
    with an execution time: the span the execution-time prior covers; None without one."""
    row = (
        instance_times.filter(
            (pl.col("terminal_event_type") == FINISH) & pl.col("execution_time_s").is_not_null()
        )
        .select(pl.col("schedule_time").min(), pl.col("end_time").max())
        .collect()
        .row(0)
    )
    if row[0] is None or row[1] is None or not 0 < row[1] < _AFTER_WINDOW:
        return None
    return (row[0] / 3.6e9, row[1] / 3.6e9)


def google2019_summary(
    fits: Google2019Fits, instance_times: pl.LazyFrame, data_dir: Path
) -> dict[str, Any]:
    """``summary.json`` of the stage: the samples' sizes, the window, what could not be fitted.

    The options it ran with are added as ``parameters`` by the stage (``record_parameters``);
    the entries here are what it derived from them and from the inputs.
    """
    ends = (
        instance_times.group_by("terminal_event_type")
        .len()
        .sort("terminal_event_type", nulls_last=True)
        .collect()
    )
    window = fitted_window_hours(instance_times)
    return {
        "trace": TRACE,
        "stage": STAGE,
        "parameters": {"location": 0.0, "terminal_event_type": FINISH, "cpu_unit": CPU_UNIT},
        "inputs": {
            "finished_incarnations": fits.n_finished,
            "long_instances": fits.n_long,
            "terminal_event_types": {
                str(r["terminal_event_type"] if r["terminal_event_type"] is not None else "none"): (
                    int(r["len"])
                )
                for r in ends.iter_rows(named=True)
            },
            "window_hours": list(window) if window else None,
        },
        SHORTFALLS: [s.text for s in google2019_shortfalls(fits, data_dir)],
        "fits": {r.name: r.to_dict() for r in fits.records},
        HEADLINE: execution_headline(
            EXECUTION,
            next((r.n for r in fits.records if r.name == EXECUTION), 0),
            "FINISHed incarnations",
        ),
    }


def google2019_shortfalls(fits: Google2019Fits, data_dir: Path) -> tuple[Shortfall, ...]:
    """One shortfall per sample that could not be fitted, naming the lake rows behind it."""
    lake = lake_dir(data_dir, TRACE)
    found = {
        EXECUTION: f"{fits.n_finished:,} FINISHed incarnations with an execution time",
        INST_MEAN: f"{fits.n_long:,} long instances",
        INST_STD: f"{fits.n_long:,} long instances",
    }
    return tuple(
        Shortfall(
            f"fit {name}",
            "2 distinct positive values",
            f"{found.get(name, why)} ({'; '.join(table_found(lake, t) for t in LAKE_TABLES[name])})",
        )
        for name, why in fits.skipped
    )


def google2019_needs(data_dir: Path) -> Shortfall | None:
    """Every prior of this trace needs instance_events (the usage priors keep only instances
    whose events show no failure): a lake without its rows (the real machine_events shard
    alone) supports none, and the stage is not run."""
    lake = lake_dir(data_dir, TRACE)
    if table_rows(lake, "instance_events").rows:
        return None
    held = "; ".join(
        table_found(lake, t) for t in ("machine_events", "instance_events", "instance_usage")
    )
    return Shortfall(
        "priors",
        "instance_events rows (the execution times of FINISHed instances; with instance_usage, "
        "the long instances' CPU usage): machine_events alone supports no prior of the model",
        held,
    )
