"""VCSched instances: the paper's generator (Virtual Clusters §4.1) and jobs drawn from the Google trace."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy.special import ndtr, ndtri

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.traces import google2011
from tracelab.analysis.yield_.algorithms import FloatArray, Instance

TRACE = google2011.ID
#: the paper's mean CPU need (§4.1): fewer than twice as many jobs as hosts usually reach yield 1
PAPER_MEAN_CPU = 0.5
#: a CPU need of exactly 0 has no yield; trace requests are floored here (fraction of a host)
MIN_CPU_NEED = 1e-6


@dataclass(frozen=True)
class InstanceSpec:
    """One instance of the grid; ``seed`` alone determines its numbers (any worker, any order)."""

    instance_id: int
    source: str  # "paper" | "trace"
    size_class: str  # "small" | "large"
    n_hosts: int
    n_jobs: int
    slack: float
    cv_cpu: float
    cv_memory: float
    replicate: int
    seed: int


def truncated_normal(
    rng: np.random.Generator, mean: float, cv: float, size: int, low: float = 0.0, high: float = 1.0
) -> FloatArray:
    """Normal(mean, cv · mean) conditioned on [low, high] by inverse-CDF sampling (§4.1)."""
    sd = cv * mean
    if sd <= 0:
        return np.full(size, min(max(mean, low), high))
    a, b = ndtr((low - mean) / sd), ndtr((high - mean) / sd)
    u = a + (b - a) * rng.random(size)
    return np.asarray(np.clip(mean + sd * ndtri(u), low, high), dtype=np.float64)


def paper_instance(spec: InstanceSpec) -> Instance:
    """§4.1: CPU ~ N(0.5, cv_cpu), memory ~ N((1 − slack) · hosts / jobs, cv_memory), both
    truncated to [0, 1]; the slack is the expected free fraction of the cluster's memory."""
    rng = np.random.default_rng(spec.seed)
    cpu = truncated_normal(rng, PAPER_MEAN_CPU, spec.cv_cpu, spec.n_jobs)
    mean_mem = (1.0 - spec.slack) * spec.n_hosts / spec.n_jobs
    memory = truncated_normal(rng, mean_mem, spec.cv_memory, spec.n_jobs)
    return Instance(np.maximum(cpu, MIN_CPU_NEED), memory, spec.n_hosts)


@dataclass(frozen=True)
class TraceJobs:
    """Per-task CPU and memory requests of the trace as fractions of one host (the largest
    machine), sorted by (job_id, task_index) so draws do not depend on file order."""

    cpu_need: FloatArray
    memory: FloatArray
    host_cpus: float
    host_memory: float


def _lake_table(data_dir: Path, table: str) -> Path:
    folder = data_dir / "lake" / TRACE / table
    if not any(folder.glob("*.parquet")):
        raise TracelabError(
            f"{folder}: no Parquet files; run `tracelab ingest --trace {TRACE}` first"
        )
    return folder


def trace_jobs(data_dir: Path) -> TraceJobs:
    """Every task's largest CPU and memory request (task_events), divided by the largest
    machine's capacities (machine_events); the paper's m_j is a job's maximum memory need."""
    machines = pl.scan_parquet(_lake_table(data_dir, "machine_events") / "*.parquet")
    caps = machines.select(pl.col("cpus").max(), pl.col("memory").max()).collect()
    host_cpus, host_memory = caps["cpus"][0], caps["memory"][0]
    if host_cpus is None or host_memory is None or host_cpus <= 0 or host_memory <= 0:
        raise TracelabError(
            f"{_lake_table(data_dir, 'machine_events')}: no machine capacities; "
            f"re-run `tracelab ingest --trace {TRACE}`"
        )
    events = pl.scan_parquet(_lake_table(data_dir, "task_events") / "*.parquet")
    tasks = (
        events.filter(pl.col("cpu_request").is_not_null() & pl.col("memory_request").is_not_null())
        .group_by("job_id", "task_index")
        .agg(pl.col("cpu_request").max(), pl.col("memory_request").max())
        .filter(pl.col("cpu_request") > 0)
        .sort("job_id", "task_index")
        .collect(engine="streaming")  # the full trace has ~144M task events
    )
    if tasks.height == 0:
        raise TracelabError(
            f"{_lake_table(data_dir, 'task_events')}: no task with CPU and memory requests; "
            f"re-run `tracelab ingest --trace {TRACE}`"
        )
    cpu = np.clip(tasks["cpu_request"].to_numpy() / host_cpus, MIN_CPU_NEED, 1.0)
    memory = np.clip(tasks["memory_request"].to_numpy() / host_memory, 0.0, 1.0)
    return TraceJobs(cpu, memory, float(host_cpus), float(host_memory))


def trace_instance(spec: InstanceSpec, jobs: TraceJobs, cpu_load: float = 0.0) -> Instance:
    """``n_jobs`` tasks drawn (without replacement when there are enough) and the fewest hosts
    (of the largest machine's size) that leave at least ``slack`` of the memory free.

    ``cpu_load`` > 0 scales the drawn CPU needs by one factor so that their sum is ``cpu_load``
    hosts' worth (each need capped at 1): a trace's requests are about as large in CPU as in
    memory, so hosts sized by memory are never CPU-bound and every algorithm yields 1.
    The paper's generator loads its hosts the same way by design (mean CPU need 0.5 per job).
    """
    rng = np.random.default_rng(spec.seed)
    pool = jobs.cpu_need.size
    picked = rng.choice(pool, size=spec.n_jobs, replace=spec.n_jobs > pool)
    cpu, memory = jobs.cpu_need[picked], jobs.memory[picked]
    hosts = max(1, math.ceil(float(memory.sum()) / (1.0 - spec.slack) - 1e-12))
    if cpu_load > 0:
        cpu = np.clip(cpu * (cpu_load * hosts / float(cpu.sum())), MIN_CPU_NEED, 1.0)
    return Instance(cpu, memory, hosts)
