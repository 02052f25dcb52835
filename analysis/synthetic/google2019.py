"""Seeded synthetic google-2019 (clusterdata v3) trace in the BigQuery JSON-lines export format.

Writes all five tables, ``<table>/<table>-000000000000.json.gz``, one JSON object per line as the
export writes them: keys in proto field order, INT64 values (times, IDs, enums) as JSON strings,
FLOAT values as JSON numbers (``"capacity":{"cpus":1,"memory":0.5}``), NULL fields left out,
nested messages as objects, repeated fields as arrays. None of the five tables has a real sample
beyond ``machine_events`` (../shared holds one shard of it), so every table here is generated;
the report says which files are real (the manifest's ``source``). Floats are float32 values (the
proto's type), so their shortest decimal is exact.

Model (all times µs since the trace start; the window is :data:`WINDOW_US`):

* machines: ``n_machines`` ADD at time 0 with a capacity (a share :data:`NO_CAPACITY_SHARE`
  without one, as in the real shard); each is removed with probability ``p_remove`` at a uniform
  time (REMOVE with its capacity) and added again :data:`DOWN_US` later; each remaining one has
  its capacity UPDATEd with probability ``p_update``;
* machine_attributes: two attributes per machine at time 0; the second is deleted later with
  probability ``p_remove``;
* collections (jobs) arrive uniformly in the window with ``1 + Poisson(3)``
  instances; each instance is SUBMITted with its collection, QUEUEd and ENABLEd (probability
  ``p_queue``, queued ``Exponential(queue_mean)``), KILLed while pending (``p_pending_kill``) or
  SCHEDULEd after ``Exponential(wait_mean)``, runs ``Exponential(duration_mean)`` (an
  UPDATE_RUNNING halfway with probability ``p_update``) and ends with FINISH / FAIL / KILL /
  EVICT (``end_mix``); an EVICTed instance is SUBMITted again 1 s later and runs to FINISH.
  An event past the window end is not written (the instance is still running at the end);
* instance_usage: one row per 300 s window of each run, cut at the run's start and end; the
  instance's CPU level ``mu ~ Gamma(cpu_shape, cpu_scale)`` and per window ``average = mu *
  U(0.8, 1.2)``, ``maximum = average * U(1.2, 2)``, ``cpu_usage_distribution`` 11 increasing
  values from ``0.5 * average`` to the maximum, ``tail_cpu_usage_distribution`` 9 between its
  90th percentile and the maximum; memory ``average = 0.5 * request``.

``TRUTH.json``: the parameters, per-table row counts, event counts per table and type, the
machines without capacity, the instances running at the window end, and per instance its true
``mu``, wait and duration (``instances``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.synthetic.csvparts import write_gzip_bytes
from tracelab.analysis.traces.google2019 import ID as TRACE

SECOND_US = 1_000_000
#: one day: enough for the derived tables, small enough for the tests
WINDOW_US = 86_400 * SECOND_US
USAGE_WINDOW_US = 300 * SECOND_US
DOWN_US = 3_600 * SECOND_US
NO_CAPACITY_SHARE = 0.02
SHARD = "{table}/{table}-000000000000.json.gz"
#: (machines, collections) per scale
SCALES: dict[str, tuple[int, int]] = {
    "tiny": (10, 30),
    "small": (40, 300),
    "medium": (200, 3_000),
    "large": (1_000, 30_000),
}
SUBMIT, QUEUE, ENABLE, SCHEDULE, EVICT, FAIL, FINISH, KILL = 0, 1, 2, 3, 4, 5, 6, 7
UPDATE_RUNNING = 10


@dataclass(frozen=True)
class Model:
    """The generator's parameters (TRUTH.json ``model``); times in seconds."""

    p_remove: float = 0.2
    p_update: float = 0.1
    p_queue: float = 0.1
    queue_mean_s: float = 60.0
    p_pending_kill: float = 0.05
    wait_mean_s: float = 30.0
    duration_mean_s: float = 3_600.0
    #: terminal event of a run: FINISH, FAIL, KILL, EVICT
    end_mix: tuple[float, float, float, float] = (0.7, 0.1, 0.1, 0.1)
    cpu_shape: float = 2.0
    cpu_scale: float = 0.01


def _f32(x: float) -> float:
    return float(np.float32(x))


def _num(x: float) -> float | int:
    # BigQuery writes an integral FLOAT as an integer (`"cpus":1`)
    return int(x) if float(x).is_integer() else x


