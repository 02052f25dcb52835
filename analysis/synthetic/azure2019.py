"""Seeded synthetic Azure V2 (2019) tables in the published format, from azure-2017's model.

The deployments, VMs, lifetimes and CPU summaries come from the Cluster Admission model of
:mod:`analysis.synthetic.azure2017` (its docstring says how), run with VM sizes up to 32 cores so
that the open core bucket ``>24`` occurs; what V2 publishes differently is written here:

* ``vmtable/vmtable.csv.gz``: V1's columns, but core count and memory as the bucket labels of
  the publisher's V2 notebook (cores ``2``, ``4``, ``8``, ``12``, ``24``, ``>24`` for 0-2, 2-4,
  4-8, 8-12, 12-24 and more; memory ``2``, ``4``, ``8``, ``32``, ``64``, ``>64`` GB), ids as
  88-character base64 like the published deployments table's;
* ``deployments/deployments.csv.gz``: one row per deployment of the vmtable, its size the
  number of its VMs (the V2 notebook plots it against "# VMs");
* ``vm_cpu_readings/vm_cpu_readings-file-N-of-M.csv.gz``: 5-minute min/max/avg CPU readings of
  a seeded sample of the VMs over the first ``max_readings_per_vm`` slots of each life, split
  into M time-ordered files (the published 195 files cover every VM: far more rows than a
  sample needs).

``TRUTH.json`` holds azure-2017's keys (priors, alpha, counts, one object per deployment, ids as
written here) with ``trace`` and ``generator`` of this module, and adds per deployment
``n_cores_counted`` (the cores the marts count: each VM's bucket label, 25 for ``>24``) and
``n_open_bucket_vms``; ``counts.cores_counted``, ``counts.open_bucket_vms``; ``core_buckets``
(VMs per label) and ``readings`` (the sampled VMs and the rule above).
"""

from __future__ import annotations

import base64
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.lake.schemas import AZURE_2017
from tracelab.analysis.synthetic.azure2017 import GRID_S, AzureModel, generate_azure_2017
from tracelab.analysis.synthetic.csvparts import marked_gzip
from tracelab.analysis.traces.azure2019 import SPEC

#: (upper end, label) of each closed core bucket; more cores fall in the open bucket
CORE_BUCKETS: tuple[tuple[int, str], ...] = ((2, "2"), (4, "4"), (8, "8"), (12, "12"), (24, "24"))
OPEN_CORES = ">24"
#: the cores the marts count for the open bucket: the fewest it admits
OPEN_CORES_COUNTED = 25
#: (upper end in GB, label) of each closed memory bucket
MEMORY_BUCKETS: tuple[tuple[float, str], ...] = (
    (2.0, "2"),
    (4.0, "4"),
    (8.0, "8"),
    (32.0, "32"),
    (64.0, "64"),
)
OPEN_MEMORY = ">64"

#: azure-2017's sizes plus 32-core VMs, which only the open bucket can hold
MODEL = replace(
    AzureModel(),
    vm_size_mix=((2, 0.36), (4, 0.28), (8, 0.16), (16, 0.12), (32, 0.08)),
)

#: VMs whose readings are written, per scale
READING_VMS: dict[str, int] = {"tiny": 40, "small": 200, "medium": 1_000, "large": 5_000}
#: the readings cover at most this many 5-minute slots of each sampled VM (one day)
MAX_READINGS_PER_VM = 288
#: the readings are split into this many time-ordered files
READING_FILES = 2


def core_bucket(cores: int) -> str:
    """The V2 label of a core count."""
    return next((label for top, label in CORE_BUCKETS if cores <= top), OPEN_CORES)


def cores_counted(cores: int) -> int:
    """The cores the marts count for a VM of ``cores`` cores: its bucket's label, or the open
    bucket's lower bound."""
    label = core_bucket(cores)
    return OPEN_CORES_COUNTED if label == OPEN_CORES else int(label)


def memory_bucket(memory_gb: float) -> str:
    """The V2 label of a memory size in GB."""
    return next((label for top, label in MEMORY_BUCKETS if memory_gb <= top), OPEN_MEMORY)


