"""Benchmark `tracelab statistics`: every stage on a medium synthetic input, and Table 1 at paper scale.

Run by hand (never in tests)::

    .venv/bin/python bench/statistics_stage.py                # 20M usage rows, 100k long tasks
    .venv/bin/python bench/statistics_stage.py --rows 2000000 # quicker
    .venv/bin/python bench/statistics_stage.py --data DIR     # an existing data dir (derive done)

Without ``--data`` it writes a synthetic task_usage lake and the three derived tables the stages
read (Gamma-distributed inst per task, avg a smoothed copy; numpy/polars, vectorised) into a
temporary directory, then runs each stage through the real Prefect flow and times it. Finally it
runs the Gaussian-sums stage at paper scale (R = S = 10,000; pool 10,000 tasks, 400 MB).
The last line is ``RESULT key=value ...``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

# an offline machine: no telemetry pings (as flows/cli.py does for the tracelab command)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tracelab.analysis.statistics.options import StatisticsOptions  # noqa: E402
from tracelab.flows.settings import Settings  # noqa: E402
from tracelab.flows.statistics import STAGES, statistics_results  # noqa: E402

#: the code whose speed this benchmark measures: `make bench-check` lists every row of
#: docs/benchmarks.md measured before the last change to these files
MEASURES = (
    "analysis/statistics",
    "flows/statistics.py",
)

TRACE = "google-2011"
WINDOW_US = 300_000_000


def write_synthetic_input(data: Path, rows: int, seed: int) -> tuple[int, int]:
    """Lake + derived tables with about ``rows`` usage rows of long tasks; returns (rows, tasks)."""
    rng = np.random.default_rng(seed)
    mean_len = 200
    n_tasks = max(100, rows // mean_len)
    lengths = rng.integers(24, 2 * mean_len - 24, n_tasks)
    total = int(lengths.sum())
    task = np.repeat(np.arange(n_tasks), lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    position = np.arange(total) - offsets[task]
    shape = rng.uniform(0.5, 4.0, n_tasks)
    mean = rng.uniform(0.005, 0.3, n_tasks)
    scale = (mean / shape)[task]
    inst = np.minimum(rng.gamma(shape[task], scale), 1.0)
    avg = 0.5 * mean[task] + 0.5 * np.minimum(rng.gamma(shape[task], scale), 1.0)
    job_id = (1_000_000 + task // 50).astype(np.int64)
    task_index = (task % 50).astype(np.int64)
    lake = data / "lake" / TRACE / "task_usage"
    derived = data / "derived" / TRACE
    lake.mkdir(parents=True)
    derived.mkdir(parents=True)
    usage = pl.DataFrame(
        {
            "start_time": 600_000_000 + WINDOW_US * position.astype(np.int64),
            "job_id": job_id,
            "task_index": task_index,
            "cpu_rate": avg,
            "sampled_cpu_usage": inst,
        }
    )
    parts = 8
    step = -(-total // parts)
    for p in range(parts):
        usage.slice(p * step, step).write_parquet(lake / f"part-{p:05d}.parquet")
    starts = offsets[:-1]
    inst_mean = np.add.reduceat(inst, starts) / lengths
    avg_mean = np.add.reduceat(avg, starts) / lengths
    inst_std = np.sqrt(np.maximum(np.add.reduceat(inst**2, starts) / lengths - inst_mean**2, 0))
    avg_std = np.sqrt(np.maximum(np.add.reduceat(avg**2, starts) / lengths - avg_mean**2, 0))
    keys = {"job_id": job_id[starts], "task_index": task_index[starts]}
    pl.DataFrame(
        {
            **keys,
            "n_windows": lengths,
            "inst_mean": inst_mean,
            "inst_std": inst_std,
            "avg_mean": avg_mean,
            "avg_std": avg_std,
            "is_long": lengths >= 24,
        }
    ).write_parquet(derived / "fct_task_usage_stats.parquet")
    bins = np.minimum((inst * 100).astype(np.int64), 99)
    counts = np.bincount(task * 100 + bins, minlength=n_tasks * 100).reshape(n_tasks, 100)
    pl.DataFrame(
        {
            **keys,
            "n_windows": lengths,
            "h": pl.Series(counts / lengths[:, None], dtype=pl.Array(pl.Float64, 100)),
        }
    ).write_parquet(derived / "fct_task_usage_histograms.parquet")
    n_times = n_tasks * 3
    pl.DataFrame(
        {
            "job_id": np.arange(n_times, dtype=np.int64),
            "task_index": np.zeros(n_times, np.int64),
            "terminal_event_type": np.where(rng.random(n_times) < 0.7, 4, 5),
            "execution_time_s": rng.gamma(0.7, 2000.0, n_times),
        }
    ).write_parquet(derived / "fct_task_times.parquet")
    return total, n_tasks


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=None, help="existing data dir (skips the synthetic input)"
    )
    parser.add_argument(
        "--rows", type=int, default=20_000_000, help="synthetic usage rows (default 20M)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paper-realizations", type=int, default=10_000, help="R at paper scale")
    parser.add_argument("--paper-sets", type=int, default=10_000, help="S at paper scale")
    parser.add_argument("--paper-pool", type=int, default=10_000, help="pool tasks at paper scale")
    parser.add_argument(
        "--stages", default=",".join(STAGES), help="comma-separated stages to time (default all)"
    )
    parser.add_argument("--skip-paper", action="store_true", help="skip the paper-scale Table 1")
    parser.add_argument("--memory", default="4GB", help="DuckDB memory limit")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-statistics-") as tmp:
        data = args.data or Path(tmp)
        if args.data is None:
            started = time.perf_counter()
            rows, tasks = write_synthetic_input(data, args.rows, args.seed)
            print(
                f"synthetic input: {rows:,} usage rows, {tasks:,} long tasks "
                f"({time.perf_counter() - started:.1f} s)"
            )
        else:
            rows = (
                pl.scan_parquet(data / "lake" / TRACE / "task_usage" / "*.parquet")
                .select(pl.len())
                .collect()
                .item()
            )
            tasks = (
                pl.scan_parquet(data / "derived" / TRACE / "fct_task_usage_stats.parquet")
                .filter(pl.col("is_long"))
                .select(pl.len())
                .collect()
                .item()
            )
        settings = Settings(data_dir=data, duckdb_memory_limit=args.memory)
        timings: dict[str, float] = {}
        wall: dict[str, float] = {}
        print(f"{'stage':<26}{'stage s':>10}{'wall s':>10}")
        for stage in [s.strip() for s in args.stages.split(",") if s.strip()]:
            started = time.perf_counter()
            summaries = statistics_results(
                settings, TRACE, StatisticsOptions(seed=args.seed, stages=(stage,))
            )
            wall[stage] = time.perf_counter() - started
            # the stage's own time, without the Prefect server start-up of the first flow run
            timings[stage] = float(summaries[stage]["seconds"])
            print(f"{stage:<26}{timings[stage]:>10.1f}{wall[stage]:>10.1f}")
        paper_s = float("nan")
        if not args.skip_paper:
            started = time.perf_counter()
            paper_options = StatisticsOptions(
                seed=args.seed,
                stages=("gaussian_sums",),
                ad_realizations=args.paper_realizations,
                ad_sets=args.paper_sets,
                ad_pool=args.paper_pool,
            )
            paper = statistics_results(settings, TRACE, paper_options)
            paper_s = float(paper["gaussian_sums"]["seconds"])
            print(
                f"{'gaussian_sums (paper R,S)':<26}{paper_s:>10.1f}{time.perf_counter() - started:>10.1f}"
            )
            table = pl.read_parquet(data / "results" / TRACE / "gaussian_sums" / "table.parquet")
            print(table.select("n_tasks_per_set", "rejection_rate", "mean_mu_cores"))
    total = sum(timings.values())
    fields = {
        "usage_rows": rows,
        "long_tasks": tasks,
        **{f"{k}_s": round(v, 1) for k, v in timings.items()},
        "all_stages_s": round(total, 1),
        "paper_ad_table_s": round(paper_s, 1),
        "peak_rss_mb": round(_peak_rss_mb()),
    }
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
