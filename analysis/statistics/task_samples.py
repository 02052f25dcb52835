"""Per-task inst/avg sample sequences, streamed in batches of whole tasks.

The stages of docs/methods.md §2.1, §2.3 and §2.5 need every window of a task in time order. The one
read of the lake lives here (:func:`task_sample_batches`); it streams
``queries/inputs/task_usage_samples.sql`` in Arrow record batches and regroups them so that a
batch never splits a task. Memory is bounded by DuckDB's memory limit (it sorts out of core) plus
one batch of rows, whatever the size of the lake.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tracelab.analysis.common.sql import load_sql
from tracelab.analysis.statistics.options import (
    DEFAULT_BATCH_ROWS,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TaskSampleBatch:
    """Whole tasks in CSR layout: task ``i`` owns rows ``offsets[i]:offsets[i + 1]``.

    ``inst`` is ``sampled_cpu_usage`` and ``avg`` is ``cpu_rate`` (avg > 1 replaced by inst), both
    in cores normalised to the largest machine, each task's rows in ``start_time`` order.
    """

    job_id: IntArray
    task_index: IntArray
    offsets: IntArray
    inst: FloatArray
    avg: FloatArray

    @property
    def n_tasks(self) -> int:
        return int(self.job_id.shape[0])

    @property
    def lengths(self) -> IntArray:
        """Windows per task (T_i)."""
        return np.diff(self.offsets)


def task_sample_batch(
    tasks: Sequence[tuple[int, int]],
    inst: Sequence[npt.ArrayLike],
    avg: Sequence[npt.ArrayLike] | None = None,
) -> TaskSampleBatch:
    """A batch built from per-task arrays (``avg`` defaults to ``inst``); for tests and benches."""
    inst_arrays = [np.asarray(x, dtype=np.float64) for x in inst]
    avg_arrays = inst_arrays if avg is None else [np.asarray(x, dtype=np.float64) for x in avg]
    lengths = np.array([a.shape[0] for a in inst_arrays], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    empty = np.zeros(0, dtype=np.float64)
    return TaskSampleBatch(
        job_id=np.array([t[0] for t in tasks], dtype=np.int64),
        task_index=np.array([t[1] for t in tasks], dtype=np.int64),
        offsets=offsets,
        inst=np.concatenate(inst_arrays) if inst_arrays else empty,
        avg=np.concatenate(avg_arrays) if avg_arrays else empty,
    )


def task_sample_batches(
    con: duckdb.DuckDBPyConnection,
    lake_glob: str | Path,
    stats_path: str | Path,
    *,
    long_only: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[TaskSampleBatch]:
    """Stream the lake's usage rows of the tasks in ``fct_task_usage_stats``, whole tasks per batch.

    ``long_only`` keeps the long tasks (``is_long``), the population of the paper's §3. Batches
    are deterministic for a given lake and ``batch_rows`` (tasks ordered by job_id, task_index).
    """
    relation = con.sql(
        load_sql("inputs/task_usage_samples"),
        params={
            "lake_glob": str(lake_glob),
            "stats_path": str(stats_path),
            "long_only": long_only,
        },
    )
    reader: pa.RecordBatchReader = relation.to_arrow_reader(batch_rows)
    yield from _whole_task_batches(reader)


def _whole_task_batches(record_batches: Iterable[pa.RecordBatch]) -> Iterator[TaskSampleBatch]:
    # the last task of a record batch may continue in the next one: carry it over
    carry: tuple[IntArray, IntArray, FloatArray, FloatArray] | None = None
    for rb in record_batches:
        if rb.num_rows == 0:
            continue
        job = rb.column("job_id").to_numpy(zero_copy_only=False).astype(np.int64)
        task = rb.column("task_index").to_numpy(zero_copy_only=False).astype(np.int64)
        inst = rb.column("inst").to_numpy(zero_copy_only=False).astype(np.float64)
        avg_col = rb.column("avg").fill_null(float("nan"))
        avg = avg_col.to_numpy(zero_copy_only=False).astype(np.float64)
        if carry is not None:
            job = np.concatenate([carry[0], job])
            task = np.concatenate([carry[1], task])
            inst = np.concatenate([carry[2], inst])
            avg = np.concatenate([carry[3], avg])
        starts = _task_starts(job, task)
        last = int(starts[-1])
        carry = (job[last:], task[last:], inst[last:], avg[last:])
        if last > 0:
            yield _batch(job[:last], task[:last], inst[:last], avg[:last], starts[:-1])
    if carry is not None and carry[0].shape[0] > 0:
        job, task, inst, avg = carry
        yield _batch(job, task, inst, avg, _task_starts(job, task))


def _task_starts(job: IntArray, task: IntArray) -> IntArray:
    change = (job[1:] != job[:-1]) | (task[1:] != task[:-1])
    return np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)


def _batch(
    job: IntArray, task: IntArray, inst: FloatArray, avg: FloatArray, starts: IntArray
) -> TaskSampleBatch:
    offsets = np.concatenate([starts, [job.shape[0]]]).astype(np.int64)
    return TaskSampleBatch(
        job_id=job[starts].copy(),
        task_index=task[starts].copy(),
        offsets=offsets,
        inst=inst.copy(),
        avg=avg.copy(),
    )
