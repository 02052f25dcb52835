"""`tracelab analyze`: the statistics stages of docs/methods.md §2.1–2.5 and §2.7.

A thin Prefect flow: one task per stage, each calling the plain functions in ``analysis/`` and
writing ``DATA/results/<trace>/<stage>/`` (Parquet tables + ``summary.json``; ``params.json`` for
the stages that feed the params export: clustering, gaussian_sums, gamma_fits).
Inputs: the derived tables of ``tracelab derive`` and, for the per-task sample stages, the
``task_usage`` lake of ``tracelab ingest``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import write_stage_params
from tracelab.analysis.common.shortfall import (
    NOT_ENOUGH_DATA,
    SHORTFALLS,
    Shortfall,
    write_shortfall,
)
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.common.stage_outputs import write_stage_outputs
from tracelab.analysis.statistics import (
    ANALYSES,
    clustering,
    gamma_fits,
    gaussian_sums,
    inst_vs_avg,
    time_invariance,
    variability,
)
from tracelab.analysis.statistics.needs import (
    analysis_shortfall,
    clustering_shortfall,
    gamma_fit_shortfalls,
    gamma_fits_shortfall,
)
from tracelab.analysis.statistics.options import AnalyzeOptions
from tracelab.analysis.statistics.task_samples import TaskSampleBatch, task_sample_batches
from tracelab.analysis.statistics.variability import long_task_stats
from tracelab.flows.observe import flow_run_name, publish_summary
from tracelab.flows.settings import Settings, duckdb_connection

STAGES = ANALYSES
SUPPORTED_TRACES: tuple[str, ...] = ("google-2011",)
USAGE_STATS = "fct_task_usage_stats"
HISTOGRAMS = "fct_task_usage_histograms"
TASK_TIMES = "fct_task_times"
#: which derived tables (and whether the task_usage lake) each stage reads
_STAGE_INPUTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "inst_vs_avg": ((USAGE_STATS,), True),
    "variability": ((USAGE_STATS,), False),
    "time_invariance": ((USAGE_STATS,), True),
    "clustering": ((HISTOGRAMS,), False),
    "gaussian_sums": ((USAGE_STATS,), True),
    "gamma_fits": ((USAGE_STATS, TASK_TIMES), False),
}


def _paths(settings: Settings, trace: str) -> dict[str, Path]:
    derived = settings.derived_dir / trace
    return {
        USAGE_STATS: derived / f"{USAGE_STATS}.parquet",
        HISTOGRAMS: derived / f"{HISTOGRAMS}.parquet",
        TASK_TIMES: derived / f"{TASK_TIMES}.parquet",
        "lake": settings.lake_dir / trace / "task_usage",
        "results": settings.results_dir / trace,
    }


def check_inputs(settings: Settings, trace: str, stages: tuple[str, ...]) -> None:
    """Raise a :class:`TracelabError` naming the first missing input and the command that makes it."""
    if trace not in SUPPORTED_TRACES:
        raise TracelabError(
            f"analyze supports {', '.join(SUPPORTED_TRACES)}, not {trace!r} "
            "(the azure-2017 fits are `tracelab fit --trace azure-2017`)"
        )
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise TracelabError(
            f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(STAGES)}"
        )
    paths = _paths(settings, trace)
    for stage in stages:
        # the task_usage lake is not checked here: a stage without long tasks says so itself
        tables, _ = _STAGE_INPUTS[stage]
        for name in tables:
            if not paths[name].exists():
                raise TracelabError(
                    f"derived table {paths[name]} is missing (needed by stage {stage}); "
                    f"run `tracelab derive --trace {trace}` first"
                )


def _samples(settings: Settings, trace: str, batch_rows: int) -> Iterator[TaskSampleBatch]:
    paths = _paths(settings, trace)
    con = duckdb_connection(settings)
    try:
        yield from task_sample_batches(
            con,
            paths["lake"] / "*.parquet",
            paths[USAGE_STATS],
            long_only=True,
            batch_rows=batch_rows,
        )
    finally:
        con.close()


def _long_stats(settings: Settings, trace: str, columns: tuple[str, ...]) -> pl.DataFrame:
    return long_task_stats(pl.scan_parquet(_paths(settings, trace)[USAGE_STATS]), columns)


def _finish(
    stage_dir: Path,
    tables: dict[str, pl.DataFrame],
    summary: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    summary = {**summary, "seconds": round(time.perf_counter() - started, 3)}
    write_stage_outputs(stage_dir, tables, summary)
    get_run_logger().info(
        "stage %s done in %.1f s -> %s", stage_dir.name, summary["seconds"], stage_dir
    )
    return summary


@task(cache_policy=NO_CACHE, task_run_name="analyze {trace}/inst_vs_avg")
def inst_vs_avg_stage(
    settings: Settings, trace: str, seed: int, ks: tuple[int, ...], batch_rows: int
) -> dict[str, Any]:
    """Figure 1: (ȳ − x̄⁽ᵏ⁾)/ȳ box statistics per k → ``inst_vs_avg/convergence.parquet``."""
    started = time.perf_counter()
    result = inst_vs_avg.inst_avg_convergence(
        _samples(settings, trace, batch_rows), ks=ks, seed=seed
    )
    return _finish(
        _paths(settings, trace)["results"] / "inst_vs_avg",
        inst_vs_avg.inst_vs_avg_tables(result),
        inst_vs_avg.inst_vs_avg_summary(result, batch_rows=batch_rows),
        started,
    )


@task(cache_policy=NO_CACHE, task_run_name="analyze {trace}/variability")
def variability_stage(settings: Settings, trace: str) -> dict[str, Any]:
    """Figures 2–3: std CDFs, heatmaps, std~mean regressions → ``variability/``."""
    started = time.perf_counter()
    stats = _long_stats(settings, trace, ("inst_mean", "inst_std", "avg_mean", "avg_std"))
    result = variability.variability(
        stats["inst_mean"].to_numpy(),
        stats["inst_std"].to_numpy(),
        stats["avg_mean"].to_numpy(),
        stats["avg_std"].to_numpy(),
    )
    return _finish(
        _paths(settings, trace)["results"] / "variability",
        variability.variability_tables(result),
        variability.variability_summary(result, n_long=stats.height),
        started,
    )


@task(cache_policy=NO_CACHE, task_run_name="analyze {trace}/time_invariance")
def time_invariance_stage(
    settings: Settings,
    trace: str,
    seed: int,
    deltas: tuple[int, ...],
    alpha: float,
    batch_rows: int,
) -> dict[str, Any]:
    """§3.4: KS share rejected per Δ → ``time_invariance/shares.parquet`` and per-task tests."""
    started = time.perf_counter()
    result = time_invariance.time_invariance(
        _samples(settings, trace, batch_rows), deltas=deltas, alpha=alpha, seed=seed
    )
    return _finish(
        _paths(settings, trace)["results"] / "time_invariance",
        time_invariance.time_invariance_tables(result),
        time_invariance.time_invariance_summary(result, deltas=deltas, batch_rows=batch_rows),
        started,
    )


@task(cache_policy=NO_CACHE, task_run_name="analyze {trace}/clustering")
def clustering_stage(
    settings: Settings,
    trace: str,
    seed: int,
    k: int,
    k_range: tuple[int, ...],
    n_init: int,
    minibatch_threshold: int,
    silhouette_sample: int,
    scan_sample: int,
    threads: int,
) -> dict[str, Any]:
    """Figure 4: k-means of the histograms, centroids, shares, inertia/silhouette → ``clustering/``."""
    started = time.perf_counter()
    paths = _paths(settings, trace)
    frame = pl.read_parquet(paths[HISTOGRAMS], columns=["job_id", "task_index", "h"])
    h = clustering.histogram_matrix(frame["h"])
    logger = get_run_logger()
    logger.info("clustering %d histograms (k=%d, scan %s)", h.shape[0], k, list(k_range))
    stage_dir = paths["results"] / "clustering"
    reason = clustering.too_few_histograms(h.shape[0], k)
    shortfall = clustering_shortfall(settings.data_dir, k)
    if reason is not None and shortfall is not None:
        logger.warning("clustering skipped: %s", reason)
        # no centroids this run: the params export must not keep an earlier run's
        skipped = clustering.clustering_skipped_summary(
            k=k, n_histograms=int(h.shape[0]), reason=reason
        )
        return _shortfall_summary(stage_dir, shortfall, skipped, started)
    limit = clustering.kmeans_thread_limit(threads)
    chosen = clustering.histogram_clusters(
        h, k=k, seed=seed, n_init=n_init, minibatch_threshold=minibatch_threshold, threads=limit
    )
    scan = clustering.k_scan(
        h,
        ks=k_range,
        seed=seed,
        n_init=n_init,
        minibatch_threshold=minibatch_threshold,
        silhouette_sample=silhouette_sample,
        scan_sample=scan_sample,
        threads=limit,
    )
    write_stage_params(stage_dir, [chosen.to_parameter(trace)])
    summary = clustering.clustering_summary(
        chosen,
        scan,
        k_range=k_range,
        n_init=n_init,
        minibatch_threshold=minibatch_threshold,
        silhouette_sample=silhouette_sample,
        scan_sample=scan_sample,
        kmeans_threads=threads,
    )
    return _finish(stage_dir, clustering.clustering_tables(frame, chosen, scan), summary, started)


@task(cache_policy=NO_CACHE, task_run_name="analyze {trace}/gaussian_sums")
def gaussian_sums_stage(
    settings: Settings,
    trace: str,
    seed: int,
    sizes: tuple[int, ...],
    realizations: int,
    sets: int,
    pool_size: int,
    batch_rows: int,
    show_progress: bool,
) -> dict[str, Any]:
    """Table 1, Figures 5 and 6 → ``gaussian_sums/{table,sets,examples}.parquet``, ``params.json``."""
    started = time.perf_counter()
    n_long = _long_stats(settings, trace, ("job_id",)).height
    pool = gaussian_sums.realization_pool(
        _samples(settings, trace, batch_rows),
        n_tasks_total=n_long,
        pool_size=pool_size,
        realizations=realizations,
        seed=seed,
    )
    logger = get_run_logger()
    logger.info(
        "gaussian sums: pool of %d tasks x %d realizations; %d sets per N",
        pool.size,
        realizations,
        sets,
    )

    def _report(row: gaussian_sums.ADRow) -> None:
        message = (
            f"gaussian sums: N={row.n_tasks_per_set} rejection rate {row.rejection_rate:.3f} "
            f"({time.perf_counter() - started:.0f} s)"
        )
        logger.info(message)
        if show_progress:
            print(f"[analyze]   {message}", file=sys.stderr, flush=True)

    result = gaussian_sums.ad_rejection_table(
        pool, sizes=sizes, sets=sets, seed=seed, on_size_done=_report
    )
    stage_dir = _paths(settings, trace)["results"] / "gaussian_sums"
    write_stage_params(stage_dir, [result.to_parameter(trace)])
    summary = gaussian_sums.gaussian_sums_summary(
        result,
        sizes=sizes,
        realizations=realizations,
        pool_size=pool_size,
        n_long=n_long,
        pool_tasks=pool.size,
    )
    return _finish(stage_dir, gaussian_sums.gaussian_sums_tables(result), summary, started)


@task(cache_policy=NO_CACHE, task_run_name="analyze {trace}/gamma_fits")
def gamma_fits_stage(settings: Settings, trace: str, seed: int, n_bootstrap: int) -> dict[str, Any]:
    """§2.7: Gamma fits of inst mean, inst std (long tasks) and execution time (finished tasks)."""
    started = time.perf_counter()
    paths = _paths(settings, trace)
    stats = _long_stats(settings, trace, ("inst_mean", "inst_std"))
    execution = gamma_fits.finished_execution_times(pl.scan_parquet(paths[TASK_TIMES]))
    result = gamma_fits.google_gamma_fits(
        stats["inst_mean"].to_numpy(),
        stats["inst_std"].to_numpy(),
        execution,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    for _, reason in result.skipped:
        get_run_logger().warning("gamma fit skipped: %s", reason)
    stage_dir = paths["results"] / "gamma_fits"
    short = gamma_fit_shortfalls(
        settings.data_dir, result.skipped, n_finished=result.n_finished_incarnations
    )
    summary = {**gamma_fits.gamma_fits_summary(result), SHORTFALLS: [f.text for f in short]}
    if not result.fits:
        whole = gamma_fits_shortfall(short)
        return _shortfall_summary(stage_dir, whole, summary, started)
    write_stage_params(stage_dir, [f.to_parameter(trace) for f in result.fits])
    return _finish(stage_dir, gamma_fits.gamma_fits_tables(result), summary, started)


def _shortfall_summary(
    stage_dir: Path, shortfall: Shortfall, extra: dict[str, Any], started: float
) -> dict[str, Any]:
    """The summary of a stage that lacked data: only what it needed and found, no results."""
    summary = {**extra, "seconds": round(time.perf_counter() - started, 3)}
    write_shortfall(stage_dir, shortfall, summary)
    get_run_logger().warning("stage %s not run: %s", stage_dir.name, shortfall.text)
    return {**summary, NOT_ENOUGH_DATA: shortfall.to_dict()}


def _stage_summary(
    settings: Settings, trace: str, stage: str, params: AnalyzeOptions
) -> dict[str, Any]:
    shortfall = analysis_shortfall(stage, settings.data_dir, ad_sizes=params.ad_sizes, k=params.k)
    if shortfall is not None and stage != "clustering":
        stage_dir = _paths(settings, trace)["results"] / stage
        return _shortfall_summary(stage_dir, shortfall, {}, time.perf_counter())
    if stage == "inst_vs_avg":
        return inst_vs_avg_stage(settings, trace, params.seed, params.ks, params.batch_rows)
    if stage == "variability":
        return variability_stage(settings, trace)
    if stage == "time_invariance":
        return time_invariance_stage(
            settings, trace, params.seed, params.deltas, params.alpha, params.batch_rows
        )
    if stage == "clustering":
        return clustering_stage(
            settings,
            trace,
            params.seed,
            params.k,
            params.k_range,
            params.n_init,
            params.minibatch_threshold,
            clustering.DEFAULT_SILHOUETTE_SAMPLE,
            clustering.DEFAULT_SCAN_SAMPLE,
            params.kmeans_threads,
        )
    if stage == "gaussian_sums":
        return gaussian_sums_stage(
            settings,
            trace,
            params.seed,
            params.ad_sizes,
            params.ad_realizations,
            params.ad_sets,
            params.ad_pool,
            params.batch_rows,
            True,
        )
    return gamma_fits_stage(settings, trace, params.seed, params.bootstrap)


@flow(name="tracelab-analyze", flow_run_name=flow_run_name("analyze"))
def analyze_flow(
    settings: Settings, trace: str, params: AnalyzeOptions
) -> dict[str, dict[str, Any]]:
    """Run the selected analysis stages in order; returns each stage's summary."""
    check_inputs(settings, trace, params.stages)
    logger = get_run_logger()
    summaries: dict[str, dict[str, Any]] = {}
    stages = params.stages
    for n, stage in enumerate(stages, start=1):
        logger.info("analyze %s: stage %d/%d %s", trace, n, len(stages), stage)
        print(f"[analyze] {n}/{len(stages)} {stage} ...", file=sys.stderr, flush=True)
        summaries[stage] = _stage_summary(settings, trace, stage, params)
        seconds = summaries[stage]["seconds"]
        short = summaries[stage].get(NOT_ENOUGH_DATA)
        done = f"not run: {short['text']}" if short else f"done in {seconds:.1f} s"
        print(f"[analyze] {n}/{len(stages)} {stage} {done}", file=sys.stderr)
    publish_summary("analyze", trace, _headline(summaries))
    return summaries


def _headline(summaries: dict[str, dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (stage, "not enough data" if NOT_ENOUGH_DATA in s else f"{s.get('seconds', 0):.1f} s")
        for stage, s in summaries.items()
    )


def _shortfalls(summaries: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    """What the stages could not do: whole stages first, then the parts of those that ran."""
    whole = [s[NOT_ENOUGH_DATA]["text"] for s in summaries.values() if NOT_ENOUGH_DATA in s]
    parts = [
        p for s in summaries.values() if NOT_ENOUGH_DATA not in s for p in s.get(SHORTFALLS, ())
    ]
    return (*whole, *parts)


def run_stage(settings: Settings, trace: str, params: AnalyzeOptions) -> StageResult:
    """The registry's entry point: the analyze flow with typed parameters."""
    check_inputs(settings, trace, params.stages)
    started = time.perf_counter()
    summaries = analyze_flow(settings, trace, params)
    return StageResult(
        stage="analyze",
        trace=trace,
        outputs=tuple(f"results/{trace}/{stage}" for stage in summaries),
        headline=_headline(summaries),
        seconds=time.perf_counter() - started,
        shortfalls=_shortfalls(summaries),
    )
