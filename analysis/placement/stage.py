"""Lifetime-aware VM placement (docs/methods.md §3.3; LAVA paper §2.4, §4–6).

VM create/delete events — the ingested Azure vmtable, or a stream generated from the exported
deployment model — are replayed on pools of identical hosts under Best Fit, LA-Binary, LAS and
LAVA, with the lifetime model read only from the params document (:mod:`.placement_model`); LARS
is scored on defragmentation sets taken from the Best Fit replays. Outputs go to
``DATA/results/azure-2017/placement/`` (see ``docs/placement.md`` for every column).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from tracelab.analysis.common.bootstrap import ratio_interval
from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.intervals import mean_interval
from tracelab.analysis.common.stage_api import (
    MapFn,
    Progress,
    no_progress,
    out_of_range,
    serial_map,
)
from tracelab.analysis.common.stage_outputs import HEADLINE, headline, write_stage_outputs
from tracelab.analysis.common.sums import sorted_mean
from tracelab.analysis.export.document import ParamsDocument, load_params
from tracelab.analysis.placement.model import (
    HOUR_S,
    LA_BINARY_CUTOFF_HOURS,
    LifetimePrior,
    deployment_posteriors,
    expected_remaining_hours,
    feature_posteriors,
    lifetime_prior_from_params,
    predicted_classes,
    predicted_long,
    true_classes,
)
from tracelab.analysis.placement.options import (
    BASELINE,
    PlacementParams,
)
from tracelab.analysis.placement.replay import (
    ReplayConfig,
    ReplayInput,
    ReplayResult,
    replay,
)
from tracelab.analysis.placement.stream import (
    GRID_S,
    WINDOW_S,
    VmStream,
    deployment_model_from_params,
    generated_pools,
    split_into_pools,
    vmtable_stream,
)

#: LAVA paper §6.1 / Fig. 6: mean empty-host improvement over the production baseline, pp
PAPER_IMPROVEMENT_PP: dict[str, float] = {
    "lava/model": 6.5,
    "las/model": 6.1,
    "la-binary/model": 5.0,
    "las/oracle": 9.5,
    "la-binary/oracle": 7.5,
}
#: LAVA paper Table 2: LARS's reduction of live migrations, %
PAPER_LARS_REDUCTION_PCT = (4.32, 4.55)
#: ages (hours) at which the outputs tabulate E[T_r | T_u] for the report
_CURVE_AGES_H = (0.0, 0.25, 0.5, 1, 2, 4, 8, 12, 24, 48, 96, 168, 336, 720)


@dataclass(frozen=True)
class PlacementSummary:
    """Headline numbers: empty hosts per policy and their improvement over Best Fit."""

    source: str
    pool_hosts: tuple[int, ...]
    vms: int
    events: int
    replays: int
    rejected_vms: int
    #: ``policy/predictor`` -> empty hosts, % of the pool, mean over pools
    empty_host_pct: dict[str, float]
    #: ``policy/predictor`` -> mean over pools of (empty % - Best Fit's empty %), pp
    improvement_pp: dict[str, float]
    stranded_cpu_pct: dict[str, float]
    stranded_memory_pct: dict[str, float]
    lars_sets: int
    lars_baseline_migrations: int
    lars_model_migrations: int
    lars_oracle_migrations: int
    lars_saved_migrations: int
    lars_saved_pct: float
    lars_oracle_saved_pct: float
    #: 95% intervals of the two saved shares (%), :data:`LARS_INTERVAL_METHOD`
    lars_saved_pct_ci: tuple[float, float]
    lars_oracle_saved_pct_ci: tuple[float, float]
    seconds: float
    #: every option of the run, by field name
    parameters: dict[str, Any]
    #: the model's classes at creation against the true ones (:func:`prediction_quality`)
    prediction: dict[str, Any] = field(default_factory=dict)
    #: ``policy/predictor`` -> the mean improvement over pools with its 95% t interval (an
    #: :class:`Estimate`'s dict; ``n`` pools)
    improvement_pp_interval: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, with the paper's numbers beside this run's."""
        d = asdict(self)
        d["pool_hosts"] = list(self.pool_hosts)
        d["paper_improvement_pp"] = dict(PAPER_IMPROVEMENT_PP)
        d["paper_lars_reduction_pct"] = list(PAPER_LARS_REDUCTION_PCT)
        d["lars_saved_pct_ci"] = list(self.lars_saved_pct_ci)
        d["lars_oracle_saved_pct_ci"] = list(self.lars_oracle_saved_pct_ci)
        d["lars_interval_method"] = LARS_INTERVAL_METHOD
        d[HEADLINE] = headline(
            "improvement_pp_la_binary_oracle",
            "LA-Binary with oracle lifetimes: empty hosts (% of the pool) minus Best Fit's, mean "
            f"over {len(self.pool_hosts)} pools of {', '.join(map(str, self.pool_hosts))} hosts "
            f"({self.vms:,} VMs, {self.source})",
        )
        return d


