"""Seeded synthetic Google cluster-usage trace 2011 v2.1 in the exact published format.

Layout (METHODS §0.1): ``out/<table>/part-NNNNN-of-MMMMM.csv.gz`` for the six tables, headerless,
columns in the order of :data:`analysis.schemas.GOOGLE_2011`. Part ``i`` of ``job_events``,
``task_events``, ``task_usage`` and ``task_constraints`` holds job batch ``i`` (every row of a job
is in the same part index), each part sorted by time (ties keep each task's event order), so the
(time, file, row) order of METHODS §1.1 is every task's true event order. ``machine_events`` and
``machine_attributes`` are one part each.

Model, per job batch (all draws from ``numpy.random.default_rng([seed, stream, batch])``):

* jobs are *service* (30%, long-running tasks, mostly production priority 9–11) or *batch*
  (short tasks, priorities mostly 0–4); 10% of service and 3% of batch jobs were submitted before
  the window: their tasks have SUBMIT and SCHEDULE at time 0 and run into the window. Other jobs
  are submitted uniformly over the horizon; most tasks at the job's time, some seconds later.
* each task lives up to four *incarnations*. An incarnation is SUBMIT, then (2.5%) a death while
  pending — FAIL, KILL, LOST or, as in the real trace (seed 002 §2.2), EVICT — or a SCHEDULE after
  a pending time (25% at the same microsecond as the SUBMIT) on a machine, then FINISH, EVICT,
  FAIL, KILL or LOST. EVICT/FAIL/KILL are followed by a resubmission with probability 0.95/0.7/0.25,
  FINISH by a restart with probability 0.05 (service 0.1), LOST never. 5% of pending and running
  periods carry an UPDATE_PENDING / UPDATE_RUNNING that revises the CPU request.
* CPU requests follow usage (seed 002 §4.1, Figure 9: requests exceed usage, production uses
  about half of what it requests): a task's request is its true mean ``cpu_rate`` (the
  ``true_avg_mean`` below, = ``true_inst_mean`` except for idle tasks) times an overcommit
  factor, log-uniform in [1.3, 3] (mean 2.03) for production (priority >= 9) and in [0.7, 1.5]
  (mean 1.05) otherwise, rounded *up* to 6 decimals and capped at 1. Each task has one factor
  on every incarnation's SUBMIT/SCHEDULE; an UPDATE carries a fresh factor of the same class.
  Requests are continuous, not a menu: rounding small usages to a menu would distort the factor.
  Every true mean is below 1, so every production request >= the task's true inst mean. A
  shifting task's request covers its window-weighted mean over its whole life, so after the shift
  it may use more than it requests (seed 002 §4.1: tasks can exceed their quota, up to ~2x).
  Memory requests stay per job.
* events after the horizon are not written, except that 3% of incarnations still running at the
  horizon end with their terminal event at 2^63-1 ("after the window"). Machine IDs are NULL while
  pending. 0.2% of task/job rows carry a ``missing info`` code and (task rows) NULL requests.
* job_events: SUBMIT at the first task SUBMIT, SCHEDULE at the first task SCHEDULE, and, when every
  task has ended, KILL / FAIL / LOST / FINISH (first that applies over the tasks' last events)
  at the last task end.
* task_usage: one row per full 300 s window, aligned to 600 s, inside each run (SCHEDULE to its
  end, or the horizon), on the incarnation's machine. inst and avg come from the task's usage
  family (:mod:`analysis.synthetic.usage_families`); tasks with >= 48 windows shift, with
  probability SHIFT_PROBABILITY, at a window drawn in [0.75 n, n - 12].
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
* ``families``: per family ``code``, ``share`` (of non-idle tasks), the ``inst`` and ``after_shift``
  distributions with the parameter ranges; ``idle_share`` (tasks with inst 0 in every window);
  ``avg_model`` (how cpu_rate is derived from the family);
* ``cpu_request``: the request model (``production_priority``, ``base``, ``request``,
  ``overcommit`` per class with ``low``, ``high``, ``mean``, ``factor_rule``, ``memory``) and
  ``usage_windows``: per class (production, non_production) the sums over usage windows of the
  true mean cpu_rate and of the request in force at the window start, and their ratio
  ``used_over_requested`` (about 1 / mean factor, 0.49 and 0.95, but the cap at 1 gives the
  heavy uniform-family tasks a smaller factor: ~0.57 production, ~0.96 non-production);
* ``shift``: ``probability`` (per eligible task), ``min_windows`` (48), ``window_rule``,
  ``shifted_tasks``, ``share_of_long_nonfailed`` (realised share of long non-failed tasks);
* ``tasks``: counts of ``tasks``, ``with_usage``, ``long`` (>= 24 windows), ``long_nonfailed``,
  ``failed``, ``per_family`` (all tasks);
* ``regression``: over long non-failed tasks whose inst is not zero in every window (the set
  METHODS §1.8 keeps), least squares of true std on true mean: ``inst`` and ``avg``, each
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

from tracelab.analysis.errors import TracelabError
from tracelab.analysis.schemas import (
    GOOGLE_2011,
    TIME_AFTER_WINDOW_US,
    USAGE_WINDOW_US,
    WINDOW_START_US,
)
from tracelab.analysis.synthetic import check_request
from tracelab.analysis.synthetic import usage_families as uf
from tracelab.analysis.synthetic.csvparts import (
    GzipPartStream,
    csv_bytes,
    nullable,
    part_name,
    pending_part_name,
    write_gzip_part,
)

GENERATOR_VERSION = "1.1.0"
TRACE = "google-2011"

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
MACHINE_ADD, MACHINE_REMOVE, MACHINE_UPDATE = range(3)

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
LONG_WINDOWS = 24
SHIFT_MIN_WINDOWS = 48
SHIFT_MIN_AFTER = 12
SHIFT_PROBABILITY = 0.25
MAX_INCARNATIONS = 4
#: threads compressing part files while the next batch is generated
COMPRESS_THREADS = 4

BATCHED_TABLES = ("job_events", "task_events", "task_usage", "task_constraints")
FLEET_TABLES = ("machine_events", "machine_attributes")

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
P_SERVICE = 0.30
P_BEFORE_WINDOW = {"service": 0.10, "batch": 0.03}
P_SAME_MICROSECOND = 0.25
P_PENDING_DEATH = 0.025
#: pending death types FAIL, KILL, LOST, EVICT
PENDING_DEATHS = np.array([FAIL, KILL, LOST, EVICT])
P_PENDING_DEATHS = np.array([0.30, 0.45, 0.05, 0.20])
RUN_ENDS = np.array([FINISH, EVICT, FAIL, KILL, LOST])
P_RUN_ENDS_SERVICE = np.array([0.60, 0.12, 0.06, 0.20, 0.02])
P_RUN_ENDS_BATCH = np.array([0.86, 0.04, 0.04, 0.05, 0.01])
#: probability of a new SUBMIT after each terminal type (index = event code)
P_CONTINUE = np.array([0, 0, 0.95, 0.70, 0.05, 0.25, 0.0, 0, 0])
P_RESTART_SERVICE = 0.10
P_UPDATE = 0.05
P_AFTER_WINDOW_END = 0.03
P_MISSING_INFO = 0.002
P_CONSTRAINED = 0.15
#: mean pending time and resubmission gap (µs)
PENDING_MEAN_US = 40_000_000
RESUBMIT_GAP_MEAN_US = 15_000_000

# --- CPU requests (seed 002 §4.1, Figure 9) ----------------------------------------------------
#: lowest production priority (seed 002 §4.1)
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
                written = 0
                for name, frame in batch.frames.items():
                    if name not in streams:
                        streams[name] = GzipPartStream(out / name / pending_part_name(n_parts))
                    raw = csv_bytes(frame)
                    pending.append(pool.submit(streams[name].write, raw))
                    totals.rows[name] += frame.height
                    totals.raw_bytes[name] += len(raw)
                    written += len(raw)
                    if name == "task_usage":
                        usage_in_part += len(raw)
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
    for name, frame in (
        ("machine_events", fleet.machine_events),
        ("machine_attributes", fleet.machine_attributes),
    ):
        path = out / name / part_name(0, 1)
        totals.raw_bytes[name] = write_gzip_part(path, frame)
        totals.rows[name] = frame.height
        files[name] = [f"{name}/{path.name}"]
    doc = _truth_document(seed, cfg, target_mb, part_mb, n_batches, n_parts, totals, files, fleet)
    truth = out / "TRUTH.json"
    truth.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return truth


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
    return Fleet(
        usable_ids=ids[role == 0],
        machine_events=machine_events,
        machine_attributes=machine_attributes,
        attribute_names=tuple(names),
        attribute_values=tuple(values),
        users=tuple(_hashes(rng, 40)),
        logical_names=tuple(_hashes(rng, 200)),
    )


# --- one batch of jobs -----------------------------------------------------------------------


def _choice(rng: np.random.Generator, values: npt.ArrayLike, p: npt.ArrayLike, n: int) -> IntArray:
    return np.asarray(rng.choice(np.asarray(values), size=n, p=np.asarray(p)), dtype=np.int64)


def batch_tables(seed: int, batch: int, cfg: Scale, fleet: Fleet) -> BatchTables:
    """Jobs, tasks, life cycles, usage and constraints of job batch ``batch``."""
    rng = np.random.default_rng([seed, 2, batch])
    horizon_end = WINDOW_START_US + cfg.horizon_us
    n_jobs = cfg.jobs_per_batch

    # jobs
    service = rng.random(n_jobs) < P_SERVICE
    before = np.where(
        service,
        rng.random(n_jobs) < P_BEFORE_WINDOW["service"],
        rng.random(n_jobs) < P_BEFORE_WINDOW["batch"],
    )
    job_submit = np.where(
        before, 0, WINDOW_START_US + (rng.random(n_jobs) * cfg.horizon_us).astype(np.int64)
    )
    n_tasks = np.where(
        service,
        1 + rng.poisson(4, n_jobs),
        1 + np.minimum(rng.lognormal(1.2, 1.1, n_jobs).astype(np.int64), 300),
    ).astype(np.int64)
    prod_pri = _choice(rng, [9, 10, 11], [0.7, 0.2, 0.1], n_jobs)
    low_pri = _choice(
        rng,
        [0, 1, 2, 3, 4, 5, 6, 7, 8],
        [0.40, 0.15, 0.15, 0.05, 0.15, 0.02, 0.04, 0.02, 0.02],
        n_jobs,
    )
    priority = np.where(service & (rng.random(n_jobs) < 0.7), prod_pri, low_pri)
    priority = np.where(~service & (rng.random(n_jobs) < 0.03), prod_pri, priority)
    sched_class = np.where(
        service,
        _choice(rng, [1, 2, 3], [0.3, 0.5, 0.2], n_jobs),
        _choice(rng, [0, 1], [0.7, 0.3], n_jobs),
    )
    job_id = 3_418_309 + (batch * n_jobs + np.arange(n_jobs, dtype=np.int64)) * 7
    user = rng.integers(0, len(fleet.users), n_jobs)
    logical = rng.integers(0, len(fleet.logical_names), n_jobs)
    job_names = pl.Series(_hashes(rng, n_jobs))
    mem_req_job = np.asarray(
        np.round(np.clip(rng.lognormal(np.log(0.03), 1.0, n_jobs), 5e-4, 1), 5), dtype=np.float64
    )
    disk_req_job = np.asarray(
        np.round(np.clip(rng.lognormal(np.log(0.0004), 0.8, n_jobs), 1e-5, 0.05), 7),
        dtype=np.float64,
    )
    restricted = rng.random(n_jobs) < 0.1

    # tasks
    t_job = np.repeat(np.arange(n_jobs), n_tasks)
    n_t = t_job.size
    job_start = np.cumsum(n_tasks) - n_tasks
    task_index = np.arange(n_t) - np.repeat(job_start, n_tasks)
    t_service = service[t_job]
    t_before = before[t_job]
    offset = np.where(
        t_before | (rng.random(n_t) < 0.7), 0, 1 + rng.exponential(5_000_000, n_t).astype(np.int64)
    )
    first_submit = job_submit[t_job] + offset
    duration_class = np.where(
        t_service,
        np.where(rng.random(n_t) < 0.9, 2, 0),
        np.where(rng.random(n_t) < 0.06, 1, 0),
    )  # 0 short, 1 hours, 2 long-running
    fam = uf.task_families(rng, n_t)

    k_max = MAX_INCARNATIONS
    submit = np.zeros((n_t, k_max), dtype=np.int64)
    sched = np.zeros((n_t, k_max), dtype=np.int64)
    end = np.zeros((n_t, k_max), dtype=np.int64)
    run_len = np.zeros((n_t, k_max), dtype=np.int64)
    exists = np.zeros((n_t, k_max), dtype=bool)
    scheduled = np.zeros((n_t, k_max), dtype=bool)
    term = np.zeros((n_t, k_max), dtype=np.int64)
    machine = fleet.usable_ids[rng.integers(0, fleet.usable_ids.size, (n_t, k_max))]

    cur_submit = first_submit.copy()
    alive = np.ones(n_t, dtype=bool)
    p_run_end = np.where(t_service[:, None], P_RUN_ENDS_SERVICE, P_RUN_ENDS_BATCH)
    for k in range(k_max):
        was_before = t_before & (k == 0)
        u = rng.random((n_t, 4))
        pend = np.where(
            was_before | (u[:, 0] < P_SAME_MICROSECOND),
            0,
            1 + rng.exponential(PENDING_MEAN_US, n_t).astype(np.int64),
        )
        is_sched = was_before | (u[:, 1] >= P_PENDING_DEATH)
        pdeath = PENDING_DEATHS[_categorical(u[:, 2], P_PENDING_DEATHS)]
        rend = RUN_ENDS[_categorical_rows(u[:, 3], p_run_end)]
        r = _run_lengths(rng, duration_class, cfg.horizon_us)
        s = cur_submit + pend
        e = np.where(is_sched, np.where(was_before, WINDOW_START_US + r, s + r), s)
        exists[:, k] = alive
        submit[:, k] = cur_submit
        sched[:, k] = s
        end[:, k] = e
        run_len[:, k] = r
        scheduled[:, k] = is_sched
        term[:, k] = np.where(is_sched, rend, pdeath)
        p_cont = P_CONTINUE[term[:, k]]
        p_cont = np.where((term[:, k] == FINISH) & t_service, P_RESTART_SERVICE, p_cont)
        cont = (e <= horizon_end) & (rng.random(n_t) < p_cont) & (k + 1 < k_max)
        cur_submit = e + 1 + rng.exponential(RESUBMIT_GAP_MEAN_US, n_t).astype(np.int64)
        alive = alive & cont & (cur_submit <= horizon_end)

    t0_sched = t_before[:, None] & (np.arange(k_max) == 0)[None, :]
    # a run that started before the window counts from the window start for its windows
    run_start = np.where(t0_sched, 0, sched)
    censored = exists & (end > horizon_end)
    sched_seen = exists & scheduled & (sched <= horizon_end)
    after_end = censored & sched_seen & (rng.random((n_t, k_max)) < P_AFTER_WINDOW_END)

    upd_p_time = submit + (sched - submit) // 2
    upd_p = exists & (rng.random((n_t, k_max)) < P_UPDATE) & (sched - submit >= 2)
    upd_p &= upd_p_time <= horizon_end
    run_from = np.where(t0_sched, WINDOW_START_US, sched)
    upd_r_time = run_from + run_len // 2
    upd_r = sched_seen & (rng.random((n_t, k_max)) < P_UPDATE) & (run_len >= 2)
    upd_r &= upd_r_time <= horizon_end
    # overcommit factors: one per task, and a fresh one on each UPDATE (pending, running)
    t_production = priority[t_job] >= PRODUCTION_PRIORITY
    over_first = overcommit_factors(rng.random(n_t), t_production)
    over_update = overcommit_factors(rng.random((n_t, k_max, 2)), t_production[:, None, None])

    # five event slots per incarnation: SUBMIT, UPDATE_PENDING, SCHEDULE, UPDATE_RUNNING, end
    term_time = np.where(after_end, TIME_AFTER_WINDOW_US, end)
    term_emit = exists & ((end <= horizon_end) | after_end)
    slot_mask = np.stack([exists, upd_p, sched_seen, upd_r, term_emit], axis=2)
    slot_time = np.stack([submit, upd_p_time, sched, upd_r_time, term_time], axis=2)
    slot_type = np.stack(
        [
            np.full_like(term, SUBMIT),
            np.full_like(term, UPDATE_PENDING),
            np.full_like(term, SCHEDULE),
            np.full_like(term, UPDATE_RUNNING),
            term,
        ],
        axis=2,
    )
    on_machine = np.stack(
        [np.zeros_like(exists), np.zeros_like(exists), scheduled, scheduled, scheduled], axis=2
    )
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
    ev_time = slot_time[ti, ki, si]
    ev_type = slot_type[ti, ki, si]
    seq = ki * 5 + si
    order = np.lexsort((seq, ti, ev_time))
    ti, ki, si, ev_time, ev_type = ti[order], ki[order], si[order], ev_time[order], ev_type[order]
    n_ev = ti.size
    ev_machine = machine[ti, ki]
    ev_on = on_machine[ti, ki, si]
    missing = rng.random(n_ev) < P_MISSING_INFO
    missing_code = rng.choice(3, size=n_ev, p=[0.2, 0.3, 0.5]).astype(np.int64)
    j_of_ev = t_job[ti]
    failing = (ev_type == EVICT) | (ev_type == FAIL) | (ev_type == KILL) | (ev_type == LOST)
    failed = np.zeros(n_t, dtype=bool)
    failed[ti[failing]] = True

    job_events = _job_events(
        rng,
        t_job,
        ti,
        ev_time,
        ev_type,
        n_jobs,
        job_id,
        fleet,
        user,
        sched_class,
        job_names,
        logical,
    )

    # usage windows of every run
    ws_first = np.where(
        run_start <= WINDOW_START_US,
        WINDOW_START_US,
        WINDOW_START_US + -((WINDOW_START_US - run_start) // USAGE_WINDOW_US) * USAGE_WINDOW_US,
    )
    run_end = np.minimum(end, horizon_end)
    n_win = np.where(sched_seen, np.maximum(0, (run_end - ws_first) // USAGE_WINDOW_US), 0)
    n_windows = n_win.sum(axis=1)
    win_offset = np.cumsum(n_win, axis=1) - n_win
    eligible = (n_windows >= SHIFT_MIN_WINDOWS) & (fam.family != uf.IDLE)
    shifts = eligible & (rng.random(n_t) < SHIFT_PROBABILITY)
    lo = np.ceil(0.75 * n_windows).astype(np.int64)
    hi = n_windows - SHIFT_MIN_AFTER
    shift_window = np.where(shifts, lo + (rng.random(n_t) * (hi - lo + 1)).astype(np.int64), -1)
    shift_window = np.minimum(shift_window, hi)

    # the request is sized from the task's true mean usage (seed 002 §4.1, Figure 9)
    moments = uf.task_moments(fam, n_windows, shifts, shift_window)
    cpu_req = cpu_requests(moments.avg_mean[ti], factor[ti, ki, si])
    task_events = pl.DataFrame(
        [
            pl.Series("time", ev_time),
            nullable(missing_code, ~missing).alias("missing_info"),
            pl.Series("job_id", job_id[j_of_ev]),
            pl.Series("task_index", task_index[ti]),
            nullable(ev_machine, ~ev_on).alias("machine_id"),
            pl.Series("event_type", ev_type),
            pl.Series(fleet.users).gather(user[j_of_ev]).alias("user"),
            pl.Series("scheduling_class", sched_class[j_of_ev]),
            pl.Series("priority", priority[j_of_ev]),
            nullable(cpu_req, missing).alias("cpu_request"),
            nullable(mem_req_job[j_of_ev], missing).alias("memory_request"),
            nullable(disk_req_job[j_of_ev], missing).alias("disk_space_request"),
            nullable(restricted[j_of_ev].astype(np.int8), missing).alias(
                "different_machines_restriction"
            ),
        ]
    )

    flat_n = n_win.reshape(-1)
    rep = np.repeat(np.arange(flat_n.size), flat_n)
    within = np.arange(rep.size) - np.repeat(np.cumsum(flat_n) - flat_n, flat_n)
    u_task = rep // k_max
    start_time = ws_first.reshape(-1)[rep] + within * USAGE_WINDOW_US
    cum = win_offset.reshape(-1)[rep] + within
    shifted_row = shifts[u_task] & (cum >= shift_window[u_task])
    usage, all_zero = _usage_rows(
        rng, fam, u_task, shifted_row, mem_req_job[t_job], disk_req_job[t_job]
    )
    usage_order = np.lexsort((task_index[u_task], job_id[t_job[u_task]], start_time))
    u_machine = machine.reshape(-1)[rep]
    task_usage = pl.DataFrame(
        [
            pl.Series("start_time", start_time),
            pl.Series("end_time", start_time + USAGE_WINDOW_US),
            pl.Series("job_id", job_id[t_job[u_task]]),
            pl.Series("task_index", task_index[u_task]),
            pl.Series("machine_id", u_machine),
            *usage,
        ]
    )[usage_order]
    no_usage = n_windows == 0
    all_zero = all_zero | no_usage

    task_constraints = _task_constraints(rng, first_submit, job_id[t_job], task_index, fleet)

    # request in force at each usage window's start against the window's true mean cpu_rate
    u_inc = rep % k_max
    row_factor = np.where(
        upd_r[u_task, u_inc] & (start_time >= upd_r_time[u_task, u_inc]),
        over_update[u_task, u_inc, 1],
        np.where(upd_p[u_task, u_inc], over_update[u_task, u_inc, 0], over_first[u_task]),
    )
    row_request = cpu_requests(moments.avg_mean[u_task], row_factor)
    row_mean = np.where(shifted_row, moments.avg_mean_post[u_task], moments.avg_mean_pre[u_task])
    row_production = t_production[u_task]
    request_sums = np.array(
        [
            [row_mean[row_production].sum(), row_request[row_production].sum()],
            [row_mean[~row_production].sum(), row_request[~row_production].sum()],
        ]
    )

    truth = _task_truth(
        fam,
        moments,
        job_id[t_job],
        task_index,
        priority[t_job],
        n_windows,
        failed,
        all_zero,
        shifts,
        shift_window,
        over_first,
        cpu_requests(moments.avg_mean, over_first),
    )
    pend_evict = int(((si == 4) & (ev_type == EVICT) & ~scheduled[ti, ki]).sum())
    first_of_inc = si == 0
    prev_term = np.where(ki > 0, term[ti, np.maximum(ki - 1, 0)], -1)
    special = {
        "task_events_time_zero": int((ev_time == 0).sum()),
        "task_events_after_window": int((ev_time == TIME_AFTER_WINDOW_US).sum()),
        "task_events_missing_info": int(missing.sum()),
        "same_microsecond_submit_schedule": int((sched_seen & (sched == submit)).sum()),
        "pending_evicts": pend_evict,
        "finish_restarts": int((first_of_inc & (prev_term == FINISH)).sum()),
        "resubmissions_after_evict_fail_kill": int(
            (first_of_inc & np.isin(prev_term, [EVICT, FAIL, KILL])).sum()
        ),
        "usage_rows_of_failed_tasks": int(failed[u_task].sum()),
    }
    frames = {
        "job_events": job_events,
        "task_events": task_events,
        "task_usage": task_usage,
        "task_constraints": task_constraints,
    }
    for name, frame in frames.items():
        frame.columns = GOOGLE_2011[name].column_names
    return BatchTables(frames=frames, truth=truth, special=special, request_sums=request_sums)


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


def _run_lengths(rng: np.random.Generator, duration_class: IntArray, horizon_us: int) -> IntArray:
    """Run time (µs) of one incarnation: minutes (short), hours, or log-uniform up to 3 horizons."""
    n = duration_class.size
    short = 1_000_000 + rng.exponential(15 * 60 * 1_000_000, n)
    hours = np.exp(rng.uniform(np.log(HOUR_US), np.log(6 * HOUR_US), n))
    long = np.exp(rng.uniform(np.log(2.5 * HOUR_US), np.log(3 * horizon_us), n))
    return np.select([duration_class == 0, duration_class == 1], [short, hours], long).astype(
        np.int64
    )


def _job_events(
    rng: np.random.Generator,
    t_job: IntArray,
    ti: IntArray,
    ev_time: IntArray,
    ev_type: IntArray,
    n_jobs: int,
    job_id: IntArray,
    fleet: Fleet,
    user: IntArray,
    sched_class: IntArray,
    job_names: pl.Series,
    logical: IntArray,
) -> pl.DataFrame:
    """SUBMIT at the first task SUBMIT, SCHEDULE at the first SCHEDULE, end when all tasks ended."""
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
    jobs = np.concatenate(rows_j)
    seq = np.concatenate(
        [np.zeros(n_jobs), np.ones(int(has_sched.sum())), np.full(int(all_ended.sum()), 2)]
    )
    order = np.lexsort((seq, jobs, times))
    jobs, times, types = jobs[order], times[order], types[order]
    missing = rng.random(jobs.size) < P_MISSING_INFO
    code = rng.choice(3, size=jobs.size, p=[0.2, 0.3, 0.5]).astype(np.int64)
    return pl.DataFrame(
        [
            pl.Series("time", times),
            nullable(code, ~missing).alias("missing_info"),
            pl.Series("job_id", job_id[jobs]),
            pl.Series("event_type", types),
            pl.Series(fleet.users).gather(user[jobs]).alias("user"),
            pl.Series("scheduling_class", sched_class[jobs]),
            job_names.gather(jobs).alias("job_name"),
            pl.Series(fleet.logical_names).gather(logical[jobs]).alias("logical_job_name"),
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
                "share": uf.FAMILY_SHARES[code],
                **uf.FAMILY_DOC[name],
            }
            for code, name in enumerate(uf.FAMILIES)
        },
        "idle_share": uf.IDLE_SHARE,
        "avg_model": "cpu_rate = (1 - a) * mu + a * y; y an independent draw of the window's "
        "inst distribution, mu its mean, a ~ U(0.4, 0.7) per task; idle tasks: "
        f"Exponential(mean {uf.IDLE_AVG_MEAN})",
        "shift": {
            "probability": SHIFT_PROBABILITY,
            "min_windows": SHIFT_MIN_WINDOWS,
            "window_rule": "first shifted window uniform in [ceil(0.75 n), n - 12]",
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
        task = bar.add_task("generating google-2011", total=total)
        yield lambda n: bar.advance(task, n)
