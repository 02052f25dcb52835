"""Seeded synthetic Alibaba cluster-trace-v2018: all six tables in the published CSV format.

Written as ``out/<table>/<table>.csv.gz`` (the published ``<table>.tar.gz`` unpacks to
``<table>.csv``; ingest reads both): headerless, the columns of
:data:`analysis.traces.alibaba2018.TABLES` in order, times in whole seconds from the
start of the 8-day period, CPU in 1/100 core, memory normalised to [0, 100], whole numbers
without decimals (``100``, not ``100.0``), an empty field for NULL. The gzip header carries the
generator's mark, so ingest records the lake as synthetic.

Real samples exist for batch_task, container_meta and machine_meta (docs/ingest.md); the model
below follows them where they show something (statuses, request sizes, machine events). For
batch_instance, container_usage and machine_usage no real rows were available: their columns
follow the schema, their values are this model's, not the trace's.

Model (every draw from one ``numpy`` Generator seeded with ``seed``):

* machines: ``cpu_num`` 96, ``mem_size`` 100 (as every real row); a machine is present from time
  0 with probability 1 - ``late_machine_share``, else it joins at a uniform time, its first event
  ``IMPORT_INSTALLING`` and a ``USING`` event ``install_s`` later; then Poisson(3) more ``USING``
  events at uniform times. machine_usage: one row per machine every ``usage_interval_s`` while it
  is present, cpu_util_percent = its level (U(20, 50)) + a daily cycle of amplitude 10 + N(0, 5).
* containers: request 400 / 800 / 1600 (1/100 core) with shares 0.78 / 0.2 / 0.02 (the real
  sample: 78 % at 400), limit = request (70 %) or 1.2 x request, ``mem_size`` = request / 256;
  started at 0 (90 %) or a uniform time, stopped at a uniform later time with probability 0.05.
  container_usage: one row every ``usage_interval_s`` while it runs, cpu_util_percent =
  100 x u + N(0, 5), clipped to [0, 100], with u ~ Beta(2, 5) per container (mean 2/7): the
  percentage of the container's request it uses (so used cores = cpu_util_percent / 100 x
  cpu_request / 100).
* batch jobs arrive uniformly in the period; 70 % are DAGs whose task k (``M1``, ``R2_1``, …) depends
  on one earlier task, the rest have independent ``task_<base64>`` tasks. A task starts when its
  dependency ends (or at arrival), runs LogNormal(ln 60 s, 1.2) seconds; its instances
  (``instance_num``: 1 with probability 0.65, else 2 + Poisson(3)) start within its first seconds
  and end by its end. Status: a task still running at the period's end is ``Running`` with
  ``end_time`` 0 (as the real Running rows); otherwise ``Failed`` with probability 0.01 (one of
  its instances Failed) or ``Terminated``; the last task of 1 % of jobs is ``Waiting`` (start and
  end 0, no instance_num, plan_cpu or plan_mem, no instances). An instance's cpu_avg is
  plan_cpu x r with r ~ Beta(2, 3) (mean 0.4), cpu_max = cpu_avg x (1 + Exp(0.5)).

``TRUTH.json``: ``trace``, ``generator``, ``version``, ``seed``, ``scale``, ``period_s``,
``usage_interval_s``, ``tables`` (``{table: {rows}}``), ``machines`` (``n``, ``present_at_start``, ``events``),
``containers`` (``n``, ``request_counts``, ``mean_util_share``: the mean of the containers' u),
``tasks`` (``n``, ``status_counts``, ``dag_jobs``, ``jobs``, ``duration_lognormal``),
``instances`` (``n``, ``status_counts``, ``cpu_avg_over_plan_mean``: the Beta mean).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.schemas import ALIBABA_2018
from tracelab.analysis.synthetic.csvparts import GzipPartStream, csv_bytes
from tracelab.analysis.traces.alibaba2018 import ID as TRACE
from tracelab.analysis.traces.alibaba2018 import PERIOD_S

VERSION = "1.0"
#: s between two usage rows of a machine or container (the model's, not the trace's)
USAGE_INTERVAL_S = 900
#: (machines, containers, jobs) per named scale
SCALES: dict[str, tuple[int, int, int]] = {
    "tiny": (20, 60, 300),
    "small": (100, 400, 3_000),
    "medium": (1_000, 4_000, 40_000),
    "large": (4_000, 16_000, 400_000),
}
LATE_MACHINE_SHARE = 0.04
INSTALL_S = 3_600
REQUESTS = (400, 800, 1600)
REQUEST_SHARES = (0.78, 0.2, 0.02)
UTIL_BETA = (2.0, 5.0)
CPU_RATIO_BETA = (2.0, 3.0)
DURATION_MU = float(np.log(60.0))
DURATION_SIGMA = 1.2
DAG_SHARE = 0.7
FAILED_SHARE = 0.01
WAITING_JOB_SHARE = 0.01
PLAN_CPU = (50, 100, 10, 400, 30, 5)
PLAN_CPU_SHARES = (0.35, 0.53, 0.03, 0.03, 0.03, 0.03)
PLAN_MEM = (0.2, 0.3, 0.39, 0.49, 0.59, 0.05)
#: containers or machines whose usage rows are built and written together (memory bound)
_BATCH = 200


def generate_alibaba_2018(
    out: Path, *, seed: int = 0, scale: str = "tiny", target_mb: float | None = None
) -> Path:
    """Write the six tables under ``out`` and ``out/TRUTH.json``; returns the TRUTH path."""
    if target_mb is not None:
        raise TracelabError(f"--target-mb is not supported for {TRACE}; choose a --scale")
    if scale not in SCALES:
        raise TracelabError(f"unknown scale {scale!r}; choose one of: {', '.join(SCALES)}")
    n_machines, n_containers, n_jobs = SCALES[scale]
    rng = np.random.default_rng(seed)
    rows: dict[str, int] = {}
    machines = _machines(rng, n_machines)
    rows["machine_meta"] = _write(out, "machine_meta", iter([machines.meta]))
    rows["machine_usage"] = _write(out, "machine_usage", _machine_usage(rng, machines.joined))
    containers = _containers(rng, n_containers, machines)
    rows["container_meta"] = _write(out, "container_meta", iter([containers.meta]))
    rows["container_usage"] = _write(out, "container_usage", _container_usage(rng, containers))
    batch = _batch(rng, n_jobs, n_machines)
    rows["batch_task"] = _write(out, "batch_task", iter([batch.tasks]))
    rows["batch_instance"] = _write(out, "batch_instance", iter([batch.instances]))
    truth = {
        "trace": TRACE,
        "generator": "analysis.synthetic.alibaba2018",
        "version": VERSION,
        "seed": seed,
        "scale": scale,
        "period_s": PERIOD_S,
        "usage_interval_s": USAGE_INTERVAL_S,
        "tables": {name: {"rows": n} for name, n in rows.items()},
        "machines": {
            "n": n_machines,
            "present_at_start": int((machines.joined == 0).sum()),
            "events": machines.meta.height,
        },
        "containers": {
            "n": n_containers,
            "request_counts": _counts(containers.meta.unique("container_id")["cpu_request"]),
            "mean_util_share": float(containers.util.mean()),
        },
        "tasks": batch.truth,
        "instances": {
            "n": batch.instances.height,
            "status_counts": _counts(batch.instances["status"]),
            "cpu_avg_over_plan_mean": CPU_RATIO_BETA[0] / sum(CPU_RATIO_BETA),
        },
    }
    path = out / "TRUTH.json"
    path.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _counts(values: pl.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted(values.value_counts().iter_rows())}


def _write(out: Path, table: str, frames: Iterator[pl.DataFrame]) -> int:
    """Stream ``frames`` into ``out/<table>/<table>.csv.gz``; returns the rows written."""
    columns = ALIBABA_2018[table].column_names
    stream = GzipPartStream(out / table / f"{table}.csv.gz")
    n = 0
    try:
        for frame in frames:
            stream.write(csv_bytes(_published_text(frame.select(columns))))
            n += frame.height
    except BaseException:
        stream.discard()
        raise
    stream.close()
    return n


def _published_text(frame: pl.DataFrame) -> pl.DataFrame:
    """Floats as the published files write them: whole numbers without decimals, else <= 2."""
    out = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype.is_float():
            rounded = col.round(2)
            whole = rounded == rounded.round(0)
            text = (
                pl.when(whole)
                .then(rounded.cast(pl.Int64).cast(pl.String))
                .otherwise(rounded.cast(pl.String))
            )
            out.append(text.alias(name))
        else:
            out.append(col)
    return frame.select(out)


@dataclass(frozen=True)
class _Machines:
    meta: pl.DataFrame
    #: s; when each machine joins (0 = present from the start); index i is machine m_{i+1}
    joined: npt.NDArray[np.int64]


def _machines(rng: np.random.Generator, n: int) -> _Machines:
    late = rng.random(n) < LATE_MACHINE_SHARE
    joined = np.where(late, rng.integers(INSTALL_S, PERIOD_S // 2, n), 0).astype(np.int64)
    ids, times, status = [], [], []
    for i in range(n):
        own = [(int(joined[i]), "USING")]
        if late[i]:
            own = [(int(joined[i]) - INSTALL_S, "IMPORT_INSTALLING"), own[0]]
        extra = rng.integers(int(joined[i]) + 1, PERIOD_S, int(rng.poisson(3.0)))
        own += [(int(t), "USING") for t in sorted(extra)]
        ids += [f"m_{i + 1}"] * len(own)
        times += [t for t, _ in own]
        status += [s for _, s in own]
    index = np.array([int(m[2:]) - 1 for m in ids])
    domain_2 = pl.Series([f"{d}.0" for d in rng.integers(1, 21, n)[index]], dtype=pl.String).set(
        pl.Series(rng.random(len(ids)) < 0.002), None
    )
    meta = pl.DataFrame(
        {
            "machine_id": ids,
            "time_stamp": times,
            "failure_domain_1": rng.integers(1, 300, n)[index],
            "failure_domain_2": domain_2,
            "cpu_num": np.full(len(ids), 96),
            "mem_size": np.full(len(ids), 100),
            "status": status,
        }
    )
    return _Machines(meta, joined)


def _times(start: int, stop: int) -> npt.NDArray[np.int64]:
    """Usage sample times on the interval grid in [start, stop)."""
    first = -(-start // USAGE_INTERVAL_S) * USAGE_INTERVAL_S
    return np.arange(first, stop, USAGE_INTERVAL_S, dtype=np.int64)


def _percent(values: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    return np.clip(np.rint(values), 0, 100).astype(np.int64)


def _optional(rng: np.random.Generator, values: npt.NDArray[np.float64], empty: float) -> pl.Series:
    """A float column with a share ``empty`` of NULLs (the usage tables have empty fields)."""
    series = pl.Series(np.round(values, 2))
    return series.set(pl.Series(rng.random(len(values)) < empty), None)


def _machine_usage(
    rng: np.random.Generator, joined: npt.NDArray[np.int64]
) -> Iterator[pl.DataFrame]:
    for lo in range(0, len(joined), _BATCH):
        frames = []
        for i in range(lo, min(lo + _BATCH, len(joined))):
            t = _times(int(joined[i]), PERIOD_S)
            level = rng.uniform(20, 50)
            cycle = 10 * np.sin(2 * np.pi * t / 86_400)
            frames.append(
                pl.DataFrame(
                    {
                        "machine_id": f"m_{i + 1}",
                        "time_stamp": t.astype(np.float64),
                        "cpu_util_percent": _percent(level + cycle + rng.normal(0, 5, len(t))),
                        "mem_util_percent": _percent(rng.uniform(60, 95, len(t))),
                        "mem_gps": _optional(rng, rng.uniform(0, 30, len(t)), 0.3),
                        "mkpi": rng.integers(0, 40, len(t)),
                        "net_in": _optional(rng, rng.uniform(20, 60, len(t)), 0.01),
                        "net_out": _optional(rng, rng.uniform(20, 60, len(t)), 0.01),
                        "disk_io_percent": _optional(rng, rng.uniform(0, 20, len(t)), 0.01),
                    }
                )
            )
        yield pl.concat(frames)


@dataclass(frozen=True)
class _Containers:
    meta: pl.DataFrame
    machine: list[str]
    start: npt.NDArray[np.int64]
    stop: npt.NDArray[np.int64]
    #: the share of its request each container uses on average
    util: npt.NDArray[np.float64]


def _containers(rng: np.random.Generator, n: int, machines: _Machines) -> _Containers:
    present = np.flatnonzero(machines.joined == 0)
    machine = [f"m_{i + 1}" for i in rng.choice(present, n)]
    request = rng.choice(REQUESTS, n, p=REQUEST_SHARES)
    limit = np.where(rng.random(n) < 0.7, request, request * 6 // 5)
    start = np.where(rng.random(n) < 0.9, 0, rng.integers(1, PERIOD_S // 2, n)).astype(np.int64)
    stopped = rng.random(n) < 0.05
    stop = np.where(stopped, rng.integers(PERIOD_S // 2, PERIOD_S, n), PERIOD_S).astype(np.int64)
    rows: list[tuple[str, str, int, str, str, int, int, float]] = []
    for i in range(n):
        times = [int(start[i]), *sorted(rng.integers(start[i] + 1, stop[i], rng.poisson(1.5)))]
        app = f"app_{1 + i // 3}"
        # 400 -> 1.56, 800 -> 3.13 (half up, as the real rows)
        mem = float(np.floor(request[i] / 256 * 100 + 0.5) / 100)
        common = (int(request[i]), int(limit[i]), mem)
        rows += [(f"c_{i + 1}", machine[i], int(t), app, "started", *common) for t in times]
        if stopped[i]:
            rows.append((f"c_{i + 1}", machine[i], int(stop[i]), app, "stopped", *common))
    names = ALIBABA_2018["container_meta"].column_names
    meta = pl.DataFrame(rows, schema=names, orient="row")
    return _Containers(meta, machine, start, stop, rng.beta(*UTIL_BETA, n))


def _container_usage(rng: np.random.Generator, c: _Containers) -> Iterator[pl.DataFrame]:
    for lo in range(0, len(c.machine), _BATCH):
        frames = []
        for i in range(lo, min(lo + _BATCH, len(c.machine))):
            t = _times(int(c.start[i]), int(c.stop[i]))
            frames.append(
                pl.DataFrame(
                    {
                        "container_id": f"c_{i + 1}",
                        "machine_id": c.machine[i],
                        "time_stamp": t.astype(np.float64),
                        "cpu_util_percent": _percent(100 * c.util[i] + rng.normal(0, 5, len(t))),
                        "mem_util_percent": _percent(rng.uniform(70, 95, len(t))),
                        "cpi": _optional(rng, rng.uniform(1, 3, len(t)), 0.05),
                        "mem_gps": _optional(rng, rng.uniform(0, 10, len(t)), 0.05),
                        "mpki": rng.integers(0, 20, len(t)),
                        "net_in": _optional(rng, rng.uniform(0, 5, len(t)), 0.05),
                        "net_out": _optional(rng, rng.uniform(0, 5, len(t)), 0.05),
                        "disk_io_percent": _optional(rng, rng.uniform(0, 10, len(t)), 0.05),
                    }
                )
            )
        if frames:
            yield pl.concat(frames)


@dataclass(frozen=True)
class _Batch:
    tasks: pl.DataFrame
    instances: pl.DataFrame
    truth: dict[str, Any]


def _task_names(rng: np.random.Generator, n: int, dag: bool) -> tuple[list[str], list[int]]:
    """Names of a job's tasks and the index of the task each depends on (-1: none)."""
    if not dag:
        names = [f"task_{base64.b64encode(rng.bytes(24)).decode('ascii')}" for _ in range(n)]
        return names, [-1] * n
    parents = [-1] + [int(rng.integers(0, k)) for k in range(1, n)]
    names = [
        f"{'R' if p >= 0 else 'M'}{k + 1}" + (f"_{p + 1}" if p >= 0 else "")
        for k, p in enumerate(parents)
    ]
    return names, parents