def _check(params: PlacementParams) -> None:
    problem = out_of_range(params)
    if problem is not None:
        raise TracelabError(problem)


def _pools(params: PlacementParams, data_dir: Path, doc: ParamsDocument) -> list[VmStream]:
    """Per-pool streams from the lake or generated from the params document."""
    if params.source == "vmtable":
        return split_into_pools(
            vmtable_stream(data_dir),
            params.pool_hosts,
            float(params.host_cores),
            params.target_load,
            params.seed,
        )
    model = deployment_model_from_params(doc, params.lifetime_record.endswith("_marginal"))
    return generated_pools(
        model, params.pool_hosts, float(params.host_cores), params.target_load, params.seed
    )


def _replay_pairs(params: PlacementParams) -> list[tuple[str, str]]:
    """(policy, predictor) of every replay of a pool; Best Fit once, without a predictor."""
    pairs = [(BASELINE, "none")]
    for policy in params.policies:
        if policy == BASELINE:
            continue
        for predictor in params.predictors:
            # LA-Binary predicts once by definition: its one-shot run is its model run
            if policy == "la-binary" and predictor == "one-shot":
                continue
            pairs.append((policy, predictor))
    return pairs


def _config(params: PlacementParams, policy: str, predictor: str, hosts: int) -> ReplayConfig:
    return ReplayConfig(
        policy=policy,
        predictor=predictor,
        hosts=hosts,
        host_cores=float(params.host_cores),
        host_memory_gb=params.host_memory_gb,
        horizon_hours=params.horizon_hours,
        warmup_s=int(params.warmup_hours * HOUR_S),
        inflation_every_s=int(params.inflation_every_hours * HOUR_S),
        inflation_draws=params.inflation_draws,
        defrag_every_s=int(params.defrag_every_hours * HOUR_S),
        defrag_hosts=params.defrag_hosts,
        migration_slots=params.migration_slots,
        migration_s=params.migration_minutes * 60.0,
        lava_fill=params.lava_fill,
        deadline_factor=params.deadline_factor,
        lava_strict=params.lava_strict,
        seed=params.seed,
        repredict_every_s=int(params.repredict_minutes * 60.0),
    )


def predictions(
    params: PlacementParams, stream: VmStream, prior: LifetimePrior
) -> tuple[np.ndarray, np.ndarray]:
    """Per VM, the Gamma(shape, rate hours) of its lifetime rate from the features the options
    switch on (none: the exported prior itself)."""
    n = len(stream)
    # without deployment history every VM is its own deployment: it has no earlier sibling
    dep = stream.deployment if params.deployment_history else np.arange(n, dtype=np.int64)
    if params.feature_history:
        return feature_posteriors(
            prior, dep, stream.subscriptions, stream.groups, stream.created_s, stream.deleted_s
        )
    if params.deployment_history:
        return deployment_posteriors(prior, dep, stream.created_s, stream.deleted_s)
    return np.full(n, prior.shape), np.full(n, prior.rate_hours)


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k / n."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(mid - half), float(mid + half)