def generate_azure_2019(
    out: Path,
    *,
    seed: int = 0,
    scale: str = "tiny",
    target_mb: float | None = None,
) -> Path:
    """Write the three V2 tables and ``TRUTH.json`` under ``out``; returns ``out/TRUTH.json``.

    ``scale`` and ``target_mb`` size the vmtable as azure-2017's generator does.
    """
    with tempfile.TemporaryDirectory() as tmp:
        v1_truth = Path(
            generate_azure_2017(Path(tmp), seed=seed, scale=scale, target_mb=target_mb, model=MODEL)
        )
        truth = json.loads(v1_truth.read_text(encoding="utf-8"))
        v1 = pl.read_csv(
            Path(tmp) / "vmtable" / "vmtable.csv.gz",
            has_header=False,
            new_columns=AZURE_2017["vmtable"].column_names,
            schema_overrides=AZURE_2017["vmtable"].polars_schema(),
        )
    # a seed stream of its own, so the V1 draws stay those of generate_azure_2017(seed)
    rng = np.random.default_rng([seed, 2019])
    ids = _new_ids(rng, v1)
    vms = (
        _with_new_ids(v1, ids, ("vmid", "subscriptionid", "deploymentid"))
        .with_columns(
            _labels(pl.col("vmcorecount"), CORE_BUCKETS, OPEN_CORES).alias("vmcorecountbucket"),
            _labels(pl.col("vmmemory"), MEMORY_BUCKETS, OPEN_MEMORY).alias("vmmemorybucket"),
        )
        .with_columns(
            pl.col("vmcorecountbucket")
            .replace_strict(
                {label: cores_counted(top) for top, label in CORE_BUCKETS},
                default=OPEN_CORES_COUNTED,
                return_dtype=pl.Int64(),
            )
            .alias("cores_counted"),
        )
    )
    vmtable = SPEC.table_map["vmtable"]
    _write_csv(out / "vmtable" / "vmtable.csv.gz", vms.select(vmtable.column_names))
    deployments = vms.group_by("deploymentid", maintain_order=True).agg(
        pl.len().cast(pl.Int64()).alias("deploymentsize")
    )
    _write_csv(out / "deployments" / "deployments.csv.gz", deployments)
    sampled = _write_readings(rng, out / "vm_cpu_readings", vms, READING_VMS[scale])

    truth_doc = _truth_document(truth, ids, vms, sampled)
    truth_path = out / "TRUTH.json"
    truth_path.write_text(json.dumps(truth_doc, indent=1), encoding="utf-8")
    return truth_path


def _labels(value: pl.Expr, buckets: tuple[tuple[Any, str], ...], open_label: str) -> pl.Expr:
    """The bucket label of each value: the first bucket whose upper end it does not exceed."""
    expr = pl.lit(open_label)
    for top, label in reversed(buckets):
        expr = pl.when(value <= top).then(pl.lit(label)).otherwise(expr)
    return expr


def _new_ids(rng: np.random.Generator, v1: pl.DataFrame) -> dict[str, str]:
    """A V2-looking id (64 random bytes: 88 base64 characters) for every V1 id, one to one."""
    old = pl.concat([v1["vmid"], v1["subscriptionid"], v1["deploymentid"]]).unique(
        maintain_order=True
    )
    raw = rng.bytes(64 * len(old))
    return {
        o: base64.b64encode(raw[64 * i : 64 * (i + 1)]).decode("ascii")
        for i, o in enumerate(old.to_list())
    }


def _with_new_ids(
    frame: pl.DataFrame, ids: dict[str, str], columns: tuple[str, ...]
) -> pl.DataFrame:
    """``frame`` with each id in ``columns`` replaced by its new id (every id has one).

    A join, not ``replace_strict``: on these 64-character base64 ids ``replace_strict`` takes
    seconds per column where the join takes milliseconds.
    """
    mapping = pl.DataFrame({"old": list(ids), "new": list(ids.values())})
    for column in columns:
        frame = (
            frame.join(mapping, left_on=column, right_on="old", how="left", maintain_order="left")
            .with_columns(pl.col("new").alias(column))
            .drop("new")
        )
    return frame


