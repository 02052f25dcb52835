"""The ``yield`` stage: VCSched (Virtual Clusters §2–4) on the paper's instances and on the trace's tasks.

Builds the instance grid (the §4.1 generator and, from the google-2011 lake, tasks drawn with
their CPU and memory requests), runs every algorithm on every instance through ``map_fn``, and
writes per-instance results, the paper's aggregates (yield vs slack, failure rate, % degradation
from best, gaps to the MILP and to the LP bound) and run times (a separate table: the only
numbers that differ between two runs).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.intervals import Estimate
from tracelab.analysis.common.reduced import reduced_options
from tracelab.analysis.common.stage_api import (
    MapFn,
    Progress,
    no_progress,
    option_values,
    serial_map,
)
from tracelab.analysis.common.stage_outputs import headline, write_stage_outputs
from tracelab.analysis.common.sums import sorted_mean
from tracelab.analysis.lake.availability import trace_requests_shortfall
from tracelab.analysis.yield_.algorithms import (
    Instance,
    IntArray,
    allocation_yields,
    backtracking_placement,
    greedy_placement,
    lp_bound,
    lp_relaxation,
    mcb_placement,
    milp_allocation,
    placement_allocation,
    rounding_placement,
)
from tracelab.analysis.yield_.instances import (
    InstanceSpec,
    TraceJobs,
    paper_instance,
    trace_instance,
    trace_jobs,
)
from tracelab.analysis.yield_.options import (
    ALGORITHMS,
    GREEDY_NAMES,
    MCB_NAMES,
    PAPER_YIELD_PARAMS,
    ROUNDING_NAMES,
    YieldParams,
)


@dataclass(frozen=True)
class YieldSummary:
    """Headline numbers; yields are means over solved instances of the headline source."""

    headline_source: str
    sources: tuple[str, ...]
    n_instances: int
    mean_min_yield: dict[str, float] = field(default_factory=dict)
    failure_rate: dict[str, float] = field(default_factory=dict)
    #: MCB1–8 mean % degradation from the best MCB on each instance (§4.2.1, Tables 1 and 2)
    mcb_degradation_pct: dict[str, float] = field(default_factory=dict)
    best_mcb: str = ""
    #: % by which the first algorithm's mean minimum yield exceeds the second's (small problems)
    milp_over_mcb8_pct: float = float("nan")
    lp_over_milp_pct: float = float("nan")
    milp_over_greedy_pct: dict[str, float] = field(default_factory=dict)
    #: mean MCB8 run time on 500-job instances, milliseconds (NaN without such instances)
    mcb8_ms_500: float = float("nan")
    #: options where this run's grid differs from the Virtual Clusters paper's §4.1 (run and paper values)
    reduced: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: mean Σc_j / hosts of the trace instances (the CPU load the yields are measured at)
    trace_mean_cpu_load: float = float("nan")
    #: sources left out for lack of data (``<part>: needs …; found …``)
    shortfalls: tuple[str, ...] = ()
    #: the number the page leads with (the MILP's gap over MCB8) and the instances it is over
    headline: dict[str, str] = field(default_factory=dict)
    #: ``milp_over_mcb8_pct`` with its percentile bootstrap 95% interval over the instances
    #: both solved (an :class:`Estimate`'s dict; ``n`` instances)
    milp_over_mcb8_interval: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Settings:
    algorithms: tuple[str, ...]
    milp_max_jobs: int
    milp_time_limit_s: float
    rounding_max_jobs: int
    backtrack_limit: int
    yield_tolerance: float
    rrnz_epsilon: float


@dataclass(frozen=True)
class _Task:
    spec: InstanceSpec
    instance: Instance
    settings: _Settings


@dataclass(frozen=True)
class InstanceOutcome:
    """One instance's rows of the instances, results and runtimes tables."""

    instance_row: dict[str, Any]
    result_rows: list[dict[str, Any]]
    runtime_rows: list[dict[str, Any]]


