"""Stage ``packing``: stochastic bin packing with GPA and its baselines (docs/methods.md §3.1).

Janus & Rzadca §4–5, Algorithm 1, Figs. 7–13. Instances of long tasks (``packing_inputs``) are packed
by every method (``packing_core``) and evaluated on held-out realizations:

* ``methods`` (Figs. 7, 8, 9, 13): every method, First and Best Fit, c = ``capacity``, full
  clairvoyance, inst statistics.
* ``statistics`` (Fig. 10): every method estimated from avg instead of inst (Best Fit); evaluation
  is always on inst realizations. Skipped for ``source="params"`` (the export has no avg data).
* ``capacity`` (Fig. 11): av 2 / GPA 0.001 and av 1.25 / GPA 0.1 for each c in ``capacities``.
* ``clairvoyance`` (Fig. 12): GPA 0.01 and 0.001, av 1.25 and 2 for each clairvoyance level v.

Every packing is evaluated with and without the paper's rebalancing (Fig. 13 compares them).
Metrics (§5.1): m = m_abs / ⌈Σ x̄_i / c⌉ with x̄_i the mean of all R inst realizations of task i (so
m does not move with the clairvoyance level), and q = overflows / (m_abs · |E|) with its binomial
standard error. Observation set: the first ⌊v·R⌉ realizations (at least 1, at most R − 1 when
v < 1); evaluation set: the rest, or all R when v = 1.

Work is split into cells (instance × experiment) run through ``map_fn``; a cell draws its
instance's realizations from ``default_rng([seed, 3, instance])``, so tables do not depend on
the map or its order.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.common.intervals import binomial_rate, clustered_mean_interval
from tracelab.analysis.common.reduced import reduced_options
from tracelab.analysis.common.stage_api import MapFn, Progress, no_progress, serial_map
from tracelab.analysis.common.stage_outputs import headline, write_stage_outputs
from tracelab.analysis.common.sums import sorted_mean
from tracelab.analysis.packing.core import (
    FloatArray,
    fits_av,
    fits_cantelli,
    fits_gpa,
    fits_perc,
    gpa_z,
    machine_loads,
    overflow,
    packed_machines,
    rebalanced_loads,
    rebalanced_machines,
)
from tracelab.analysis.packing.inputs import (
    InstanceTasks,
    TaskSource,
    params_tasks,
    realizations,
    trace_tasks,
)
from tracelab.analysis.packing.options import PAPER_PACKING_PARAMS, PackingParams

#: Janus & Rzadca §5.4/§5.5: the av/GPA pairs with similar (m, q) at c = 1 that Figs. 11–12 compare
PAIRED_METHODS: tuple[tuple[str, float], ...] = (
    ("av", 2.0),
    ("gpa", 0.001),
    ("av", 1.25),
    ("gpa", 0.1),
)
CLAIRVOYANCE_METHODS: tuple[tuple[str, float], ...] = (
    ("gpa", 0.01),
    ("av", 1.25),
    ("gpa", 0.001),
    ("av", 2.0),
)
#: Janus & Rzadca §5.2–5.6 headline numbers the report states beside this run's
PAPER_HEADLINE: dict[str, Any] = {
    "gpa_q_at_rho_0.001": 1.6e-3,
    "cantelli_q_b_1.0": 3e-4,
    "cantelli_q_b_1.7": 2e-6,
    "machines_ratio_cantelli_to_gpa_at_95pct_slo": [1.9, 3.7],
    "observations_sufficient": 100,
    "rebalancing_q_decrease": 0.07,
    "av1_mean_machines": 28.0,
    "instances": 50,
    "tasks": 1000,
    "realizations": 10000,
}
_CELLS_PER_CHUNK = 4


@dataclass(frozen=True)
class Method:
    """One estimation method: family ``gpa``/``cantelli``/``av``/``perc`` and its parameter."""

    family: str
    parameter: float

    @property
    def label(self) -> str:
        name = {"gpa": "GPA", "cantelli": "Cantelli", "av": "av", "perc": "perc"}[self.family]
        return f"{name} {self.parameter:g}"


def all_methods(params: PackingParams) -> tuple[Method, ...]:
    """Every method of the grid, in the paper's order (GPA, Cantelli, av, perc)."""
    return (
        *(Method("gpa", r) for r in params.rhos),
        *(Method("cantelli", b) for b in params.cantelli),
        *(Method("av", f) for f in params.av_factors),
        *(Method("perc", p) for p in params.percentiles),
    )


