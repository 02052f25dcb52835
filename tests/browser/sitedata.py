"""A small data directory with derived tables written by hand (seeded), for report tests.

The tables follow the derive stage's column contracts (queries/*.sql); the values are simple
enough that a test can recompute every number a page states. The marts that summarise a
hand-written table for its page are derived from it by their own queries.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from tracelab.analysis.lake.derive import DeriveParams, expose_derived, materialise_table

WINDOW_START_US = 600_000_000
AFTER = 2**63 - 1
HOUR_US = 3_600_000_000
#: google-2011's event names by code, as agg_transition_counts names them
_NAMES = (
    "SUBMIT",
    "SCHEDULE",
    "EVICT",
    "FAIL",
    "FINISH",
    "KILL",
    "LOST",
    "UPDATE_PENDING",
    "UPDATE_RUNNING",
)


def write_google_derived(data: Path, seed: int = 7) -> Path:
    """Write every google-2011 derived table the report reads; returns the derived folder."""
    rng = np.random.default_rng(seed)
    out = data / "derived" / "google-2011"
    out.mkdir(parents=True, exist_ok=True)

    # transitions: (prev, event, n, allowed); EVICT after SUBMIT is the undocumented one
    pairs = [
        (None, 0, 500, True),
        (0, 1, 450, True),
        (0, 2, 13, False),
        (0, 5, 20, True),
        (1, 4, 300, True),
        (1, 2, 60, True),
        (2, 0, 55, True),
        (4, 0, 7, True),
        (1, 8, 9, True),
        (8, 4, 9, True),
    ]
    pl.DataFrame(
        {
            "prev_event_type": [p[0] for p in pairs],
            "prev_event_name": [None if p[0] is None else _NAMES[p[0]] for p in pairs],
            "event_type": [p[1] for p in pairs],
            "event_name": [_NAMES[p[1]] for p in pairs],
            "n": [p[2] for p in pairs],
            "n_production": [p[2] // 10 for p in pairs],
            "allowed_by_documented_graph": [p[3] for p in pairs],
        },
        schema={
            "prev_event_type": pl.Int64,
            "prev_event_name": pl.String,
            "event_type": pl.Int64,
            "event_name": pl.String,
            "n": pl.Int64,
            "n_production": pl.Int64,
            "allowed_by_documented_graph": pl.Boolean,
        },
    ).write_parquet(out / "agg_transition_counts.parquet")
    derive_marts(out, ("agg_transition_counts",), ("agg_transition_summary",))

    times = np.concatenate([[0], WINDOW_START_US + np.sort(rng.integers(0, 48 * HOUR_US, 400))])
    times = np.unique(times)
    n = times.size
    new = rng.integers(0, 5, n)
    subs = new + rng.integers(0, 3, n)
    sch = rng.integers(0, 6, n)
    comp = rng.integers(0, 4, n)
    cum = {
        k: np.cumsum(v)
        for k, v in (
            ("new_submissions", new),
            ("submissions", subs),
            ("schedules", sch),
            ("completions", comp),
        )
    }
    cols: dict[str, object] = {"time": times}
    for k, c in cum.items():
        cols[f"cum_{k}"] = c
    for k, c in cum.items():
        cols[f"cdf_{k}"] = c / c[-1]
        cols[f"weighted_{k}"] = c / cum["new_submissions"][-1]
    pl.DataFrame(cols).write_parquet(out / "agg_event_cdf.parquet")
    derive_marts(out, ("agg_event_cdf",), ("agg_event_cdf_summary",))

    change_paper = rng.integers(-3, 5, n)
    pevict = rng.integers(0, 2, n)
    pl.DataFrame(
        {
            "time": times,
            "queue_length_paper": np.cumsum(change_paper),
            "queue_length": np.cumsum(change_paper - pevict),
        }
    ).write_parquet(out / "agg_queue_length.parquet")
    pl.DataFrame({"time": times, "running_tasks": np.cumsum(rng.integers(-2, 4, n))}).write_parquet(
        out / "agg_running_tasks.parquet"
    )
    derive_marts(out, ("agg_queue_length", "agg_running_tasks"), ("agg_queue_summary",))

    m = 3000
    sched = WINDOW_START_US + rng.integers(0, 48 * HOUR_US, m)
    exec_s = rng.exponential(900.0, m)
    terminal = rng.choice([4, 4, 4, 2, 5], m)
    pl.DataFrame(
        {
            "job_id": np.arange(m) // 10,
            "task_index": np.arange(m) % 10,
            "incarnation": np.ones(m, dtype=np.int64),
            "priority": rng.integers(0, 12, m),
            "submit_time": sched - 1_000_000,
            "schedule_time": sched,
            "end_time": sched + (exec_s * 1e6).astype(np.int64),
            "terminal_event_type": terminal,
            "scheduling_time_s": rng.exponential(2.0, m),
            "execution_time_s": exec_s,
        }
    ).write_parquet(out / "fct_task_times.parquet")
    derive_marts(
        out,
        ("fct_task_times",),
        ("agg_task_times_window", "agg_task_times_hourly", "agg_task_times_summary"),
    )

    k = 300
    frames = []
    for klass, scale in (("production", 3.0), ("non_production", 1.0)):
        frames.append(
            pl.DataFrame(
                {
                    "window_index": np.arange(k),
                    "window_start": WINDOW_START_US + np.arange(k) * 300_000_000,
                    "priority_class": [klass] * k,
                    "requested_cpu": scale * (1.0 + rng.random(k)),
                    "requested_memory": scale * (1.0 + rng.random(k)),
                    "used_cpu": scale * 0.5 * rng.random(k),
                    "used_memory": scale * 0.6 * rng.random(k),
                    "usage_records": rng.integers(1, 50, k),
                }
            )
        )
    pl.concat(frames).write_parquet(out / "agg_usage_by_priority.parquet")
    derive_marts(out, ("agg_usage_by_priority",), ("agg_usage_by_class", "agg_usage_summary"))

    used = 10 + rng.normal(0, 1.2, k)
    change = np.concatenate([[np.nan], np.diff(used) / used[:-1]])
    mem = 20 + rng.normal(0, 5.0, k)
    mchange = np.concatenate([[np.nan], np.diff(mem) / mem[:-1]])
    pl.DataFrame(
        {
            "window_index": np.arange(k),
            "window_start": WINDOW_START_US + np.arange(k) * 300_000_000,
            "used_cpu": used,
            "used_memory": mem,
            "cpu_change": change,
            "memory_change": mchange,
        }
    ).with_columns(pl.col("cpu_change", "memory_change").fill_nan(None)).write_parquet(
        out / "agg_utilization_change.parquet"
    )
    derive_marts(out, ("agg_utilization_change",), ("agg_utilization_change_summary",))
    return out


def derive_marts(out: Path, given: tuple[str, ...], marts: tuple[str, ...]) -> None:
    """Derive ``marts`` (in that order) from the hand-written tables ``given``, with
    google-2011's FINISH code (4) as the only staged task event the marts look up."""
    con = duckdb.connect()
    expose_derived(con, given, out)
    finish = pl.DataFrame({"event_type": [4], "event": ["finish"]})
    con.from_arrow(finish.to_arrow()).create_view("stg_task_events")
    for name in marts:
        materialise_table(con, name, DeriveParams().as_sql_params(), out)
    con.close()


def write_manifest(data: Path, trace: str = "google-2011") -> Path:
    """A two-file ingest manifest with known counts."""
    lake = data / "lake" / trace
    lake.mkdir(parents=True, exist_ok=True)
    path = lake / "_manifest.parquet"
    pl.DataFrame(
        {
            "table": ["task_events", "task_events", "task_usage"],
            "path": [
                "task_events/part-00000-of-00002.csv.gz",
                "task_events/part-00001-of-00002.csv.gz",
                "task_usage/part-00000-of-00001.csv.gz",
            ],
            "bytes": [1000, 2000, 3000],
            "checksum": ["aaa111", "bbb222", "ccc333"],
            "rows_read": [100, 200, 300],
            "rows_written": [99, 200, 297],
            "rows_rejected": [1, 0, 3],
            "started_at": ["2026-11-22T10:00:00Z"] * 3,
            "seconds": [0.5, 0.25, 1.0],
            "status": ["ok", "ok", "ok"],
            "error": [None, None, None],
        }
    ).write_parquet(path)
    return path


def write_export(data: Path) -> Path:
    path = data / "exports" / "params.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": "1.0.0", "parameters": []}), encoding="utf-8")
    return path
