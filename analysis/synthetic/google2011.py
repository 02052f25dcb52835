"""Seeded synthetic Google cluster-usage trace 2011 v2.1 in the exact published format.

Layout (docs/methods.md §0.1): ``out/<table>/part-NNNNN-of-MMMMM.csv.gz`` for the six tables, headerless,
columns in the order of :data:`analysis.schemas.GOOGLE_2011`. Part ``i`` of ``job_events``,
``task_events``, ``task_usage`` and ``task_constraints`` holds job batch ``i`` (every row of a job
is in the same part index), each part sorted by time (ties keep each task's event order), so the
(time, file, row) order of docs/methods.md §1.1 is every task's true event order. ``machine_events`` and
``machine_attributes`` are one part each.

Model, per job batch (all draws from ``numpy.random.default_rng([seed, stream, batch])``), calibrated
to Janus & Rzadca and Zhu et al. and the real task_events parts 2-3 (``analysis/calibration/stage.py`` checks a run):

* jobs are *service* (20%, 1 + Poisson(9) tasks) or *batch* (1 + lognormal(2.3, 1.2) tasks, at
  most 501). 55% of service jobs and 0.5% of batch jobs have a production priority (9-11), so
  production is ~6% of tasks (Zhu et al. §4.1); production service tasks run for days (90%), other
  service tasks mostly for hours, batch tasks for minutes. 10% of service and 3% of batch jobs
  were submitted before the window: their tasks have SUBMIT and SCHEDULE at time 0 and run into
  the window. Other jobs are submitted uniformly over the horizon; most tasks at the job's time,
  some seconds later.
* each task lives up to 16 *incarnations*. An incarnation is SUBMIT, then (2.5%) a death while
  pending — FAIL, KILL, LOST or, as in the real trace (Zhu et al. §2.2), EVICT — or a SCHEDULE after
  a lognormal pending time (median 2 s, never 0 µs: the real parts never SCHEDULE in the SUBMIT's
  microsecond) on a machine, then FINISH, EVICT, FAIL, KILL or LOST. A new SUBMIT follows 1-12 µs
  later with the real parts' probabilities: after EVICT 0.999, FAIL 0.9, KILL 0.38, FINISH 0.03,
  LOST never. 12% of batch tasks *crash-loop* (they mostly FAIL after 1-40 minutes and are
  resubmitted), which makes submissions ~1.9x new submissions (Zhu et al. §2.2). Short runs are
  log-uniform in [30 s, 2 h] (~40% of executions under 5 minutes, Zhu et al. Fig. 8). 5% of
  pending and running periods carry an UPDATE_PENDING / UPDATE_RUNNING that revises the CPU
  request.
* CPU requests follow usage (Zhu et al. §4.1, Figure 9: requests exceed usage, production uses
  about half of what it requests): a task's request is its true mean ``cpu_rate`` (the
  ``true_avg_mean`` below, = ``true_inst_mean`` except for idle tasks) times an overcommit
  factor, log-uniform in [1.3, 3] (mean 2.03) for production (priority >= 9) and in [0.7, 1.5]
  (mean 1.05) otherwise, rounded *up* to 6 decimals and capped at 1. Each task has one factor
  on every incarnation's SUBMIT/SCHEDULE; an UPDATE carries a fresh factor of the same class.
  Requests are continuous, not a menu: rounding small usages to a menu would distort the factor.
  Every true mean is below 1, so every production request >= the task's true inst mean. A
  shifting task's request covers its window-weighted mean over its whole life, so after the shift
  it may use more than it requests (Zhu et al. §4.1: tasks can exceed their quota, up to ~2x).
  Memory requests stay per job, lognormal around 0.06 (production) and 0.015 (other jobs), so
  production holds > 80% of the memory used (Zhu et al. §4.1).
* events after the horizon are not written, except that 3% of incarnations still running at the
  horizon end with their terminal event at 2^63-1 ("after the window"). Machine IDs are NULL while
  pending. 0.2% of task/job rows carry a ``missing info`` code and (task rows) NULL requests.
* job_events: SUBMIT at the first task SUBMIT, SCHEDULE at the first task SCHEDULE, and, when every
  task has ended, KILL / FAIL / LOST / FINISH (first that applies over the tasks' last events)
  at the last task end.
* task_usage: one row per full 300 s window, aligned to 600 s, inside each run (SCHEDULE to its
  end, or the horizon), on the incarnation's machine. inst and avg come from the task's usage
  family (:mod:`analysis.synthetic.usage_families`: ~0.027 core per long task, mostly below
  0.1 core, production leaning to the heavier families); tasks with >= 24 windows change phase,
  with probability SHIFT_PROBABILITY, at a window drawn in [max(ceil(0.7 n), 12), n - 12]
  (Janus & Rzadca §3.4: KS rejects ~30% of long tasks at Δ = 12).
* machines: a fleet ADDed at time 0; 3% are REMOVEd and re-ADDed, 3% ADDed during the window,
  5% UPDATEd; tasks only run on machines present all along. machine_attributes gives every
  machine a few attributes (integer or hash values, a few deleted later); task_constraints puts
  1–3 constraints on 15% of tasks, at their first SUBMIT, on attribute names and values that exist.

``TRUTH.json`` keys:

* ``trace`` ("google-2011"), ``generator`` (module), ``generator_version``, ``seed``, ``scale``,
  ``target_mb`` and ``part_mb`` (null unless given), ``batches`` (job batches), ``parts`` (part
  files per batched table: one per batch unless ``part_mb`` groups consecutive batches);
* ``window_start_us``, ``horizon_us`` (synthetic window length), ``window_end_us``,
  ``usage_window_us``, ``time_after_window_us``;
* ``tables``: per table ``rows``, ``uncompressed_bytes`` and ``files`` (paths relative to out);
* ``event_type_counts``: ``task_events``, ``job_events``, ``machine_events``: {code: rows};
* ``special_rows``: task_events rows at time 0, at 2^63-1, with missing info, SUBMIT+SCHEDULE at
  the same microsecond (pairs), EVICTs straight from pending, FINISH->SUBMIT restarts,
  resubmissions after EVICT/FAIL/KILL, usage rows of failed tasks;
* ``families``: per family ``code``, ``share`` (of non-idle tasks, per class ``production`` and
  ``non_production``), the ``inst`` and ``after_shift`` distributions with the parameter ranges; ``idle_share`` (tasks with inst 0 in every window);
  ``avg_model`` (how cpu_rate is derived from the family);
* ``cpu_request``: the request model (``production_priority``, ``base``, ``request``,
  ``overcommit`` per class with ``low``, ``high``, ``mean``, ``factor_rule``, ``memory``) and
  ``usage_windows``: per class (production, non_production) the sums over usage windows of the
  true mean cpu_rate and of the request in force at the window start, and their ratio
  ``used_over_requested`` (about 1 / mean factor, 0.49 and 0.95, but the cap at 1 gives the
  heavy uniform-family tasks a smaller factor: ~0.57 production, ~0.96 non-production);
* ``shift``: ``probability`` (per eligible task), ``min_windows`` (24), ``window_rule``,
  ``shifted_tasks``, ``share_of_long_nonfailed`` (realised share of long non-failed tasks);
* ``tasks``: counts of ``tasks``, ``with_usage``, ``long`` (>= 24 windows), ``long_nonfailed``,
  ``failed``, ``per_family`` (all tasks);
* ``regression``: over long non-failed tasks whose inst is not zero in every window (the set
  docs/methods.md §1.8 keeps), least squares of true std on true mean: ``inst`` and ``avg``, each
  ``slope``, ``intercept``, ``n``;
* ``tasks_file``: "TRUTH_tasks.parquet", one row per task: ``job_id``, ``task_index``,
  ``priority``, ``family`` (name or "idle"), ``has_usage``, ``n_windows``, ``failed`` (any
  EVICT/FAIL/KILL/LOST event), ``all_zero_inst``, ``shifts``, ``shift_window`` (0-based index of
  the first shifted window over the task's windows in time order; null if none),
  ``true_inst_mean``, ``true_inst_std``, ``true_avg_mean``, ``true_avg_std`` (exact moments of the
  generating distributions, weighted by the task's windows before/after the shift),
  ``cpu_overcommit`` (the task's factor) and ``cpu_request`` (its request on SUBMIT/SCHEDULE).
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow.parquet as pq

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.schemas import (
    GOOGLE_2011,
    TIME_AFTER_WINDOW_US,
    USAGE_WINDOW_US,
    WINDOW_START_US,
)
from tracelab.analysis.synthetic import usage_families as uf
from tracelab.analysis.synthetic.csvparts import (
    GzipPartStream,
    csv_bytes,
    nullable,
    part_name,
    pending_part_name,
    write_gzip_part,
)
from tracelab.analysis.synthetic.request import check_request
from tracelab.analysis.traces import google2011

GENERATOR_VERSION = "2.0.0"
TRACE = google2011.ID

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
MACHINE_ADD, MACHINE_REMOVE, MACHINE_UPDATE = range(3)

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
LONG_WINDOWS = 24
#: phase changes (Janus & Rzadca §3.4: KS rejects ~30% of long tasks at Δ = 12): tasks with at least
#: SHIFT_MIN_WINDOWS windows change with SHIFT_PROBABILITY at a window uniform in
#: [max(ceil(SHIFT_FROM n), 12), n - 12], keeping 12 windows on each side
SHIFT_MIN_WINDOWS = 24
SHIFT_MIN_AFTER = 12
SHIFT_FROM = 0.7
SHIFT_PROBABILITY = 0.7
MAX_INCARNATIONS = 16
#: threads compressing part files while the next batch is generated
COMPRESS_THREADS = 4

BATCHED_TABLES = ("job_events", "task_events", "task_usage", "task_constraints")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Scale:
    """Size of a generated trace: job batches (= part files) of a fixed number of jobs."""

    name: str
    batches: int
    jobs_per_batch: int
    horizon_us: int
    machines: int


SCALES: dict[str, Scale] = {
    s.name: s
    for s in (
        Scale("tiny", batches=4, jobs_per_batch=100, horizon_us=1 * DAY_US, machines=200),
        Scale("small", batches=8, jobs_per_batch=150, horizon_us=3 * DAY_US, machines=1_000),
        # ~270k usage rows (~45 MB of CSV) per batch over the real 29-day window
        Scale("medium", batches=90, jobs_per_batch=100, horizon_us=29 * DAY_US, machines=5_000),
        Scale("large", batches=450, jobs_per_batch=100, horizon_us=29 * DAY_US, machines=12_000),
    )
}

# --- life-cycle probabilities (per incarnation) ---------------------------------------------
#: service jobs (long-running tasks); with the task counts below, production (priority >= 9) is
#: ~6% of tasks (Zhu et al. §4.1)
P_SERVICE = 0.20
SERVICE_TASKS_MEAN = 10
#: batch jobs: 1 + lognormal(mu, sigma) tasks (capped at 500), mean ~21
BATCH_TASKS_LOGNORMAL = (2.3, 1.2)
P_SERVICE_PRODUCTION = 0.55
P_BATCH_PRODUCTION = 0.005
#: duration class of service tasks: long-running (days) for production, mostly hours otherwise
P_LONG_PRODUCTION_SERVICE = 0.9
P_LONG_OTHER_SERVICE = 0.07
P_BATCH_HOURS = 0.02
P_BEFORE_WINDOW = {"service": 0.10, "batch": 0.03}
P_PENDING_DEATH = 0.025
#: pending death types FAIL, KILL, LOST, EVICT
PENDING_DEATHS = np.array([FAIL, KILL, LOST, EVICT])
P_PENDING_DEATHS = np.array([0.30, 0.45, 0.05, 0.20])
RUN_ENDS = np.array([FINISH, EVICT, FAIL, KILL, LOST])
P_RUN_ENDS_SERVICE = np.array([0.50, 0.18, 0.08, 0.22, 0.02])
P_RUN_ENDS_BATCH = np.array([0.80, 0.06, 0.05, 0.085, 0.005])
#: a few batch tasks crash-loop: they FAIL fast and are resubmitted again and again, which is
#: what makes submissions ~1.9x new submissions in the real trace (Zhu et al. §2.2)
P_CRASH_LOOP = 0.12
P_RUN_ENDS_CRASH_LOOP = np.array([0.08, 0.02, 0.85, 0.05, 0.0])
#: probability of a new SUBMIT after each terminal type (index = event code). Real task_events
#: parts 2-3: after EVICT 99.9%, FAIL 89-96%, KILL 37-41%, FINISH 0.1-4.5%; LOST never
P_CONTINUE = np.array([0, 0, 0.999, 0.9, 0.03, 0.38, 0.0, 0, 0])
P_CONTINUE_CRASH_LOOP = np.array([0, 0, 0.999, 0.97, 0.03, 0.5, 0.0, 0, 0])
P_UPDATE = 0.05
P_AFTER_WINDOW_END = 0.03
P_MISSING_INFO = 0.002
P_CONSTRAINED = 0.15
#: SUBMIT -> SCHEDULE, lognormal (median µs, sigma): real parts 2-3 give a ~2 s median, 90th
#: percentile 4-29 s, 99th 36-73 s, and never 0 µs
PENDING_LOGNORMAL_US = (2_000_000, 1.3)
#: end -> resubmission gap (µs): 3-12 µs in the real parts 2-3
RESUBMIT_GAP_MEAN_US = 5

# --- CPU requests (Zhu et al. §4.1, Figure 9) ----------------------------------------------------
#: lowest production priority (Zhu et al. §4.1)
PRODUCTION_PRIORITY = 9
#: request = true mean cpu_rate x a log-uniform overcommit factor in these bounds: production
#: over-requests (the seed finds it uses ~50% of what it requests); the rest request about what
#: they use, some a little less
OVERCOMMIT_PRODUCTION = (1.3, 3.0)
OVERCOMMIT_NON_PRODUCTION = (0.7, 1.5)
#: requests are written with 6 decimals (steps of 1e-6), rounded up so that rounding never
#: takes a request below factor x usage
REQUEST_STEPS = 1_000_000


@dataclass(frozen=True)
class Fleet:
    """Machines and their attributes, shared by every batch."""

    usable_ids: IntArray
    machine_events: pl.DataFrame
    machine_attributes: pl.DataFrame
    attribute_names: tuple[str, ...]
    attribute_values: tuple[tuple[str, ...], ...]
    users: tuple[str, ...]
    logical_names: tuple[str, ...]


@dataclass
class _Totals:
    """Running totals over batches (mutable accumulator, local to one generation)."""

    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GOOGLE_2011, 0))
    raw_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GOOGLE_2011, 0))
    task_types: IntArray = field(default_factory=lambda: np.zeros(9, dtype=np.int64))
    job_types: IntArray = field(default_factory=lambda: np.zeros(9, dtype=np.int64))
    special: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    per_family: dict[str, int] = field(default_factory=dict)
    #: n, sum x, sum y, sum xx, sum xy for inst then avg
    regression: FloatArray = field(default_factory=lambda: np.zeros((2, 5)))
    #: as BatchTables.request_sums, summed over batches
    request_sums: FloatArray = field(default_factory=lambda: np.zeros((2, 2)))

    def add(self, key: str, value: int, target: str = "special") -> None:
        bucket = self.special if target == "special" else self.tasks
        bucket[key] = bucket.get(key, 0) + int(value)


@dataclass(frozen=True)
class BatchTables:
    """Everything one job batch writes."""

    frames: dict[str, pl.DataFrame]
    truth: pl.DataFrame
    special: dict[str, int]
    #: rows production, non-production; columns: sum over usage windows of the true mean
    #: cpu_rate, and of the CPU request in force at the window start
    request_sums: FloatArray


def _queue_batch(
    batch: BatchTables,
    streams: dict[str, GzipPartStream],
    out: Path,
    n_parts: int,
    pool: ThreadPoolExecutor,
    totals: _Totals,
) -> tuple[int, int, list[Future[None]]]:
    """Queue one batch's CSV bytes on each table's open part (opening parts as needed).

    Returns (raw bytes written, of which task_usage, the compression futures).
    """
    written = usage = 0
    queued: list[Future[None]] = []
    for name, frame in batch.frames.items():
        if name not in streams:
            streams[name] = GzipPartStream(out / name / pending_part_name(n_parts))
        raw = csv_bytes(frame)
        queued.append(pool.submit(streams[name].write, raw))
        totals.rows[name] += frame.height
        totals.raw_bytes[name] += len(raw)
        written += len(raw)
        if name == "task_usage":
            usage += len(raw)
    return written, usage, queued


def generate_google_2011(
    out: Path,
    *,
    seed: int = 0,
    scale: str = "tiny",
    target_mb: float | None = None,
    part_mb: float | None = None,
    progress: bool = False,
) -> Path:
    """Write a synthetic google-2011 trace under ``out``; returns ``out/TRUTH.json``.

    ``part_mb`` None writes one part per job batch (tens of MB of task_usage at the large
    scale); a number closes every table's part once its task_usage part holds that many raw MB,
    so benchmarks can use the published part sizes (~350 MB of raw task_usage per part).
    """
    check_request(TRACE, scale, target_mb, part_mb)
    cfg = SCALES[scale]
    out = Path(out)
    _clear_previous_output(out)
    fleet = fleet_tables(seed, cfg)
    totals = _Totals()
    target_bytes = None if target_mb is None else int(target_mb * 1_000_000)
    part_bytes = 0 if part_mb is None else int(part_mb * 1_000_000)
    truth_path = out / "TRUTH_tasks.parquet"
    writer: pq.ParquetWriter | None = None
    n_batches = 0
    n_parts = 0
    streams: dict[str, GzipPartStream] = {}
    usage_in_part = 0
    pending: list[Future[None]] = []
    # gzip (which releases the GIL) runs in threads while the next batch is generated; waiting
    # for the previous batch before queueing the next keeps at most two batches in memory and
    # keeps each part's chunks in order
    pool = ThreadPoolExecutor(max_workers=COMPRESS_THREADS, thread_name_prefix="gzip")
    try:
        with _progress(progress, cfg.batches if target_bytes is None else target_bytes) as step:
            while True:
                batch = batch_tables(seed, n_batches, cfg, fleet)
                for done in pending:
                    done.result()
                pending = []
                if streams and usage_in_part >= part_bytes:
                    pending.extend(pool.submit(s.close) for s in streams.values())
                    streams, usage_in_part, n_parts = {}, 0, n_parts + 1
                written, usage, queued = _queue_batch(batch, streams, out, n_parts, pool, totals)
                pending.extend(queued)
                usage_in_part += usage
                _accumulate(totals, batch)
                table = batch.truth.to_arrow()
                if writer is None:
                    writer = pq.ParquetWriter(truth_path, table.schema, compression="zstd")
                writer.write_table(table)
                n_batches += 1
                step(1 if target_bytes is None else written)
                if target_bytes is None:
                    if n_batches >= cfg.batches:
                        break
                elif sum(totals.raw_bytes.values()) >= target_bytes:
                    break
        for done in pending:
            done.result()
        for stream in streams.values():
            stream.close()
        streams, n_parts = {}, n_parts + 1
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for stream in streams.values():
            stream.discard()
        if writer is not None:
            writer.close()
    files = _finalise_parts(out, n_parts)
    files.update(_write_fleet(out, fleet, totals))
    doc = _truth_document(seed, cfg, target_mb, part_mb, n_batches, n_parts, totals, files, fleet)
    truth = out / "TRUTH.json"
    truth.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return truth


def _write_fleet(out: Path, fleet: Fleet, totals: _Totals) -> dict[str, list[str]]:
    """machine_events and machine_attributes, one part each; their rows and bytes into totals."""
    files: dict[str, list[str]] = {}
    for name, frame in (
        ("machine_events", fleet.machine_events),
        ("machine_attributes", fleet.machine_attributes),
    ):
        path = out / name / part_name(0, 1)
        totals.raw_bytes[name] = write_gzip_part(path, frame)
        totals.rows[name] = frame.height
        files[name] = [f"{name}/{path.name}"]
    return files


# --- fleet -----------------------------------------------------------------------------------


def _hashes(rng: np.random.Generator, n: int) -> list[str]:
    """Opaque base64 SHA-256-looking names, as the trace publishes user/job/platform names."""
    raw = rng.bytes(32 * n)
    return [base64.b64encode(raw[32 * i : 32 * (i + 1)]).decode("ascii") for i in range(n)]


def fleet_tables(seed: int, cfg: Scale) -> Fleet:
    """Machines (ADD at 0, a few REMOVE/ADD/UPDATE), their attributes, and shared name pools."""
    rng = np.random.default_rng([seed, 1, cfg.machines])
    m = cfg.machines
    end = WINDOW_START_US + cfg.horizon_us
    ids = np.sort(rng.choice(6_000_000_000, size=m, replace=False).astype(np.int64) + 1_000_000)
    ids = rng.permutation(ids)
    platforms = _hashes(rng, 3)
    platform = rng.choice(3, size=m, p=[0.9, 0.06, 0.04])
    cpus = np.array([0.5, 0.25, 1.0])[platform]
    memory = np.where(
        platform == 0,
        rng.choice([0.2493, 0.4995, 0.749], size=m, p=[0.35, 0.55, 0.10]),
        np.where(platform == 1, 0.2493, 1.0),
    )
    role = rng.choice(3, size=m, p=[0.94, 0.03, 0.03])  # 0 stable, 1 maintenance, 2 late
    in_window = WINDOW_START_US + (rng.random(m) * cfg.horizon_us * 0.9).astype(np.int64)
    add_time = np.where(role == 2, in_window, 0)
    t_rows: list[IntArray] = [add_time]
    id_rows: list[IntArray] = [ids]
    type_rows: list[IntArray] = [np.full(m, MACHINE_ADD, dtype=np.int64)]
    cpu_rows: list[FloatArray] = [cpus]
    mem_rows: list[FloatArray] = [memory]
    null_rows: list[BoolArray] = [np.zeros(m, dtype=bool)]
    maint = np.flatnonzero(role == 1)
    back = in_window[maint] + (rng.exponential(2 * HOUR_US, maint.size)).astype(np.int64) + 1
    keep_back = back <= end
    t_rows += [in_window[maint], back[keep_back]]
    id_rows += [ids[maint], ids[maint][keep_back]]
    type_rows += [np.full(maint.size, MACHINE_REMOVE), np.full(int(keep_back.sum()), MACHINE_ADD)]
    cpu_rows += [cpus[maint], cpus[maint][keep_back]]
    mem_rows += [memory[maint], memory[maint][keep_back]]
    null_rows += [rng.random(maint.size) < 0.5, np.zeros(int(keep_back.sum()), dtype=bool)]
    upd = np.flatnonzero((role == 0) & (rng.random(m) < 0.05))
    t_upd = WINDOW_START_US + (rng.random(upd.size) * cfg.horizon_us).astype(np.int64)
    t_rows.append(t_upd)
    id_rows.append(ids[upd])
    type_rows.append(np.full(upd.size, MACHINE_UPDATE))
    cpu_rows.append(cpus[upd])
    mem_rows.append(np.round(np.clip(memory[upd] * rng.choice([0.5, 2.0], upd.size), 0, 1), 4))
    null_rows.append(np.zeros(upd.size, dtype=bool))
    t = np.concatenate(t_rows)
    mid = np.concatenate(id_rows)
    et = np.concatenate(type_rows).astype(np.int64)
    order = np.lexsort((np.arange(t.size), t))
    plat_series = pl.Series(platforms)
    plat_of = dict(zip(ids.tolist(), platform.tolist(), strict=True))
    plat_idx = np.array([plat_of[i] for i in mid.tolist()], dtype=np.int64)
    null = np.concatenate(null_rows)
    machine_events = pl.DataFrame(
        {
            "time": t[order],
            "machine_id": mid[order],
            "event_type": et[order],
            "platform_id": plat_series.gather(plat_idx[order]),
            "cpus": nullable(np.concatenate(cpu_rows)[order], null[order]),
            "memory": nullable(np.concatenate(mem_rows)[order], null[order]),
        }
    )
    machine_events.columns = GOOGLE_2011["machine_events"].column_names

    machine_attributes, names, values = _machine_attributes(rng, ids, add_time, m, end)
    return Fleet(
        usable_ids=ids[role == 0],
        machine_events=machine_events,
        machine_attributes=machine_attributes,
        attribute_names=tuple(names),
        attribute_values=tuple(values),
        users=tuple(_hashes(rng, 40)),
        logical_names=tuple(_hashes(rng, 200)),
    )


def _machine_attributes(
    rng: np.random.Generator, ids: IntArray, add_time: IntArray, m: int, end: int
) -> tuple[pl.DataFrame, list[str], list[tuple[str, ...]]]:
    """machine_attributes rows (a few deleted later), the attribute names and their values."""
    n_attr = 12
    names = _hashes(rng, n_attr)
    values: list[tuple[str, ...]] = []
    for j in range(n_attr):
        if j % 2 == 0:
            values.append(tuple(str(v) for v in range(1, 5)))
        else:
            values.append(tuple(_hashes(rng, 3)))
    present = rng.random((m, n_attr)) < 0.6
    mi, aj = np.nonzero(present)
    pick = rng.integers(0, 3, size=mi.size)
    val = [values[a][p] for a, p in zip(aj.tolist(), pick.tolist(), strict=True)]
    a_time = add_time[mi]
    deleted = rng.random(mi.size) < 0.01
    del_from = np.maximum(a_time, WINDOW_START_US)
    del_time = del_from + (rng.random(mi.size) * (end - del_from)).astype(np.int64)
    times = np.concatenate([a_time, del_time[deleted]])
    a_ids = np.concatenate([ids[mi], ids[mi][deleted]])
    a_names = np.concatenate([aj, aj[deleted]])
    a_vals: list[str | None] = [*val, *([None] * int(deleted.sum()))]
    a_del = np.concatenate([np.zeros(mi.size, np.int8), np.ones(int(deleted.sum()), np.int8)])
    order = np.lexsort((np.arange(times.size), times))
    machine_attributes = pl.DataFrame(
        {
            "time": times[order],
            "machine_id": a_ids[order],
            "attribute_name": pl.Series(names).gather(a_names[order]),
            "attribute_value": pl.Series(a_vals, dtype=pl.String).gather(order),
            "attribute_deleted": a_del[order],
        }
    )
    machine_attributes.columns = GOOGLE_2011["machine_attributes"].column_names
    return machine_attributes, names, values


# --- one batch of jobs -----------------------------------------------------------------------


def _choice(rng: np.random.Generator, values: npt.ArrayLike, p: npt.ArrayLike, n: int) -> IntArray:
    return np.asarray(rng.choice(np.asarray(values), size=n, p=np.asarray(p)), dtype=np.int64)


@dataclass(frozen=True)
class _Jobs:
    """Per-job draws of one batch."""

    service: BoolArray
    before: BoolArray
    submit: IntArray
    n_tasks: IntArray
    priority: IntArray
    sched_class: IntArray
    job_id: IntArray
    user: IntArray
    logical: IntArray
    names: pl.Series
    mem_req: FloatArray
    disk_req: FloatArray
    restricted: BoolArray


@dataclass(frozen=True)
class _Tasks:
    """Per-task draws of one batch (``job`` indexes the batch's jobs)."""

    job: IntArray
    index: IntArray
    first_submit: IntArray
    duration_class: IntArray
    service: BoolArray
    crash_loop: BoolArray
    production: BoolArray
    fam: uf.TaskFamilies


@dataclass(frozen=True)
class _Lives:
    """Per task x incarnation: times, outcome, machine (arrays of shape (tasks, MAX_INCARNATIONS))."""

    exists: BoolArray
    scheduled: BoolArray
    submit: IntArray
    sched: IntArray
    end: IntArray
    run_len: IntArray
    term: IntArray
    machine: IntArray


@dataclass(frozen=True)
class _Events:
    """task_events rows of one batch, as (task, incarnation, slot) indices, in output order."""

    ti: IntArray
    ki: IntArray
    si: IntArray
    time: IntArray
    type: IntArray
    on_machine: BoolArray
    sched_seen: BoolArray
    upd_p: BoolArray
    upd_r: BoolArray
    upd_r_time: IntArray
    over_first: FloatArray
    over_update: FloatArray
    factor: FloatArray


def batch_tables(seed: int, batch: int, cfg: Scale, fleet: Fleet) -> BatchTables:
    """Jobs, tasks, life cycles, usage and constraints of job batch ``batch``."""
    rng = np.random.default_rng([seed, 2, batch])
    jobs = _draw_jobs(rng, batch, cfg, fleet)
    tasks = _draw_tasks(rng, jobs)
    lives = _life_cycles(rng, tasks, cfg, fleet)
    events = _event_rows(rng, tasks, lives, cfg)
    n_t = tasks.job.size
    failed = np.zeros(n_t, dtype=bool)
    failing = np.isin(events.type, [EVICT, FAIL, KILL, LOST])
    failed[events.ti[failing]] = True
    job_events = _job_events(rng, tasks.job, events.ti, events.time, events.type, jobs, fleet)
    win = _usage_windows(rng, tasks, lives, events, cfg)
    moments = uf.task_moments(tasks.fam, win.n_windows, win.shifts, win.shift_window)
    task_events = _task_events_frame(rng, jobs, tasks, lives, events, moments, fleet)
    usage, all_zero = _usage_rows(
        rng,
        tasks.fam,
        win.u_task,
        win.shifted_row,
        jobs.mem_req[tasks.job],
        jobs.disk_req[tasks.job],
    )
    t_job_id = jobs.job_id[tasks.job]
    task_usage = pl.DataFrame(
        [
            pl.Series("start_time", win.start_time),
            pl.Series("end_time", win.start_time + USAGE_WINDOW_US),
            pl.Series("job_id", t_job_id[win.u_task]),
            pl.Series("task_index", tasks.index[win.u_task]),
            pl.Series("machine_id", lives.machine.reshape(-1)[win.rep]),
            *usage,
        ]
    )[np.lexsort((tasks.index[win.u_task], t_job_id[win.u_task], win.start_time))]
    task_constraints = _task_constraints(rng, tasks.first_submit, t_job_id, tasks.index, fleet)
    truth = _task_truth(
        tasks.fam,
        moments,
        t_job_id,
        tasks.index,
        jobs.priority[tasks.job],
        win.n_windows,
        failed,
        all_zero | (win.n_windows == 0),
        win.shifts,
        win.shift_window,
        events.over_first,
        cpu_requests(moments.avg_mean, events.over_first),
    )
    frames = {
        "job_events": job_events,
        "task_events": task_events,
        "task_usage": task_usage,
        "task_constraints": task_constraints,
    }
    special = _special_counts(lives, events, failed, win.u_task)
    special["task_events_missing_info"] = int(task_events["missing_info"].is_not_null().sum())
    for name, frame in frames.items():
        frame.columns = GOOGLE_2011[name].column_names
    sums = _request_sums(tasks, events, win, moments)
    return BatchTables(frames=frames, truth=truth, special=special, request_sums=sums)


def _draw_jobs(rng: np.random.Generator, batch: int, cfg: Scale, fleet: Fleet) -> _Jobs:
    """Job kind, submit time, size, priority, class, names and per-job memory/disk requests."""
    n_jobs = cfg.jobs_per_batch
    service = rng.random(n_jobs) < P_SERVICE
    before = np.where(
        service,
        rng.random(n_jobs) < P_BEFORE_WINDOW["service"],
        rng.random(n_jobs) < P_BEFORE_WINDOW["batch"],
    )
    submit = np.where(
        before, 0, WINDOW_START_US + (rng.random(n_jobs) * cfg.horizon_us).astype(np.int64)
    )
    n_tasks = np.where(
        service,
        1 + rng.poisson(SERVICE_TASKS_MEAN - 1, n_jobs),
        1 + np.minimum(rng.lognormal(*BATCH_TASKS_LOGNORMAL, n_jobs).astype(np.int64), 500),
    ).astype(np.int64)
    prod_pri = _choice(rng, [9, 10, 11], [0.7, 0.2, 0.1], n_jobs)
    low_pri = _choice(
        rng,
        [0, 1, 2, 3, 4, 5, 6, 7, 8],
        [0.40, 0.15, 0.15, 0.05, 0.15, 0.02, 0.04, 0.02, 0.02],
        n_jobs,
    )
    priority = np.where(service & (rng.random(n_jobs) < P_SERVICE_PRODUCTION), prod_pri, low_pri)
    priority = np.where(~service & (rng.random(n_jobs) < P_BATCH_PRODUCTION), prod_pri, priority)
    sched_class = np.where(
        service,
        _choice(rng, [1, 2, 3], [0.3, 0.5, 0.2], n_jobs),
        _choice(rng, [0, 1], [0.7, 0.3], n_jobs),
    )
    # production jobs hold most memory (Zhu et al. §4.1: > 80% of memory): larger requests
    production = priority >= PRODUCTION_PRIORITY
    mem_median = np.where(production, 0.06, 0.015)
    return _Jobs(
        service=service,
        before=before,
        submit=submit,
        n_tasks=n_tasks,
        priority=priority,
        sched_class=sched_class,
        job_id=3_418_309 + (batch * n_jobs + np.arange(n_jobs, dtype=np.int64)) * 7,
        user=rng.integers(0, len(fleet.users), n_jobs),
        logical=rng.integers(0, len(fleet.logical_names), n_jobs),
        names=pl.Series(_hashes(rng, n_jobs)),
        mem_req=np.asarray(
            np.round(np.clip(mem_median * rng.lognormal(0.0, 1.0, n_jobs), 5e-4, 1), 5),
            dtype=np.float64,
        ),
        disk_req=np.asarray(
            np.round(np.clip(rng.lognormal(np.log(0.0004), 0.8, n_jobs), 1e-5, 0.05), 7),
            dtype=np.float64,
        ),
        restricted=rng.random(n_jobs) < 0.1,
    )


def _draw_tasks(rng: np.random.Generator, jobs: _Jobs) -> _Tasks:
    """Tasks of every job: index, first SUBMIT, duration class, crash loop, usage family."""
    t_job = np.repeat(np.arange(jobs.n_tasks.size), jobs.n_tasks)
    n_t = t_job.size
    job_start = np.cumsum(jobs.n_tasks) - jobs.n_tasks
    t_service = jobs.service[t_job]
    t_before = jobs.before[t_job]
    offset = np.where(
        t_before | (rng.random(n_t) < 0.7), 0, 1 + rng.exponential(5_000_000, n_t).astype(np.int64)
    )
    production = jobs.priority[t_job] >= PRODUCTION_PRIORITY
    # 0 short, 1 hours, 2 long-running: production services run for days, other services for
    # hours (Zhu et al. §4.1: production is 6% of tasks but > 80% of the CPU and memory used)
    long_share = np.where(production, P_LONG_PRODUCTION_SERVICE, P_LONG_OTHER_SERVICE)
    u = rng.random(n_t)
    duration_class = np.where(
        t_service,
        np.where(u < long_share, 2, np.where(u < long_share + 0.3, 1, 0)),
        np.where(u < P_BATCH_HOURS, 1, 0),
    )
    crash_loop = ~t_service & (rng.random(n_t) < P_CRASH_LOOP)
    return _Tasks(
        job=t_job,
        index=np.arange(n_t) - np.repeat(job_start, jobs.n_tasks),
        first_submit=jobs.submit[t_job] + offset,
        duration_class=duration_class,
        service=t_service,
        crash_loop=crash_loop,
        production=production,
        fam=uf.task_families(rng, production),
    )


def _life_cycles(rng: np.random.Generator, tasks: _Tasks, cfg: Scale, fleet: Fleet) -> _Lives:
    """Up to MAX_INCARNATIONS incarnations per task: SUBMIT, pending, SCHEDULE or death, end."""
    n_t, k_max = tasks.job.size, MAX_INCARNATIONS
    horizon_end = WINDOW_START_US + cfg.horizon_us
    shape = (n_t, k_max)
    submit, sched, end, run_len, term = (np.zeros(shape, dtype=np.int64) for _ in range(5))
    exists, scheduled = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    machine = fleet.usable_ids[rng.integers(0, fleet.usable_ids.size, shape)]
    t_service = tasks.service
    t_before = tasks.first_submit == 0
    cur_submit = tasks.first_submit.copy()
    alive = np.ones(n_t, dtype=bool)
    p_run_end = np.where(
        tasks.crash_loop[:, None],
        P_RUN_ENDS_CRASH_LOOP,
        np.where(t_service[:, None], P_RUN_ENDS_SERVICE, P_RUN_ENDS_BATCH),
    )
    for k in range(k_max):
        was_before = t_before & (k == 0)
        u = rng.random((n_t, 3))
        # real parts 2-3: SUBMIT -> SCHEDULE takes 0.8-29 s (10th-90th percentile, median ~2 s),
        # never 0 µs; tasks submitted before the window show both at time 0
        pend = np.where(was_before, 0, _pending_times(rng, n_t))
        is_sched = was_before | (u[:, 0] >= P_PENDING_DEATH)
        pdeath = PENDING_DEATHS[_categorical(u[:, 1], P_PENDING_DEATHS)]
        rend = RUN_ENDS[_categorical_rows(u[:, 2], p_run_end)]
        r = _run_lengths(rng, tasks.duration_class, tasks.crash_loop, cfg.horizon_us)
        s = cur_submit + pend
        e = np.where(is_sched, np.where(was_before, WINDOW_START_US + r, s + r), s)
        exists[:, k], submit[:, k], sched[:, k], end[:, k] = alive, cur_submit, s, e
        run_len[:, k], scheduled[:, k] = r, is_sched
        term[:, k] = np.where(is_sched, rend, pdeath)
        p_cont = np.where(
            tasks.crash_loop, P_CONTINUE_CRASH_LOOP[term[:, k]], P_CONTINUE[term[:, k]]
        )
        cont = (e <= horizon_end) & (rng.random(n_t) < p_cont) & (k + 1 < k_max)
        # real parts 2-3: the resubmission follows the end by 3-12 µs
        cur_submit = e + 1 + rng.exponential(RESUBMIT_GAP_MEAN_US, n_t).astype(np.int64)
        alive = alive & cont & (cur_submit <= horizon_end)
    return _Lives(exists, scheduled, submit, sched, end, run_len, term, machine)


def _pending_times(rng: np.random.Generator, n: int) -> IntArray:
    """SUBMIT -> SCHEDULE (µs, >= 1): lognormal around the real excerpts' ~2 s median."""
    median, sigma = PENDING_LOGNORMAL_US
    return np.asarray(1 + rng.lognormal(np.log(median), sigma, n).astype(np.int64))


def _event_rows(rng: np.random.Generator, tasks: _Tasks, lives: _Lives, cfg: Scale) -> _Events:
    """Five event slots per incarnation (SUBMIT, UPDATE_PENDING, SCHEDULE, UPDATE_RUNNING, end)."""
    n_t, k_max = lives.exists.shape
    horizon_end = WINDOW_START_US + cfg.horizon_us
    t0_sched = (tasks.first_submit == 0)[:, None] & (np.arange(k_max) == 0)[None, :]
    censored = lives.exists & (lives.end > horizon_end)
    sched_seen = lives.exists & lives.scheduled & (lives.sched <= horizon_end)
    after_end = censored & sched_seen & (rng.random((n_t, k_max)) < P_AFTER_WINDOW_END)
    upd_p_time = lives.submit + (lives.sched - lives.submit) // 2
    upd_p = lives.exists & (rng.random((n_t, k_max)) < P_UPDATE)
    upd_p &= (lives.sched - lives.submit >= 2) & (upd_p_time <= horizon_end)
    run_from = np.where(t0_sched, WINDOW_START_US, lives.sched)
    upd_r_time = run_from + lives.run_len // 2
    upd_r = sched_seen & (rng.random((n_t, k_max)) < P_UPDATE) & (lives.run_len >= 2)
    upd_r &= upd_r_time <= horizon_end
    # overcommit factors: one per task, and a fresh one on each UPDATE (pending, running)
    over_first = overcommit_factors(np.asarray(rng.random(n_t), dtype=np.float64), tasks.production)
    over_update = overcommit_factors(rng.random((n_t, k_max, 2)), tasks.production[:, None, None])
    term_time = np.where(after_end, TIME_AFTER_WINDOW_US, lives.end)
    term_emit = lives.exists & ((lives.end <= horizon_end) | after_end)
    slot_mask = np.stack([lives.exists, upd_p, sched_seen, upd_r, term_emit], axis=2)
    slot_time = np.stack([lives.submit, upd_p_time, lives.sched, upd_r_time, term_time], axis=2)
    codes = [SUBMIT, UPDATE_PENDING, SCHEDULE, UPDATE_RUNNING]
    slot_type = np.stack([*(np.full_like(lives.term, c) for c in codes), lives.term], axis=2)
    no = np.zeros_like(lives.exists)
    on_machine = np.stack([no, no, lives.scheduled, lives.scheduled, lives.scheduled], axis=2)
    slot_no = np.arange(5)
    # the factor in force at each slot: an UPDATE replaces it until the incarnation ends; every
    # incarnation starts again from the task's own factor
    factor = np.where(
        (slot_no >= 3)[None, None, :] & upd_r[:, :, None],
        over_update[:, :, 1:2],
        np.where(
            (slot_no >= 1)[None, None, :] & upd_p[:, :, None],
            over_update[:, :, 0:1],
            over_first[:, None, None],
        ),
    )
    ti, ki, si = np.nonzero(slot_mask)
    order = np.lexsort((ki * 5 + si, ti, slot_time[ti, ki, si]))
    ti, ki, si = ti[order], ki[order], si[order]
    return _Events(
        ti=ti,
        ki=ki,
        si=si,
        time=slot_time[ti, ki, si],
        type=slot_type[ti, ki, si],
        on_machine=on_machine[ti, ki, si],
        sched_seen=sched_seen,
        upd_p=upd_p,
        upd_r=upd_r,
        upd_r_time=upd_r_time,
        over_first=over_first,
        over_update=over_update,
        factor=factor[ti, ki, si],
    )


def _task_events_frame(
    rng: np.random.Generator,
    jobs: _Jobs,
    tasks: _Tasks,
    lives: _Lives,
    events: _Events,
    moments: uf.TaskMoments,
    fleet: Fleet,
) -> pl.DataFrame:
    """The task_events rows; the CPU request is sized from the task's true mean usage (Fig. 9)."""
    n_ev = events.ti.size
    missing = rng.random(n_ev) < P_MISSING_INFO
    missing_code = rng.choice(3, size=n_ev, p=[0.2, 0.3, 0.5]).astype(np.int64)
    j = tasks.job[events.ti]
    cpu_req = cpu_requests(moments.avg_mean[events.ti], events.factor)
    return pl.DataFrame(
        [
            pl.Series("time", events.time),
            nullable(missing_code, ~missing).alias("missing_info"),
            pl.Series("job_id", jobs.job_id[j]),
            pl.Series("task_index", tasks.index[events.ti]),
            nullable(lives.machine[events.ti, events.ki], ~events.on_machine).alias("machine_id"),
            pl.Series("event_type", events.type),
            pl.Series(fleet.users).gather(jobs.user[j]).alias("user"),
            pl.Series("scheduling_class", jobs.sched_class[j]),
            pl.Series("priority", jobs.priority[j]),
            nullable(cpu_req, missing).alias("cpu_request"),
            nullable(jobs.mem_req[j], missing).alias("memory_request"),
            nullable(jobs.disk_req[j], missing).alias("disk_space_request"),
            nullable(jobs.restricted[j].astype(np.int8), missing).alias(
                "different_machines_restriction"
            ),
        ]
    )


@dataclass(frozen=True)
class _Windows:
    """The usage windows of every run: per row its task, time and shift state; per task counts."""

    rep: IntArray
    u_task: IntArray
    u_inc: IntArray
    start_time: IntArray
    shifted_row: BoolArray
    n_windows: IntArray
    shifts: BoolArray
    shift_window: IntArray


def _usage_windows(
    rng: np.random.Generator, tasks: _Tasks, lives: _Lives, events: _Events, cfg: Scale
) -> _Windows:
    """One row per full 300 s window of each run (aligned to the window grid) and the shifts."""
    k_max = lives.exists.shape[1]
    horizon_end = WINDOW_START_US + cfg.horizon_us
    t0_sched = (tasks.first_submit == 0)[:, None] & (np.arange(k_max) == 0)[None, :]
    # a run that started before the window counts from the window start for its windows
    run_start = np.where(t0_sched, 0, lives.sched)
    ws_first = np.where(
        run_start <= WINDOW_START_US,
        WINDOW_START_US,
        WINDOW_START_US + -((WINDOW_START_US - run_start) // USAGE_WINDOW_US) * USAGE_WINDOW_US,
    )
    run_end = np.minimum(lives.end, horizon_end)
    n_win = np.where(events.sched_seen, np.maximum(0, (run_end - ws_first) // USAGE_WINDOW_US), 0)
    n_windows = n_win.sum(axis=1)
    win_offset = np.cumsum(n_win, axis=1) - n_win
    shifts, shift_window = _draw_shifts(rng, n_windows, tasks.fam.family)
    flat_n = n_win.reshape(-1)
    rep = np.repeat(np.arange(flat_n.size), flat_n)
    within = np.arange(rep.size) - np.repeat(np.cumsum(flat_n) - flat_n, flat_n)
    u_task = rep // k_max
    cum = win_offset.reshape(-1)[rep] + within
    return _Windows(
        rep=rep,
        u_task=u_task,
        u_inc=rep % k_max,
        start_time=ws_first.reshape(-1)[rep] + within * USAGE_WINDOW_US,
        shifted_row=shifts[u_task] & (cum >= shift_window[u_task]),
        n_windows=n_windows,
        shifts=shifts,
        shift_window=shift_window,
    )


def _draw_shifts(
    rng: np.random.Generator, n_windows: IntArray, family: npt.NDArray[np.int8]
) -> tuple[BoolArray, IntArray]:
    """Which long tasks change phase, and the first changed window (Janus & Rzadca §3.4: ~30% reject)."""
    eligible = (n_windows >= SHIFT_MIN_WINDOWS) & (family != uf.IDLE)
    shifts = eligible & (rng.random(n_windows.size) < SHIFT_PROBABILITY)
    lo = np.maximum(np.ceil(SHIFT_FROM * n_windows).astype(np.int64), SHIFT_MIN_AFTER)
    hi = n_windows - SHIFT_MIN_AFTER
    lo = np.minimum(lo, hi)
    shift_window = np.where(
        shifts, lo + (rng.random(n_windows.size) * (hi - lo + 1)).astype(np.int64), -1
    )
    return shifts, np.minimum(shift_window, hi)


def _request_sums(
    tasks: _Tasks, events: _Events, win: _Windows, moments: uf.TaskMoments
) -> FloatArray:
    """Per class, the sums over usage windows of the true mean cpu_rate and the request in force."""
    t, k = win.u_task, win.u_inc
    row_factor = np.where(
        events.upd_r[t, k] & (win.start_time >= events.upd_r_time[t, k]),
        events.over_update[t, k, 1],
        np.where(events.upd_p[t, k], events.over_update[t, k, 0], events.over_first[t]),
    )
    row_request = cpu_requests(moments.avg_mean[t], row_factor)
    row_mean = np.where(win.shifted_row, moments.avg_mean_post[t], moments.avg_mean_pre[t])
    prod = tasks.production[t]
    return np.array(
        [
            [row_mean[prod].sum(), row_request[prod].sum()],
            [row_mean[~prod].sum(), row_request[~prod].sum()],
        ]
    )


def _special_counts(
    lives: _Lives, events: _Events, failed: BoolArray, u_task: IntArray
) -> dict[str, int]:
    """The counts of TRUTH.json ``special_rows`` for one batch."""
    ti, ki, si, ev_time, ev_type = events.ti, events.ki, events.si, events.time, events.type
    pend_evict = int(((si == 4) & (ev_type == EVICT) & ~lives.scheduled[ti, ki]).sum())
    first_of_inc = si == 0
    prev_term = np.where(ki > 0, lives.term[ti, np.maximum(ki - 1, 0)], -1)
    return {
        "task_events_time_zero": int((ev_time == 0).sum()),
        "task_events_after_window": int((ev_time == TIME_AFTER_WINDOW_US).sum()),
        "task_events_missing_info": 0,
        "same_microsecond_submit_schedule": int(
            (events.sched_seen & (lives.sched == lives.submit)).sum()
        ),
        "pending_evicts": pend_evict,
        "finish_restarts": int((first_of_inc & (prev_term == FINISH)).sum()),
        "resubmissions_after_evict_fail_kill": int(
            (first_of_inc & np.isin(prev_term, [EVICT, FAIL, KILL])).sum()
        ),
        "usage_rows_of_failed_tasks": int(failed[u_task].sum()),
    }


def overcommit_factors(u: FloatArray, production: npt.ArrayLike) -> FloatArray:
    """Log-uniform overcommit factors from uniforms ``u``, in the class's bounds (broadcast)."""
    lo = np.where(production, OVERCOMMIT_PRODUCTION[0], OVERCOMMIT_NON_PRODUCTION[0])
    hi = np.where(production, OVERCOMMIT_PRODUCTION[1], OVERCOMMIT_NON_PRODUCTION[1])
    return np.asarray(np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo))), dtype=np.float64)


def log_uniform_mean(bounds: tuple[float, float]) -> float:
    """Mean of a log-uniform distribution on ``bounds``."""
    lo, hi = bounds
    return (hi - lo) / float(np.log(hi / lo))


def cpu_requests(mean_usage: FloatArray, factor: FloatArray) -> FloatArray:
    """CPU request (fraction of the largest machine): usage x factor, rounded up, at most 1."""
    steps = np.ceil(mean_usage * factor * REQUEST_STEPS)
    # whole steps / 1e6 is the double nearest the 6-decimal value, so the CSV text is exact
    return np.asarray(np.minimum(steps / REQUEST_STEPS, 1.0), dtype=np.float64)


def _categorical(u: FloatArray, p: FloatArray) -> IntArray:
    idx = np.searchsorted(np.cumsum(p), u, side="right")
    return np.asarray(np.minimum(idx, p.size - 1), dtype=np.int64)


def _categorical_rows(u: FloatArray, p: FloatArray) -> IntArray:
    cp = np.cumsum(p, axis=1)
    idx = np.minimum((u[:, None] >= cp).sum(axis=1), p.shape[1] - 1)
    return np.asarray(idx, dtype=np.int64)


def _run_lengths(
    rng: np.random.Generator, duration_class: IntArray, crash_loop: BoolArray, horizon_us: int
) -> IntArray:
    """Run time (µs) of one incarnation: minutes (short), hours, or log-uniform up to 3 horizons.

    Short runs are log-uniform in [30 s, 2 h] and a crash-looping task runs log-uniform 1 to 40
    minutes before it fails, so ~42-44% of either end within 5 minutes (Zhu et al. Fig. 8: ~40%
    of all executions).
    """
    n = duration_class.size
    second = 1_000_000
    short = np.exp(rng.uniform(np.log(30 * second), np.log(2 * HOUR_US), n))
    hours = np.exp(rng.uniform(np.log(HOUR_US), np.log(6 * HOUR_US), n))
    long = np.exp(rng.uniform(np.log(2.5 * HOUR_US), np.log(3 * horizon_us), n))
    crash = np.exp(rng.uniform(np.log(60 * second), np.log(40 * 60 * second), n))
    return np.select(
        [crash_loop, duration_class == 0, duration_class == 1], [crash, short, hours], long
    ).astype(np.int64)


def _job_events(
    rng: np.random.Generator,
    t_job: IntArray,
    ti: IntArray,
    ev_time: IntArray,
    ev_type: IntArray,
    jobs: _Jobs,
    fleet: Fleet,
) -> pl.DataFrame:
    """SUBMIT at the first task SUBMIT, SCHEDULE at the first SCHEDULE, end when all tasks ended."""
    n_jobs = jobs.n_tasks.size
    big = np.iinfo(np.int64).max
    ej = t_job[ti]
    first_submit = np.full(n_jobs, big)
    np.minimum.at(first_submit, ej[ev_type == SUBMIT], ev_time[ev_type == SUBMIT])
    first_sched = np.full(n_jobs, big)
    np.minimum.at(first_sched, ej[ev_type == SCHEDULE], ev_time[ev_type == SCHEDULE])
    # each task's last event (events are sorted by time, and task order within a time)
    n_t = t_job.size
    last_idx = np.full(n_t, -1)
    np.maximum.at(last_idx, ti, np.arange(ti.size))
    last_type = ev_type[last_idx]
    last_time = ev_time[last_idx]
    ended = np.isin(last_type, [EVICT, FAIL, FINISH, KILL, LOST])
    all_ended = np.ones(n_jobs, dtype=bool)
    np.logical_and.at(all_ended, t_job, ended)
    end_time = np.zeros(n_jobs, dtype=np.int64)
    np.maximum.at(end_time, t_job, last_time)
    kind = np.zeros((n_jobs, 4), dtype=bool)  # any KILL, FAIL(or EVICT), LOST, FINISH
    for col, codes in enumerate(([KILL], [FAIL, EVICT], [LOST], [FINISH])):
        np.logical_or.at(kind[:, col], t_job, np.isin(last_type, codes))
    job_end_type = np.select(
        [kind[:, 0], kind[:, 1], kind[:, 2]], [KILL, FAIL, LOST], FINISH
    ).astype(np.int64)
    has_sched = first_sched < big
    rows_j = [np.arange(n_jobs), np.flatnonzero(has_sched), np.flatnonzero(all_ended)]
    times = np.concatenate([first_submit, first_sched[has_sched], end_time[all_ended]])
    types = np.concatenate(
        [np.full(n_jobs, SUBMIT), np.full(int(has_sched.sum()), SCHEDULE), job_end_type[all_ended]]
    ).astype(np.int64)
    rows = np.concatenate(rows_j)
    seq = np.concatenate(
        [np.zeros(n_jobs), np.ones(int(has_sched.sum())), np.full(int(all_ended.sum()), 2)]
    )
    order = np.lexsort((seq, rows, times))
    rows, times, types = rows[order], times[order], types[order]
    missing = rng.random(rows.size) < P_MISSING_INFO
    code = rng.choice(3, size=rows.size, p=[0.2, 0.3, 0.5]).astype(np.int64)
    return pl.DataFrame(
        [
            pl.Series("time", times),
            nullable(code, ~missing).alias("missing_info"),
            pl.Series("job_id", jobs.job_id[rows]),
            pl.Series("event_type", types),
            pl.Series(fleet.users).gather(jobs.user[rows]).alias("user"),
            pl.Series("scheduling_class", jobs.sched_class[rows]),
            jobs.names.gather(rows).alias("job_name"),
            pl.Series(fleet.logical_names).gather(jobs.logical[rows]).alias("logical_job_name"),
        ]
    )


def _usage_rows(
    rng: np.random.Generator,
    fam: uf.TaskFamilies,
    u_task: IntArray,
    shifted_row: BoolArray,
    mem_req: FloatArray,
    disk_req: FloatArray,
) -> tuple[list[pl.Series], BoolArray]:
    """The 15 measurement columns of task_usage, and per task whether inst is 0 in every row."""
    n = u_task.size
    n_tasks = fam.family.size
    family = fam.family[u_task]
    params = fam.params[u_task]
    idle = family == uf.IDLE
    inst = uf.inst_samples(rng, family, params, shifted_row)
    inst[idle] = 0.0
    mean_pre, _ = uf.family_moments(fam.family, fam.params, shifted=False)
    mean_post, _ = uf.family_moments(fam.family, fam.params, shifted=True)
    mu = np.where(shifted_row, mean_post[u_task], mean_pre[u_task])
    y = uf.inst_samples(rng, family, params, shifted_row)
    a = fam.avg_weight[u_task]
    avg = (1 - a) * mu + a * y
    avg[idle] = rng.exponential(uf.IDLE_AVG_MEAN, int(idle.sum()))
    inst = np.round(inst, 6)
    avg = np.round(avg, 6)
    nonzero = np.zeros(n_tasks, dtype=bool)
    nonzero[u_task[inst > 0]] = True

    mem_base = mem_req * (0.3 + 0.6 * rng.random(n_tasks))
    canonical = np.clip(mem_base[u_task] * (1 + 0.05 * rng.standard_normal(n)), 0, 1)
    assigned = canonical * (1 + 0.15 * rng.random(n))
    unmapped = mem_base[u_task] * 0.02 * rng.random(n)
    total_pc = unmapped + mem_base[u_task] * 0.05 * rng.random(n)
    max_mem = canonical * (1 + 0.1 * rng.random(n))
    disk_io = rng.exponential(2e-5, n)
    local_disk = disk_req[u_task] * (0.1 + 0.9 * rng.random(n))
    max_cpu = np.maximum(avg, inst) * (1 + rng.exponential(0.5, n))
    max_disk_io = disk_io * (1 + rng.exponential(3.0, n))
    cpi = rng.lognormal(np.log(2.0), 0.4, n)
    mai = rng.lognormal(np.log(0.008), 0.6, n)
    # real task_usage leaves these empty in ~2.6% / 4.2% / 5.7% of rows (PROVENANCE.md)
    null_mdio = rng.random(n) < 0.026
    null_cpi = rng.random(n) < 0.042
    null_mai = null_cpi | (rng.random(n) < 0.015)
    agg = (rng.random(n) < 0.73).astype(np.int8)

    def r6(x: FloatArray) -> FloatArray:
        return np.round(x, 6)

    cols = [
        pl.Series("cpu_rate", avg),
        pl.Series("canonical_memory_usage", r6(canonical)),
        pl.Series("assigned_memory_usage", r6(assigned)),
        pl.Series("unmapped_page_cache", r6(unmapped)),
        pl.Series("total_page_cache", r6(total_pc)),
        pl.Series("maximum_memory_usage", r6(max_mem)),
        pl.Series("disk_io_time", r6(disk_io)),
        pl.Series("local_disk_space_usage", r6(local_disk)),
        pl.Series("maximum_cpu_rate", r6(max_cpu)),
        nullable(r6(max_disk_io), null_mdio).alias("maximum_disk_io_time"),
        nullable(np.round(cpi, 4), null_cpi).alias("cycles_per_instruction"),
        nullable(r6(mai), null_mai).alias("memory_accesses_per_instruction"),
        pl.Series("sample_portion", np.zeros(n)),
        pl.Series("aggregation_type", agg),
        pl.Series("sampled_cpu_usage", inst),
    ]
    return cols, ~nonzero


def _task_constraints(
    rng: np.random.Generator,
    first_submit: IntArray,
    job_ids: IntArray,
    task_index: IntArray,
    fleet: Fleet,
) -> pl.DataFrame:
    """1–3 constraints on a share of tasks, at their first SUBMIT, on existing attributes."""
    n_t = first_submit.size
    counts = np.where(rng.random(n_t) < P_CONSTRAINED, rng.integers(1, 4, n_t), 0)
    t = np.repeat(np.arange(n_t), counts)
    n = t.size
    op = _choice(rng, [0, 1, 2, 3], [0.5, 0.3, 0.1, 0.1], n)
    attr = rng.integers(0, len(fleet.attribute_names), n)
    pick = rng.integers(0, 3, n)
    numeric = attr % 2 == 0
    # LESS/GREATER THAN compare integers, so they only use the integer-valued attributes
    attr = np.where((op >= 2) & ~numeric, attr - 1, attr)
    values: list[str | None] = [
        fleet.attribute_values[a][p] for a, p in zip(attr.tolist(), pick.tolist(), strict=True)
    ]
    empty = (op == 1) & (rng.random(n) < 0.3)
    for i in np.flatnonzero(empty).tolist():
        values[i] = None
    order = np.lexsort((np.arange(n), first_submit[t]))
    return pl.DataFrame(
        [
            pl.Series("time", first_submit[t][order]),
            pl.Series("job_id", job_ids[t][order]),
            pl.Series("task_index", task_index[t][order]),
            pl.Series("comparison_operator", op[order]),
            pl.Series(fleet.attribute_names).gather(attr[order]).alias("attribute_name"),
            pl.Series("attribute_value", values, dtype=pl.String).gather(order),
        ]
    )


def _task_truth(
    fam: uf.TaskFamilies,
    moments: uf.TaskMoments,
    job_ids: IntArray,
    task_index: IntArray,
    priority: IntArray,
    n_windows: IntArray,
    failed: BoolArray,
    all_zero: BoolArray,
    shifts: BoolArray,
    shift_window: IntArray,
    overcommit: FloatArray,
    cpu_request: FloatArray,
) -> pl.DataFrame:
    """Per-task truth: family, windows, outcome, exact moments of inst and avg, CPU request."""
    names = np.array([*uf.FAMILIES, "idle"])
    return pl.DataFrame(
        [
            pl.Series("job_id", job_ids),
            pl.Series("task_index", task_index),
            pl.Series("priority", priority),
            pl.Series("family", names[fam.family.astype(np.int64)]),
            pl.Series("has_usage", n_windows > 0),
            pl.Series("n_windows", n_windows.astype(np.int64)),
            pl.Series("failed", failed),
            pl.Series("all_zero_inst", all_zero),
            pl.Series("shifts", shifts),
            nullable(shift_window.astype(np.int64), ~shifts).alias("shift_window"),
            pl.Series("true_inst_mean", moments.inst_mean),
            pl.Series("true_inst_std", moments.inst_std),
            pl.Series("true_avg_mean", moments.avg_mean),
            pl.Series("true_avg_std", moments.avg_std),
            pl.Series("cpu_overcommit", overcommit),
            pl.Series("cpu_request", cpu_request),
        ]
    )


# --- totals, parts, truth --------------------------------------------------------------------


def _accumulate(totals: _Totals, batch: BatchTables) -> None:
    for key, value in batch.special.items():
        totals.add(key, value)
    totals.request_sums += batch.request_sums
    totals.task_types += np.bincount(
        batch.frames["task_events"]["event_type"].to_numpy(), minlength=9
    )[:9]
    totals.job_types += np.bincount(
        batch.frames["job_events"]["event_type"].to_numpy(), minlength=9
    )[:9]
    t = batch.truth
    long = (t["n_windows"] >= LONG_WINDOWS).to_numpy()
    failed = t["failed"].to_numpy()
    totals.add("tasks", t.height, "tasks")
    totals.add("with_usage", int(t["has_usage"].sum()), "tasks")
    totals.add("long", int(long.sum()), "tasks")
    totals.add("long_nonfailed", int((long & ~failed).sum()), "tasks")
    totals.add("failed", int(failed.sum()), "tasks")
    totals.add("shifted", int(t["shifts"].sum()), "tasks")
    totals.add(
        "shifted_long_nonfailed", int((t["shifts"].to_numpy() & long & ~failed).sum()), "tasks"
    )
    for name, count in t["family"].value_counts().iter_rows():
        totals.per_family[name] = totals.per_family.get(name, 0) + int(count)
    keep = long & ~failed & ~t["all_zero_inst"].to_numpy()
    for row, (mean_col, std_col) in enumerate(
        (("true_inst_mean", "true_inst_std"), ("true_avg_mean", "true_avg_std"))
    ):
        x = t[mean_col].to_numpy()[keep]
        y = t[std_col].to_numpy()[keep]
        totals.regression[row] += [x.size, x.sum(), y.sum(), (x * x).sum(), (x * y).sum()]


def _slope_intercept(acc: FloatArray) -> dict[str, float]:
    n, sx, sy, sxx, sxy = acc.tolist()
    denom = n * sxx - sx * sx
    slope = (n * sxy - sx * sy) / denom if denom > 0 else float("nan")
    intercept = (sy - slope * sx) / n if n > 0 else float("nan")
    return {"slope": slope, "intercept": intercept, "n": int(n)}


def _clear_previous_output(out: Path) -> None:
    """Remove part files and truth of an earlier generation in ``out`` (nothing else)."""
    if out.exists() and not out.is_dir():
        raise TracelabError(f"--out {out} exists and is not a directory; pick another path")
    for name in GOOGLE_2011:
        folder = out / name
        if folder.is_dir():
            for pattern in ("part-*.csv.gz", "_pending-*", "__pending-*.tmp", "_part-*.tmp"):
                for part in folder.glob(pattern):
                    part.unlink()
    for name in ("TRUTH.json", "TRUTH_tasks.parquet"):
        (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def _finalise_parts(out: Path, n_parts: int) -> dict[str, list[str]]:
    """Rename the pending parts to ``part-NNNNN-of-MMMMM.csv.gz`` now that M is known."""
    files: dict[str, list[str]] = {}
    for name in BATCHED_TABLES:
        files[name] = []
        for i in range(n_parts):
            final = out / name / part_name(i, n_parts)
            shutil.move(out / name / pending_part_name(i), final)
            files[name].append(f"{name}/{final.name}")
    return files


def _truth_document(
    seed: int,
    cfg: Scale,
    target_mb: float | None,
    part_mb: float | None,
    n_batches: int,
    n_parts: int,
    totals: _Totals,
    files: dict[str, list[str]],
    fleet: Fleet,
) -> dict[str, Any]:
    machine_types = np.bincount(fleet.machine_events["event_type"].to_numpy(), minlength=3)
    long_nf = totals.tasks.get("long_nonfailed", 0)
    return {
        "trace": TRACE,
        "generator": "analysis.synthetic.google2011",
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "scale": cfg.name,
        "target_mb": target_mb,
        "part_mb": part_mb,
        "batches": n_batches,
        "parts": n_parts,
        "window_start_us": WINDOW_START_US,
        "horizon_us": cfg.horizon_us,
        "window_end_us": WINDOW_START_US + cfg.horizon_us,
        "usage_window_us": USAGE_WINDOW_US,
        "time_after_window_us": TIME_AFTER_WINDOW_US,
        "tables": {
            name: {
                "rows": totals.rows[name],
                "uncompressed_bytes": totals.raw_bytes[name],
                "files": files[name],
            }
            for name in GOOGLE_2011
        },
        "event_type_counts": {
            "task_events": {str(i): int(c) for i, c in enumerate(totals.task_types) if c},
            "job_events": {str(i): int(c) for i, c in enumerate(totals.job_types) if c},
            "machine_events": {str(i): int(c) for i, c in enumerate(machine_types) if c},
        },
        "special_rows": dict(totals.special),
        "families": {
            name: {
                "code": code,
                "share": {cls: shares[code] for cls, shares in uf.FAMILY_SHARES.items()},
                **uf.FAMILY_DOC[name],
            }
            for code, name in enumerate(uf.FAMILIES)
        },
        "idle_share": uf.IDLE_SHARE,
        "avg_model": "cpu_rate = (1 - a) * mu + a * y; y an independent draw of the window's "
        f"inst distribution, mu its mean, a ~ U{uf.AVG_WEIGHT_RANGE} per task; idle tasks: "
        f"Exponential(mean {uf.IDLE_AVG_MEAN})",
        "shift": {
            "probability": SHIFT_PROBABILITY,
            "min_windows": SHIFT_MIN_WINDOWS,
            "window_rule": f"first shifted window uniform in [max(ceil({SHIFT_FROM} n), "
            f"{SHIFT_MIN_AFTER}), n - {SHIFT_MIN_AFTER}]",
            "shifted_tasks": totals.tasks.get("shifted", 0),
            "share_of_long_nonfailed": (
                totals.tasks.get("shifted_long_nonfailed", 0) / long_nf if long_nf else 0.0
            ),
        },
        "cpu_request": _cpu_request_truth(totals.request_sums),
        "tasks": {**totals.tasks, "per_family": dict(sorted(totals.per_family.items()))},
        "regression": {
            "population": "long (>= 24 windows), no EVICT/FAIL/KILL/LOST, inst not all zero",
            "inst": _slope_intercept(totals.regression[0]),
            "avg": _slope_intercept(totals.regression[1]),
        },
        "tasks_file": "TRUTH_tasks.parquet",
    }


def _cpu_request_truth(sums: FloatArray) -> dict[str, Any]:
    """The CPU request model and, per priority class, true usage over requests in usage windows."""
    usage_windows = {}
    for row, name in enumerate(("production", "non_production")):
        used, requested = sums[row].tolist()
        usage_windows[name] = {
            "true_mean_cpu_sum": used,
            "request_sum": requested,
            "used_over_requested": used / requested if requested > 0 else None,
        }
    return {
        "production_priority": PRODUCTION_PRIORITY,
        "base": "the task's true mean cpu_rate = true_avg_mean in TRUTH_tasks (equal to "
        "true_inst_mean, window-weighted over a shift; idle tasks: the idle cpu_rate mean "
        f"{uf.IDLE_AVG_MEAN})",
        "request": "ceil(base x factor, 6 decimals), at most 1",
        "overcommit": {
            name: {
                "distribution": "log-uniform",
                "low": bounds[0],
                "high": bounds[1],
                "mean": log_uniform_mean(bounds),
            }
            for name, bounds in (
                ("production", OVERCOMMIT_PRODUCTION),
                ("non_production", OVERCOMMIT_NON_PRODUCTION),
            )
        },
        "factor_rule": "one factor per task (TRUTH_tasks cpu_overcommit), on the SUBMIT and "
        "SCHEDULE of every incarnation; an UPDATE_PENDING / UPDATE_RUNNING carries base x a fresh "
        "factor of the same class, in force until the incarnation ends",
        "memory": "unchanged: one lognormal request per job; canonical_memory_usage about "
        "U(0.3, 0.9) x that request per task",
        "usage_windows": usage_windows,
    }


@contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Any]:
    """A rich progress bar (batches, or bytes with --target-mb), or a no-op."""
    if not enabled:
        yield lambda _n: None
        return
    from rich.progress import Progress

    with Progress(transient=False) as bar:
        task = bar.add_task(f"generating {TRACE}", total=total)
        yield lambda n: bar.advance(task, n)