def instance_specs(params: YieldParams) -> list[InstanceSpec]:
    """The grid in a fixed order; ``instance_id`` is the position and seeds the instance."""
    rows: list[tuple[str, str, int, int, float, float, float, int]] = []
    if "paper" in params.sources:
        for size_class, hosts, sizes, reps in (
            ("small", params.small_hosts, params.small_jobs, params.small_instances),
            ("large", params.large_hosts, params.large_jobs, params.large_instances),
        ):
            for n in sizes:
                for slack in params.slacks:
                    for cv_cpu in params.cvs:
                        for cv_mem in params.cvs:
                            rows += [
                                ("paper", size_class, hosts, n, slack, cv_cpu, cv_mem, r)
                                for r in range(reps)
                            ]
    if "trace" in params.sources:
        small_max = max(params.small_jobs, default=0)
        for n in params.trace_jobs:
            size_class = "small" if n <= small_max else "large"
            for slack in params.slacks:
                nan = float("nan")
                rows += [
                    ("trace", size_class, 0, n, slack, nan, nan, r)
                    for r in range(params.trace_instances)
                ]
    return [
        InstanceSpec(
            i, *row, seed=int(np.random.SeedSequence((params.seed, i)).generate_state(1)[0])
        )
        for i, row in enumerate(rows)
    ]


def yield_grid(params: YieldParams) -> dict[str, Any]:
    """What the options make of the grid, recorded with them: instances per source and size
    class, and the job counts on which the MILP and the rounding (an LP each) run at all."""
    specs = instance_specs(params)
    jobs = sorted({s.n_jobs for s in specs})
    ran = set(params.algorithms)
    return {
        "grid_instances": dict(
            sorted(Counter(f"{s.source} {s.size_class}" for s in specs).items())
        ),
        "milp_jobs": [n for n in jobs if n <= params.milp_max_jobs] if "MILP" in ran else [],
        "rounding_jobs": [n for n in jobs if n <= params.rounding_max_jobs]
        if ran & set(ROUNDING_NAMES)
        else [],
    }


def _settings(params: YieldParams) -> _Settings:
    return _Settings(
        params.algorithms,
        params.milp_max_jobs,
        params.milp_time_limit_s,
        params.rounding_max_jobs,
        params.backtrack_limit,
        params.yield_tolerance,
        params.rrnz_epsilon,
    )


# Run times are CPU seconds of the computing thread (time.thread_time): on a shared machine the
# wall clock mostly measures the other tenants; the paper timed a dedicated 3.2 GHz Xeon.


def _placement_runners(
    task: _Task,
) -> dict[str, Callable[[], IntArray | None]]:
    """One zero-argument callable per heuristic that applies to this instance."""
    inst, s = task.instance, task.settings
    runners: dict[str, Callable[[], IntArray | None]] = {}
    for name in s.algorithms:
        if name.startswith("MCB"):
            runners[name] = partial(mcb_placement, inst, int(name[3:]), s.yield_tolerance)
        elif name in ("GR", "SG"):
            runners[name] = partial(greedy_placement, inst, name == "SG")
        elif name in ("GB", "SGB"):
            runners[name] = partial(backtracking_placement, inst, name == "SGB", s.backtrack_limit)
    return runners


def _rounding_placements(task: _Task) -> dict[str, tuple[IntArray | None, float, float]]:
    """RRND/RRNZ placements with run times (each includes the LP solve, as in §4.2.2), plus the
    LP optimum found by HiGHS (third item) for the cross-check with the closed form."""
    inst, s = task.instance, task.settings
    wanted = [n for n in ROUNDING_NAMES if n in s.algorithms]
    if not wanted or inst.n_jobs > s.rounding_max_jobs:
        return {}
    start = time.thread_time()
    relaxed = lp_relaxation(inst)
    lp_seconds = time.thread_time() - start
    out: dict[str, tuple[IntArray | None, float, float]] = {}
    for name in wanted:
        if relaxed is None:
            out[name] = (None, lp_seconds, float("nan"))
            continue
        # the same stream for both: RRNZ differs from RRND only by ε (§3.2)
        rng = np.random.default_rng((task.spec.seed, 1))
        eps = s.rrnz_epsilon if name == "RRNZ" else 0.0
        start = time.thread_time()
        host = rounding_placement(inst, relaxed[1], rng, eps)
        out[name] = (host, lp_seconds + time.thread_time() - start, relaxed[0])
    return out


def _result_row(task: _Task, name: str, host: IntArray | None) -> dict[str, Any]:
    allocation = placement_allocation(task.instance, host)
    if allocation is None:
        return {"algorithm": name, "solved": False, "min_yield": None, "avg_yield": None}
    yields = allocation_yields(task.instance, allocation)
    return {
        "algorithm": name,
        "solved": True,
        "min_yield": float(yields.min()),
        "avg_yield": float(yields.mean()),
    }


