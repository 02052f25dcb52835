"""The per-task and per-priority tables on real task_events, against the raw CSVs read directly.

Three real inputs, each through the ingest and derive flows as a user's data would go: the repo's
trimmed excerpt (``tests/data/google-2011``), the complete published task_events parts 0, 2 and 3
(``../shared/data/real/google-clusterdata-2011-2``) and those with parts 4-13
(``…-parts-04-13``). ``agg_events_by_priority`` and ``fct_task_lifecycles`` must equal a plain
Python computation over the gzip CSVs (``csv`` module, one loop per task), which shares no code
with the SQL.
"""

from __future__ import annotations

import csv
import gzip
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tracelab.analysis.lake import derive
from tracelab.flows.derive import run_derive
from tracelab.flows.ingest import run_ingest
from tracelab.flows.settings import Settings

pytestmark = [pytest.mark.real_data, pytest.mark.slow]

REPO_EXCERPT = Path(__file__).resolve().parents[2] / "data" / "google-2011"
AFTER_WINDOW = 2**63 - 1
PRODUCTION = 9
TERMINAL = {2, 3, 4, 5, 6}
#: the state a task is in after an event of each type (an UPDATE keeps pending or running)
STATE = {
    0: "pending",
    1: "running",
    2: "evicted",
    3: "failed",
    4: "finished",
    5: "killed",
    6: "lost",
    7: "pending",
    8: "running",
}
PARTS_023 = (0, 2, 3)
PARTS_0_13 = (0, *range(2, 14))


def _part(n: int) -> str:
    return f"part-{n:05d}-of-00500.csv.gz"


@dataclass(frozen=True, slots=True)
class Event:
    time: int
    part: str
    row: int
    event_type: int
    priority: int | None
    missing_info: int | None


def _int(text: str) -> int | None:
    return int(text) if text else None


def read_task_events(files: list[Path]) -> dict[tuple[int, int], list[Event]]:
    """Every task's events from headerless task_events parts, in (time, part, row) order."""
    tasks: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for path in files:
        with gzip.open(path, "rt", newline="") as fh:
            for row_no, row in enumerate(csv.reader(fh), start=1):
                # format doc: time, missing info, job ID, task index, machine ID, event type,
                # user, scheduling class, priority, ...
                key = (int(row[2]), int(row[3]))
                tasks[key].append(
                    Event(int(row[0]), path.name, row_no, int(row[5]), _int(row[8]), _int(row[1]))
                )
    for events in tasks.values():
        events.sort(key=lambda e: (e.time, e.part, e.row))
    return tasks


def events_by_priority(tasks: dict[tuple[int, int], list[Event]]) -> pl.DataFrame:
    n: Counter[tuple[int | None, int]] = Counter()
    before: Counter[tuple[int | None, int]] = Counter()
    after: Counter[tuple[int | None, int]] = Counter()
    synthesised: Counter[tuple[int | None, int]] = Counter()
    who: dict[tuple[int | None, int], set[tuple[int, int]]] = defaultdict(set)
    for task, events in tasks.items():
        for e in events:
            pair = (e.priority, e.event_type)
            n[pair] += 1
            who[pair].add(task)
            before[pair] += e.time == 0
            after[pair] += e.time == AFTER_WINDOW
            synthesised[pair] += e.missing_info is not None
    rows = [
        {
            "priority": p,
            "event_type": t,
            "is_production": None if p is None else p >= PRODUCTION,
            "n_events": n[(p, t)],
            "n_tasks": len(who[(p, t)]),
            "n_before_window": before[(p, t)],
            "n_after_window": after[(p, t)],
            "n_missing_info": synthesised[(p, t)],
        }
        for p, t in n
    ]
    return pl.DataFrame(rows).sort("priority", "event_type")


def _known(t: int) -> bool:
    return 0 < t < AFTER_WINDOW


def _durations(events: list[Event]) -> tuple[int | None, int | None]:
    """(wait, run) in µs over the task's incarnations; None when any part is unknown."""
    if events[0].event_type != 0:
        return None, None  # the task's history predates the data
    starts = [i for i, e in enumerate(events) if e.event_type == 0]
    wait: int | None = 0
    run: int | None = 0
    for k, start in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else len(events)
        inc = events[start:stop]
        sub = inc[0].time
        sched = next((i for i, e in enumerate(inc) if e.event_type == 1), None)
        end = next((i for i, e in enumerate(inc) if e.event_type in TERMINAL), None)
        this_wait: int | None
        this_run: int | None
        # a SCHEDULE after the terminal event does not start this incarnation's run
        if sched is not None and (end is None or sched < end):
            s = inc[sched].time
            this_wait = s - sub if _known(sub) and _known(s) else None
            if end is not None and _known(s) and _known(inc[end].time):
                this_run = inc[end].time - s
            else:
                this_run = None
        elif end is not None:
            t = inc[end].time
            this_wait = t - sub if _known(sub) and _known(t) else None
            this_run = 0
        else:
            this_wait, this_run = None, 0
        wait = None if wait is None or this_wait is None else wait + this_wait
        run = None if run is None or this_run is None else run + this_run
    return wait, run