def _write_csv(path: Path, frame: pl.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as raw, marked_gzip(raw, level=6) as gz:
        gz.write(frame.write_csv(include_header=False).encode())


def _write_readings(
    rng: np.random.Generator, folder: Path, vms: pl.DataFrame, n_vms: int
) -> pl.DataFrame:
    """Readings of ``n_vms`` seeded VMs; returns the sampled VMs (vmid, readings written)."""
    chosen = np.sort(rng.choice(vms.height, size=min(n_vms, vms.height), replace=False))
    sample: pl.DataFrame = vms[chosen.tolist()]
    frames = []
    for vm in sample.iter_rows(named=True):
        slots = (vm["vmdeleted"] - vm["vmcreated"]) // GRID_S
        n = int(max(1, min(slots, MAX_READINGS_PER_VM)))
        # around the VM's own average, never above 100 %: min <= avg <= max
        avg = np.minimum(vm["avgcpu"] * rng.gamma(4.0, 0.25, n), 100.0)
        low = avg * rng.uniform(0.2, 1.0, n)
        high = np.minimum(avg + rng.uniform(0.0, 1.0, n) * (vm["maxcpu"] - vm["avgcpu"]), 100.0)
        frames.append(
            pl.DataFrame(
                {
                    "timestamp": vm["vmcreated"] + GRID_S * np.arange(n, dtype=np.int64),
                    "vmid": [vm["vmid"]] * n,
                    "mincpu": np.round(low, 6),
                    "maxcpu": np.round(np.maximum(high, avg), 6),
                    "avgcpu": np.round(avg, 6),
                }
            )
        )
    readings = pl.concat(frames).sort("timestamp", "vmid")
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(_split(readings, READING_FILES), start=1):
        _write_csv(folder / f"vm_cpu_readings-file-{i}-of-{READING_FILES}.csv.gz", part)
    counts = readings.group_by("vmid").agg(pl.len().alias("readings"))
    return sample.select("vmid").join(counts, on="vmid", how="left")


def _split(frame: pl.DataFrame, parts: int) -> list[pl.DataFrame]:
    size = -(-frame.height // parts)
    return [frame.slice(i * size, size) for i in range(parts)]


def _truth_document(
    truth: dict[str, Any], ids: dict[str, str], vms: pl.DataFrame, sampled: pl.DataFrame
) -> dict[str, Any]:
    per_deployment = {
        row["deploymentid"]: row
        for row in vms.group_by("deploymentid")
        .agg(
            pl.col("cores_counted").sum().alias("n_cores_counted"),
            (pl.col("vmcorecountbucket") == OPEN_CORES).sum().alias("n_open_bucket_vms"),
        )
        .iter_rows(named=True)
    }
    deployments = []
    for d in truth["deployments"]:
        new_id = ids[d["deploymentid"]]
        extra = per_deployment[new_id]
        deployments.append(
            {
                **d,
                "deploymentid": new_id,
                "n_cores_counted": int(extra["n_cores_counted"]),
                "n_open_bucket_vms": int(extra["n_open_bucket_vms"]),
            }
        )
    buckets = vms.group_by("vmcorecountbucket").agg(pl.len().alias("vms"))
    return {
        **truth,
        "trace": SPEC.id,
        "generator": "analysis.synthetic.azure2019",
        "counts": {
            **truth["counts"],
            "cores_counted": int(vms["cores_counted"].sum()),
            "open_bucket_vms": int((vms["vmcorecountbucket"] == OPEN_CORES).sum()),
        },
        "core_buckets": {r["vmcorecountbucket"]: r["vms"] for r in buckets.iter_rows(named=True)},
        "readings": {
            "rule": f"the first {MAX_READINGS_PER_VM} 5-minute slots of each sampled VM's life",
            "files": READING_FILES,
            "vms": {r["vmid"]: r["readings"] for r in sampled.iter_rows(named=True)},
        },
        "deployments": deployments,
    }
