"""`tracelab analyze` (issue #4): the statistics stages of METHODS §2.1–2.5 and §2.7.

A thin Prefect flow: one task per stage, each calling the plain functions in ``analysis/`` and
writing ``DATA/results/<trace>/<stage>/`` (Parquet tables + ``summary.json``; ``params.json`` for
the stages that feed the params export: clustering, gaussian_sums, gamma_fits).
Inputs: the derived tables of ``tracelab derive`` and, for the per-task sample stages, the
``task_usage`` lake of ``tracelab ingest``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tracelab.analysis import (
    clustering,
    gamma_fits,
    gaussian_sums,
    inst_vs_avg,
    time_invariance,
    variability,
)
from tracelab.analysis.errors import TracelabError
from tracelab.analysis.params import write_stage_params
from tracelab.analysis.stage_outputs import write_stage_outputs
from tracelab.analysis.task_samples import DEFAULT_BATCH_ROWS, TaskSampleBatch, task_sample_batches
from tracelab.analysis.variability import long_task_stats
from tracelab.flows.settings import Settings, duckdb_connection

STAGES: tuple[str, ...] = (
    "inst_vs_avg",
    "variability",
    "time_invariance",
    "clustering",
    "gaussian_sums",
    "gamma_fits",
)
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
        tables, needs_lake = _STAGE_INPUTS[stage]
        for name in tables:
            if not paths[name].exists():
                raise TracelabError(
                    f"derived table {paths[name]} is missing (needed by stage {stage}); "
                    f"run `tracelab derive --trace {trace}` first"
                )
        if needs_lake and not any(paths["lake"].glob("*.parquet")):
            raise TracelabError(
                f"no task_usage Parquet files in {paths['lake']} (needed by stage {stage}); "
                f"run `tracelab ingest --trace {trace}` first"
            )


def _settings(data_dir: str, memory_limit: str, threads: int) -> Settings:
    return Settings(
        data_dir=Path(data_dir), duckdb_memory_limit=memory_limit, duckdb_threads=threads
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


@task(cache_policy=NO_CACHE)
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


@task(cache_policy=NO_CACHE)
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


@task(cache_policy=NO_CACHE)
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


@task(cache_policy=NO_CACHE)
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
    if reason is not None:
        logger.warning("clustering skipped: %s", reason)
        # no centroids this run: the params export must not keep an earlier run's
        write_stage_params(stage_dir, [])
        skipped = clustering.clustering_skipped_summary(
            k=k, n_histograms=int(h.shape[0]), reason=reason
        )
        return _finish(stage_dir, {}, skipped, started)
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


@task(cache_policy=NO_CACHE)
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


@task(cache_policy=NO_CACHE)
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
    write_stage_params(stage_dir, [f.to_parameter(trace) for f in result.fits])
    return _finish(
        stage_dir,
        gamma_fits.gamma_fits_tables(result),
        gamma_fits.gamma_fits_summary(result),
        started,
    )


@flow(name="analyze")
def analyze_flow(
    data_dir: str = "data",
    trace: str = "google-2011",
    seed: int = 0,
    stages: tuple[str, ...] = STAGES,
    ks: tuple[int, ...] = inst_vs_avg.DEFAULT_KS,
    deltas: tuple[int, ...] = time_invariance.DEFAULT_DELTAS,
    alpha: float = time_invariance.DEFAULT_ALPHA,
    k: int = clustering.DEFAULT_K,
    k_range: tuple[int, ...] = clustering.DEFAULT_K_RANGE,
    n_init: int = clustering.DEFAULT_N_INIT,
    minibatch_threshold: int = clustering.DEFAULT_MINIBATCH_THRESHOLD,
    silhouette_sample: int = clustering.DEFAULT_SILHOUETTE_SAMPLE,
    scan_sample: int = clustering.DEFAULT_SCAN_SAMPLE,
    kmeans_threads: int = clustering.DEFAULT_THREADS,
    ad_sizes: tuple[int, ...] = gaussian_sums.DEFAULT_SIZES,
    ad_realizations: int = gaussian_sums.DEFAULT_REALIZATIONS,
    ad_sets: int = gaussian_sums.DEFAULT_SETS,
    ad_pool: int = gaussian_sums.DEFAULT_POOL_SIZE,
    bootstrap: int = gamma_fits.DEFAULT_BOOTSTRAP,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    duckdb_memory_limit: str = "8GB",
    duckdb_threads: int = 0,
    show_progress: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run the selected analysis stages in order; returns each stage's summary."""
    settings = _settings(data_dir, duckdb_memory_limit, duckdb_threads)
    check_inputs(settings, trace, stages)
    logger = get_run_logger()
    summaries: dict[str, dict[str, Any]] = {}
    for n, stage in enumerate(stages, start=1):
        logger.info("analyze %s: stage %d/%d %s", trace, n, len(stages), stage)
        if show_progress:
            print(f"[analyze] {n}/{len(stages)} {stage} ...", file=sys.stderr, flush=True)
        if stage == "inst_vs_avg":
            summaries[stage] = inst_vs_avg_stage(settings, trace, seed, ks, batch_rows)
        elif stage == "variability":
            summaries[stage] = variability_stage(settings, trace)
        elif stage == "time_invariance":
            summaries[stage] = time_invariance_stage(
                settings, trace, seed, deltas, alpha, batch_rows
            )
        elif stage == "clustering":
            summaries[stage] = clustering_stage(
                settings,
                trace,
                seed,
                k,
                k_range,
                n_init,
                minibatch_threshold,
                silhouette_sample,
                scan_sample,
                kmeans_threads,
            )
        elif stage == "gaussian_sums":
            summaries[stage] = gaussian_sums_stage(
                settings,
                trace,
                seed,
                ad_sizes,
                ad_realizations,
                ad_sets,
                ad_pool,
                batch_rows,
                show_progress,
            )
        elif stage == "gamma_fits":
            summaries[stage] = gamma_fits_stage(settings, trace, seed, bootstrap)
        if show_progress:
            seconds = summaries[stage]["seconds"]
            print(f"[analyze] {n}/{len(stages)} {stage} done in {seconds:.1f} s", file=sys.stderr)
    return summaries


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _stage_list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="google-2011", help="trace id (google-2011)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of every random choice (default 0)"
    )
    parser.add_argument(
        "--stages",
        type=_stage_list,
        default=STAGES,
        help=f"comma-separated stages to run (default all: {','.join(STAGES)})",
    )
    parser.add_argument(
        "--k", type=int, default=clustering.DEFAULT_K, help="k-means clusters (default 16)"
    )
    parser.add_argument(
        "--k-range",
        type=_int_list,
        default=clustering.DEFAULT_K_RANGE,
        help="k values for the inertia/silhouette scan (default 4,6,...,32)",
    )
    parser.add_argument(
        "--n-init", type=int, default=clustering.DEFAULT_N_INIT, help="k-means restarts (default 4)"
    )
    parser.add_argument(
        "--minibatch-threshold",
        type=int,
        default=clustering.DEFAULT_MINIBATCH_THRESHOLD,
        help="use MiniBatchKMeans above this many tasks (default 50000)",
    )
    parser.add_argument(
        "--kmeans-threads",
        type=int,
        default=clustering.DEFAULT_THREADS,
        help="threads for k-means (default 1: faster on a busy machine; 0 = library default)",
    )
    parser.add_argument(
        "--deltas",
        type=_int_list,
        default=time_invariance.DEFAULT_DELTAS,
        help="KS window lengths in records (default 12,24,36)",
    )
    parser.add_argument(
        "--ad-sizes",
        type=_int_list,
        default=gaussian_sums.DEFAULT_SIZES,
        help="tasks per set N (default 10,20,30,50,100,250,500)",
    )
    parser.add_argument(
        "--ad-realizations",
        type=int,
        default=gaussian_sums.DEFAULT_REALIZATIONS,
        help=f"realizations R per task (default {gaussian_sums.DEFAULT_REALIZATIONS}; paper 10000)",
    )
    parser.add_argument(
        "--ad-sets",
        type=int,
        default=gaussian_sums.DEFAULT_SETS,
        help=f"random sets S per N (default {gaussian_sums.DEFAULT_SETS}; paper 10000)",
    )
    parser.add_argument(
        "--ad-pool",
        type=int,
        default=gaussian_sums.DEFAULT_POOL_SIZE,
        help="tasks in the realization pool (memory: pool x R x 4 bytes; "
        f"default {gaussian_sums.DEFAULT_POOL_SIZE}; paper 100000)",
    )
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=gamma_fits.DEFAULT_BOOTSTRAP,
        help=f"bootstrap resamples per Gamma fit (default {gamma_fits.DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--batch-rows",
        type=int,
        default=DEFAULT_BATCH_ROWS,
        help="usage rows per streamed batch (bounds memory; default 1000000)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-stage progress lines")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    check_inputs(settings, args.trace, tuple(args.stages))
    summaries = analyze_flow(
        data_dir=str(settings.data_dir),
        trace=args.trace,
        seed=args.seed,
        stages=tuple(args.stages),
        deltas=tuple(args.deltas),
        k=args.k,
        k_range=tuple(args.k_range),
        n_init=args.n_init,
        minibatch_threshold=args.minibatch_threshold,
        kmeans_threads=args.kmeans_threads,
        ad_sizes=tuple(args.ad_sizes),
        ad_realizations=args.ad_realizations,
        ad_sets=args.ad_sets,
        ad_pool=args.ad_pool,
        bootstrap=args.bootstrap,
        batch_rows=args.batch_rows,
        duckdb_memory_limit=settings.duckdb_memory_limit,
        duckdb_threads=settings.duckdb_threads,
        show_progress=not args.quiet,
    )
    results = settings.results_dir / args.trace
    for stage, summary in summaries.items():
        print(f"{stage}: {results / stage} ({summary.get('seconds', 0):.1f} s)")
    return 0