@dataclass(frozen=True)
class TaskStatistics:
    """What the methods see of each task: moments and percentiles of its observation set (cores)."""

    mean: FloatArray
    std: FloatArray
    percentiles: dict[float, FloatArray]


def observed_statistics(observed: FloatArray, percentiles: Sequence[float]) -> TaskStatistics:
    """Mean, population std and the requested percentiles (linear interpolation) per task row."""
    pct = np.percentile(observed, list(percentiles), axis=1) if percentiles else np.zeros((0,))
    return TaskStatistics(
        mean=observed.mean(axis=1),
        std=observed.std(axis=1),
        percentiles={p: pct[i] for i, p in enumerate(percentiles)},
    )


def item_moments(method: Method, stats: TaskStatistics) -> tuple[FloatArray, FloatArray, float]:
    """(μ, σ², z) for GPA, or (fixed item size, 0, 0) for the baselines."""
    zeros = np.zeros_like(stats.mean)
    if method.family == "gpa":
        return stats.mean, stats.std**2, gpa_z(method.parameter)
    if method.family == "cantelli":
        return stats.mean + method.parameter * stats.std, zeros, 0.0
    if method.family == "av":
        return method.parameter * stats.mean, zeros, 0.0
    return stats.percentiles[method.parameter], zeros, 0.0


@dataclass(frozen=True)
class Cell:
    """One unit of work: one experiment on one instance."""

    instance: int
    experiment: str
    tasks: InstanceTasks
    params: PackingParams


@dataclass(frozen=True)
class _Setting:
    statistics: str
    clairvoyance: float
    capacity: float
    methods: tuple[Method, ...]
    fits: tuple[str, ...]


def experiment_settings(experiment: str, params: PackingParams) -> tuple[_Setting, ...]:
    """The (statistics, clairvoyance, capacity, methods, fit algorithms) an experiment packs."""
    every = all_methods(params)
    paired = tuple(Method(f, p) for f, p in PAIRED_METHODS)
    if experiment == "methods":
        return (_Setting("inst", 1.0, params.capacity, every, ("first", "best")),)
    if experiment == "statistics":
        return (_Setting("avg", 1.0, params.capacity, every, ("best",)),)
    if experiment == "capacity":
        return tuple(_Setting("inst", 1.0, c, paired, ("best",)) for c in params.capacities)
    if experiment == "clairvoyance":
        clair = tuple(Method(f, p) for f, p in CLAIRVOYANCE_METHODS)
        return tuple(
            _Setting("inst", v, params.capacity, clair, ("best",)) for v in params.clairvoyance
        )
    raise ValueError(f"unknown experiment {experiment!r}")


def observation_count(clairvoyance: float, r: int) -> int:
    """|O| = ⌊v·R⌉ clipped to [1, R − 1] (R when v = 1, where O = E = all realizations)."""
    if clairvoyance >= 1.0:
        return r
    return int(min(max(1, round(clairvoyance * r)), r - 1))


def cell_runs(cell: Cell) -> pl.DataFrame:
    """Every packing of one cell, evaluated without and with rebalancing: one row per evaluation."""
    p = cell.params
    rng = np.random.default_rng([p.seed, 3, cell.instance])
    inst, avg = realizations(cell.tasks, p.realizations, rng)
    return evaluated_runs(cell.instance, cell.experiment, p, inst, avg)


def evaluated_runs(
    instance: int, experiment: str, p: PackingParams, inst: FloatArray, avg: FloatArray
) -> pl.DataFrame:
    """The experiment's packings of one instance's (inst, avg) realizations (n_tasks × R).

    Deterministic given the realizations, so tests can hand it tiny hand-made instances.
    """
    r = int(inst.shape[1])
    # x̄_i of §5.1 from all R realizations, so m_norm is the same at every clairvoyance level
    total_mean = float(inst.mean(axis=1).sum())
    rows: list[dict[str, Any]] = []
    for setting in experiment_settings(experiment, p):
        n_obs = observation_count(setting.clairvoyance, r)
        source = inst if setting.statistics == "inst" else avg
        wanted = sorted({m.parameter for m in setting.methods if m.family == "perc"})
        stats = observed_statistics(source[:, :n_obs], wanted)
        # Fig. 10 estimates from avg, but a machine overflows on its inst usage either way
        evaluation = inst if n_obs == r else inst[:, n_obs:]
        m_norm = max(1, int(np.ceil(total_mean / setting.capacity)))
        context = {
            "instance": instance,
            "experiment": experiment,
            "statistics": setting.statistics,
            "clairvoyance": setting.clairvoyance,
            "observations": n_obs,
            "capacity": setting.capacity,
            "m_norm": m_norm,
        }
        for method in setting.methods:
            for fit in setting.fits:
                rows += _packing_rows(context, method, fit, stats, evaluation, p.max_failures)
    return pl.DataFrame(rows, schema=_RUN_SCHEMA)