def _line(fields: dict[str, Any]) -> str:
    """One export line: NULLs left out, ints as strings, floats as numbers, nesting kept."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = value
        elif isinstance(value, int):
            out[key] = str(value)
        elif isinstance(value, float):
            out[key] = _num(value)
        elif isinstance(value, dict):
            out[key] = {k: _num(v) for k, v in value.items() if v is not None}
        elif isinstance(value, list):
            out[key] = [str(v) if isinstance(v, int) else _num(v) for v in value]
        else:
            out[key] = value
    return json.dumps(out, separators=(",", ":")) + "\n"


def _hash(rng: np.random.Generator) -> str:
    import base64

    return base64.b64encode(rng.bytes(32)).decode()


@dataclass
class _Machines:
    ids: list[int]
    lines: list[tuple[int, str]]
    attributes: list[tuple[int, str]]
    counts: Counter[int]
    no_capacity: int


def _machine_rows(rng: np.random.Generator, n: int, model: Model) -> _Machines:
    switches = [_hash(rng) for _ in range(max(1, n // 8))]
    platform = _hash(rng)
    ids = [int(x) for x in rng.choice(10**11, size=n, replace=False) + 10**6]
    out = _Machines(ids, [], [], Counter(), 0)

    def event(time: int, mid: int, kind: int, switch: str, cap: dict[str, float] | None) -> None:
        fields = {"time": time, "machine_id": mid, "type": kind, "switch_id": switch}
        out.lines.append((time, _line({**fields, "capacity": cap, "platform_id": platform})))
        out.counts[kind] += 1

    for mid in ids:
        switch = switches[int(rng.integers(len(switches)))]
        cpus = _f32(float(rng.choice([0.25, 0.5, 1.0])))
        cap = {"cpus": cpus, "memory": _f32(cpus * float(rng.choice([0.5, 1.0])))}
        missing = bool(rng.random() < NO_CAPACITY_SHARE)
        out.no_capacity += missing
        event(0, mid, 1, switch, None if missing else cap)
        name_a, name_b = "attr-platform-" + switch[:4], "attr-kernel"
        out.attributes.append(
            (0, _line({"time": 0, "machine_id": mid, "name": name_a, "value": "1"}))
        )
        out.attributes.append(
            (0, _line({"time": 0, "machine_id": mid, "name": name_b, "value": "5"}))
        )
        if rng.random() < model.p_remove:
            t = int(rng.integers(SECOND_US, WINDOW_US - DOWN_US))
            event(t, mid, 2, switch, cap)
            event(t + DOWN_US, mid, 1, switch, cap)
            line = _line({"time": t, "machine_id": mid, "name": name_b, "deleted": True})
            out.attributes.append((t, line))
        elif rng.random() < model.p_update:
            t = int(rng.integers(SECOND_US, WINDOW_US))
            event(t, mid, 3, switch, {"cpus": _f32(cap["cpus"] / 2), "memory": cap["memory"]})
    return out


@dataclass(frozen=True)
class InstanceTruth:
    """One instance's true quantities (TRUTH.json ``instances``)."""

    collection_id: int
    instance_index: int
    mu_cpu: float
    #: s from the first SUBMIT to the first SCHEDULE (queueing included); None when never
    #: scheduled in the window
    schedule_delay_s: float | None
    #: s of the first run, cut at the window end (None when never scheduled in the window)
    duration_s: float | None
    end_type: int | None
    running_at_end: bool


