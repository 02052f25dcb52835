"""The packing stage's tasks: drawn from the trace's long tasks or built from the params export.

Janus & Rzadca §5.1: an instance is N' tasks, each with R realizations of its inst (1-second) and avg
(5-minute mean) usage resampled from its own empirical distribution. Realizations are drawn
inside each work cell from the cell's instance seed, so only the tasks' own samples (or model
parameters) travel to a worker and the result does not depend on where the cell runs.

* ``source="trace"``: the long tasks (``is_long`` in ``fct_task_usage_stats``) of the
  ``task_usage`` lake, streamed with :func:`task_sample_batches` in (job_id, task_index) order.
  Realization t of a task takes inst *and* avg from the same randomly drawn window, so the two
  series describe the same moments (the paper does not say how it paired them).
* ``source="params"``: a task's shape is a k-means centroid (cluster drawn with its exported
  share), its mean and std are drawn from the exported Gamma fits of the long tasks' inst mean and
  std (independently: the export carries no correlation), and a realization is a draw from the
  centroid histogram standardised to that mean and std, floored at 0 cores. The export has no avg
  data, so ``avg`` equals ``inst`` for these tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import numpy.typing as npt
import polars as pl

from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.common.duck import bounded_connection
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.export.document import ParamsDocument, load_params
from tracelab.analysis.statistics.task_samples import TaskSampleBatch, task_sample_batches
from tracelab.analysis.traces import google2011

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TRACE = google2011.ID
USAGE_STATS = "fct_task_usage_stats"
#: DuckDB memory_limit of the sorted read of the lake that picks the instances' tasks
SORT_MEMORY_LIMIT = "1GB"
CLUSTER_RECORD = ("clustering", "task_inst_histogram_clusters")
MEAN_RECORD = ("gamma_fits", "google_task_inst_mean")
STD_RECORD = ("gamma_fits", "google_task_inst_std")


#: one instance's tasks with their observed windows: the same CSR layout as the analysis stages
EmpiricalTasks = TaskSampleBatch


@dataclass(frozen=True)
class ModelTasks:
    """One instance's tasks as (cluster, mean, std) draws from the params export."""

    cluster: IntArray
    mean: FloatArray
    std: FloatArray
    #: k × bins centroid histograms (shares of samples per bin of ``bin_width`` cores)
    centroids: FloatArray
    bin_width: float

    @property
    def n_tasks(self) -> int:
        return int(self.cluster.shape[0])


InstanceTasks = EmpiricalTasks | ModelTasks


@dataclass(frozen=True)
class TaskSource:
    """Every instance's tasks and where they came from."""

    instances: tuple[InstanceTasks, ...]
    source: str
    #: tasks the draws were made from (long tasks in the trace; 0 for the params source)
    population: int
    #: True when an instance needed more tasks than the population and drew with replacement
    with_replacement: bool
    description: str