def _best_peak_load(instance: Instance, placements: list[IntArray | None]) -> float | None:
    """The lowest peak CPU load among the heuristics' placements: a valid cut for the MILP."""
    peaks = [
        float(np.bincount(h, weights=instance.cpu_need, minlength=instance.n_hosts).max())
        for h in placements
        if h is not None
    ]
    return min(peaks) if peaks else None


def _instance_outcome(task: _Task) -> InstanceOutcome:
    """Every algorithm on one instance (module level: picklable for a Dask client's map)."""
    inst, spec, s = task.instance, task.spec, task.settings
    results: list[dict[str, Any]] = []
    runtimes: list[dict[str, Any]] = []
    placed: list[IntArray | None] = []
    for name, run in _placement_runners(task).items():
        start = time.thread_time()
        host = run()
        placed.append(host)
        runtimes.append({"algorithm": name, "seconds": time.thread_time() - start})
        results.append(_result_row(task, name, host))
    lp_solver = float("nan")
    for name, (host, seconds, lp_value) in _rounding_placements(task).items():
        placed.append(host)
        runtimes.append({"algorithm": name, "seconds": seconds})
        results.append(_result_row(task, name, host))
        lp_solver = lp_value
    milp_optimal: bool | None = None
    if "MILP" in s.algorithms and inst.n_jobs <= s.milp_max_jobs:
        start = time.thread_time()
        exact = milp_allocation(inst, s.milp_time_limit_s, _best_peak_load(inst, placed))
        runtimes.append({"algorithm": "MILP", "seconds": time.thread_time() - start})
        host = None if exact.allocation is None else exact.allocation.host
        results.append(_result_row(task, "MILP", host))
        milp_optimal = exact.optimal
    bound = lp_bound(inst)
    if "LP" in s.algorithms:
        solved = bool(np.isfinite(bound))
        results.append(
            {
                "algorithm": "LP",
                "solved": solved,
                "min_yield": bound if solved else None,
                "avg_yield": None,
            }
        )
    ids = {"instance_id": spec.instance_id}
    instance_row = {
        **ids,
        "source": spec.source,
        "size_class": spec.size_class,
        "n_hosts": inst.n_hosts,
        "n_jobs": inst.n_jobs,
        "slack": spec.slack,
        "cv_cpu": spec.cv_cpu,
        "cv_memory": spec.cv_memory,
        "replicate": spec.replicate,
        "seed": spec.seed,
        "total_cpu_need": float(inst.cpu_need.sum()),
        "total_memory": float(inst.memory.sum()),
        "lp_bound": bound,
        "lp_bound_solver": lp_solver,
        "milp_optimal": milp_optimal,
    }
    return InstanceOutcome(
        instance_row,
        [{**ids, **r} for r in results],
        [{**ids, "n_jobs": inst.n_jobs, **r} for r in runtimes],
    )


def _build_tasks(params: YieldParams, data_dir: Path) -> list[_Task]:
    specs = instance_specs(params)
    jobs: TraceJobs | None = (
        trace_jobs(data_dir) if any(s.source == "trace" for s in specs) else None
    )
    settings = _settings(params)
    tasks = []
    for spec in specs:
        if spec.source == "paper":
            instance = paper_instance(spec)
        else:
            assert jobs is not None
            instance = trace_instance(spec, jobs, params.trace_cpu_load)
        tasks.append(_Task(spec, instance, settings))
    return tasks


