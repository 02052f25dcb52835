"""Benchmark the derived tables and compare ``fct_task_usage_stats`` with pandas.

Generates (or reuses, under ``--out``) a synthetic google-2011 trace with
:func:`analysis.synthetic.generate_trace` (``--scale medium`` is about 24 million usage rows over
the 29-day window), ingests it with ``tracelab ingest`` (a child process), then in this process:

* derives every google-2011 table in dependency order with the same functions the flow uses
  (:mod:`analysis.derive`, a DuckDB connection bounded by ``--memory-limit``), timing each;
* computes the same per-task statistics (docs/methods.md §1.8) the way published notebooks do: pandas
  ``read_parquet`` -> merge away failing tasks -> ``groupby().agg`` and ``groupby().quantile``;
* checks that both agree (same tasks, every statistic within 1e-9).

Prints a table and, as its last line,
``RESULT rows_per_s=… pandas_rows_per_s=… speedup=…`` where rows are task_usage rows per second of
``fct_task_usage_stats`` (DuckDB) and of the pandas version. Never run in tests.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from tracelab.analysis.lake import derive  # noqa: E402
from tracelab.analysis.synthetic import generate_trace  # noqa: E402
from tracelab.flows.settings import Settings, duckdb_connection  # noqa: E402

#: the code whose speed this benchmark measures: `make bench-check` lists every row of
#: docs/benchmarks.md measured before the last change to these files
MEASURES = (
    "analysis/lake/derive.py",
    "analysis/common/sql.py",
    "queries",
    "flows/derive.py",
)

TRACE = "google-2011"
KEYS = ["job_id", "task_index"]
STATS = ["mean", "std", "min", "max", "p50", "p90", "p95", "p99"]
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
#: tables whose main input is task_usage (the others read task_events)
USAGE_TABLES = {"fct_task_usage_stats", "fct_task_usage_histograms", "agg_usage_by_priority"}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time every derived table on a synthetic trace; compare "
        "fct_task_usage_stats with a pandas groupby implementation.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "bench" / "out" / "derive",
        help="work folder (raw, lake, derived); reused when it already holds a lake",
    )
    parser.add_argument("--scale", default="medium", help="generator scale (default: medium)")
    parser.add_argument("--target-mb", type=float, default=None, help="generator target size")
    parser.add_argument("--seed", type=int, default=7, help="generator seed")
    parser.add_argument("--memory-limit", default="8GB", help="DuckDB memory_limit")
    parser.add_argument("--threads", type=int, default=0, help="DuckDB threads (0 = all cores)")
    parser.add_argument("--skip-pandas", action="store_true", help="time only the DuckDB tables")
    return parser.parse_args(argv)


def _lake_rows(lake: Path, table: str) -> int:
    return sum(pq.read_metadata(p).num_rows for p in derive.lake_table_files(lake, table))


def _prepare(args: argparse.Namespace) -> Path:
    """The lake folder of the trace: generated and ingested unless already there."""
    data = args.out / "data"
    lake = data / "lake" / TRACE
    if derive.lake_table_files(lake, "task_usage"):
        print(f"reusing the lake in {lake}")
        return lake
    raw = data / "raw" / TRACE
    start = time.perf_counter()
    generate_trace(TRACE, raw, seed=args.seed, scale=args.scale, target_mb=args.target_mb)
    print(f"generated {raw} in {time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tracelab.flows.cli",
            "ingest",
            "--data",
            str(data),
            "--trace",
            TRACE,
            "--no-progress",
        ],
        check=True,
        cwd=REPO,
    )
    print(f"ingested into {lake} in {time.perf_counter() - start:.0f} s")
    return lake


def _derive_all(args: argparse.Namespace, lake: Path) -> tuple[list[derive.TableResult], Path]:
    data = args.out / "data"
    settings = Settings(
        data_dir=data, duckdb_memory_limit=args.memory_limit, duckdb_threads=args.threads
    )
    out = settings.derived_dir / TRACE
    params = derive.DeriveParams().as_sql_params()
    results = []
    with duckdb_connection(settings) as con:
        derive.create_input_views(con, TRACE, lake)
        for name in derive.dependency_order(derive.table_dependencies(TRACE)):
            result = derive.materialise_table(con, name, params, out)
            print(f"  {name}: {result.rows:,} rows in {result.seconds:.2f} s", flush=True)
            results.append(result)
        checks = [derive.check_violations(con, c, params) for c in derive.check_names(TRACE)]
    failed = derive.failed_checks_message(checks)
    print(failed or f"  {len(checks)} invariant checks hold")
    return results, out


def pandas_usage_stats(lake: Path, long_task_windows: int = 24) -> pd.DataFrame:
    """docs/methods.md §1.8 the notebook way: whole tables in memory, merge, groupby."""
    usage = pd.read_parquet(lake / "task_usage", columns=[*KEYS, "cpu_rate", "sampled_cpu_usage"])
    events = pd.read_parquet(lake / "task_events", columns=[*KEYS, "event_type"])
    failing = events.loc[events["event_type"].isin([2, 3, 5, 6]), KEYS].drop_duplicates()
    usage = usage.merge(failing, on=KEYS, how="left", indicator=True)
    usage = usage[(usage["_merge"] == "left_only") & usage["sampled_cpu_usage"].notna()]
    usage = usage.assign(
        inst=usage["sampled_cpu_usage"],
        avg=np.where(usage["cpu_rate"] > 1, usage["sampled_cpu_usage"], usage["cpu_rate"]),
    )[[*KEYS, "inst", "avg"]]
    grouped = usage.groupby(KEYS)
    stats = grouped.agg(
        n_windows=("inst", "size"),
        inst_mean=("inst", "mean"),
        inst_min=("inst", "min"),
        inst_max=("inst", "max"),
        avg_mean=("avg", "mean"),
        avg_min=("avg", "min"),
        avg_max=("avg", "max"),
    )
    std = grouped[["inst", "avg"]].std(ddof=0).add_suffix("_std")
    q = grouped[["inst", "avg"]].quantile(list(QUANTILES.values())).unstack()
    q.columns = [
        f"{col}_{name}" for col, qv in q.columns for name, v in QUANTILES.items() if v == qv
    ]
    stats = stats.join(std).join(q).reset_index()
    stats = stats[stats["inst_max"] > 0]
    stats["is_long"] = stats["n_windows"] >= long_task_windows
    return stats


def _max_difference(ours: pd.DataFrame, theirs: pd.DataFrame) -> tuple[int, int, float]:
    merged = ours.merge(theirs, on=KEYS, how="outer", suffixes=("", "_pd"), indicator=True)
    unmatched = int((merged["_merge"] != "both").sum())
    both = merged[merged["_merge"] == "both"]
    worst = 0.0
    for kind in ("inst", "avg"):
        for s in STATS:
            col = f"{kind}_{s}"
            diff = (both[col] - both[f"{col}_pd"]).abs().max()
            worst = max(worst, float(0.0 if pd.isna(diff) else diff))
    mismatched_n = int((both["n_windows"] != both["n_windows_pd"]).sum())
    return unmatched, mismatched_n, worst


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    lake = _prepare(args)
    usage_rows = _lake_rows(lake, "task_usage")
    event_rows = _lake_rows(lake, "task_events")
    print(f"lake: task_usage {usage_rows:,} rows, task_events {event_rows:,} rows")
    print("derive (DuckDB):")
    results, out = _derive_all(args, lake)
    duck_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    duck_stats = next(r for r in results if r.name == "fct_task_usage_stats")

    print()
    print(f"{'table':32} {'rows out':>12} {'seconds':>9} {'input rows/s':>14}")
    for r in results:
        inputs = usage_rows if r.name in USAGE_TABLES else event_rows
        print(f"{r.name:32} {r.rows:>12,} {r.seconds:>9.2f} {inputs / r.seconds:>14,.0f}")
    total = sum(r.seconds for r in results)
    print(f"{'all tables':32} {'':>12} {total:>9.2f}")
    print(
        f"peak RSS after deriving: {duck_peak_mb:,.0f} MB (DuckDB memory_limit {args.memory_limit})"
    )

    rows_per_s = usage_rows / duck_stats.seconds
    if args.skip_pandas:
        print(f"RESULT rows_per_s={rows_per_s:.0f} pandas_rows_per_s=nan speedup=nan")
        return 0
    start = time.perf_counter()
    theirs = pandas_usage_stats(lake)
    pandas_seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ours = pd.read_parquet(out / "fct_task_usage_stats.parquet")
    unmatched, mismatched_n, worst = _max_difference(ours, theirs)
    print()
    print(f"fct_task_usage_stats: DuckDB {duck_stats.seconds:.2f} s, pandas {pandas_seconds:.2f} s")
    print(
        f"agreement: {len(ours):,} vs {len(theirs):,} tasks, {unmatched} unmatched, "
        f"{mismatched_n} differing n_windows, max |difference| {worst:.2e}; "
        f"peak RSS of this process {peak_mb:,.0f} MB"
    )
    pandas_rows_per_s = usage_rows / pandas_seconds
    speedup = pandas_seconds / duck_stats.seconds
    print(
        f"RESULT rows_per_s={rows_per_s:.0f} pandas_rows_per_s={pandas_rows_per_s:.0f} "
        f"speedup={speedup:.2f}"
    )
    return 0 if unmatched == 0 and mismatched_n == 0 and worst < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
