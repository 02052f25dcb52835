"""Seeded synthetic Azure V1 ``vmtable`` from the deployment model of Cluster Admission (§2.1, App. B).

The file is written exactly as published (docs/methods.md §0.2): ``vmtable/vmtable.csv.gz``, headerless,
columns in the order of :data:`analysis.schemas.AZURE_2017`, base64-looking hashes, times in
seconds on the 300 s grid of a 30-day window, VMs alive at the end carrying the censored value
``vmdeleted = 2591700``, CPU in percent.

Model (Cluster Admission §2.1, all rates per hour):

* deployments arrive as a Poisson process; arrival times inside the window are iid uniform
  (a Poisson process conditioned on its count). Deployments that arrived during the 30 days
  *before* the window and still have a VM alive at time 0 are "survivors": their VMs created
  before 0 appear with ``vmcreated = 0``;
* per deployment, drawn independently from Gamma priors (shape, rate):
  core-lifetime rate ``lambda`` (1/hour), normalised scale-out rate ``rho`` and scale-out size
  parameter ``s``; the scale-out rate is ``r = rho * lambda**alpha`` (equivalently
  ``rho = r * (1/lambda)**alpha``: deployments with long-lived cores scale slower);
* the arrival adds ``1 + Poisson(initial_size_mean)`` cores, every scale-out ``1 + Poisson(s)``,
  split into VMs of 1, 2, 4 or 8 cores (15 cores -> 8 + 4 + 2 + 1); every VM lives
  ``Exponential(lambda)`` hours, so each of its cores has an exponential lifetime;
* scale-outs are Poisson(r) in time while the deployment has active cores; a deployment
  whose cores have all ended is dead (no later scale-out);
* shutdown: the deployment's maximal age is ``E / lambda`` with ``E ~ Exponential(theta)``
  (age measured in mean core lifetimes); at that age every VM still alive ends at one time.

Creation and deletion times are floored to the 300 s grid (a VM lives at least 300 s), so two
scale-outs within one 5-minute slot appear as one, as they would in the real trace.

``TRUTH.json`` keys:

* ``trace``, ``generator``, ``seed``, ``scale``, ``target_mb``;
* ``window_s`` (2,592,000), ``grid_s`` (300), ``censored_vmdeleted_s`` (2,591,700);
* ``units``: the unit of every per-deployment quantity below;
* ``priors``: ``lifetime_rate``, ``normalised_scaleout_rate``, ``scaleout_size`` — each
  ``{"distribution": "gamma", "shape", "rate", "value_unit", "rate_unit"}``;
* ``alpha``, ``shutdown_rate`` (exponential rate of the maximal age, per mean core lifetime),
  ``arrival_rate_per_hour``;
* ``counts``: ``deployments_in_window``, ``survivor_deployments``, ``vms``, ``cores``,
  ``shut_down_deployments``;
* ``deployments``: one object per deployment written to the table — ``deploymentid``,
  ``arrival_s`` (may be negative for survivors), ``survivor``, ``lifetime_rate_per_hour``,
  ``normalised_scaleout_rate``, ``scaleout_rate_per_hour``, ``scaleout_size_param``,
  ``max_age_core_lifetimes``, ``shut_down`` (the shutdown happened inside the window),
  ``n_vms``, ``n_cores``.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy.special import gammaincinv, ndtr, ndtri

from tracelab.analysis.lake.schemas import AZURE_2017, AZURE_CENSORED_VMDELETED_S
from tracelab.analysis.synthetic.csvparts import marked_gzip
from tracelab.analysis.traces.azure2017 import ID as TRACE

WINDOW_S = 2_592_000
GRID_S = 300
_HOUR_S = 3600.0

#: deployments arriving inside the window, per named scale
SCALES: dict[str, int] = {"tiny": 300, "small": 3_000, "medium": 30_000, "large": 300_000}

#: the real excerpt (``../shared/data/real/azure-public-dataset-v1/filtered_vmtables_50.csv``):
#: 27 of its 656 one-core VMs have 0.75 GB, the rest 1.75 GB (Azure's A0 and A1 sizes)
SMALL_MEMORY_GB = 0.75
_BATCH_DEPLOYMENTS = 500
_TARGET_BATCH_DEPLOYMENTS = 15


@dataclass(frozen=True)
class GammaPrior:
    """A Gamma(shape, rate) population prior; ``rate`` is in the inverse unit of the value."""

    shape: float
    rate: float
    value_unit: str
    rate_unit: str

    @property
    def mean(self) -> float:
        return self.shape / self.rate


@dataclass(frozen=True)
class AzureModel:
    """True parameters of the generator, calibrated to the published V1 figures.

    Targets (``analysis/calibration/stage.py`` rows): 51.8 VM-hours per VM and 2.28 cores per VM-hour
    (AzurePublicDatasetV1.md: 2,013,767 VMs, 104.4 M VM-hours, 237.8 M core-hours), ~56 VMs per
    deployment (2,013,767 VMs / 35,941 deployments in the V1 notebook), ~145 cores per arriving
    deployment and 27% of ended deployments shut down (Cluster Admission App. B), 97.5% of the arriving
    deployments' cores inactive by the end of the month (Cluster Admission App. B: 4,211,926 of
    4,317,961), and 84% of the deployments arriving inside the window (29,757 of 35,576). The
    survivors carry most VM-hours, so with few of them each must be large and long-lived:
    short-lived deployments use large VMs (few VMs where VMs are many and short), long-lived ones
    small VMs, and no deployment arrives over 45 days before the window. Short VMs stay common:
    the lifetime-rate prior has shape < 1, so about a fifth of VMs live under an hour while VMs
    of an hour or more hold > 99% of the core-hours
    (the pattern of LAVA paper §2.1, whose 88% under an hour is Google's, not a target here).
    """

    #: per-deployment core lifetime rate, 1/hour: mean 0.625/h but shape 0.5 spreads it from
    #: minutes to months
    lifetime_rate: GammaPrior = GammaPrior(0.5, 0.8, "1/hour", "hour")
    normalised_scaleout_rate: GammaPrior = GammaPrior(2.5, 3.0, "hour^(alpha-1)", "hour^(1-alpha)")
    #: Cluster Admission App. B: ~145 cores per deployment (a ~61-core start plus scale-outs of ~9 cores)
    scaleout_size: GammaPrior = GammaPrior(1.5, 0.19, "cores", "1/cores")
    alpha: float = 0.85
    #: the arrival adds 1 + Poisson(initial_size_mean) cores (the deployment's initial size)
    initial_size_mean: float = 60.0
    #: rate of the exponential maximal age, per mean core lifetime (mean ~17 core lifetimes)
    shutdown_rate: float = 0.06
    #: survivors: the process also runs this many seconds before the window (45 days: with
    #: 240 days 37% of the window's deployments were survivors, against the paper's 16%;
    #: the ones that cannot reach the window are dropped before they are simulated)
    pre_window_s: int = 45 * 86_400
    #: (cores per VM, share of deployments): a deployment's VM size; a scale-out of c cores is
    #: c // size VMs of that size plus the remainder in powers of two (one-core VMs come from
    #: the remainders). Chosen (V1 publishes no size shares, and the real excerpt holds one-core
    #: VMs only) so that core-hours per VM-hour come out near the published 2.28
    vm_size_mix: tuple[tuple[int, float], ...] = (
        (2, 0.40),
        (4, 0.30),
        (8, 0.18),
        (16, 0.12),
    )
    #: (GB of memory per core, share of deployments): Azure's 2017 families (A: 1.75 GB/core,
    #: D: 3.5 GB/core, memory-optimised: 7 GB/core, e.g. the V1 notebook's 8-core 56 GB VM)
    memory_mix: tuple[tuple[float, float], ...] = ((1.75, 0.6), (3.5, 0.3), (7.0, 0.1))
    #: share of 0.75 GB VMs among one-core 1.75 GB/core VMs (real excerpt: 27 of 656)
    small_memory_share: float = 27 / 656
    #: (category, share of deployments), from the longest-lived to the shortest-lived deployments
    category_mix: tuple[tuple[str, float], ...] = (
        ("Interactive", 0.35),
        ("Unknown", 0.25),
        ("Delay-insensitive", 0.40),
    )
    #: correlation of two deployments' latent lifetime scores when they share a subscription
    subscription_correlation: float = 0.6
    #: correlation of a deployment's category score and its lifetime score
    category_correlation: float = 0.7
    #: correlation of a deployment's VM-size score and its (long) lifetime score: negative, the
    #: long-lived deployments, which hold most VM-hours, use the small VMs
    size_correlation: float = -0.6


@dataclass(frozen=True)
class _Deployment:
    deploymentid: str
    arrival_s: float
    survivor: bool
    lifetime_rate_per_hour: float
    normalised_scaleout_rate: float
    scaleout_rate_per_hour: float
    scaleout_size_param: float
    max_age_core_lifetimes: float
    shut_down: bool
    n_vms: int
    n_cores: int
    subscription: int
    category: str
    vm_size_cores: int
    memory_gb_per_core: float


@dataclass(frozen=True)
class _Traits:
    """What a deployment draws before it runs: its rate and the features a predictor may see."""

    lifetime_rate_per_hour: float
    max_age_core_lifetimes: float
    subscription: int
    category: str
    vm_size_cores: int
    memory_gb_per_core: float


def _mix_index(score: npt.NDArray[np.float64], shares: list[float]) -> npt.NDArray[np.int64]:
    """Index into a mix of ``shares`` by a standard-normal score (higher score, later entry)."""
    cuts = ndtri(np.cumsum(shares)[:-1] / float(np.sum(shares)))
    return np.searchsorted(cuts, score).astype(np.int64)


def _traits(
    rng: np.random.Generator,
    model: AzureModel,
    sub_scores: npt.NDArray[np.float64],
    arrivals: npt.NDArray[np.float64],
) -> list[tuple[float, _Traits]]:
    """Correlated deployment traits through a Gaussian copula, for deployments that can be seen.

    Each deployment has a standard-normal lifetime score ``z`` (correlation
    ``subscription_correlation`` within a subscription); its lifetime rate is the Gamma prior's
    quantile at ``Phi(z)``, so the population prior stays exactly Gamma(shape, rate). Category and
    VM size are read off scores correlated with ``z``: short-lived deployments (high ``z``) are
    mostly Delay-insensitive and use large VMs, so both are informative features. A deployment
    that arrived before the window and reached its maximal age before it is dropped here (it
    cannot leave a VM in the window), so a long pre-window period costs little.
    """
    n = len(arrivals)
    rho = model.subscription_correlation
    sub = rng.integers(len(sub_scores), size=n)
    z = np.sqrt(rho) * sub_scores[sub] + np.sqrt(1.0 - rho) * rng.standard_normal(n)
    prior = model.lifetime_rate
    lam = np.maximum(gammaincinv(prior.shape, ndtr(z)) / prior.rate, 1e-12)
    max_age = rng.exponential(1.0 / model.shutdown_rate, n)
    kc, ks = model.category_correlation, model.size_correlation
    cat_score = kc * z + np.sqrt(1.0 - kc * kc) * rng.standard_normal(n)
    size_score = -ks * z + np.sqrt(1.0 - ks * ks) * rng.standard_normal(n)
    cats = _mix_index(cat_score, [w for _, w in model.category_mix])
    sizes = _mix_index(size_score, [w for _, w in model.vm_size_mix])
    mem_w = np.asarray([w for _, w in model.memory_mix])
    mems = rng.choice(len(mem_w), size=n, p=mem_w / mem_w.sum())
    seen = arrivals + max_age / lam * _HOUR_S > 0.0
    return [
        (
            float(arrivals[i]),
            _Traits(
                lifetime_rate_per_hour=float(lam[i]),
                max_age_core_lifetimes=float(max_age[i]),
                subscription=int(sub[i]),
                category=model.category_mix[int(cats[i])][0],
                vm_size_cores=model.vm_size_mix[int(sizes[i])][0],
                memory_gb_per_core=model.memory_mix[int(mems[i])][0],
            ),
        )
        for i in np.flatnonzero(seen).tolist()
    ]


def generate_azure_2017(
    out: Path,
    *,
    seed: int = 0,
    scale: str = "tiny",
    target_mb: float | None = None,
    progress: bool = False,
    model: AzureModel | None = None,
) -> Path:
    """Write ``out/vmtable/vmtable.csv.gz`` and ``out/TRUTH.json``; returns ``out/TRUTH.json``.

    ``scale`` fixes the number of deployments arriving inside the window (:data:`SCALES`);
    ``target_mb`` instead keeps adding deployments until the gzip file reaches that many MB.
    Rows are written in batches of deployments, so memory does not grow with the output.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of: {', '.join(SCALES)}")
    if target_mb is not None and target_mb <= 0:
        raise ValueError(f"target_mb must be positive, got {target_mb}")
    model = model or AzureModel()
    rng = np.random.default_rng(seed)
    n_in_window = SCALES[scale]
    target_bytes = None if target_mb is None else int(target_mb * 1_000_000)

    table_dir = out / "vmtable"
    table_dir.mkdir(parents=True, exist_ok=True)
    csv_path = table_dir / "vmtable.csv.gz"
    subscriptions = [_hash(rng) for _ in range(max(1, n_in_window // 6))]
    # a subscription's latent lifetime score, shared (in part) by its deployments
    sub_scores = rng.standard_normal(len(subscriptions))
    truths: list[_Deployment] = []
    columns = AZURE_2017["vmtable"].column_names

    bar = _progress_bar(progress, None if target_bytes else n_in_window)
    with csv_path.open("wb") as raw, marked_gzip(raw, level=9) as gz:
        done = 0
        while True:
            if target_bytes is None:
                n_batch = min(_BATCH_DEPLOYMENTS, n_in_window - done)
                if n_batch <= 0:
                    break
            else:
                if raw.tell() >= target_bytes:
                    break
                # small batches so the file overshoots the target by little
                n_batch = _TARGET_BATCH_DEPLOYMENTS
            # survivors in proportion: the pre-window period has the same arrival rate
            n_pre = int(rng.poisson(n_batch * model.pre_window_s / WINDOW_S))
            arrivals = np.concatenate(
                [
                    rng.uniform(GRID_S, AZURE_CENSORED_VMDELETED_S, n_batch),
                    rng.uniform(-model.pre_window_s, 0.0, n_pre),
                ]
            )
            frames: list[pl.DataFrame] = []
            for arrival, traits in _traits(rng, model, sub_scores, arrivals):
                truth, vms = _deployment(rng, model, arrival, traits, subscriptions)
                if truth is not None:
                    truths.append(truth)
                    frames.append(vms)
            if frames:
                frame = pl.concat(frames).cast(AZURE_2017["vmtable"].polars_schema())  # type: ignore[arg-type]
                gz.write(frame.select(columns).write_csv(include_header=False).encode())
            done += n_batch
            if bar is not None:
                bar[0].update(bar[1], completed=raw.tell() if target_bytes else done)
        if bar is not None:
            bar[0].stop()

    truth_doc = _truth_document(
        truths,
        model,
        seed=seed,
        scale=scale,
        target_mb=target_mb,
    )
    truth_path = out / "TRUTH.json"
    truth_path.write_text(json.dumps(truth_doc, indent=1), encoding="utf-8")
    return truth_path


def _progress_bar(enabled: bool, total: int | None) -> tuple[Any, Any] | None:
    if not enabled:
        return None
    from rich.progress import Progress

    bar = Progress()
    task = bar.add_task(f"{TRACE} vmtable", total=total)
    bar.start()
    return bar, task


def _hash(rng: np.random.Generator) -> str:
    # V1 ids are 64-character base64 strings (48 random bytes encode to exactly 64 characters)
    return base64.b64encode(rng.bytes(48)).decode("ascii")


def _split_cores(cores: int, size: int) -> list[int]:
    """VM core counts of one scale-out: ``cores // size`` VMs of the deployment's size, the
    remainder in powers of two (15 cores at size 4 -> 4 + 4 + 4 + 2 + 1): the cores stay exactly
    the Cluster Admission model's ``1 + Poisson(s)``."""
    sizes = [size] * (cores // size)
    rest = cores % size
    bit = size // 2
    while rest:
        if rest >= bit:
            sizes.append(bit)
            rest -= bit
        bit //= 2
    return sizes


def _event_vms(
    cores: npt.NDArray[np.int64], size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(event index, cores) of every VM the events' core counts split into."""
    vm_event: list[int] = []
    vm_cores: list[int] = []
    for i, c in enumerate(cores):
        for v in _split_cores(int(c), size):
            vm_event.append(i)
            vm_cores.append(v)
    return np.asarray(vm_event, dtype=np.int64), np.asarray(vm_cores, dtype=np.int64)


def _deployment(
    rng: np.random.Generator,
    model: AzureModel,
    arrival_s: float,
    traits: _Traits,
    subscriptions: list[str],
) -> tuple[_Deployment | None, pl.DataFrame]:
    """Simulate one deployment; ``None`` if it left no VM alive inside the window."""
    lam = traits.lifetime_rate_per_hour
    rho = float(
        rng.gamma(model.normalised_scaleout_rate.shape, 1.0 / model.normalised_scaleout_rate.rate)
    )
    size = float(rng.gamma(model.scaleout_size.shape, 1.0 / model.scaleout_size.rate))
    rate = rho * lam**model.alpha
    max_age_cl = traits.max_age_core_lifetimes
    shutdown_s = arrival_s + max_age_cl / lam * _HOUR_S
    # nothing is created in the last 300 s slot: a VM seen at all lives at least one slot
    horizon_s = min(shutdown_s, float(AZURE_CENSORED_VMDELETED_S))

    # event times: arrival, then Poisson(rate) scale-outs up to the horizon
    times = [arrival_s]
    t = arrival_s
    while True:
        t += float(rng.exponential(1.0 / rate)) * _HOUR_S
        if t >= horizon_s:
            break
        times.append(t)
    event_times = np.asarray(times)
    cores = 1 + rng.poisson(size, len(event_times))
    cores[0] = 1 + rng.poisson(model.initial_size_mean)

    vm_event_a, vm_cores_a = _event_vms(cores, traits.vm_size_cores)
    vm_start = event_times[vm_event_a]
    vm_end = vm_start + rng.exponential(1.0 / lam, len(vm_start)) * _HOUR_S

    # the deployment dies when no core is active: a later scale-out never happens
    event_end = np.full(len(event_times), -np.inf)
    np.maximum.at(event_end, vm_event_a, vm_end)
    alive_until = np.maximum.accumulate(event_end)
    dead_before = np.nonzero(event_times[1:] > alive_until[:-1])[0]
    n_events = int(dead_before[0]) + 1 if len(dead_before) else len(event_times)
    keep = vm_event_a < n_events
    vm_start, vm_end, vm_cores_a = vm_start[keep], vm_end[keep], vm_cores_a[keep]
    natural_death_s = float(vm_end.max())
    shut_down = shutdown_s < natural_death_s
    if shut_down:
        vm_end = np.minimum(vm_end, shutdown_s)

    visible = vm_end > 0.0
    if not visible.any():
        return None, pl.DataFrame()
    vm_start, vm_end, vm_cores_a = vm_start[visible], vm_end[visible], vm_cores_a[visible]
    created = np.maximum(np.floor(vm_start / GRID_S) * GRID_S, 0).astype(np.int64)
    deleted = (np.floor(vm_end / GRID_S) * GRID_S).astype(np.int64)
    deleted = np.minimum(np.maximum(deleted, created + GRID_S), AZURE_CENSORED_VMDELETED_S)

    depid = _hash(rng)
    rows = _vm_frame(rng, model, depid, traits, subscriptions, created, deleted, vm_cores_a)
    n = rows.height
    truth = _Deployment(
        deploymentid=depid,
        arrival_s=arrival_s,
        survivor=arrival_s < 0,
        lifetime_rate_per_hour=lam,
        normalised_scaleout_rate=rho,
        scaleout_rate_per_hour=rate,
        scaleout_size_param=size,
        max_age_core_lifetimes=max_age_cl,
        shut_down=bool(shut_down and shutdown_s < WINDOW_S),
        n_vms=n,
        n_cores=int(vm_cores_a.sum()),
        subscription=traits.subscription,
        category=traits.category,
        vm_size_cores=traits.vm_size_cores,
        memory_gb_per_core=traits.memory_gb_per_core,
    )
    return truth, rows


def _vm_frame(
    rng: np.random.Generator,
    model: AzureModel,
    depid: str,
    traits: _Traits,
    subscriptions: list[str],
    created: npt.NDArray[np.int64],
    deleted: npt.NDArray[np.int64],
    vm_cores_a: npt.NDArray[np.int64],
) -> pl.DataFrame:
    """The vmtable rows of one deployment (columns, not a dict per VM: ~50 VMs each)."""
    subscription = subscriptions[traits.subscription]
    n = len(created)
    # CPU in percent: avg <= p95 <= max <= 100
    avg = rng.uniform(1.0, 60.0, n)
    p95 = np.minimum(avg + rng.uniform(0.0, 35.0, n), 100.0)
    peak = np.minimum(p95 + rng.uniform(0.0, 20.0, n), 100.0)
    memory = vm_cores_a.astype(np.float64) * traits.memory_gb_per_core
    small = rng.random(n) < model.small_memory_share
    if traits.memory_gb_per_core == 1.75:
        memory = np.where(small & (vm_cores_a == 1), SMALL_MEMORY_GB, memory)
    raw_ids = rng.bytes(48 * n)
    return pl.DataFrame(
        {
            "vmid": [
                base64.b64encode(raw_ids[48 * i : 48 * (i + 1)]).decode("ascii") for i in range(n)
            ],
            "subscriptionid": [subscription] * n,
            "deploymentid": [depid] * n,
            "vmcreated": created,
            "vmdeleted": deleted,
            "maxcpu": np.round(peak, 6),
            "avgcpu": np.round(avg, 6),
            "p95maxcpu": np.round(p95, 6),
            "vmcategory": [traits.category] * n,
            "vmcorecount": vm_cores_a.astype(np.int64),
            "vmmemory": memory,
        }
    )


def _truth_document(
    truths: list[_Deployment],
    model: AzureModel,
    *,
    seed: int,
    scale: str,
    target_mb: float | None,
) -> dict[str, Any]:
    survivors = sum(d.survivor for d in truths)
    # arrival times are iid uniform given their count: the rate is count / window
    arrival_rate_per_hour = (len(truths) - survivors) / (WINDOW_S / _HOUR_S)
    return {
        "trace": TRACE,
        "generator": "analysis.synthetic.azure2017",
        "seed": seed,
        "scale": scale,
        "target_mb": target_mb,
        "window_s": WINDOW_S,
        "grid_s": GRID_S,
        "censored_vmdeleted_s": AZURE_CENSORED_VMDELETED_S,
        "units": {
            "arrival_s": "s from trace start",
            "lifetime_rate_per_hour": "1/hour",
            "normalised_scaleout_rate": "hour^(alpha-1) (scale-out rate x mean core lifetime^alpha)",
            "scaleout_rate_per_hour": "1/hour",
            "scaleout_size_param": "cores (a scale-out adds 1 + Poisson(param) cores)",
            "max_age_core_lifetimes": "mean core lifetimes of the deployment",
        },
        "priors": {
            "lifetime_rate": {"distribution": "gamma", **asdict(model.lifetime_rate)},
            "normalised_scaleout_rate": {
                "distribution": "gamma",
                **asdict(model.normalised_scaleout_rate),
            },
            "scaleout_size": {"distribution": "gamma", **asdict(model.scaleout_size)},
        },
        "alpha": model.alpha,
        "shutdown_rate": model.shutdown_rate,
        "initial_size_mean": model.initial_size_mean,
        "vm_size_mix": [list(x) for x in model.vm_size_mix],
        "memory_mix": [list(x) for x in model.memory_mix],
        "small_memory_share": model.small_memory_share,
        "category_mix": [list(x) for x in model.category_mix],
        "subscription_correlation": model.subscription_correlation,
        "category_correlation": model.category_correlation,
        "size_correlation": model.size_correlation,
        "arrival_rate_per_hour": arrival_rate_per_hour,
        "counts": {
            "deployments_in_window": len(truths) - survivors,
            "survivor_deployments": survivors,
            "vms": sum(d.n_vms for d in truths),
            "cores": sum(d.n_cores for d in truths),
            "shut_down_deployments": sum(d.shut_down for d in truths),
        },
        "deployments": [
            {
                k: (round(v, 9) if isinstance(v, float) and math.isfinite(v) else v)
                for k, v in asdict(d).items()
            }
            for d in truths
        ],
    }