def prediction_quality(
    streams: list[VmStream], posteriors: list[tuple[np.ndarray, np.ndarray]]
) -> dict[str, Any]:
    """How the model's classes at creation match the VMs' true classes, over every pool.

    A VM still alive at the end counts only where its class is known (LC4 once it lived 100 h;
    long for LA-Binary once it lived 2 h). The majority share is what always guessing the
    commonest true class would score.
    """
    pred, true, p_long, t_long, known_long = [], [], [], [], []
    for s, (shape, rate) in zip(streams, posteriors, strict=True):
        life_h = (s.deleted_s - s.created_s) / HOUR_S
        censored = s.deleted_s >= WINDOW_S - GRID_S
        pred.append(predicted_classes(shape, rate))
        true.append(true_classes(life_h, censored))
        p_long.append(predicted_long(shape, rate))
        t_long.append(life_h >= LA_BINARY_CUTOFF_HOURS)
        known_long.append(~censored | (life_h >= LA_BINARY_CUTOFF_HOURS))
    pc, tc = np.concatenate(pred), np.concatenate(true)
    known = tc > 0
    n = int(known.sum())
    hits = int((pc[known] == tc[known]).sum())
    counts = np.bincount(tc[known], minlength=5)[1:]
    pcounts = np.bincount(pc[known], minlength=5)[1:]
    kl = np.concatenate(known_long)
    b_hits = int((np.concatenate(p_long)[kl] == np.concatenate(t_long)[kl]).sum())
    return {
        "class_vms": n,
        "class_accuracy": hits / n if n else float("nan"),
        "class_accuracy_ci": list(_wilson(hits, n)),
        "majority_class_share": float(counts.max() / n) if n else float("nan"),
        "true_class_shares": [float(c / n) if n else float("nan") for c in counts],
        "predicted_class_shares": [float(c / n) if n else float("nan") for c in pcounts],
        "binary_vms": int(kl.sum()),
        "binary_accuracy": b_hits / int(kl.sum()) if kl.any() else float("nan"),
        "binary_accuracy_ci": list(_wilson(b_hits, int(kl.sum()))),
    }


def replay_inputs(
    params: PlacementParams, pools: list[VmStream], prior: LifetimePrior
) -> list[ReplayInput]:
    """Every (pool, policy, predictor) replay as a self-contained work item."""
    items: list[ReplayInput] = []
    for pool, (stream, hosts) in enumerate(zip(pools, params.pool_hosts, strict=True)):
        shape, rate = predictions(params, stream, prior)
        for policy, predictor in _replay_pairs(params):
            cfg = _config(params, policy, predictor, hosts)
            items.append(ReplayInput(pool, cfg, stream, shape, rate))
    return items


def placement_results(
    params: PlacementParams,
    data_dir: Path,
    out_dir: Path,
    *,
    progress: Progress = no_progress,
    map_fn: MapFn = serial_map,
) -> PlacementSummary:
    """Replay every pool under every policy; write the tables and ``summary.json`` to ``out_dir``."""
    started = time.perf_counter()
    _check(params)
    doc = load_params(PARAMS_EXPORT.path(data_dir))
    prior = lifetime_prior_from_params(doc, params.lifetime_record)
    pools = _pools(params, data_dir, doc)
    items = replay_inputs(params, pools, prior)
    per_pool = len(items) // max(len(pools), 1)
    quality = prediction_quality(
        pools, [(it.shape, it.rate_hours) for it in items[::per_pool]] if per_pool else []
    )
    results: list[ReplayResult] = []
    progress(0, len(items), "replays")
    # one map per pool: progress moves while the replays of a big run go on
    for start in range(0, len(items), per_pool):
        results.extend(map_fn(replay, items[start : start + per_pool]))
        progress(len(results), len(items), "replays")
    tables = placement_tables(results, pools, params, prior)
    summary = placement_summary(results, params, time.perf_counter() - started, quality)
    write_stage_outputs(out_dir, tables, summary.to_dict())
    return summary


def _key(r: ReplayResult) -> str:
    return f"{r.policy}/{r.predictor}"