def _packing_rows(
    context: dict[str, Any],
    method: Method,
    fit: str,
    stats: TaskStatistics,
    evaluation: FloatArray,
    max_failures: int,
) -> list[dict[str, Any]]:
    """One packing, evaluated as packed and after rebalancing (two rows)."""
    capacity = float(context["capacity"])
    mu, var, z = item_moments(method, stats)
    machine = packed_machines(mu, var, capacity=capacity, z=z, best_fit=fit == "best")
    n_machines = int(machine.max()) + 1
    loads = machine_loads(evaluation, machine, n_machines)
    moved = rebalanced_machines(machine, mu, var, capacity=capacity, z=z, max_failures=max_failures)
    after = rebalanced_loads(loads, evaluation, moved, n_machines)
    base = context | {
        "family": method.family,
        "parameter": method.parameter,
        "method": method.label,
        "fit": fit,
        "n_tasks": int(mu.shape[0]),
    }
    rows = []
    for rebalance, assignment, load in ((False, machine, loads), (True, moved.machine, after)):
        result = overflow(load, assignment, capacity)
        rows.append(
            base
            | {
                "rebalance": rebalance,
                "moves": int(moved.moved_tasks.size) if rebalance else 0,
                "m_abs": result.machines_used,
                "m": result.machines_used / int(context["m_norm"]),
                "overflows": result.overflows,
                "evaluations": result.evaluations,
                "q": result.q,
                "q_stderr": result.q_stderr,
            }
        )
    return rows


_RUN_SCHEMA: dict[str, Any] = {
    "instance": pl.Int64,
    "experiment": pl.String,
    "statistics": pl.String,
    "clairvoyance": pl.Float64,
    "observations": pl.Int64,
    "capacity": pl.Float64,
    "family": pl.String,
    "parameter": pl.Float64,
    "method": pl.String,
    "fit": pl.String,
    "n_tasks": pl.Int64,
    "m_norm": pl.Int64,
    "rebalance": pl.Boolean,
    "moves": pl.Int64,
    "m_abs": pl.Int64,
    "m": pl.Float64,
    "overflows": pl.Int64,
    "evaluations": pl.Int64,
    "q": pl.Float64,
    "q_stderr": pl.Float64,
}


def selected_experiments(params: PackingParams) -> tuple[str, ...]:
    """The experiments the grid runs (``statistics`` needs avg data: not with the params source)."""
    chosen = ["methods"]
    if params.statistics_experiment and params.source == "trace":
        chosen.append("statistics")
    if params.capacity_experiment:
        chosen.append("capacity")
    if params.clairvoyance_experiment:
        chosen.append("clairvoyance")
    return tuple(chosen)


def packing_runs(
    source: TaskSource,
    params: PackingParams,
    *,
    progress: Progress = no_progress,
    map_fn: MapFn = serial_map,
) -> pl.DataFrame:
    """Every cell's evaluations, sorted by (instance, experiment order) whatever the map."""
    cells = [
        Cell(i, e, tasks, params)
        for i, tasks in enumerate(source.instances)
        for e in selected_experiments(params)
    ]
    frames: list[pl.DataFrame] = []
    progress(0, len(cells), "cells")
    for first in range(0, len(cells), _CELLS_PER_CHUNK):
        chunk = cells[first : first + _CELLS_PER_CHUNK]
        frames.extend(map_fn(cell_runs, chunk))
        progress(len(frames), len(cells), "cells")
    return pl.concat(frames) if frames else pl.DataFrame(schema=_RUN_SCHEMA)


_GROUP = (
    "experiment",
    "statistics",
    "clairvoyance",
    "observations",
    "capacity",
    "family",
    "parameter",
    "method",
    "fit",
    "rebalance",
)


