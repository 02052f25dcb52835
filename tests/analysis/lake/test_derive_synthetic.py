"""Derived tables on a generated trace, against the generator's truth and simple re-computations.

generate (seeded, tiny) -> ingest flow -> derive flow. The queue and running series must equal an
event-by-event Python replay of the raw rows; the per-task usage statistics must equal numpy on the
raw rows (and keep exactly the tasks the generator's truth says docs/methods.md §1.8 keeps).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from tracelab.analysis.lake.schemas import GOOGLE_2011, TIME_AFTER_WINDOW_US
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.derive import DeriveRun, run_derive
from tracelab.flows.ingest import run_ingest
from tracelab.flows.settings import Settings

SEED = 20111
TRACE = "google-2011"

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Generated:
    raw: Path
    derived: Path
    truth: dict[str, Any]
    run: DeriveRun


@pytest.fixture(scope="module")
def generated(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Generated:
    data = tmp_path_factory.mktemp("synthetic")
    raw = data / "raw" / TRACE
    truth_path = generate_trace(TRACE, raw, seed=SEED, scale="tiny")
    summary = run_ingest(TRACE, raw, data / "lake")
    assert not summary.failed
    settings = Settings(data_dir=data, duckdb_memory_limit="1GB", duckdb_threads=2)
    run = run_derive(settings=settings, trace=TRACE)
    return Generated(
        raw=raw,
        derived=data / "derived" / TRACE,
        truth=json.loads(truth_path.read_text()),
        run=run,
    )


def _raw(raw: Path, table: str) -> pl.DataFrame:
    """The generator's raw rows of one table, with file name and 1-based row, read directly."""
    t = GOOGLE_2011[table]
    read = {k: (pl.Int64() if v == pl.Boolean() else v) for k, v in t.polars_schema().items()}
    frames = [
        pl.read_csv(
            path,
            has_header=False,
            new_columns=t.column_names,
            schema=read,
            row_index_name="row",
            row_index_offset=1,
        ).with_columns(pl.lit(path.name).alias("file"), pl.col("row").cast(pl.Int64()))
        for path in sorted((raw / table).glob("part-*.csv.gz"))
    ]
    return pl.concat(frames)


def _derived(g: Generated, name: str) -> pl.DataFrame:
    return pl.read_parquet(g.derived / f"{name}.parquet")


def _replay(events: pl.DataFrame) -> dict[int, tuple[int, int, int]]:
    """Walk the events in (time, file, row) order with one state per task.

    Returns, per timestamp, (paper queue, queue, running) after the timestamp's last event.
    """
    paper = queue = running = 0
    last: dict[tuple[int, int], int] = {}  # the task's previous non-UPDATE event type
    after: dict[int, tuple[int, int, int]] = {}
    ordered = events.filter(pl.col("time") < TIME_AFTER_WINDOW_US).sort("time", "file", "row")
    for t, job, task, ev in ordered.select(
        "time", "job_id", "task_index", "event_type"
    ).iter_rows():
        key = (job, task)
        if ev in (7, 8):
            continue
        prev = last.get(key)
        if ev == 0:
            paper += 1
            queue += 1
        elif ev == 1:
            paper -= 1
            queue -= 1
            running += 1
        elif prev == 0 and ev in (3, 5, 6):
            paper -= 1
            queue -= 1
        elif prev == 0 and ev == 2:
            queue -= 1  # the paper keeps a pending EVICT in its queue
        elif prev == 1 and ev in (2, 3, 4, 5, 6):
            running -= 1
        last[key] = ev
        after[t] = (paper, queue, running)
    return after


def test_queue_and_running_match_a_replay(generated: Generated) -> None:
    events = _raw(generated.raw, "task_events")
    after = _replay(events)
    q = _derived(generated, "agg_queue_length").sort("time")
    r = _derived(generated, "agg_running_tasks").sort("time")
    assert q.height > 100
    assert r.height > 100
    for t, paper, queue in q.select("time", "queue_length_paper", "queue_length").iter_rows():
        assert after[t][:2] == (paper, queue), t
    for t, running in r.select("time", "running_tasks").iter_rows():
        assert after[t][2] == running, t
    # after the last event, both series end where the replay ends
    final = after[max(after)]
    assert (q["queue_length_paper"][-1], q["queue_length"][-1]) == final[:2]
    assert r["running_tasks"][-1] == final[2]
    # the omission the paper makes is visible: its queue ends above ours
    assert q["queue_length_paper"][-1] > q["queue_length"][-1]