def _batch(rng: np.random.Generator, n_jobs: int, n_machines: int) -> _Batch:
    tasks: list[dict[str, Any]] = []
    instances: list[dict[str, Any]] = []
    dag_jobs = 0
    for j in range(n_jobs):
        dag = bool(rng.random() < DAG_SHARE)
        dag_jobs += dag
        names, parents = _task_names(rng, 1 + min(int(rng.poisson(1.5)), 7), dag)
        arrival = int(rng.integers(0, PERIOD_S))
        waiting_last = bool(rng.random() < WAITING_JOB_SHARE)
        ends: list[int] = []
        for k, name in enumerate(names):
            start = (ends[parents[k]] if parents[k] >= 0 else arrival) + int(rng.integers(0, 5))
            end = start + max(1, int(rng.lognormal(DURATION_MU, DURATION_SIGMA)))
            ends.append(end)
            task = _task_row(rng, f"j_{j + 1}", name, start, end)
            if waiting_last and k == len(names) - 1:
                task.update(status="Waiting", start_time=0, end_time=0, instance_num=None)
                task.update(plan_cpu=None, plan_mem=None)
            tasks.append(task)
            instances += _instances(rng, task, start, end, n_machines, len(instances))
    frame = pl.DataFrame(tasks, schema=ALIBABA_2018["batch_task"].polars_schema())
    truth = {
        "n": len(tasks),
        "jobs": n_jobs,
        "dag_jobs": dag_jobs,
        "status_counts": _counts(frame["status"]),
        "duration_lognormal": {"mu_log_s": DURATION_MU, "sigma": DURATION_SIGMA},
    }
    schema = ALIBABA_2018["batch_instance"].polars_schema()
    return _Batch(frame, pl.DataFrame(instances, schema=schema), truth)