def _run_in_chunks(tasks: list[_Task], map_fn: MapFn, progress: Progress) -> list[InstanceOutcome]:
    """``map_fn`` over the instances in a few chunks so progress moves while a cluster works."""
    total = len(tasks)
    chunk = max(1, total // 10)
    outcomes: list[InstanceOutcome] = []
    progress(0, total, "instances")
    for start in range(0, total, chunk):
        outcomes += map_fn(_instance_outcome, tasks[start : start + chunk])
        progress(len(outcomes), total, "instances")
    return outcomes


def yield_results(
    params: YieldParams,
    data_dir: Path,
    out_dir: Path,
    *,
    progress: Progress = no_progress,
    map_fn: MapFn = serial_map,
) -> YieldSummary:
    """Run the grid, write the tables and ``summary.json`` to ``out_dir``, return the summary.

    Without task_events or machine_events rows the trace's instances are left out (the paper's
    need no data) and the summary says what they needed and found.
    """
    asked = params
    short = (
        trace_requests_shortfall("yield trace instances", data_dir)
        if "trace" in params.sources
        else None
    )
    if short is not None:
        params = replace(params, sources=tuple(s for s in params.sources if s != "trace"))
        if not params.sources:
            raise TracelabError(f"not enough data: {short.text}")
    outcomes = _run_in_chunks(_build_tasks(params, data_dir), map_fn, progress)
    tables = yield_tables(outcomes)
    summary = replace(
        yield_summary(tables, params.sources),
        reduced=reduced_options(asked, PAPER_YIELD_PARAMS),
        trace_mean_cpu_load=_mean_cpu_load(tables["instances"], "trace"),
        shortfalls=(short.text,) if short is not None else (),
    )
    # the options as given (the summary's shortfalls say which source had no data), the grid run
    parameters = {**option_values(asked), **yield_grid(params)}
    write_stage_outputs(out_dir, tables, summary.to_dict() | {"parameters": parameters})
    return summary


def _mean_cpu_load(instances: pl.DataFrame, source: str) -> float:
    mine = instances.filter(pl.col("source") == source)
    if not mine.height:
        return float("nan")
    return float((mine["total_cpu_need"] / mine["n_hosts"]).mean())  # type: ignore[arg-type]


_INSTANCE_SCHEMA = {
    "instance_id": pl.Int64,
    "source": pl.Utf8,
    "size_class": pl.Utf8,
    "n_hosts": pl.Int64,
    "n_jobs": pl.Int64,
    "slack": pl.Float64,
    "cv_cpu": pl.Float64,
    "cv_memory": pl.Float64,
    "replicate": pl.Int64,
    "seed": pl.Int64,
    "total_cpu_need": pl.Float64,
    "total_memory": pl.Float64,
    "lp_bound": pl.Float64,
    "lp_bound_solver": pl.Float64,
    "milp_optimal": pl.Boolean,
}
_RESULT_SCHEMA = {
    "instance_id": pl.Int64,
    "algorithm": pl.Utf8,
    "solved": pl.Boolean,
    "min_yield": pl.Float64,
    "avg_yield": pl.Float64,
}
_RUNTIME_SCHEMA = {
    "instance_id": pl.Int64,
    "algorithm": pl.Utf8,
    "n_jobs": pl.Int64,
    "seconds": pl.Float64,
}
#: (higher, lower): the gaps §4.2.2 states, "the MILP is about 2% better than MCB8", …
GAP_PAIRS = (
    ("MILP", "MCB8"),
    ("LP", "MILP"),
    ("LP", "MCB8"),
    *(("MILP", g) for g in (*GREEDY_NAMES, *ROUNDING_NAMES)),
    *(("LP", g) for g in GREEDY_NAMES),
)
_KEYS = ("source", "size_class")


def _algorithm_rank() -> pl.Expr:
    return pl.col("algorithm").replace_strict(
        {a: i for i, a in enumerate(ALGORITHMS)}, return_dtype=pl.Int64
    )


def degradation_per_instance(results: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    """% degradation from best (§4.2.1): 100 · (best − y) / best per solved instance, the best
    taken within the family: MCB1–8 ("mcb", Tables 1–2) or MCB8 + greedy + rounding."""
    families = {"mcb": MCB_NAMES, "heuristics": ("MCB8", *GREEDY_NAMES, *ROUNDING_NAMES)}
    parts = []
    for family, names in families.items():
        solved = results.filter(pl.col("algorithm").is_in(names) & pl.col("solved"))
        best = pl.col("min_yield").max().over("instance_id")
        parts.append(
            solved.with_columns(pl.lit(family).alias("family"), best.alias("best"))
            .filter(pl.col("best") > 0)
            .with_columns(
                (100.0 * (pl.col("best") - pl.col("min_yield")) / pl.col("best")).alias(
                    "degradation_pct"
                )
            )
            .select("instance_id", "family", "algorithm", "degradation_pct")
        )
    return pl.concat(parts).join(instances.select("instance_id", *_KEYS), on="instance_id")


def _gap_table(results: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    solved = results.filter(pl.col("solved")).join(
        instances.select("instance_id", *_KEYS), on="instance_id"
    )
    rows = []
    for higher, lower in GAP_PAIRS:
        a = solved.filter(pl.col("algorithm") == higher).select(
            "instance_id", *_KEYS, pl.col("min_yield").alias("hi")
        )
        b = solved.filter(pl.col("algorithm") == lower).select(
            "instance_id", pl.col("min_yield").alias("lo")
        )
        pair = (
            a.join(b, on="instance_id")
            .group_by(*_KEYS)
            .agg(
                pl.len().cast(pl.Int64).alias("n_instances"),
                sorted_mean("hi").alias("mean_higher"),
                sorted_mean("lo").alias("mean_lower"),
            )
        )
        rows.append(pair.with_columns(pl.lit(higher).alias("higher"), pl.lit(lower).alias("lower")))
    table = pl.concat(rows) if rows else pl.DataFrame()
    return (
        table.with_columns(
            (100.0 * (pl.col("mean_higher") / pl.col("mean_lower") - 1.0)).alias("gap_pct")
        )
        .select(*_KEYS, "higher", "lower", "n_instances", "mean_higher", "mean_lower", "gap_pct")
        .sort(*_KEYS, "higher", "lower")
    )


def yield_tables(outcomes: list[InstanceOutcome]) -> dict[str, pl.DataFrame]:
    """Per-instance tables and the paper's aggregates; only ``runtimes*`` hold wall-clock times."""
    instances = pl.DataFrame(
        [o.instance_row for o in outcomes], schema=_INSTANCE_SCHEMA, orient="row"
    )
    rows = [r for o in outcomes for r in o.result_rows]
    results = pl.DataFrame(rows, schema=_RESULT_SCHEMA, orient="row").sort(
        "instance_id", _algorithm_rank()
    )
    rt_rows = [r for o in outcomes for r in o.runtime_rows]
    runtimes = pl.DataFrame(rt_rows, schema=_RUNTIME_SCHEMA, orient="row").sort(
        "instance_id", _algorithm_rank()
    )
    keyed = results.join(instances.select("instance_id", *_KEYS, "slack"), on="instance_id")
    by_slack = (
        keyed.group_by(*_KEYS, "algorithm", "slack")
        .agg(
            pl.len().cast(pl.Int64).alias("n_instances"),
            pl.col("solved").sum().cast(pl.Int64).alias("n_solved"),
            sorted_mean("min_yield").alias("mean_min_yield"),
            sorted_mean("avg_yield").alias("mean_avg_yield"),
        )
        .with_columns((1.0 - pl.col("n_solved") / pl.col("n_instances")).alias("failure_rate"))
        .sort(*_KEYS, _algorithm_rank(), "slack")
    )
    degradation = (
        degradation_per_instance(results, instances)
        .group_by(*_KEYS, "family", "algorithm")
        .agg(
            pl.len().cast(pl.Int64).alias("n_instances"),
            sorted_mean("degradation_pct").alias("mean_pct"),
            pl.col("degradation_pct").max().alias("max_pct"),
        )
        .sort(*_KEYS, "family", "mean_pct", "algorithm")
    )
    runtime_by_size = (
        runtimes.join(instances.select("instance_id", "source"), on="instance_id")
        .group_by("source", "algorithm", "n_jobs")
        .agg(
            pl.len().cast(pl.Int64).alias("n_instances"),
            (1e3 * pl.col("seconds").mean()).alias("mean_ms"),
            (1e3 * pl.col("seconds").max()).alias("max_ms"),
        )
        .sort("source", _algorithm_rank(), "n_jobs")
    )
    return {
        "instances": instances.sort("instance_id"),
        "results": results,
        "by_slack": by_slack,
        "degradation": degradation,
        "gaps": _gap_table(results, instances),
        "runtimes": runtimes,
        "runtime_by_size": runtime_by_size,
    }


#: how the MILP gap's interval is computed
GAP_BOOTSTRAP = "percentile bootstrap resampling instances"


def _gap_row(gaps: pl.DataFrame, source: str, higher: str, lower: str) -> pl.DataFrame:
    """The gaps table's row of the pair on the source's small instances (none or one)."""
    return gaps.filter(
        (pl.col("source") == source)
        & (pl.col("size_class") == "small")
        & (pl.col("higher") == higher)
        & (pl.col("lower") == lower)
    )


def _gap(gaps: pl.DataFrame, source: str, higher: str, lower: str) -> float:
    row = _gap_row(gaps, source, higher, lower)
    return float(row["gap_pct"][0]) if row.height else float("nan")


def yield_summary(tables: dict[str, pl.DataFrame], sources: tuple[str, ...]) -> YieldSummary:
    """Headline numbers from :func:`yield_tables`: the paper's source when run, else the trace."""
    instances, results = tables["instances"], tables["results"]
    source = "paper" if "paper" in sources else (sources[0] if sources else "")
    ids = instances.filter(pl.col("source") == source)["instance_id"]
    mine = results.filter(pl.col("instance_id").is_in(ids.implode()))
    per_algorithm = (
        mine.group_by("algorithm")
        .agg(sorted_mean("min_yield").alias("mean"), (1.0 - pl.col("solved").mean()).alias("fail"))
        .sort(_algorithm_rank())
    )
    degradation = (
        degradation_per_instance(results, instances)
        .filter((pl.col("source") == source) & (pl.col("family") == "mcb"))
        .group_by("algorithm")
        .agg(sorted_mean("degradation_pct"))
        .sort("degradation_pct", "algorithm")
    )
    mcb_deg = {str(a): float(d) for a, d in degradation.iter_rows()}
    gaps = tables["gaps"]
    mcb8 = tables["runtimes"].filter((pl.col("algorithm") == "MCB8") & (pl.col("n_jobs") == 500))
    return YieldSummary(
        headline_source=source,
        sources=sources,
        n_instances=instances.height,
        mean_min_yield={str(a): float(m) for a, m, _ in per_algorithm.iter_rows() if m is not None},
        failure_rate={str(a): float(f) for a, _, f in per_algorithm.iter_rows()},
        mcb_degradation_pct=mcb_deg,
        best_mcb=next(iter(mcb_deg), ""),
        milp_over_mcb8_pct=_gap(gaps, source, "MILP", "MCB8"),
        lp_over_milp_pct=_gap(gaps, source, "LP", "MILP"),
        milp_over_greedy_pct={g: _gap(gaps, source, "MILP", g) for g in GREEDY_NAMES},
        mcb8_ms_500=1e3 * float(mcb8.select(pl.col("seconds").mean()).item())
        if mcb8.height
        else float("nan"),
        headline=_headline(gaps, source),
        milp_over_mcb8_interval=gap_interval(results, instances, source, "MILP", "MCB8").to_dict(),
    )


def gap_interval(
    results: pl.DataFrame, instances: pl.DataFrame, source: str, higher: str, lower: str
) -> Estimate:
    """``100 · (mean higher / mean lower − 1)`` over the small instances of ``source`` both
    solved (the gaps table's gap), with a percentile bootstrap 95% interval resampling those
    instances (seeded: the same results give the same interval)."""
    ids = instances.filter((pl.col("source") == source) & (pl.col("size_class") == "small"))[
        "instance_id"
    ]
    solved = results.filter(pl.col("solved") & pl.col("instance_id").is_in(ids.implode()))
    pair = (
        solved.filter(pl.col("algorithm") == higher)
        .select("instance_id", hi="min_yield")
        .join(
            solved.filter(pl.col("algorithm") == lower).select("instance_id", lo="min_yield"),
            on="instance_id",
        )
    )
    hi = pair["hi"].to_numpy().astype(np.float64)
    lo = pair["lo"].to_numpy().astype(np.float64)
    if hi.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, method=GAP_BOOTSTRAP)
    gap = 100.0 * (hi.mean() / lo.mean() - 1.0)
    picks = np.random.default_rng(0).integers(0, hi.size, size=(2000, hi.size))
    boot = 100.0 * (hi[picks].mean(axis=1) / lo[picks].mean(axis=1) - 1.0)
    low, high = np.percentile(boot, [2.5, 97.5])
    return Estimate(float(gap), float(low), float(high), int(hi.size), method=GAP_BOOTSTRAP)


def _headline(gaps: pl.DataFrame, source: str) -> dict[str, str]:
    """The MILP's gap over MCB8 and the instances it is a mean over."""
    row = _gap_row(gaps, source, "MILP", "MCB8")
    n = int(row["n_instances"][0]) if row.height else 0
    which = "generated (§4.1)" if source == "paper" else f"{source}-drawn"
    return headline(
        "milp_over_mcb8_pct",
        f"mean minimum yields over the {n:,} small {which} instances that both the MILP and "
        "MCB8 solved",
    )
