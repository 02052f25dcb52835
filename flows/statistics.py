"""`tracelab statistics`: the statistics stages of docs/methods.md §2.1–2.5 and §2.7.

Plain functions, no Prefect: one per analysis, each calling the plain functions in ``analysis/``,
all run and written the same way by :func:`analysis_summary`, into ``DATA/results/<trace>/<stage>/`` (Parquet tables + ``summary.json``; ``params.json`` for
the stages that feed the params export: clustering, gaussian_sums, gamma_fits).
Inputs: the derived tables of ``tracelab derive`` and, for the per-task sample stages, the
``task_usage`` lake of ``tracelab ingest``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import FittedParameter, write_stage_params
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
from tracelab.analysis.statistics.options import StatisticsOptions
from tracelab.analysis.statistics.task_samples import TaskSampleBatch, task_sample_batches
from tracelab.analysis.statistics.variability import long_task_stats
from tracelab.analysis.traces import traces_feeding
from tracelab.flows.settings import Settings, duckdb_connection

STAGES = ANALYSES
_LOG = logging.getLogger("tracelab.statistics")
SUPPORTED_TRACES: tuple[str, ...] = traces_feeding("statistics")
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
            f"statistics supports {', '.join(SUPPORTED_TRACES)}, not {trace!r} "
            f"(the priors of {', '.join(traces_feeding('priors'))} are `tracelab priors --trace ...`)"
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


@dataclass(frozen=True)
class _Computed:
    """What one analysis made: its tables, its summary and, for those that feed the params
    export, its fitted records; or, when it lacked data, the shortfall instead of tables."""

    tables: dict[str, pl.DataFrame]
    summary: dict[str, Any]
    records: tuple[FittedParameter, ...] = ()
    shortfall: Shortfall | None = None


@dataclass(frozen=True)
class _Analysis:
    """The inputs every analysis reads: where the data is, which trace, which options."""

    settings: Settings
    trace: str
    params: StatisticsOptions

    def samples(self) -> Iterator[TaskSampleBatch]:
        return _samples(self.settings, self.trace, self.params.batch_rows)

    def long_stats(self, *columns: str) -> pl.DataFrame:
        return _long_stats(self.settings, self.trace, columns)


def _inst_vs_avg(a: _Analysis) -> _Computed:
    """Figure 1: (ȳ − x̄⁽ᵏ⁾)/ȳ box statistics per k → ``inst_vs_avg/convergence.parquet``."""
    p = a.params
    result = inst_vs_avg.inst_avg_convergence(a.samples(), ks=p.ks, seed=p.seed)
    return _Computed(
        inst_vs_avg.inst_vs_avg_tables(result),
        inst_vs_avg.inst_vs_avg_summary(result, batch_rows=p.batch_rows),
    )


def _variability(a: _Analysis) -> _Computed:
    """Figures 2–3: std CDFs, heatmaps, std~mean regressions → ``variability/``."""
    stats = a.long_stats("inst_mean", "inst_std", "avg_mean", "avg_std")
    result = variability.variability(
        stats["inst_mean"].to_numpy(),
        stats["inst_std"].to_numpy(),
        stats["avg_mean"].to_numpy(),
        stats["avg_std"].to_numpy(),
    )
    return _Computed(
        variability.variability_tables(result),
        variability.variability_summary(result, n_long=stats.height),
    )


def _time_invariance(a: _Analysis) -> _Computed:
    """§3.4: KS share rejected per Δ → ``time_invariance/shares.parquet`` and per-task tests."""
    p = a.params
    result = time_invariance.time_invariance(
        a.samples(), deltas=p.deltas, alpha=p.alpha, seed=p.seed
    )
    return _Computed(
        time_invariance.time_invariance_tables(result),
        time_invariance.time_invariance_summary(result, deltas=p.deltas, batch_rows=p.batch_rows),
    )


def _clustering(a: _Analysis) -> _Computed:
    """Figure 4: k-means of the histograms, centroids, shares, inertia/silhouette → ``clustering/``."""
    p = a.params
    frame = pl.read_parquet(
        _paths(a.settings, a.trace)[HISTOGRAMS], columns=["job_id", "task_index", "h"]
    )
    h = clustering.histogram_matrix(frame["h"])
    _LOG.info("clustering %d histograms (k=%d, scan %s)", h.shape[0], p.k, list(p.k_range))
    reason = clustering.too_few_histograms(h.shape[0], p.k)
    shortfall = clustering_shortfall(a.settings.data_dir, p.k)
    if reason is not None and shortfall is not None:
        _LOG.warning("clustering skipped: %s", reason)
        # no centroids this run: the params export must not keep an earlier run's
        skipped = clustering.clustering_skipped_summary(
            k=p.k, n_histograms=int(h.shape[0]), reason=reason
        )
        return _Computed({}, skipped, shortfall=shortfall)
    limit = clustering.kmeans_thread_limit(p.kmeans_threads)
    fit = {"seed": p.seed, "n_init": p.n_init, "minibatch_threshold": p.minibatch_threshold}
    chosen = clustering.histogram_clusters(h, k=p.k, threads=limit, **fit)
    samples = {
        "silhouette_sample": clustering.DEFAULT_SILHOUETTE_SAMPLE,
        "scan_sample": clustering.DEFAULT_SCAN_SAMPLE,
    }
    scan = clustering.k_scan(h, ks=p.k_range, threads=limit, **fit, **samples)
    summary = clustering.clustering_summary(
        chosen,
        scan,
        k_range=p.k_range,
        n_init=p.n_init,
        minibatch_threshold=p.minibatch_threshold,
        kmeans_threads=p.kmeans_threads,
        **samples,
    )
    return _Computed(
        clustering.clustering_tables(frame, chosen, scan),
        summary,
        (chosen.to_parameter(a.trace),),
    )


def _gaussian_sums(a: _Analysis) -> _Computed:
    """Table 1, Figures 5 and 6 → ``gaussian_sums/{table,sets,examples}.parquet``, ``params.json``."""
    p = a.params
    started = time.perf_counter()
    n_long = a.long_stats("job_id").height
    pool = gaussian_sums.realization_pool(
        a.samples(),
        n_tasks_total=n_long,
        pool_size=p.ad_pool,
        realizations=p.ad_realizations,
        seed=p.seed,
    )
    _LOG.info(
        "gaussian sums: pool of %d tasks x %d realizations; %d sets per N",
        pool.size,
        p.ad_realizations,
        p.ad_sets,
    )

    def _report(row: gaussian_sums.ADRow) -> None:
        message = (
            f"gaussian sums: N={row.n_tasks_per_set} rejection rate {row.rejection_rate:.3f} "
            f"({time.perf_counter() - started:.0f} s)"
        )
        _LOG.info(message)
        print(f"[statistics]   {message}", file=sys.stderr, flush=True)

    result = gaussian_sums.ad_rejection_table(
        pool, sizes=p.ad_sizes, sets=p.ad_sets, seed=p.seed, on_size_done=_report
    )
    summary = gaussian_sums.gaussian_sums_summary(
        result,
        sizes=p.ad_sizes,
        realizations=p.ad_realizations,
        pool_size=p.ad_pool,
        n_long=n_long,
        pool_tasks=pool.size,
    )
    return _Computed(
        gaussian_sums.gaussian_sums_tables(result), summary, (result.to_parameter(a.trace),)
    )


def _gamma_fits(a: _Analysis) -> _Computed:
    """§2.7: Gamma fits of inst mean, inst std (long tasks) and execution time (finished tasks)."""
    stats = a.long_stats("inst_mean", "inst_std")
    task_times = pl.scan_parquet(_paths(a.settings, a.trace)[TASK_TIMES])
    result = gamma_fits.google_gamma_fits(
        stats["inst_mean"].to_numpy(),
        stats["inst_std"].to_numpy(),
        gamma_fits.finished_execution_times(task_times),
        seed=a.params.seed,
        n_bootstrap=a.params.bootstrap,
    )
    for _, reason in result.skipped:
        _LOG.warning("gamma fit skipped: %s", reason)
    short = gamma_fit_shortfalls(
        a.settings.data_dir, result.skipped, n_finished=result.n_finished_incarnations
    )
    summary = {**gamma_fits.gamma_fits_summary(result), SHORTFALLS: [f.text for f in short]}
    if not result.fits:
        return _Computed({}, summary, shortfall=gamma_fits_shortfall(short))
    records = tuple(f.to_parameter(a.trace) for f in result.fits)
    return _Computed(gamma_fits.gamma_fits_tables(result), summary, records)


#: each analysis by name, in ``ANALYSES`` order; every one writes ``results/<trace>/<name>/``
_COMPUTE: dict[str, Callable[[_Analysis], _Computed]] = {
    "inst_vs_avg": _inst_vs_avg,
    "variability": _variability,
    "time_invariance": _time_invariance,
    "clustering": _clustering,
    "gaussian_sums": _gaussian_sums,
    "gamma_fits": _gamma_fits,
}


def analysis_summary(
    settings: Settings, trace: str, name: str, params: StatisticsOptions
) -> dict[str, Any]:
    """Run one analysis and write its folder; its summary (with ``seconds``), or, when it lacked
    data, the summary naming what it needed and found."""
    started = time.perf_counter()
    stage_dir = _paths(settings, trace)["results"] / name
    shortfall = analysis_shortfall(name, settings.data_dir, ad_sizes=params.ad_sizes, k=params.k)
    # clustering judges the histograms it reads itself: a shortfall there may still leave enough
    computed = (
        _Computed({}, {}, shortfall=shortfall)
        if shortfall is not None and name != "clustering"
        else _COMPUTE[name](_Analysis(settings, trace, params))
    )
    summary = {**computed.summary, "seconds": round(time.perf_counter() - started, 3)}
    if computed.shortfall is not None:
        write_shortfall(stage_dir, computed.shortfall, summary)
        _LOG.warning("stage %s not run: %s", name, computed.shortfall.text)
        return {**summary, NOT_ENOUGH_DATA: computed.shortfall.to_dict()}
    if computed.records:
        write_stage_params(stage_dir, list(computed.records))
    write_stage_outputs(stage_dir, computed.tables, summary)
    _LOG.info("stage %s done in %.1f s -> %s", name, summary["seconds"], stage_dir)
    return summary


def statistics_results(
    settings: Settings, trace: str, params: StatisticsOptions
) -> dict[str, dict[str, Any]]:
    """Run the selected analyses in order; returns each one's summary."""
    check_inputs(settings, trace, params.stages)
    summaries: dict[str, dict[str, Any]] = {}
    stages = params.stages
    for n, stage in enumerate(stages, start=1):
        _LOG.info("analyze %s: stage %d/%d %s", trace, n, len(stages), stage)
        print(f"[statistics] {n}/{len(stages)} {stage} ...", file=sys.stderr, flush=True)
        summaries[stage] = analysis_summary(settings, trace, stage, params)
        seconds = summaries[stage]["seconds"]
        short = summaries[stage].get(NOT_ENOUGH_DATA)
        done = f"not run: {short['text']}" if short else f"done in {seconds:.1f} s"
        print(f"[statistics] {n}/{len(stages)} {stage} {done}", file=sys.stderr)
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


def run_stage(settings: Settings, trace: str, params: StatisticsOptions) -> StageResult:
    """The registry's entry point: every selected analysis, with typed parameters."""
    check_inputs(settings, trace, params.stages)
    started = time.perf_counter()
    summaries = statistics_results(settings, trace, params)
    return StageResult(
        stage="statistics",
        trace=trace,
        outputs=tuple(f"results/{trace}/{stage}" for stage in summaries),
        headline=_headline(summaries),
        seconds=time.perf_counter() - started,
        shortfalls=_shortfalls(summaries),
    )