def _task_row(
    rng: np.random.Generator, job: str, name: str, start: int, end: int
) -> dict[str, Any]:
    if end >= PERIOD_S:
        status, end_time = "Running", 0
    else:
        status = "Failed" if rng.random() < FAILED_SHARE else "Terminated"
        end_time = end
    return {
        "task_name": name,
        "instance_num": 1 if rng.random() < 0.65 else 2 + int(rng.poisson(3.0)),
        "job_name": job,
        "task_type": "1" if rng.random() < 0.86 else str(int(rng.integers(2, 13))),
        "status": status,
        "start_time": start,
        "end_time": end_time,
        "plan_cpu": float(rng.choice(PLAN_CPU, p=PLAN_CPU_SHARES)),
        "plan_mem": float(rng.choice(PLAN_MEM)),
    }


def _instances(
    rng: np.random.Generator,
    task: dict[str, Any],
    start: int,
    end: int,
    n_machines: int,
    first: int,
) -> list[dict[str, Any]]:
    """The task's instances (none for a Waiting task); one of a Failed task's instances failed."""
    if task["status"] == "Waiting":
        return []
    n = int(task["instance_num"])
    failed = int(rng.integers(0, n)) if task["status"] == "Failed" else -1
    out = []
    for i in range(n):
        begin = start + int(rng.integers(0, min(5, end - start) + 1))
        finish = int(rng.integers(begin, end + 1))
        if task["status"] == "Running" and finish >= PERIOD_S:
            status, finish = "Running", 0
        else:
            status = "Failed" if i == failed else "Terminated"
        cpu_avg = task["plan_cpu"] * rng.beta(*CPU_RATIO_BETA)
        mem_avg = task["plan_mem"] * rng.uniform(0.3, 0.9)
        out.append(
            {
                "instance_name": f"ins_{first + i + 1}",
                "task_name": task["task_name"],
                "job_name": task["job_name"],
                "task_type": task["task_type"],
                "status": status,
                "start_time": begin,
                "end_time": finish,
                "machine_id": f"m_{int(rng.integers(1, n_machines + 1))}",
                "seq_no": 1,
                "total_seq_no": 1,
                "cpu_avg": cpu_avg,
                "cpu_max": cpu_avg * (1 + rng.exponential(0.5)),
                "mem_avg": mem_avg,
                "mem_max": mem_avg * rng.uniform(1.0, 1.3),
            }
        )
    return out
