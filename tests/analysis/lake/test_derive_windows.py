"""Any window of the real trace: each task_events part alone, and parts 2 + 3.

Users download some parts, rarely starting at part 0. Tasks submitted before such a window are
SCHEDULEd inside it; their SCHEDULE must not drive the queue below zero. Every derived table and
check must hold on the window, and the queue series must equal an independent computation:
per task in Python over the raw rows, a SCHEDULE leaves the queue only if the task's previous
event (UPDATE_* left out) is its SUBMIT, as a running death does in ``agg_running_tasks``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from test_derive_real import real_task_events

from tracelab.flows.derive import DeriveRun, run_derive
from tracelab.flows.ingest import run_ingest
from tracelab.flows.settings import Settings

pytestmark = [pytest.mark.real_data, pytest.mark.slow]

WINDOWS = {
    "part0": ("part-00000-of-00500",),
    "part2": ("part-00002-of-00500",),
    "part3": ("part-00003-of-00500",),
    "parts2+3": ("part-00002-of-00500", "part-00003-of-00500"),
}
AFTER_WINDOW = 2**63 - 1
WINDOW_START = 600_000_000
SUBMIT, SCHEDULE, EVICT = 0, 1, 2
PENDING_DEATHS = (2, 3, 5, 6)


def _derive_window(real_dir: Path, data: Path, parts: tuple[str, ...]) -> DeriveRun:
    raw = data / "raw" / "google-2011" / "task_events"
    raw.mkdir(parents=True)
    for part in parts:
        source = real_dir / "google-clusterdata-2011-2" / "task_events" / f"{part}.csv.gz"
        (raw / f"{part}.csv.gz").symlink_to(source)
    summary = run_ingest("google-2011", raw.parent, data / "lake")
    assert not summary.failed
    settings = Settings(data_dir=data, duckdb_memory_limit="1GB", duckdb_threads=2)
    return run_derive(settings=settings, trace="google-2011")


def expected_queue(events: pl.DataFrame) -> dict[int, tuple[int, int]]:
    """time → (queue_length_paper, queue_length), computed per task in plain Python."""
    # per time: (change without pending EVICTs, change with them)
    changes: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    ordered = events.filter(~pl.col("event_type").is_in([7, 8])).sort(
        "job_id", "task_index", "time", "source_file", "source_row"
    )
    previous: dict[tuple[int, int], int] = {}
    rows = ordered.select("job_id", "task_index", "time", "event_type").iter_rows()
    for job, index, time, event in rows:
        prev = previous.get((job, index))
        previous[(job, index)] = event
        pending_death = prev == SUBMIT and event in PENDING_DEATHS
        if time >= AFTER_WINDOW or not (event in (SUBMIT, SCHEDULE) or pending_death):
            continue
        change = changes[time]
        if event == SUBMIT:
            change[0] += 1
            change[1] += 1
        elif (event == SCHEDULE and prev == SUBMIT) or (pending_death and event != EVICT):
            change[0] -= 1
            change[1] -= 1
        elif pending_death:
            change[1] -= 1
    out: dict[int, tuple[int, int]] = {}
    paper = total = 0
    for time in sorted(changes):
        paper += changes[time][0]
        total += changes[time][1]
        out[time] = (paper, total)
    return out


@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_window_derives_with_every_check_holding(
    window: str, prefect_harness: None, real_dir: Path, tmp_path: Path
) -> None:
    parts = WINDOWS[window]
    run = _derive_window(real_dir, tmp_path, parts)
    failed = [c.name for c in run.checks if not c.holds]
    assert not failed, f"{window}: checks fail: {failed}"
    queue = pl.read_parquet(tmp_path / "derived" / "google-2011" / "agg_queue_length.parquet")
    expected = expected_queue(real_task_events(real_dir, parts))
    got = {
        t: (p, q)
        for t, p, q in queue.select("time", "queue_length_paper", "queue_length").iter_rows()
    }
    assert got == expected
    after_start = [v for t, v in expected.items() if t >= WINDOW_START]
    assert min(min(v) for v in after_start) >= 0
