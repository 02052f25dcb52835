"""Gamma priors from alibaba-2018's derived tables: which rows enter each fit,
the trace named in every record, and recovery of known Gamma parameters (fixed seed)."""

from __future__ import annotations

import numpy as np
import polars as pl

from tracelab.analysis.priors.alibaba import TRACE, alibaba_fits, alibaba_summary

N = 2_000


def _task_times(rng: np.random.Generator) -> pl.DataFrame:
    # Terminated tasks: Gamma(shape 2, rate 0.05 / s); the others must not enter the fit: a
    # Failed task of 10^6 s or Running tasks without a time would move it far
    times = rng.gamma(2.0, 1 / 0.05, N)
    return pl.DataFrame(
        {
            "terminal_state": ["Terminated"] * N + ["Failed"] * 50 + [None] * 20,
            "execution_time_s": [*times.tolist(), *([1e6] * 50), *([None] * 20)],
        }
    )


def test_records_name_the_trace_and_recover_the_parameters() -> None:
    rng = np.random.default_rng(11)
    usage = pl.DataFrame({"avg_mean": [*rng.gamma(1.5, 1 / 4.0, N).tolist(), None]})
    fits = alibaba_fits(_task_times(rng), usage, seed=3, n_bootstrap=50)
    assert fits.skipped == ()
    by_name = {r.name: r for r in fits.records}
    assert set(by_name) == {"alibaba_task_execution_time", "alibaba_task_avg_mean"}
    assert {r.trace for r in fits.records} == {TRACE}
    execution = by_name["alibaba_task_execution_time"]
    assert execution.n == N
    # MLE standard errors at n = 2,000: shape ~0.06, rate ~0.002; tolerances ~3.5 of them
    assert abs(execution.parameters["shape"].value - 2.0) < 0.2
    assert abs(execution.parameters["rate"].value - 0.05) < 0.007
    assert execution.parameters["rate"].unit == "1/s"
    cpu = by_name["alibaba_task_avg_mean"]
    assert cpu.n == N
    assert abs(cpu.parameters["shape"].value - 1.5) < 0.15
    assert abs(cpu.parameters["rate"].value - 4.0) < 0.45
    assert cpu.parameters["rate"].unit == "1/cores"
    times = _task_times(rng)
    summary = alibaba_summary(fits, times, usage)
    # the index leads with the execution prior's shape over its N Terminated tasks
    assert summary["headline"] == {
        "key": "alibaba_task_execution_time_shape",
        "condition": "MLE with location 0 over the execution times of 2,000 Terminated tasks",
    }


def test_a_sample_that_cannot_be_fitted_is_skipped_with_the_reason() -> None:
    rng = np.random.default_rng(1)
    empty = pl.DataFrame({"avg_mean": pl.Series([], dtype=pl.Float64)})
    fits = alibaba_fits(_task_times(rng), empty, n_bootstrap=10)
    assert [r.name for r in fits.records] == ["alibaba_task_execution_time"]
    assert fits.skipped[0][0] == "alibaba_task_avg_mean"
    assert "at least 2 distinct positive values" in fits.skipped[0][1]
