"""Benchmark the packing stage: the paper's full grid, and a naive per-task Python GPA baseline.

Run by hand (never in tests)::

    .venv/bin/python bench/packing.py                 # Janus & Rzadca grid: 50 × 1,000 tasks, R = 10,000
    .venv/bin/python bench/packing.py --quick         # 4 instances × 500 tasks, R = 2,000
    .venv/bin/python bench/packing.py --workers 2     # the same grid on a local Dask cluster
    .venv/bin/python bench/packing.py --dask-address tcp://host:8786
    .venv/bin/python bench/packing.py --data DIR      # an existing data dir (derive done)

Without ``--data`` it writes a synthetic task_usage lake and ``fct_task_usage_stats`` of long tasks
shaped like the trace's (per-task mean ~ Gamma with mean 0.028 cores, so av 1 needs about 28
machines per 1,000 tasks as in Janus & Rzadca §5.2; std ≈ 0.36·mean + 0.015 as in §3.3). It then runs
``packing_results`` on the grid and times it (``grid_s``), and times a straightforward per-task
Python First Fit + GPA (lists, ``math.erfc``, realization-by-realization evaluation) on a subset
(instance 0, every ρ, First Fit, no rebalancing) against the vectorised kernels on the same
subset (``speedup``). The last line is ``RESULT key=value ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tracelab.analysis.packing.core import (  # noqa: E402
    gpa_z,
    machine_loads,
    overflow,
    packed_machines,
)
from tracelab.analysis.packing.inputs import realizations  # noqa: E402
from tracelab.analysis.packing.options import PAPER_PACKING_PARAMS, PackingParams  # noqa: E402
from tracelab.analysis.packing.stage import (  # noqa: E402
    observed_statistics,
    packing_results,
    task_source,
)

#: the code whose speed this benchmark measures: `make bench-check` lists every row of
#: docs/benchmarks.md measured before the last change to these files
MEASURES = ("analysis/packing",)

TRACE = "google-2011"
WINDOW_US = 300_000_000
QUICK = dataclasses.replace(PAPER_PACKING_PARAMS, instances=4, tasks=500, realizations=2_000)


def write_synthetic_input(data: Path, n_tasks: int, seed: int) -> int:
    """A lake and fct_task_usage_stats of ``n_tasks`` long tasks; returns the usage rows."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(24, 400, n_tasks)
    task = np.repeat(np.arange(n_tasks), lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    mean = rng.gamma(0.8, 0.028 / 0.8, n_tasks)
    std = 0.36 * mean + 0.015 * rng.uniform(0.5, 1.5, n_tasks)
    shape = (mean / std) ** 2
    inst = np.minimum(rng.gamma(shape[task], (std**2 / mean)[task]), 1.0)
    avg = 0.5 * mean[task] + 0.5 * np.minimum(rng.gamma(shape[task], (std**2 / mean)[task]), 1.0)
    lake = data / "lake" / TRACE / "task_usage"
    derived = data / "derived" / TRACE
    lake.mkdir(parents=True)
    derived.mkdir(parents=True)
    position = np.arange(task.size) - offsets[task]
    pl.DataFrame(
        {
            "job_id": (task // 50).astype(np.int64),
            "task_index": (task % 50).astype(np.int64),
            "start_time": 600_000_000 + WINDOW_US * position.astype(np.int64),
            "sampled_cpu_usage": inst,
            "cpu_rate": avg,
        }
    ).write_parquet(lake / "part-00000.parquet")
    ids = np.arange(n_tasks)
    pl.DataFrame(
        {"job_id": ids // 50, "task_index": ids % 50, "is_long": np.ones(n_tasks, dtype=bool)}
    ).write_parquet(derived / "fct_task_usage_stats.parquet")
    return int(task.size)


def naive_first_fit_gpa(
    mu: list[float], var: list[float], x: list[list[float]], capacity: float, rho: float
) -> tuple[int, float]:
    """Per-task Python First Fit with GPA, then q realization by realization: (m_abs, q)."""
    bins_mu: list[float] = []
    bins_var: list[float] = []
    members: list[list[int]] = []
    for k in range(len(mu)):
        placed = False
        for j in range(len(bins_mu)):
            s = math.sqrt(bins_var[j] + var[k])
            p = 0.5 * math.erfc((capacity - bins_mu[j] - mu[k]) / s / math.sqrt(2)) if s else 0.0
            if p <= rho:
                bins_mu[j] += mu[k]
                bins_var[j] += var[k]
                members[j].append(k)
                placed = True
                break
        if not placed:
            bins_mu.append(mu[k])
            bins_var.append(var[k])
            members.append([k])
    over = 0
    r = len(x[0])
    for tasks in members:
        for t in range(r):
            total = 0.0
            for i in tasks:
                total += x[i][t]
            if total > capacity:
                over += 1
    return len(members), over / (len(members) * r)


def _subset(params: PackingParams, data: Path) -> tuple[np.ndarray, Any]:
    source = task_source(dataclasses.replace(params, instances=1), data)
    inst, _ = realizations(
        source.instances[0], params.realizations, np.random.default_rng([params.seed, 3, 0])
    )
    return inst, observed_statistics(inst, ())


def compare_naive(params: PackingParams, data: Path) -> tuple[float, float]:
    """(naive seconds, vectorised seconds) on instance 0 for every ρ, First Fit, no rebalancing."""
    inst, stats = _subset(params, data)
    var = stats.std**2
    started = time.perf_counter()
    vector: list[tuple[int, float]] = []
    for rho in params.rhos:
        machine = packed_machines(
            stats.mean, var, capacity=params.capacity, z=gpa_z(rho), best_fit=False
        )
        result = overflow(
            machine_loads(inst, machine, int(machine.max()) + 1), machine, params.capacity
        )
        vector.append((result.machines_used, result.q))
    vector_s = time.perf_counter() - started
    started = time.perf_counter()
    rows = inst.tolist()
    naive = [
        naive_first_fit_gpa(stats.mean.tolist(), var.tolist(), rows, params.capacity, rho)
        for rho in params.rhos
    ]
    naive_s = time.perf_counter() - started
    for rho, (m1, q1), (m2, q2) in zip(params.rhos, vector, naive, strict=True):
        same = m1 == m2 and abs(q1 - q2) < 1e-12
        print(
            f"  rho {rho:g}: m_abs {m1} vs naive {m2}, q {q1:.4g} vs {q2:.4g} {'ok' if same else 'DIFFERENT'}"
        )
    return naive_s, vector_s


def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return max(own, children)


def _map(args: argparse.Namespace) -> tuple[Callable[..., list[Any]], Callable[[], None], str]:
    if not args.workers and not args.dask_address:
        from tracelab.analysis.common.stage_api import serial_map

        return serial_map, lambda: None, "serial"
    from distributed import Client, LocalCluster

    if args.dask_address:
        client = Client(args.dask_address)
        where = args.dask_address
    else:
        cluster = LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = Client(cluster)
        where = f"LocalCluster {args.workers} workers"

    def dask_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return list(client.gather(client.map(fn, items, pure=False)))

    return dask_map, client.close, where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=None, help="existing data dir (derive done)")
    parser.add_argument("--quick", action="store_true", help="4 instances × 500 tasks, R = 2,000")
    parser.add_argument("--population", type=int, default=20_000, help="synthetic long tasks")
    parser.add_argument("--workers", type=int, default=0, help="local Dask workers (0: serial)")
    parser.add_argument("--dask-address", default=None, help="an existing Dask scheduler")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    params = dataclasses.replace(QUICK if args.quick else PAPER_PACKING_PARAMS, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-packing-") as tmp:
        data = args.data or Path(tmp) / "data"
        if args.data is None:
            started = time.perf_counter()
            rows = write_synthetic_input(data, args.population, args.seed)
            print(
                f"synthetic input: {args.population:,} long tasks, {rows:,} usage rows "
                f"({time.perf_counter() - started:.1f} s)"
            )
        map_fn, close, where = _map(args)
        print(
            f"grid: {params.instances} instances × {params.tasks} tasks, R = {params.realizations:,}; {where}"
        )
        last = [time.perf_counter()]

        def progress(done: int, total: int, what: str) -> None:
            if done == total or time.perf_counter() - last[0] > 30:
                last[0] = time.perf_counter()
                print(f"  {done}/{total} {what}", flush=True)

        started = time.perf_counter()
        try:
            summary = packing_results(
                params, data, Path(tmp) / "out", progress=progress, map_fn=map_fn
            )
        finally:
            close()
        grid_s = time.perf_counter() - started
        runs = pl.read_parquet(Path(tmp) / "out" / "runs.parquet")
        print(f"grid: {runs.height:,} evaluations in {grid_s:.1f} s")
        print(f"  GPA q by rho: {summary.gpa_q}; Cantelli q: {summary.cantelli_q}")
        print(f"  m(Cantelli)/m(GPA 0.05): {summary.machines_ratio_cantelli_to_gpa_95}")
        print(
            f"  av 1 mean m: {summary.m_by_method.get('av 1')}; rebalancing q decrease "
            f"{summary.rebalancing_q_decrease:.3g}"
        )
        print("naive per-task Python First Fit + GPA on instance 0 (every rho):")
        naive_s, vector_s = compare_naive(params, data)
        print(f"  naive {naive_s:.2f} s, vectorised {vector_s:.3f} s")
    print(
        f"RESULT grid_s={grid_s:.1f} naive_s={naive_s:.2f} vector_s={vector_s:.3f} "
        f"speedup={naive_s / vector_s:.1f} evaluations={runs.height} "
        f"peak_rss_mb={_peak_rss_mb():.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