def replays_table(results: list[ReplayResult]) -> pl.DataFrame:
    """One row per replay, with its improvement over the same pool's Best Fit replay, pp."""
    base = {r.pool: r.empty_host_pct for r in results if r.policy == BASELINE}
    return pl.DataFrame(
        {
            "pool": [r.pool for r in results],
            "policy": [r.policy for r in results],
            "predictor": [r.predictor for r in results],
            "hosts": [r.hosts for r in results],
            "vms": [r.vms for r in results],
            "events": [r.events for r in results],
            "empty_host_pct": [r.empty_host_pct for r in results],
            "improvement_pp": [r.empty_host_pct - base[r.pool] for r in results],
            "hosts_used_mean": [r.hosts_used_mean for r in results],
            "hosts_used_peak": [r.hosts_used_peak for r in results],
            "stranded_cpu_pct": [r.stranded_cpu_pct for r in results],
            "stranded_memory_pct": [r.stranded_memory_pct for r in results],
            "rejected_vms": [r.rejected_vms for r in results],
            "deadline_misses": [r.deadline_misses for r in results],
            "class_lowerings": [r.class_lowerings for r in results],
        },
        schema_overrides={"hosts_used_peak": pl.Int64, "rejected_vms": pl.Int64},
    ).sort("pool", "policy", "predictor")


def _series_table(results: list[ReplayResult]) -> pl.DataFrame:
    frames = [
        pl.DataFrame(
            {
                "pool": np.full(len(r.series_hours), r.pool, dtype=np.int64),
                "policy": [r.policy] * len(r.series_hours),
                "predictor": [r.predictor] * len(r.series_hours),
                "hour": r.series_hours,
                "empty_host_pct": r.series_empty_pct,
            }
        )
        for r in results
    ]
    return pl.concat(frames).sort("pool", "policy", "predictor", "hour")