def lifecycles(tasks: dict[tuple[int, int], list[Event]]) -> pl.DataFrame:
    rows = []
    for (job_id, task_index), events in tasks.items():
        priorities = [e.priority for e in events if e.priority is not None]
        submits = [e for e in events if e.event_type == 0]
        terminals = [e for e in events if e.event_type in TERMINAL]
        non_updates = [e for e in events if e.event_type not in (7, 8)]
        wait, run = _durations(events)
        priority = priorities[-1] if priorities else None
        rows.append(
            {
                "job_id": job_id,
                "task_index": task_index,
                "priority": priority,
                "is_production": None if priority is None else priority >= PRODUCTION,
                "first_event_time": events[0].time,
                "first_submit_time": submits[0].time if submits else None,
                "last_terminal_time": terminals[-1].time if terminals else None,
                "last_terminal_event_type": terminals[-1].event_type if terminals else None,
                "final_state": STATE[(non_updates or events)[-1].event_type],
                "n_events": len(events),
                "n_submits": len(submits),
                "n_attempts": sum(e.event_type == 1 for e in events),
                "total_wait_s": None if wait is None else wait / 1e6,
                "total_run_s": None if run is None else run / 1e6,
                "has_missing_info": any(e.missing_info is not None for e in events),
            }
        )
    schema = {"total_wait_s": pl.Float64(), "total_run_s": pl.Float64()}
    return pl.DataFrame(rows, schema_overrides=schema).sort("job_id", "task_index")


def _raw_root(root: Path, task_parts: list[Path], job_parts: list[Path]) -> Path:
    """A published-layout raw root of symlinks to the chosen files (nothing copied)."""
    for table, files in (("task_events", task_parts), ("job_events", job_parts)):
        (root / table).mkdir(parents=True, exist_ok=True)
        for f in files:
            (root / table / f.name).symlink_to(f)
    return root


def _derive(
    data: Path, task_parts: list[Path], job_parts: list[Path], tables: tuple[str, ...]
) -> Path:
    raw = _raw_root(data / "raw" / "google-2011", task_parts, job_parts)
    summary = run_ingest("google-2011", raw, data / "lake")
    assert not summary.failed
    settings = Settings(data_dir=data, duckdb_memory_limit="1GB", duckdb_threads=2)
    run = run_derive(settings=settings, trace="google-2011", tables=tables)
    assert run.checks
    assert all(c.holds for c in run.checks)
    return data / "derived" / "google-2011"


def _compare(derived: Path, task_parts: list[Path]) -> None:
    tasks = read_task_events(task_parts)
    n_rows = sum(len(e) for e in tasks.values())

    ours = pl.read_parquet(derived / "agg_events_by_priority.parquet")
    want = events_by_priority(tasks)
    assert_frame_equal(ours.sort("priority", "event_type"), want, check_dtypes=False)
    assert int(ours["n_events"].sum()) == n_rows

    ours = pl.read_parquet(derived / "fct_task_lifecycles.parquet")
    want = lifecycles(tasks)
    assert_frame_equal(
        ours.sort("job_id", "task_index"), want, check_dtypes=False, check_exact=True
    )


MARTS = ("agg_events_by_priority", "fct_task_lifecycles")


def test_repo_excerpt(prefect_harness: None, tmp_path: Path) -> None:
    task_parts = [REPO_EXCERPT / "task_events" / _part(n) for n in PARTS_023]
    job_parts = [REPO_EXCERPT / "job_events" / _part(0)]
    # every table, as `tracelab derive --trace google-2011` runs them
    derived = _derive(tmp_path, task_parts, job_parts, ())
    assert sorted(p.stem for p in derived.glob("*.parquet")) == derive.derived_table_names(
        "google-2011"
    )
    _compare(derived, task_parts)


def _shared(real_dir: Path, folder: str) -> Path:
    path = real_dir / folder
    if not path.is_dir():
        pytest.skip(f"{path} not found: the real excerpt is not on this machine")
    return path


def test_published_parts_0_2_3(prefect_harness: None, real_dir: Path, tmp_path: Path) -> None:
    src = _shared(real_dir, "google-clusterdata-2011-2")
    task_parts = [src / "task_events" / _part(n) for n in PARTS_023]
    job_parts = [src / "job_events" / _part(n) for n in PARTS_023]
    derived = _derive(tmp_path, task_parts, job_parts, MARTS)
    _compare(derived, task_parts)


@pytest.mark.heavy
def test_published_parts_0_and_2_to_13(
    prefect_harness: None, real_dir: Path, tmp_path: Path
) -> None:
    first = _shared(real_dir, "google-clusterdata-2011-2")
    more = _shared(real_dir, "google-clusterdata-2011-2-parts-04-13")

    def where(table: str, n: int) -> Path:
        return (first if (first / table / _part(n)).is_file() else more) / table / _part(n)

    task_parts = [where("task_events", n) for n in PARTS_0_13]
    job_parts = [where("job_events", n) for n in range(14)]
    derived = _derive(tmp_path, task_parts, job_parts, MARTS)
    _compare(derived, task_parts)