def realizations(
    tasks: InstanceTasks, r: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """(inst, avg): n_tasks × R realizations (cores) of the instance's tasks."""
    if isinstance(tasks, EmpiricalTasks):
        lengths = np.diff(tasks.offsets)
        windows = tasks.offsets[:-1, None] + np.floor(
            rng.random((tasks.n_tasks, r)) * lengths[:, None]
        ).astype(np.int64)
        return tasks.inst[windows], tasks.avg[windows]
    inst = _model_realizations(tasks, r, rng)
    return inst, inst


def _model_realizations(tasks: ModelTasks, r: int, rng: np.random.Generator) -> FloatArray:
    k, bins = tasks.centroids.shape
    shares = tasks.centroids / tasks.centroids.sum(axis=1, keepdims=True)
    # one searchsorted for all clusters: cluster c's CDF is shifted to [c, c + 1]
    cdf = (np.cumsum(shares, axis=1) + np.arange(k)[:, None]).ravel()
    u = rng.random((tasks.n_tasks, r)) + tasks.cluster[:, None]
    flat = np.minimum(np.searchsorted(cdf, u, side="right"), k * bins - 1)
    bin_index = flat - tasks.cluster[:, None] * bins
    y = (np.clip(bin_index, 0, bins - 1) + rng.random((tasks.n_tasks, r))) * tasks.bin_width
    # exact moments of the centroid's piecewise-uniform density
    mid = (np.arange(bins) + 0.5) * tasks.bin_width
    c_mean = shares @ mid
    c_var = shares @ mid**2 - c_mean**2 + tasks.bin_width**2 / 12.0
    c_std = np.sqrt(np.maximum(c_var, 0.0))[tasks.cluster]
    z = (y - c_mean[tasks.cluster][:, None]) / np.where(c_std > 0, c_std, 1.0)[:, None]
    x: FloatArray = np.maximum(tasks.mean[:, None] + tasks.std[:, None] * z, 0.0)
    return x


def _chosen_tasks(
    population: int, instances: int, tasks: int, seed: int
) -> tuple[list[IntArray], bool]:
    """Ordinals of each instance's tasks; distinct within an instance unless too few exist."""
    replace = tasks > population
    return [
        np.random.default_rng([seed, 1, i]).choice(population, size=tasks, replace=replace)
        for i in range(instances)
    ], replace


def trace_tasks(data_dir: Path, *, instances: int, tasks: int, seed: int) -> TaskSource:
    """Draw the instances from the long tasks of the derived stats and the task_usage lake."""
    stats = data_dir / "derived" / TRACE / f"{USAGE_STATS}.parquet"
    lake = data_dir / "lake" / TRACE / "task_usage"
    if not stats.exists():
        raise TracelabError(
            f"derived table {stats} is missing (needed by stage packing); "
            f"run `tracelab derive --trace {TRACE}` first"
        )
    if not any(lake.glob("*.parquet")):
        raise TracelabError(
            f"no task_usage Parquet files in {lake} (needed by stage packing); "
            f"run `tracelab ingest --trace {TRACE}` first"
        )
    n_long = int(pl.scan_parquet(stats).filter(pl.col("is_long")).select(pl.len()).collect().item())
    if n_long == 0:
        raise TracelabError(f"{stats} has no long tasks (T_i >= 24 windows) to pack")
    chosen, replace = _chosen_tasks(n_long, instances, tasks, seed)
    wanted = np.unique(np.concatenate(chosen))
    samples = _wanted_samples(data_dir, stats, lake, wanted)
    raw = (data_dir / "raw" / TRACE / "TRUTH.json").is_file()
    return TaskSource(
        instances=tuple(_instance_slice(samples, np.searchsorted(wanted, c)) for c in chosen),
        source="trace",
        population=n_long,
        with_replacement=replace,
        description=(
            f"{n_long:,} long tasks of the {TRACE} "
            + ("synthetic sample (generated, TRUTH.json present)" if raw else "trace files")
        ),
    )


def lake_sort_connection(data_dir: Path) -> duckdb.DuckDBPyConnection:
    """The connection of the sorted read of the lake: bounded, spilling under ``data_dir/tmp``."""
    # the query sorts the whole lake (out of core): bound it well under the stage's 4 GB budget and
    # spill into the data directory (the default temp folder of the other stages' connections)
    return bounded_connection(SORT_MEMORY_LIMIT, data_dir / "tmp", threads=2)


def _wanted_samples(data_dir: Path, stats: Path, lake: Path, wanted: IntArray) -> EmpiricalTasks:
    """The windows of the long tasks whose stream ordinals are in ``wanted`` (sorted)."""
    con = lake_sort_connection(data_dir)
    jobs: list[IntArray] = []
    idx: list[IntArray] = []
    lengths: list[IntArray] = []
    inst: list[FloatArray] = []
    avg: list[FloatArray] = []
    seen = 0
    try:
        for batch in task_sample_batches(con, lake / "*.parquet", stats, long_only=True):
            lo, hi = np.searchsorted(wanted, [seen, seen + batch.n_tasks])
            local = wanted[lo:hi] - seen
            seen += batch.n_tasks
            for i in local:
                a, b = int(batch.offsets[i]), int(batch.offsets[i + 1])
                inst.append(batch.inst[a:b])
                # avg is NULL where the trace has no cpu_rate: fall back to inst (docs/methods.md §1.8)
                avg.append(np.where(np.isnan(batch.avg[a:b]), batch.inst[a:b], batch.avg[a:b]))
                lengths.append(np.array([b - a], dtype=np.int64))
            jobs.append(batch.job_id[local])
            idx.append(batch.task_index[local])
    finally:
        con.close()
    if seen < int(wanted[-1]) + 1:
        raise TracelabError(
            f"{lake} holds usage rows for only {seen} of the long tasks in {stats}; "
            f"re-run `tracelab derive --trace {TRACE}`"
        )
    return EmpiricalTasks(
        job_id=np.concatenate(jobs),
        task_index=np.concatenate(idx),
        offsets=np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.int64),
        inst=np.concatenate(inst),
        avg=np.concatenate(avg),
    )