def _lars_table(results: list[ReplayResult]) -> pl.DataFrame:
    rows = [(r.pool, *d) for r in results if r.policy == BASELINE for d in r.defrag]
    cols = ("pool", "hour", "vms", "baseline_migrations", "lars_model_migrations")
    schema = {c: pl.Int64 for c in cols} | {"hour": pl.Float64, "lars_oracle_migrations": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row").sort("pool", "hour")


def _pools_table(pools: list[VmStream], params: PlacementParams) -> pl.DataFrame:
    def load(s: VmStream, hosts: int) -> float:
        span_h = max(float(s.created_s.max()), 1.0) / HOUR_S if len(s) else 1.0
        core_h = float(((s.deleted_s - s.created_s) * s.cores).sum()) / HOUR_S
        return core_h / span_h / (hosts * params.host_cores)

    return pl.DataFrame(
        {
            "pool": list(range(len(pools))),
            "hosts": list(params.pool_hosts),
            "vms": [len(s) for s in pools],
            "deployments": [len(np.unique(s.deployment)) for s in pools],
            "mean_load": [load(s, h) for s, h in zip(pools, params.pool_hosts, strict=True)],
        }
    )


def _curve_table(prior: LifetimePrior, params: PlacementParams) -> pl.DataFrame:
    ages = np.asarray(_CURVE_AGES_H, dtype=np.float64)
    return pl.DataFrame(
        {
            "age_hours": ages,
            "expected_remaining_hours": expected_remaining_hours(
                prior.shape, prior.rate_hours, ages, params.horizon_hours
            ),
            "expected_remaining_unrestricted_hours": expected_remaining_hours(
                prior.shape, prior.rate_hours, ages, np.inf
            ),
        }
    )


def placement_tables(
    results: list[ReplayResult],
    pools: list[VmStream],
    params: PlacementParams,
    prior: LifetimePrior,
) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem (columns in ``docs/placement.md``)."""
    replays = replays_table(results)
    improvement = (
        replays.group_by("policy", "predictor")
        .agg(
            sorted_mean("empty_host_pct"),
            sorted_mean("improvement_pp").alias("improvement_pp_mean"),
            pl.col("improvement_pp").min().alias("improvement_pp_min"),
            pl.col("improvement_pp").max().alias("improvement_pp_max"),
            sorted_mean("stranded_cpu_pct"),
            sorted_mean("stranded_memory_pct"),
            pl.len().alias("pools"),
        )
        .sort("policy", "predictor")
    )
    return {
        "replays": replays,
        "improvement": improvement,
        "empty_hosts_series": _series_table(results),
        "lars": _lars_table(results),
        "pools": _pools_table(pools, params),
        "lifetime_curve": _curve_table(prior, params),
    }


def _mean_by_key(
    results: list[ReplayResult], value: dict[int, float] | None, attr: str
) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for r in results:
        v = getattr(r, attr) - (value[r.pool] if value is not None else 0.0)
        out.setdefault(_key(r), []).append(float(v))
    return {k: float(np.mean(v)) for k, v in sorted(out.items())}


#: how the LARS intervals are computed (recorded in summary.json beside them)
LARS_INTERVAL_METHOD = (
    "percentile bootstrap, 95%, 2,000 resamples of the defragmentation sets (each set's "
    "lifetime-blind and LARS migration counts resampled together), seeded by --seed; sets are "
    "treated as independent"
)
_LARS_RESAMPLES = 2000


def saved_share_interval(
    baseline: npt.NDArray[np.int64], other: npt.NDArray[np.int64], seed: int
) -> tuple[float, float]:
    """95% interval of 100 (sum(baseline) - sum(other)) / sum(baseline), the share of
    migrations an order saves (:data:`LARS_INTERVAL_METHOD`); NaN without a set."""
    if baseline.size == 0:
        return math.nan, math.nan
    low, high = ratio_interval(
        100.0 * (baseline - other).astype(np.float64),
        baseline.astype(np.float64),
        _LARS_RESAMPLES,
        seed,
    )
    return low, high


def improvement_intervals(replays: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """``policy/predictor`` -> mean improvement over Best Fit over pools with its t interval, of
    :func:`replays_table`'s rows (Best Fit's own left out), as :class:`Estimate` dicts."""
    others = replays.filter(pl.col("policy") != BASELINE)
    return {
        f"{policy}/{predictor}": mean_interval(part["improvement_pp"].to_numpy()).to_dict()
        for (policy, predictor), part in others.group_by("policy", "predictor", maintain_order=True)
    }


def placement_summary(
    results: list[ReplayResult],
    params: PlacementParams,
    seconds: float,
    quality: dict[str, Any] | None = None,
) -> PlacementSummary:
    """Headline numbers over every pool (means of per-pool values, as LAVA paper Fig. 6 averages)."""
    base = {r.pool: r.empty_host_pct for r in results if r.policy == BASELINE}
    lars = np.asarray(
        [d[2:] for r in results if r.policy == BASELINE for d in r.defrag], dtype=np.int64
    ).reshape(-1, 3)
    baseline_m, model_m, oracle_m = (int(x) for x in lars.sum(axis=0))
    improvement = _mean_by_key([r for r in results if r.policy != BASELINE], base, "empty_host_pct")
    return PlacementSummary(
        source=params.source,
        pool_hosts=params.pool_hosts,
        vms=sum(r.vms for r in results if r.policy == BASELINE),
        events=sum(r.events for r in results),
        replays=len(results),
        rejected_vms=sum(r.rejected_vms for r in results),
        empty_host_pct=_mean_by_key(results, None, "empty_host_pct"),
        improvement_pp=improvement,
        stranded_cpu_pct=_mean_by_key(results, None, "stranded_cpu_pct"),
        stranded_memory_pct=_mean_by_key(results, None, "stranded_memory_pct"),
        lars_sets=len(lars),
        lars_baseline_migrations=baseline_m,
        lars_model_migrations=model_m,
        lars_oracle_migrations=oracle_m,
        lars_saved_migrations=baseline_m - model_m,
        lars_saved_pct=100.0 * (baseline_m - model_m) / baseline_m if baseline_m else 0.0,
        lars_oracle_saved_pct=100.0 * (baseline_m - oracle_m) / baseline_m if baseline_m else 0.0,
        lars_saved_pct_ci=saved_share_interval(lars[:, 0], lars[:, 1], params.seed),
        lars_oracle_saved_pct_ci=saved_share_interval(lars[:, 0], lars[:, 2], params.seed),
        seconds=round(seconds, 3),
        parameters=asdict(params),
        prediction=dict(quality or {}),
        improvement_pp_interval=improvement_intervals(replays_table(results)),
    )
