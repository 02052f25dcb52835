"""The packing stage's numbers that the wiring tests left unchecked, on instances worked by hand.

The summary's base case is Best Fit (not First Fit), the statistics experiment packs with the
realizations of avg, and the stage entry writes every table under its name through the map it
was given.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from packing_helpers import write_packing_params
from test_packing_wiring import METHODS_ONLY, R, _m_abs, _rows

from tracelab.analysis.common.stage_api import serial_map
from tracelab.analysis.packing.inputs import EmpiricalTasks, TaskSource
from tracelab.analysis.packing.stage import (
    evaluated_runs,
    packing_results,
    packing_runs,
    packing_summary,
)


def test_summary_base_case_is_best_fit() -> None:
    # five tasks of constant usage 0.875, 0.375, 0.75, 0.25, 0.5 (σ = 0: av 1, Cantelli and the
    # percentiles size them at their mean), c = 1:
    #   First Fit: 0.875 | 0.375 | 0.75 | 0.25 beside 0.375 | 0.5 fits nowhere: 4 machines
    #   Best Fit: 0.25 into the fullest that fits (beside 0.75, left 0), 0.5 beside 0.375: 3
    # m_norm = ⌈2.75 / 1⌉ = 3; the loads never exceed 1, so rebalancing moves nothing
    sizes = np.array([0.875, 0.375, 0.75, 0.25, 0.5])
    usage = np.repeat(sizes[:, None], R, axis=1)
    runs = evaluated_runs(0, "methods", METHODS_ONLY, usage, usage)
    assert _m_abs(_rows(runs, fit="first"))["av 1"] == 4
    assert _m_abs(_rows(runs, fit="best"))["av 1"] == 3
    summary = packing_summary(runs, METHODS_ONLY, TaskSource((), "trace", 5, False, "x"))
    assert summary.m_by_method["av 1"] == pytest.approx(3 / 3)
    assert summary.m_by_method["Cantelli 1"] == pytest.approx(3 / 3)
    assert summary.m_by_method["perc 50"] == pytest.approx(3 / 3)


def test_statistics_experiment_packs_the_realizations_of_avg() -> None:
    # four tasks, each one window: inst 0.5 cores, avg 0.25. From inst av 1 packs two per machine
    # (2 machines, loads 1.0: no overflow); from avg four on one machine, whose inst load of 2.0
    # overflows in every realization (q = 1)
    window = np.arange(5, dtype=np.int64)
    tasks = EmpiricalTasks(
        job_id=np.arange(4, dtype=np.int64),
        task_index=np.zeros(4, dtype=np.int64),
        offsets=window,
        inst=np.full(4, 0.5),
        avg=np.full(4, 0.25),
    )
    params = dataclasses.replace(METHODS_ONLY, statistics_experiment=True, realizations=R)
    runs = packing_runs(TaskSource((tasks,), "trace", 4, False, "hand-made"), params)
    av = _rows(runs).filter(pl.col("method") == "av 1")
    by_statistics = {s: (m, q) for s, m, q in av.select("statistics", "m_abs", "q").iter_rows()}
    assert by_statistics == {"inst": (2, 0.0), "avg": (1, 1.0)}


def test_stage_entry_writes_each_table_through_the_given_map(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_packing_params(data)
    params = dataclasses.replace(
        METHODS_ONLY, source="params", instances=2, tasks=6, realizations=10
    )
    chunks: list[int] = []

    def recording_map(fn: Any, items: list[Any]) -> list[Any]:
        chunks.append(len(items))
        return serial_map(fn, items)

    out = tmp_path / "out"
    packing_results(params, data, out, map_fn=recording_map)
    # 2 instances × the methods experiment = 2 cells, one chunk
    assert chunks == [2]
    # 16 methods × 2 fits × with and without rebalancing, each a mean over the 2 instances
    methods = pl.read_parquet(out / "methods.parquet")
    assert methods.height == 16 * 2 * 2
    assert set(methods["instances"]) == {2}
    # per instance, 16 methods × 2 fits, the rebalancing beside the packing without it
    rebalancing = pl.read_parquet(out / "rebalancing.parquet")
    assert rebalancing.height == 2 * 16 * 2
    assert {"q_off", "q_on", "q_decrease"} <= set(rebalancing.columns)
