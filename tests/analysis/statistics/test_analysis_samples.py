"""The lake reader: whole tasks per batch, time order, docs/methods.md §1.8 filters, real DuckDB/Parquet."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from tracelab.analysis.statistics.task_samples import (
    _whole_task_batches,
    task_sample_batch,
    task_sample_batches,
)


def _usage(rows: list[tuple[int, int, int, float | None, float | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "start_time": pl.Int64,
            "job_id": pl.Int64,
            "task_index": pl.Int64,
            "cpu_rate": pl.Float64,
            "sampled_cpu_usage": pl.Float64,
        },
        orient="row",
    ).with_columns(machine_id=pl.lit(7, pl.Int64))


def test_record_batches_split_mid_task_are_regrouped() -> None:
    job = [1, 1, 1, 1, 2, 2, 3]
    task = [0, 0, 1, 1, 0, 0, 5]
    inst = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    table = pa.table({"job_id": job, "task_index": task, "inst": inst, "avg": inst})
    # cut after rows 1, 3 and 5: every cut falls inside a task
    batches = list(_whole_task_batches(table.to_batches(max_chunksize=1)))
    tasks = [
        (int(j), int(t), list(b.inst[b.offsets[i] : b.offsets[i + 1]]))
        for b in batches
        for i, (j, t) in enumerate(zip(b.job_id, b.task_index, strict=True))
    ]
    assert tasks == [
        (1, 0, [0.1, 0.2]),
        (1, 1, [0.3, 0.4]),
        (2, 0, [0.5, 0.6]),
        (3, 5, [0.7]),
    ]


def test_lake_read_orders_filters_and_replaces(tmp_path: Path) -> None:
    lake = tmp_path / "task_usage"
    lake.mkdir()
    w = 300_000_000
    # two files, rows out of time order; task (1,0) long, (1,1) short, (2,0) not in stats
    _usage(
        [
            (3 * w, 1, 0, 0.30, 0.33),
            (1 * w, 1, 0, 1.70, 0.11),  # avg > 1 -> inst (docs/methods.md §1.8)
            (1 * w, 1, 1, 0.05, 0.05),
            (1 * w, 2, 0, 0.50, 0.50),
        ]
    ).write_parquet(lake / "part-0.parquet")
    _usage(
        [
            (2 * w, 1, 0, 0.20, 0.22),
            (4 * w, 1, 0, 0.40, None),  # no inst: not a window of the task
        ]
    ).write_parquet(lake / "part-1.parquet")
    stats = tmp_path / "stats.parquet"
    pl.DataFrame(
        {"job_id": [1, 1], "task_index": [0, 1], "is_long": [True, False]},
    ).write_parquet(stats)
    con = duckdb.connect()
    long_only = list(task_sample_batches(con, lake / "*.parquet", stats, batch_rows=2))
    assert sum(b.n_tasks for b in long_only) == 1
    b = long_only[0]
    assert (int(b.job_id[0]), int(b.task_index[0])) == (1, 0)
    np.testing.assert_array_equal(b.inst, [0.11, 0.22, 0.33])
    np.testing.assert_array_equal(b.avg, [0.11, 0.20, 0.30])
    every = list(task_sample_batches(con, lake / "*.parquet", stats, long_only=False, batch_rows=1))
    keys = [(int(j), int(t)) for bb in every for j, t in zip(bb.job_id, bb.task_index, strict=True)]
    assert keys == [(1, 0), (1, 1)]


def test_batch_builder_layout() -> None:
    b = task_sample_batch([(1, 0), (1, 1)], [[0.1, 0.2, 0.3], [0.4]])
    np.testing.assert_array_equal(b.offsets, [0, 3, 4])
    np.testing.assert_array_equal(b.lengths, [3, 1])
    assert b.n_tasks == 2