def method_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Per experiment setting and method: means over instances (the paper's m̄, q̄) and pooled q."""
    return (
        runs.group_by(_GROUP, maintain_order=True)
        .agg(
            pl.len().alias("instances"),
            sorted_mean("m").alias("m_mean"),
            pl.col("m").median().alias("m_median"),
            sorted_mean("m_abs").alias("m_abs_mean"),
            sorted_mean("q").alias("q_mean"),
            pl.col("q").median().alias("q_median"),
            pl.col("overflows").sum().alias("overflows"),
            pl.col("evaluations").sum().alias("evaluations"),
        )
        .with_columns(q_pooled=pl.col("overflows") / pl.col("evaluations"))
        .with_columns(
            q_pooled_stderr=(
                pl.col("q_pooled") * (1 - pl.col("q_pooled")) / pl.col("evaluations")
            ).sqrt(),
            gpa_rel_error=pl.when(pl.col("family") == "gpa").then(
                (pl.col("q_mean") - pl.col("parameter")) / pl.col("parameter")
            ),
        )
    )


def rebalancing_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Fig. 13 per instance and packing: q_off, q_on and (q_off − q_on)/q_off (null when q_off = 0)."""
    keys = [c for c in ("instance", *_GROUP) if c != "rebalance"]
    off = runs.filter(~pl.col("rebalance")).select(*keys, q_off="q", m_abs_off="m_abs")
    on = runs.filter(pl.col("rebalance")).select(*keys, q_on="q", m_abs_on="m_abs", moves="moves")
    return off.join(on, on=keys, how="inner", maintain_order="left").with_columns(
        q_decrease=pl.when(pl.col("q_off") > 0).then(
            (pl.col("q_off") - pl.col("q_on")) / pl.col("q_off")
        )
    )


@dataclass(frozen=True)
class PackingSummary:
    """Headline numbers of a run (base case: Best Fit, rebalancing, c = ``capacity``, v = 1, inst).

    q values are means over instances of each instance's overflow frequency, as the paper's q̄.
    Keys of the dicts are the method parameters as text (ρ, b, c, v).
    """

    source: str
    data: str
    instances: int
    tasks: int
    realizations: int
    population: int
    with_replacement: bool
    experiments: tuple[str, ...]
    gpa_q: dict[str, float]
    gpa_relative_error: dict[str, float]
    cantelli_q: dict[str, float]
    m_by_method: dict[str, float]
    q_by_method: dict[str, float]
    #: m(Cantelli b) / m(GPA ρ = 0.05): how many more machines Cantelli needs at a 95% SLO
    machines_ratio_cantelli_to_gpa_95: dict[str, float]
    #: mean over instances and av/GPA packings with q_off > 0 of (q_off − q_on)/q_off (Fig. 13)
    rebalancing_q_decrease: float
    #: largest |m_abs(First Fit) − m_abs(Best Fit)| over instances and methods (§5.2: at most 1)
    first_best_max_machine_difference: int
    #: GPA 0.01 q̄ per clairvoyance level (Fig. 12), and observations per level
    clairvoyance_gpa_q: dict[str, float]
    clairvoyance_observations: dict[str, int]
    #: GPA 0.001 q̄ per capacity, with rebalancing (Fig. 11a)
    capacity_gpa_q: dict[str, float]
    parameters: dict[str, Any] = field(default_factory=dict)
    #: options where this run's grid differs from the SLO-aware Colocation paper's §5 (run and paper values)
    reduced: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the number the page leads with (GPA 0.001's q) and the case it is the mean of
    headline: dict[str, str] = field(default_factory=dict)
    #: per method of the base case, the pooled overflow rate (all instances' overflows of their
    #: m_abs × R evaluations) with its Clopper–Pearson interval, an :class:`Estimate`'s dict
    q_interval_by_method: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``rebalancing_q_decrease`` with its interval resampling whole instances (Estimate dict)
    rebalancing_q_decrease_interval: dict[str, Any] = field(default_factory=dict)
    #: Fig. 10: mean over GPA's ρ of its mean q with statistics from avg over its mean q with
    #: statistics from inst (ρ whose inst q is 0 left out; NaN without the experiment)
    gpa_avg_over_inst: float = float("nan")
    #: Fig. 11: GPA 0.001's largest over smallest mean q across capacities, with rebalancing
    capacity_q_spread: float = float("nan")
    #: Fig. 12: the clairvoyance level whose observation set is nearest the paper's 100, its
    #: observations, and GPA 0.01's mean q there over its mean q with full clairvoyance
    clairvoyance_level: float = float("nan")
    clairvoyance_level_observations: int = 0
    clairvoyance_q_ratio: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        """``summary.json``: these fields, the grid it ran and the paper's headline numbers."""
        return dataclasses.asdict(self) | {"paper": PAPER_HEADLINE}


def _key(value: float) -> str:
    return f"{value:g}"


def _base(methods: pl.DataFrame, capacity: float) -> pl.DataFrame:
    return methods.filter(
        (pl.col("experiment") == "methods")
        & (pl.col("fit") == "best")
        & pl.col("rebalance")
        & (pl.col("capacity") == capacity)
    )


def _by(frame: pl.DataFrame, family: str, value: str) -> dict[str, float]:
    rows = frame.filter(pl.col("family") == family)
    return {_key(p): float(v) for p, v in zip(rows["parameter"], rows[value], strict=True)}


#: the observations the SLO-aware Colocation paper finds enough for near-full clairvoyance (§5.5)
PAPER_OBSERVATIONS = 100


def statistics_q_ratio(runs: pl.DataFrame) -> float:
    """Fig. 10: GPA's mean q over instances with statistics from avg over that from inst, averaged
    over ρ (Best Fit, rebalancing; a ρ whose inst mean q is 0 has no ratio)."""
    avg = runs.filter((pl.col("experiment") == "statistics") & pl.col("rebalance"))
    if avg.height == 0:
        return float("nan")
    inst = runs.filter(
        (pl.col("experiment") == "methods") & (pl.col("fit") == "best") & pl.col("rebalance")
    )
    means = (
        pl.concat([inst, avg])
        .filter(pl.col("family") == "gpa")
        .group_by("method", "statistics", maintain_order=True)
        .agg(pl.col("q").mean())
        .pivot(on="statistics", index="method", values="q")
    )
    if means.height == 0 or not {"inst", "avg"} <= set(means.columns):
        return float("nan")
    q_inst = means["inst"].to_numpy().astype(np.float64)
    q_avg = means["avg"].to_numpy().astype(np.float64)
    ratio = np.full(q_inst.shape, np.nan)
    np.divide(q_avg, q_inst, out=ratio, where=q_inst > 0)
    finite = ratio[np.isfinite(ratio)]
    return float(np.mean(finite)) if finite.size else float("nan")


def capacity_q_spread(runs: pl.DataFrame) -> float:
    """Fig. 11: GPA 0.001's mean q over instances per capacity (rebalancing), largest over
    smallest; NaN without the experiment or with a mean of 0."""
    q = (
        runs.filter(
            (pl.col("experiment") == "capacity")
            & (pl.col("method") == "GPA 0.001")
            & pl.col("rebalance")
        )
        .group_by("capacity")
        .agg(pl.col("q").mean())["q"]
        .to_numpy()
        .astype(np.float64)
    )
    return float(q.max() / q.min()) if q.size and q.min() > 0 else float("nan")


def clairvoyance_ratio(
    q_by_level: dict[str, float], observations: dict[str, int]
) -> tuple[float, int, float]:
    """Fig. 12: the partial level whose observations are nearest :data:`PAPER_OBSERVATIONS`
    (in log ratio), its observations, and its q over the q of full clairvoyance (level 1)."""
    partial = {k: int(v) for k, v in observations.items() if k != "1"}
    if not partial or "1" not in q_by_level:
        return float("nan"), 0, float("nan")
    best = min(partial, key=lambda k: abs(math.log(max(partial[k], 1) / PAPER_OBSERVATIONS)))
    full = q_by_level["1"]
    q = q_by_level.get(best, float("nan"))
    return float(best), partial[best], q / full if full > 0 else float("nan")


def packing_summary(
    runs: pl.DataFrame, params: PackingParams, source: TaskSource
) -> PackingSummary:
    """The headline numbers from the runs table (NaN where the grid lacks the method)."""
    methods = method_table(runs)
    base = _base(methods, params.capacity)
    m_by = dict(zip(base["method"], base["m_mean"].cast(pl.Float64), strict=True))
    gpa_m = _by(base, "gpa", "m_mean")
    ratio = {
        b: m / gpa_m["0.05"] if "0.05" in gpa_m else float("nan")
        for b, m in _by(base, "cantelli", "m_mean").items()
    }
    gain_rows = rebalancing_table(runs).filter(
        (pl.col("experiment") == "methods")
        & (pl.col("fit") == "best")
        & pl.col("family").is_in(["gpa", "av"])
        & pl.col("q_decrease").is_not_null()
    )
    gains = gain_rows["q_decrease"]
    base_runs = runs.filter((pl.col("experiment") == "methods") & pl.col("rebalance"))
    per_fit = base_runs.pivot(on="fit", index=["instance", "method"], values="m_abs")
    diff = np.abs(per_fit["first"].to_numpy() - per_fit["best"].to_numpy())
    clair = methods.filter(
        (pl.col("experiment") == "clairvoyance")
        & pl.col("rebalance")
        & (pl.col("method") == "GPA 0.01")
    )
    cap = methods.filter(
        (pl.col("experiment") == "capacity")
        & pl.col("rebalance")
        & (pl.col("method") == "GPA 0.001")
    )
    clair_q = dict(
        zip(map(_key, clair["clairvoyance"]), clair["q_mean"].cast(pl.Float64), strict=True)
    )
    clair_n = dict(zip(map(_key, clair["clairvoyance"]), clair["observations"], strict=True))
    return PackingSummary(
        source=params.source,
        data=source.description,
        instances=params.instances,
        tasks=params.tasks,
        realizations=params.realizations,
        population=source.population,
        with_replacement=source.with_replacement,
        experiments=selected_experiments(params),
        gpa_q=_by(base, "gpa", "q_mean"),
        gpa_relative_error=_by(base, "gpa", "gpa_rel_error"),
        cantelli_q=_by(base, "cantelli", "q_mean"),
        m_by_method={str(k): float(v) for k, v in m_by.items()},
        q_by_method=dict(zip(base["method"], base["q_mean"].cast(pl.Float64), strict=True)),
        machines_ratio_cantelli_to_gpa_95=ratio,
        rebalancing_q_decrease=float(gains.to_numpy().mean()) if gains.len() else float("nan"),
        first_best_max_machine_difference=int(diff.max()) if diff.size else 0,
        clairvoyance_gpa_q=clair_q,
        clairvoyance_observations=clair_n,
        capacity_gpa_q=dict(
            zip(map(_key, cap["capacity"]), cap["q_mean"].cast(pl.Float64), strict=True)
        ),
        parameters=dataclasses.asdict(params),
        reduced=reduced_options(params, PAPER_PACKING_PARAMS),
        q_interval_by_method={
            str(r["method"]): binomial_rate(int(r["overflows"]), int(r["evaluations"])).to_dict()
            for r in base.iter_rows(named=True)
        },
        rebalancing_q_decrease_interval=clustered_mean_interval(
            gains.to_numpy(), gain_rows["instance"].to_numpy()
        ).to_dict(),
        gpa_avg_over_inst=statistics_q_ratio(runs),
        capacity_q_spread=capacity_q_spread(runs),
        **_clairvoyance_fields(clair_q, clair_n),
        headline=headline(
            "gpa_q_rho_0001",
            f"GPA at ρ = 0.001: Best Fit with rebalancing, c = {params.capacity:g}, full "
            f"clairvoyance, statistics from inst; mean over {params.instances:,} instances of "
            f"{params.tasks:,} tasks, {params.realizations:,} realizations each",
        ),
    )


def _clairvoyance_fields(q: dict[str, float], n: dict[str, int]) -> dict[str, Any]:
    level, observations, ratio = clairvoyance_ratio(q, n)
    return {
        "clairvoyance_level": level,
        "clairvoyance_level_observations": observations,
        "clairvoyance_q_ratio": ratio,
    }


def packing_tables(runs: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: ``runs``, ``methods``, ``rebalancing``."""
    return {
        "runs": runs,
        "methods": method_table(runs),
        "rebalancing": rebalancing_table(runs),
    }


def task_source(params: PackingParams, data_dir: Path) -> TaskSource:
    """The instances' tasks from the trace's derived tables or the params export."""
    draw = params_tasks if params.source == "params" else trace_tasks
    return draw(data_dir, instances=params.instances, tasks=params.tasks, seed=params.seed)


def packing_results(
    params: PackingParams,
    data_dir: Path,
    out_dir: Path,
    *,
    progress: Progress = no_progress,
    map_fn: MapFn = serial_map,
) -> PackingSummary:
    """Build the instances, run every experiment cell, write the tables and ``summary.json``."""
    source = task_source(params, data_dir)
    runs = packing_runs(source, params, progress=progress, map_fn=map_fn)
    summary = packing_summary(runs, params, source)
    write_stage_outputs(out_dir, packing_tables(runs), summary.to_dict())
    return summary


__all__ = [
    "PackingSummary",
    "fits_av",
    "fits_cantelli",
    "fits_gpa",
    "fits_perc",
    "packing_results",
]
