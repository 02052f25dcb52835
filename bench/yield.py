"""Benchmark the yield stage: the Virtual Clusters paper's large-problem grid with MCB8 and the greedy heuristics.

Run by hand (never in tests)::

    .venv/bin/python bench/yield.py              # 10,800 instances (64 hosts × 100/250/500 jobs)
    .venv/bin/python bench/yield.py --quick      # 5 instances per spec: 540 instances
    .venv/bin/python bench/yield.py --workers 2  # a process pool as the stage's map

It runs ``yield_results`` (the stage's own code, tables and summary written to a temporary
folder) and, in the same run, a straightforward MCB8 (pure Python, each list rescanned from the
top for every placement, as §3.4 describes it) on the 500-job instances as the baseline. The
last line is ``RESULT instances_per_s=… mcb8_ms_500=…``; targets: the whole grid under 10 min on
2 cores, MCB8 on 500 tasks under 50 ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tracelab.analysis.yield_.algorithms import Instance, mcb_sort_key  # noqa: E402
from tracelab.analysis.yield_.instances import paper_instance  # noqa: E402
from tracelab.analysis.yield_.options import PAPER_YIELD_PARAMS, YieldParams  # noqa: E402
from tracelab.analysis.yield_.stage import (  # noqa: E402
    instance_specs,
    yield_results,
)

#: the code whose speed this benchmark measures: `make bench-check` lists every row of
#: docs/benchmarks.md measured before the last change to these files
MEASURES = ("analysis/yield_",)

ALGORITHMS = ("MCB8", "GR", "SG", "GB", "SGB")


def naive_mcb8_packing(cpu: list[float], mem: list[float], hosts: int) -> list[int] | None:
    """Two-list packing with every scan from the top of the list (the baseline)."""
    key = mcb_sort_key(np.array(cpu), np.array(mem), 8)
    order = sorted(range(len(cpu)), key=lambda j: key[j])
    lists = [[j for j in order if cpu[j] > mem[j]], [j for j in order if cpu[j] <= mem[j]]]
    host = [-1] * len(cpu)
    for h in range(hosts):
        room_cpu = room_mem = 1.0 + 1e-9
        while True:
            first = 0 if room_cpu >= room_mem else 1
            chosen = None
            for which in (first, 1 - first):
                for pos, j in enumerate(lists[which]):
                    if cpu[j] <= room_cpu and mem[j] <= room_mem:
                        chosen = (which, pos, j)
                        break
                if chosen:
                    break
            if chosen is None:
                break
            which, pos, j = chosen
            lists[which].pop(pos)
            host[j] = h
            room_cpu -= cpu[j]
            room_mem -= mem[j]
    return host if not lists[0] and not lists[1] else None


def naive_mcb8(instance: Instance, tolerance: float = 1e-4) -> list[int] | None:
    """Binary search on the yield around :func:`naive_mcb8_packing`."""
    c, m = instance.cpu_need.tolist(), instance.memory.tolist()
    high = min(1.0, instance.n_hosts / sum(c))
    low, best = 0.0, None
    while high - low > tolerance:
        y = 0.5 * (low + high)
        packed = naive_mcb8_packing([y * v for v in c], m, instance.n_hosts)
        if packed is None:
            high = y
        else:
            low, best = y, packed
    return best if best is not None else naive_mcb8_packing([0.0] * len(c), m, instance.n_hosts)


def baseline_ms_500(params: YieldParams, limit: int) -> float:
    """Mean time of the naive MCB8 on up to ``limit`` of the grid's 500-job instances."""
    specs = [s for s in instance_specs(params) if s.n_jobs == 500][:limit]
    instances = [paper_instance(spec) for spec in specs]
    # CPU time of this thread, as the stage's run-time table
    start = time.thread_time()
    for instance in instances:
        naive_mcb8(instance)
    return 1e3 * (time.thread_time() - start) / max(len(specs), 1)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (a shared machine's wall clock lies)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _progress(done: int, total: int, what: str) -> None:
    print(f"  {done}/{total} {what}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 instances per spec (540)")
    parser.add_argument("--instances", type=int, default=0, help="instances per spec (overrides)")
    parser.add_argument("--workers", type=int, default=1, help="processes for the stage's map")
    parser.add_argument("--backtrack-limit", type=int, default=500_000, help="GB/SGB attempts")
    parser.add_argument("--baseline-instances", type=int, default=20)
    args = parser.parse_args(argv)
    params = dataclasses.replace(
        PAPER_YIELD_PARAMS,
        algorithms=ALGORITHMS,
        small_instances=0,
        large_instances=args.instances or (5 if args.quick else 100),
        backtrack_limit=args.backtrack_limit,
    )
    n = len(instance_specs(params))
    with tempfile.TemporaryDirectory() as tmp:
        pool = ProcessPoolExecutor(args.workers) if args.workers > 1 else None

        def map_fn(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
            return list(pool.map(fn, items, chunksize=4)) if pool else [fn(i) for i in items]

        start, cpu_start = time.perf_counter(), _cpu_seconds()
        summary = yield_results(
            params, Path(tmp), Path(tmp) / "yield", map_fn=map_fn, progress=_progress
        )
        seconds = time.perf_counter() - start
        per_algorithm = (
            pl.read_parquet(Path(tmp) / "yield" / "runtimes.parquet")
            .group_by("algorithm")
            .agg(pl.col("seconds").sum(), (1e3 * pl.col("seconds").max()).alias("max_ms"))
        )
        if pool:
            pool.shutdown()
        cpu = _cpu_seconds() - cpu_start
    baseline = baseline_ms_500(params, args.baseline_instances)
    print(
        f"instances: {n} (64 hosts × {params.large_jobs} jobs), algorithms {', '.join(ALGORITHMS)}"
    )
    print(f"wall time: {seconds:.1f} s with {args.workers} worker(s); CPU time {cpu:.1f} s")
    spent = {str(a): (float(t), float(m)) for a, t, m in per_algorithm.iter_rows()}
    for name in ALGORITHMS:
        total, worst = spent.get(name, (float("nan"), float("nan")))
        print(
            f"  {name:5s} mean min yield {summary.mean_min_yield.get(name, float('nan')):.4f}"
            f"  failure rate {summary.failure_rate.get(name, float('nan')):.3f}"
            f"  time {total:8.1f} s (slowest instance {worst:8.1f} ms)"
        )
    print(
        f"MCB8 500 jobs: {summary.mcb8_ms_500:.1f} ms (straightforward baseline {baseline:.1f} ms,"
        f" {baseline / summary.mcb8_ms_500:.1f}x)"
    )
    print(
        f"RESULT instances_per_s={n / seconds:.2f} mcb8_ms_500={summary.mcb8_ms_500:.2f}"
        f" baseline_mcb8_ms_500={baseline:.2f} wall_s={seconds:.1f} cpu_s={cpu:.1f} instances={n}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