def test_transition_counts_match_the_truth(generated: Generated) -> None:
    special = generated.truth["special_rows"]
    counts = _derived(generated, "agg_transition_counts")

    def n(prev: int, event: int) -> int:
        hit = counts.filter((pl.col("prev_event_type") == prev) & (pl.col("event_type") == event))
        return int(hit["n"].sum())

    assert n(0, 0) == 0
    assert n(2, 0) + n(3, 0) + n(5, 0) == special["resubmissions_after_evict_fail_kill"]
    assert n(4, 0) == special["finish_restarts"]
    collapsed = _derived(generated, "fct_task_transitions_collapsed")
    pending_evicts = collapsed.filter(
        (pl.col("death_phase") == "pending") & (pl.col("event_type") == 2)
    )
    assert pending_evicts.height == special["pending_evicts"] > 0
    transitions = _derived(generated, "fct_task_transitions")
    same_us = transitions.filter(
        (pl.col("prev_event_type") == 0)
        & (pl.col("event_type") == 1)
        & (pl.col("time") == pl.col("prev_time"))
    )
    assert same_us.height == special["same_microsecond_submit_schedule"]
    assert int(counts["n"].sum()) == generated.truth["tables"]["task_events"]["rows"]


def _numpy_stats(values: np.ndarray) -> list[float]:
    return [
        float(values.mean()),
        float(values.std()),
        float(values.min()),
        float(values.max()),
        *(float(v) for v in np.percentile(values, [50, 90, 95, 99])),
    ]


def test_usage_stats_match_numpy_on_the_raw_rows(generated: Generated) -> None:
    events = _raw(generated.raw, "task_events")
    usage = _raw(generated.raw, "task_usage")
    failing = set(
        events.filter(pl.col("event_type").is_in([2, 3, 5, 6]))
        .select("job_id", "task_index")
        .iter_rows()
    )
    samples: dict[tuple[int, int], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for job, task, inst, avg in usage.select(
        "job_id", "task_index", "sampled_cpu_usage", "cpu_rate"
    ).iter_rows():
        if (job, task) in failing or inst is None:
            continue
        samples[(job, task)][0].append(inst)
        samples[(job, task)][1].append(inst if avg is None or avg > 1 else avg)
    expected = {k: v for k, v in samples.items() if max(v[0]) > 0}

    stats = _derived(generated, "fct_task_usage_stats")
    inst_cols = [f"inst_{s}" for s in ("mean", "std", "min", "max", "p50", "p90", "p95", "p99")]
    avg_cols = [c.replace("inst_", "avg_") for c in inst_cols]
    got = {
        (row[0], row[1]): row[2:]
        for row in stats.select(
            "job_id", "task_index", "n_windows", "is_long", *inst_cols, *avg_cols
        ).iter_rows()
    }
    assert set(got) == set(expected)
    for key, (inst, avg) in expected.items():
        n_windows, is_long, *values = got[key]
        assert n_windows == len(inst)
        assert is_long == (len(inst) >= 24)
        want = _numpy_stats(np.array(inst)) + _numpy_stats(np.array(avg))
        np.testing.assert_allclose(values, want, rtol=1e-9, atol=1e-12, err_msg=str(key))

    # the generator's truth says which tasks docs/methods.md §1.8 keeps
    truth = pl.read_parquet(generated.raw / "TRUTH_tasks.parquet")
    kept = truth.filter(pl.col("has_usage") & ~pl.col("failed") & ~pl.col("all_zero_inst"))
    assert set(kept.select("job_id", "task_index").iter_rows()) == set(got)


def test_histograms_match_decimal_binning(generated: Generated) -> None:
    stats = _derived(generated, "fct_task_usage_stats").filter("is_long")
    hist = _derived(generated, "fct_task_usage_histograms")
    assert hist.height == stats.height > 0
    long_keys = set(stats.select("job_id", "task_index").iter_rows())
    usage = _raw(generated.raw, "task_usage").filter(pl.col("sampled_cpu_usage").is_not_null())
    counts: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(100))
    for job, task, inst in usage.select("job_id", "task_index", "sampled_cpu_usage").iter_rows():
        if (job, task) in long_keys:
            # the decimal value as written in the file, times 100, floored: bin edges are exact
            k = int((Decimal(repr(inst)) * 100).to_integral_value(rounding=ROUND_FLOOR))
            counts[(job, task)][min(max(k, 0), 99)] += 1
    for job, task, n_windows, h in hist.select(
        "job_id", "task_index", "n_windows", "h"
    ).iter_rows():
        c = counts[(job, task)]
        assert n_windows == c.sum()
        np.testing.assert_allclose(np.array(h), c / c.sum(), atol=1e-12)