def _usage_lines(
    rng: np.random.Generator, key: dict[str, int], start: int, end: int, mu: float, mem: float
) -> Iterator[str]:
    t = start
    while t < end:
        stop = min(end, (t // USAGE_WINDOW_US + 1) * USAGE_WINDOW_US)
        avg = _f32(mu * rng.uniform(0.8, 1.2))
        peak = _f32(avg * rng.uniform(1.2, 2.0))
        dist = [_f32(v) for v in np.linspace(0.5 * avg, peak, 11)]
        tail = [_f32(v) for v in np.linspace(dist[9], peak, 11)[1:10]]
        fields: dict[str, Any] = {"start_time": t, "end_time": stop, **key}
        fields |= {"alloc_collection_id": 0, "alloc_instance_index": -1, "collection_type": 0}
        fields |= {
            "average_usage": {"cpus": avg, "memory": mem},
            "maximum_usage": {"cpus": peak, "memory": mem},
            "random_sample_usage": {"cpus": _f32(avg * rng.uniform(0.5, 1.5))},
            "assigned_memory": _f32(2 * mem),
            "sample_rate": 1.0,
        }
        fields["cpu_usage_distribution"] = dist
        fields["tail_cpu_usage_distribution"] = tail
        yield _line(fields)
        t = stop


@dataclass
class _Collection:
    collection_id: int
    priority: int
    scheduling_class: int
    submit: int
    user: str


@dataclass
class _Written:
    """Lines per table as (time, line), and the counts TRUTH.json states."""

    instance_events: list[tuple[int, str]]
    usage: list[tuple[int, str]]
    counts: Counter[int]
    truths: list[InstanceTruth]


def _emit(w: _Written, base: dict[str, Any], time: int, kind: int, machine: int | None) -> None:
    if time < WINDOW_US:
        tail = ("alloc_instance_index", "resource_request")
        fields = {"time": time, "type": kind} | {k: v for k, v in base.items() if k not in tail}
        fields |= {"machine_id": machine} | {k: base[k] for k in tail} | {"constraint": []}
        w.instance_events.append((time, _line(fields)))
        w.counts[kind] += 1


def _run(
    rng: np.random.Generator,
    w: _Written,
    base: dict[str, Any],
    start: int,
    machine: int,
    model: Model,
    end_type: int,
    mu: float,
) -> tuple[int, bool]:
    """One run from SCHEDULE at ``start``: its events and usage; (end, running at the window end)."""
    duration = max(SECOND_US, int(rng.exponential(model.duration_mean_s) * SECOND_US))
    end = start + duration
    _emit(w, base, start, SCHEDULE, machine)
    if rng.random() < model.p_update:
        _emit(w, base, start + duration // 2, UPDATE_RUNNING, machine)
    _emit(w, base, end, end_type, machine)
    key = {"collection_id": base["collection_id"], "instance_index": base["instance_index"]}
    mem = _f32(base["resource_request"]["memory"] / 2)
    usage = _usage_lines(rng, key | {"machine_id": machine}, start, min(end, WINDOW_US), mu, mem)
    w.usage.extend((start, line) for line in usage)
    return end, start < WINDOW_US <= end


def _instance(
    rng: np.random.Generator,
    w: _Written,
    c: _Collection,
    index: int,
    machines: list[int],
    model: Model,
) -> None:
    cpus = _f32(float(rng.choice([0.0078125, 0.015625, 0.03125])))
    base: dict[str, Any] = {
        "collection_id": c.collection_id,
        "scheduling_class": c.scheduling_class,
        "collection_type": 0,
        "priority": c.priority,
        "alloc_collection_id": 0,
        "instance_index": index,
        "alloc_instance_index": -1,
        "resource_request": {"cpus": cpus, "memory": _f32(cpus / 2)},
    }
    mu = float(rng.gamma(model.cpu_shape, model.cpu_scale))
    _emit(w, base, c.submit, SUBMIT, None)
    ready = c.submit
    if rng.random() < model.p_queue:
        _emit(w, base, c.submit, QUEUE, None)
        ready = c.submit + int(rng.exponential(model.queue_mean_s) * SECOND_US)
        _emit(w, base, ready, ENABLE, None)
    if rng.random() < model.p_pending_kill:
        _emit(w, base, ready + SECOND_US, KILL, None)
        w.truths.append(InstanceTruth(c.collection_id, index, mu, None, None, KILL, False))
        return
    scheduled = ready + int(rng.exponential(model.wait_mean_s) * SECOND_US)
    end_type = [FINISH, FAIL, KILL, EVICT][int(rng.choice(4, p=list(model.end_mix)))]
    machine = machines[int(rng.integers(len(machines)))]
    end, running = _run(rng, w, base, scheduled, machine, model, end_type, mu)
    if end_type == EVICT and end < WINDOW_US:
        # resubmitted at once, scheduled after another wait, runs to FINISH
        _emit(w, base, end + SECOND_US, SUBMIT, None)
        again = end + SECOND_US + int(rng.exponential(model.wait_mean_s) * SECOND_US)
        _, running = _run(rng, w, base, again, machine, model, FINISH, mu)
    in_window = scheduled < WINDOW_US
    w.truths.append(
        InstanceTruth(
            c.collection_id,
            index,
            mu,
            (scheduled - c.submit) / SECOND_US if in_window else None,
            (min(end, WINDOW_US) - scheduled) / SECOND_US if in_window else None,
            end_type if end < WINDOW_US else None,
            running,
        )
    )


def _collections(
    rng: np.random.Generator, n: int, machines: list[int], model: Model
) -> tuple[_Written, list[tuple[int, str]], Counter[int]]:
    w = _Written([], [], Counter(), [])
    lines: list[tuple[int, str]] = []
    counts: Counter[int] = Counter()
    users = [_hash(rng) for _ in range(max(1, n // 10))]
    ids = sorted(int(x) for x in rng.choice(10**11, size=n, replace=False) + 10**6)
    for cid in ids:
        c = _Collection(
            cid,
            int(rng.choice([0, 25, 100, 200, 360])),
            int(rng.integers(4)),
            int(rng.integers(0, WINDOW_US)),
            users[int(rng.integers(len(users)))],
        )
        first, before = len(w.instance_events), len(w.truths)
        for index in range(1 + int(rng.poisson(3))):
            _instance(rng, w, c, index, machines, model)
        mine = w.truths[before:]
        fields: dict[str, Any] = {"collection_id": cid, "scheduling_class": c.scheduling_class}
        fields |= {"collection_type": 0, "priority": c.priority, "alloc_collection_id": 0}
        fields |= {
            "user": c.user,
            "collection_name": _hash(rng),
            "collection_logical_name": _hash(rng),
        }
        fields |= {"parent_collection_id": None, "start_after_collection_ids": []}
        fields |= {"max_per_machine": 0, "max_per_switch": 0, "vertical_scaling": 1, "scheduler": 0}
        lines.append((c.submit, _line({"time": c.submit, "type": SUBMIT, **fields})))
        counts[SUBMIT] += 1
        if not any(t.running_at_end or t.end_type is None for t in mine):
            end = max(t for t, _ in w.instance_events[first:])
            kind = FINISH if all(t.end_type in (FINISH, EVICT) for t in mine) else KILL
            lines.append((end, _line({"time": end, "type": kind, **fields})))
            counts[kind] += 1
    return w, lines, counts


def _write_table(out: Path, table: str, rows: list[tuple[int, str]]) -> int:
    rows.sort(key=lambda r: r[0])
    write_gzip_bytes(out / SHARD.format(table=table), "".join(line for _, line in rows).encode())
    return len(rows)


def generate_google_2019(
    out: Path,
    *,
    seed: int = 0,
    scale: str = "tiny",
    target_mb: float | None = None,
    model: Model | None = None,
) -> Path:
    """Write the five tables under ``out`` and ``out/TRUTH.json``; returns the truth's path."""
    if target_mb is not None:
        raise TracelabError(f"--target-mb is not supported for {TRACE}; use --scale")
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of: {', '.join(SCALES)}")
    model = model or Model()
    rng = np.random.default_rng(seed)
    n_machines, n_collections = SCALES[scale]
    machines = _machine_rows(rng, n_machines, model)
    w, collection_lines, collection_counts = _collections(rng, n_collections, machines.ids, model)
    rows = {
        "machine_events": _write_table(out, "machine_events", machines.lines),
        "machine_attributes": _write_table(out, "machine_attributes", machines.attributes),
        "collection_events": _write_table(out, "collection_events", collection_lines),
        "instance_events": _write_table(out, "instance_events", w.instance_events),
        "instance_usage": _write_table(out, "instance_usage", w.usage),
    }
    doc = {
        "trace": TRACE,
        "generator": "analysis.synthetic.google2019",
        "seed": seed,
        "scale": scale,
        "window_us": WINDOW_US,
        "usage_window_us": USAGE_WINDOW_US,
        "model": asdict(model),
        "tables": {name: {"rows": n, "real": False} for name, n in rows.items()},
        "event_counts": {
            "machine_events": _keyed(machines.counts),
            "collection_events": _keyed(collection_counts),
            "instance_events": _keyed(w.counts),
        },
        "machines": n_machines,
        "machines_without_capacity": machines.no_capacity,
        "instances": len(w.truths),
        "instances_running_at_end": sum(t.running_at_end for t in w.truths),
        "instance_truths": [
            {k: (round(v, 12) if isinstance(v, float) else v) for k, v in asdict(t).items()}
            for t in w.truths
        ],
    }
    path = out / "TRUTH.json"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def _keyed(counts: Counter[int]) -> dict[str, int]:
    return {str(k): counts[k] for k in sorted(counts)}