def _instance_slice(samples: EmpiricalTasks, rows: IntArray) -> EmpiricalTasks:
    starts = samples.offsets[rows]
    lengths = samples.offsets[rows + 1] - starts
    gather = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    gather = gather + np.arange(int(lengths.sum()))
    return EmpiricalTasks(
        job_id=samples.job_id[rows],
        task_index=samples.task_index[rows],
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        inst=samples.inst[gather],
        avg=samples.avg[gather],
    )


def params_tasks(data_dir: Path, *, instances: int, tasks: int, seed: int) -> TaskSource:
    """Build the instances from ``DATA/exports/params.json`` alone (centroids + Gamma fits)."""
    path = PARAMS_EXPORT.path(data_dir)
    doc = load_params(path)
    centroids, shares, width = _clusters(doc)
    mean_shape, mean_rate = _gamma(doc, MEAN_RECORD)
    std_shape, std_rate = _gamma(doc, STD_RECORD)
    built: list[InstanceTasks] = []
    for i in range(instances):
        rng = np.random.default_rng([seed, 2, i])
        built.append(
            ModelTasks(
                cluster=rng.choice(shares.size, size=tasks, p=shares).astype(np.int64),
                mean=rng.gamma(mean_shape, 1.0 / mean_rate, size=tasks),
                std=rng.gamma(std_shape, 1.0 / std_rate, size=tasks),
                centroids=centroids,
                bin_width=width,
            )
        )
    return TaskSource(
        instances=tuple(built),
        source="params",
        population=0,
        with_replacement=False,
        description=f"params export {path} (created {doc.created_at}, code {doc.code_version})",
    )


def _clusters(doc: ParamsDocument) -> tuple[FloatArray, FloatArray, float]:
    rec = doc.record(TRACE, *CLUSTER_RECORD)
    centroids = np.maximum(np.asarray(rec.values["centroids"], dtype=np.float64), 0.0)
    shares = np.asarray(rec.values["shares"], dtype=np.float64)
    if centroids.ndim != 2 or shares.size != centroids.shape[0] or shares.sum() <= 0:
        raise TracelabError(
            f"params record {TRACE}/{'/'.join(CLUSTER_RECORD)}: centroids and shares disagree; "
            "re-run `tracelab statistics` and `tracelab export`"
        )
    # a centroid with no mass cannot be sampled: treat it as uniform over the bins
    centroids[centroids.sum(axis=1) <= 0] = 1.0
    width = float(rec.values.get("bin_width_cores", 1.0 / centroids.shape[1]))
    return centroids, shares / shares.sum(), width


def _gamma(doc: ParamsDocument, which: tuple[str, str]) -> tuple[float, float]:
    return doc.number(TRACE, *which, "shape"), doc.number(TRACE, *which, "rate")
