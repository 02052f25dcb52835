"""VM streams for the placement replays: the ingested vmtable, or one generated from the params.

A stream is the columns the replay needs, as numpy arrays sorted by creation time: creation and
deletion seconds on the trace's 300 s grid, cores, memory (GB), a deployment code. Pools get
disjoint streams sized to their hosts: deployments are taken in a fixed pseudo-random order until
the pool's *mean* demand (core-hours over the window) reaches ``target_load`` of its cores — mean
demand adds up across deployments, peak demand does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.export.document import ParamsDocument
from tracelab.analysis.placement.model import HOUR_S, PRIORS_STAGE, TRACE

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: docs/methods.md §0.2: the vmtable's 300 s grid and 30-day window
GRID_S = 300
WINDOW_S = 2_592_000
#: generated VMs: largest VM and memory per core of the default sample's generator (a deviation:
#: the params document has no VM shapes)
GENERATED_MAX_VM_CORES = 4
GENERATED_MEMORY_GB_PER_CORE = 1.75
_VMTABLE_COLUMNS = ("deploymentid", "vmcreated", "vmdeleted", "vmcorecount", "vmmemory")
#: the predictor's features (LAVA paper §3: VM family and shape; here also subscription and category)
_FEATURE_COLUMNS = ("subscriptionid", "vmcategory")


@dataclass(frozen=True)
class VmStream:
    """One pool's VMs, sorted by (created, deployment); times in seconds.

    ``subscription`` and ``group`` (a code of the VM's category and shape) are the predictor's
    features besides the deployment; ``None`` means "no such feature" (each VM's deployment
    stands for its subscription, and every VM is in one group).
    """

    created_s: IntArray
    deleted_s: IntArray
    cores: FloatArray
    memory_gb: FloatArray
    deployment: IntArray
    subscription: IntArray | None = None
    group: IntArray | None = None

    def __len__(self) -> int:
        return len(self.created_s)

    def take(self, idx: IntArray) -> VmStream:
        return VmStream(
            self.created_s[idx],
            self.deleted_s[idx],
            self.cores[idx],
            self.memory_gb[idx],
            self.deployment[idx],
            None if self.subscription is None else self.subscription[idx],
            None if self.group is None else self.group[idx],
        )

    @property
    def subscriptions(self) -> IntArray:
        return self.deployment if self.subscription is None else self.subscription

    @property
    def groups(self) -> IntArray:
        return np.zeros(len(self), np.int64) if self.group is None else self.group


def _sorted_stream(
    created: IntArray,
    deleted: IntArray,
    cores: FloatArray,
    mem: FloatArray,
    dep: IntArray,
    features: tuple[IntArray, IntArray] | None = None,
) -> VmStream:
    # a VM seen at all lived at least one slot (as fct_azure_vm_lifetimes floors it)
    deleted = np.maximum(deleted, created + GRID_S)
    order = np.lexsort((dep, created))
    sub, group = (None, None) if features is None else (f[order].astype(np.int64) for f in features)
    return VmStream(
        created[order].astype(np.int64),
        deleted[order].astype(np.int64),
        cores[order].astype(np.float64),
        mem[order].astype(np.float64),
        dep[order].astype(np.int64),
        sub,
        group,
    )


def vmtable_stream(data_dir: Path) -> VmStream:
    """Every VM of the ingested lake ``DATA/lake/azure-2017/vmtable/*.parquet``."""
    folder = data_dir / "lake" / TRACE / "vmtable"
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise TracelabError(
            f"{folder}: no vmtable Parquet files; run `tracelab ingest --trace {TRACE}`"
        )
    lf = pl.scan_parquet([str(f) for f in files])
    names = lf.collect_schema().names()
    missing = [c for c in (*_VMTABLE_COLUMNS, *_FEATURE_COLUMNS) if c not in names]
    if missing:
        raise TracelabError(
            f"{folder}: lake vmtable lacks column(s) {', '.join(missing)}; "
            f"re-run `tracelab ingest --trace {TRACE}`"
        )
    # a VM without cores or a field cannot be placed (slots per host = host cores / VM cores)
    df = (
        lf.select(*_VMTABLE_COLUMNS, *_FEATURE_COLUMNS)
        .drop_nulls(_VMTABLE_COLUMNS)
        .filter(pl.col("vmcorecount") > 0)
        .with_columns(pl.col(c).fill_null("") for c in _FEATURE_COLUMNS)
        .collect()
    )

    def code(*cols: str) -> IntArray:
        # dense rank: a code fixed by the data alone, whatever the file order
        key = df.select(pl.concat_str([pl.col(c).cast(pl.String) for c in cols], separator="|"))
        return key.to_series().rank("dense").to_numpy().astype(np.int64) - 1

    return _sorted_stream(
        df["vmcreated"].to_numpy().astype(np.int64),
        df["vmdeleted"].to_numpy().astype(np.int64),
        df["vmcorecount"].to_numpy().astype(np.float64),
        df["vmmemory"].to_numpy().astype(np.float64),
        code("deploymentid"),
        (code("subscriptionid"), code("vmcategory", "vmcorecount", "vmmemory")),
    )


def _pool_deployments(
    stream: VmStream, order: IntArray, target_core_hours: tuple[float, ...]
) -> list[IntArray]:
    """Consecutive runs of ``order`` (deployment codes) whose core-hours reach each target."""
    life_h = (stream.deleted_s - stream.created_s) / HOUR_S
    per_dep = np.bincount(stream.deployment, weights=life_h * stream.cores)
    cum = np.cumsum(per_dep[order])
    out: list[IntArray] = []
    start = 0
    done = 0.0
    for target in target_core_hours:
        stop = int(np.searchsorted(cum, done + target, side="left")) + 1
        stop = min(stop, len(order))
        out.append(order[start:stop])
        done = float(cum[stop - 1]) if stop > 0 else 0.0
        start = stop
    return out


def split_into_pools(
    stream: VmStream,
    pool_hosts: tuple[int, ...],
    host_cores: float,
    target_load: float,
    seed: int,
) -> list[VmStream]:
    """Disjoint per-pool streams, each with mean demand ``target_load`` of its cores.

    Deployments are shuffled with ``seed``; a pool left short when the stream runs out keeps what
    there is (its load is then lower; the summary reports the pools' loads).
    """
    n_dep = int(stream.deployment.max()) + 1 if len(stream) else 0
    order = np.random.default_rng(seed).permutation(n_dep).astype(np.int64)
    window_h = max(float(stream.created_s.max()), GRID_S) / HOUR_S if len(stream) else 1.0
    targets = tuple(h * host_cores * target_load * window_h for h in pool_hosts)
    pools = []
    for deps in _pool_deployments(stream, order, targets):
        keep = np.isin(stream.deployment, deps)
        pools.append(stream.take(np.flatnonzero(keep)))
    return pools


@dataclass(frozen=True)
class DeploymentModel:
    """The exported deployment model (Cluster Admission §2.1) as the generator needs it; hours."""

    lifetime_shape: float
    lifetime_rate_hours: float
    scaleout_shape: float
    scaleout_rate: float
    alpha: float
    size_shape: float
    size_rate: float
    shutdown_rate: float


def deployment_model_from_params(doc: ParamsDocument, marginal: bool) -> DeploymentModel:
    """The priors records (``*_marginal`` when ``marginal``) of the params document."""
    sfx = "_marginal" if marginal else ""

    def value(name: str, parameter: str) -> float:
        need = {"alpha": "finite"}.get(
            parameter, "non-negative" if name.endswith("shutdown") else "positive"
        )
        return doc.number(TRACE, PRIORS_STAGE, name + sfx, parameter, need)

    return DeploymentModel(
        lifetime_shape=value("core_lifetime_rate_prior", "shape"),
        lifetime_rate_hours=value("core_lifetime_rate_prior", "rate"),
        scaleout_shape=value("normalised_scaleout_rate_prior", "shape"),
        scaleout_rate=value("normalised_scaleout_rate_prior", "rate"),
        alpha=value("scaleout_alpha", "alpha"),
        size_shape=value("scaleout_size_prior", "shape"),
        size_rate=value("scaleout_size_prior", "rate"),
        shutdown_rate=value("deployment_shutdown", "rate"),
    )


def _vm_cores(total: int) -> list[int]:
    """Powers of two up to the largest VM, as the sample's generator splits a scale-out."""
    sizes: list[int] = []
    while total >= GENERATED_MAX_VM_CORES:
        sizes.append(GENERATED_MAX_VM_CORES)
        total -= GENERATED_MAX_VM_CORES
    bit = GENERATED_MAX_VM_CORES // 2
    while total:
        if total >= bit:
            sizes.append(bit)
            total -= bit
        bit //= 2
    return sizes


def _one_deployment(
    m: DeploymentModel, rng: np.random.Generator, arrival_s: float
) -> tuple[list[float], list[float], list[int]]:
    """(created s, deleted s, cores) of one deployment's VMs, unclipped (Cluster Admission §2.1)."""
    lam = float(rng.gamma(m.lifetime_shape, 1.0 / m.lifetime_rate_hours))
    rho = float(rng.gamma(m.scaleout_shape, 1.0 / m.scaleout_rate))
    size = float(rng.gamma(m.size_shape, 1.0 / m.size_rate))
    rate = rho * lam**m.alpha
    shutdown_s = arrival_s + float(rng.exponential(1.0 / m.shutdown_rate)) / lam * HOUR_S
    horizon = min(shutdown_s, float(WINDOW_S - GRID_S))
    created: list[float] = []
    deleted: list[float] = []
    cores: list[int] = []
    t = arrival_s
    alive_until = -np.inf
    while t < horizon and (not created or t <= alive_until):
        # the first creation is sized like a scale-out: the document has no initial size
        for c in _vm_cores(1 + int(rng.poisson(size))):
            end = min(t + float(rng.exponential(1.0 / lam)) * HOUR_S, shutdown_s)
            created.append(t)
            deleted.append(end)
            cores.append(c)
            alive_until = max(alive_until, end)
        t += float(rng.exponential(1.0 / rate)) * HOUR_S
    return created, deleted, cores


def _generated_deployments(m: DeploymentModel, seed: int) -> Iterator[tuple[IntArray, ...]]:
    """Endless iid deployments arriving uniformly over the window and the 30 days before it."""
    rng = np.random.default_rng(seed)
    while True:
        arrival = float(rng.uniform(-WINDOW_S, WINDOW_S - GRID_S))
        created, deleted, cores = _one_deployment(m, rng, arrival)
        c = np.floor(np.asarray(created) / GRID_S) * GRID_S
        d = np.floor(np.asarray(deleted) / GRID_S) * GRID_S
        seen = d > 0
        if not seen.any():
            continue
        c = np.maximum(c[seen], 0.0)
        d = np.minimum(np.maximum(d[seen], c + GRID_S), WINDOW_S - GRID_S)
        yield c.astype(np.int64), d.astype(np.int64), np.asarray(cores, dtype=np.int64)[seen]


def generated_pools(
    m: DeploymentModel,
    pool_hosts: tuple[int, ...],
    host_cores: float,
    target_load: float,
    seed: int,
) -> list[VmStream]:
    """One generated stream per pool, deployments added until mean demand reaches the target."""
    window_h = WINDOW_S / HOUR_S
    pools: list[VmStream] = []
    for i, hosts in enumerate(pool_hosts):
        target = hosts * host_cores * target_load * window_h
        parts: list[tuple[IntArray, ...]] = []
        got = 0.0
        gen = _generated_deployments(m, seed * 1_000_003 + i)
        while got < target:
            c, d, k = next(gen)
            parts.append((c, d, k, np.full(len(c), len(parts), dtype=np.int64)))
            got += float(((d - c) * k).sum()) / HOUR_S
        created, deleted, cores, dep = (np.concatenate(col) for col in zip(*parts, strict=True))
        pools.append(
            _sorted_stream(
                created,
                deleted,
                cores.astype(np.float64),
                cores * GENERATED_MEMORY_GB_PER_CORE,
                dep,
            )
        )
    return pools
