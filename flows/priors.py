"""`tracelab priors`: Gamma priors of the Azure deployment model (docs/methods.md §2.6).

Reads ``DATA/derived/azure-2017/fct_azure_deployments.parquet`` (``tracelab derive --trace
azure-2017``) or, with ``--vmtable FILE``, first derives the ``fct_azure_*`` / ``agg_azure_*`` tables
from that one vmtable CSV(.gz) (``queries/``, :mod:`analysis.azure_vmtable`) into
``DATA/derived/azure-2017/``; fits the priors (:mod:`analysis.priors`) into
``DATA/results/azure-2017/priors/``. ``--trace azure-2019`` fits the same priors on V2's
``fct_azure_deployments`` into ``DATA/results/azure-2019/priors/`` (its cores come from buckets:
docs/derive.md); ``--vmtable`` is V1's only.

``--trace alibaba-2018`` fits the priors that trace supports
(:mod:`analysis.priors.alibaba`: Gamma execution times of the Terminated tasks and per-task mean
CPU) from ``DATA/derived/alibaba-2018/`` into ``DATA/results/alibaba-2018/priors/``; the azure-only
options do not apply there. ``--trace google-2019`` likewise fits google-2011's §2.7 Gamma priors
on v3's tables (:mod:`analysis.priors.google2019`) into ``DATA/results/google-2019/priors/``; a lake
without instance_events (the real machine_events shard alone) supports none, and its ``needs``
(:func:`tracelab.analysis.priors.needs.priors_needs`) says so instead of running.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import FittedParameter, write_stage_params
from tracelab.analysis.common.shortfall import recorded_shortfalls
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.common.stage_outputs import record_parameters, write_stage_outputs
from tracelab.analysis.lake import derive
from tracelab.analysis.lake.schemas import AZURE_CENSORED_VMDELETED_S
from tracelab.analysis.priors import alibaba, google2019
from tracelab.analysis.priors.fits import azure_priors, priors_summary, priors_tables
from tracelab.analysis.priors.options import AZURE_ONLY_OPTIONS, PriorsOptions
from tracelab.analysis.priors.vmtable import (
    TRACE,
    derive_azure_tables,
    register_vmtable_csv,
)
from tracelab.flows.settings import Settings, duckdb_connection

_LOG = logging.getLogger("tracelab.priors")


def derive_azure(settings: Settings, vmtable_csv: Path, shutdown_min_vms: int) -> dict[str, int]:
    """Derived azure tables -> ``DATA/derived/azure-2017/<table>.parquet``; returns row counts."""
    con = duckdb_connection(settings)
    try:
        register_vmtable_csv(con, vmtable_csv)
        params = derive.DeriveParams(shutdown_min_vms=shutdown_min_vms).as_sql_params()
        counts = derive_azure_tables(con, params, settings.derived_dir / TRACE)
        for name, rows in counts.items():
            _LOG.info("derived %s: %d rows", name, rows)
        return counts
    finally:
        con.close()


def fit_priors(
    settings: Settings,
    trace: str,
    seed: int,
    n_boot: int,
    zero_event_probability: float | None,
    alpha: float | None,
    shutdown_cores: str,
) -> Path:
    """Priors from ``fct_azure_deployments.parquet`` -> ``DATA/results/<trace>/priors/``."""
    deployments = pl.read_parquet(settings.derived_dir / trace / "fct_azure_deployments.parquet")
    priors = azure_priors(
        deployments,
        window_hours=AZURE_CENSORED_VMDELETED_S / 3600.0,
        seed=seed,
        n_boot=n_boot,
        zero_event_probability=zero_event_probability,
        alpha=alpha,
        shutdown_cores=shutdown_cores,
        trace=trace,
    )
    out = settings.results_dir / trace / "priors"
    write_stage_outputs(out, priors_tables(priors), priors_summary(priors))
    path = write_stage_params(out, priors.records())
    _LOG.info(
        "priors from %d deployments: lifetime rate Gamma(%.3g, %.3g), alpha %.3g",
        len(priors.mles.deploymentid),
        priors.lifetime_rate.shape,
        priors.lifetime_rate.rate,
        priors.alpha,
    )
    return path


def fit_azure(settings: Settings, trace: str, params: PriorsOptions) -> tuple[Path, int]:
    """Fit the priors on derive's azure tables (or on ``--vmtable``'s, derived here first);
    the stage's params.json and the number of deployments fitted."""
    steps = 2 if params.vmtable else 1
    if params.vmtable:
        print(f"[priors] 1/2 deriving the {TRACE} tables from --vmtable ...", file=sys.stderr)
        derive_azure(settings, Path(params.vmtable), params.shutdown_min_vms)
    print(
        f"[priors] {steps}/{steps} fitting the priors ({params.n_boot} bootstrap replicates per fit) ...",
        file=sys.stderr,
        flush=True,
    )
    path = fit_priors(
        settings,
        trace,
        params.seed,
        params.n_boot,
        params.zero_event_probability,
        params.alpha,
        params.shutdown_cores,
    )
    # the page's "Parameters of this run" and a reader of summary.json see what the fit ran with
    record_parameters(path.parent, params)
    deployments = pl.scan_parquet(
        settings.derived_dir / trace / "fct_azure_deployments.parquet"
    ).select(pl.len())
    return path, int(deployments.collect().item())


def fit_alibaba_priors(settings: Settings, params: PriorsOptions) -> alibaba.AlibabaFits:
    """Priors from ``fct_alibaba_task_times`` and ``fct_alibaba_task_usage_stats`` ->
    ``DATA/results/alibaba-2018/priors/`` (params.json, summary.json with the options)."""
    derived = settings.derived_dir / alibaba.TRACE
    task_times = pl.read_parquet(
        derived / "fct_alibaba_task_times.parquet", columns=["terminal_state", "execution_time_s"]
    )
    task_usage = pl.read_parquet(
        derived / "fct_alibaba_task_usage_stats.parquet", columns=["avg_mean"]
    )
    fits = alibaba.alibaba_fits(task_times, task_usage, seed=params.seed, n_bootstrap=params.n_boot)
    out = settings.results_dir / alibaba.TRACE / alibaba.STAGE
    summary = alibaba.alibaba_summary(fits, task_times, task_usage)
    _write_trace_priors(out, summary, params, fits.records, fits.skipped)
    return fits


def fit_google2019_priors(settings: Settings, params: PriorsOptions) -> google2019.Google2019Fits:
    """Priors from ``fct_task_times`` and ``fct_task_usage_stats`` ->
    ``DATA/results/google-2019/priors/`` (params.json, summary.json with the options)."""
    derived = settings.derived_dir / google2019.TRACE
    times = pl.scan_parquet(derived / f"{google2019.INSTANCE_TIMES}.parquet")
    usage = pl.scan_parquet(derived / f"{google2019.USAGE_STATS}.parquet")
    fits = google2019.google2019_fits(times, usage, seed=params.seed, n_bootstrap=params.n_boot)
    out = settings.results_dir / google2019.TRACE / google2019.STAGE
    summary = google2019.google2019_summary(fits, times, settings.data_dir)
    _write_trace_priors(out, summary, params, fits.records, fits.skipped)
    return fits


def _write_trace_priors(
    out: Path,
    summary: dict[str, Any],
    params: PriorsOptions,
    records: Sequence[FittedParameter],
    skipped: Sequence[tuple[str, str]],
) -> None:
    """A trace's priors folder (params.json, summary.json with the options), each fit logged."""
    write_stage_outputs(out, {}, summary)
    record_parameters(out, params, leave_out=AZURE_ONLY_OPTIONS)
    write_stage_params(out, list(records))
    for record in records:
        _LOG.info("%s: Gamma over %d values, KS %.3g", record.name, record.n, record.ks_distance)
    for name, why in skipped:
        _LOG.warning("%s not fitted: %s", name, why)


#: the report page of each trace's priors besides azure-2017's
_PRIORS_PAGE = {alibaba.TRACE: "alibaba-priors", google2019.TRACE: f"{google2019.TRACE}-priors"}


def run_stage(settings: Settings, trace: str, params: PriorsOptions) -> StageResult:
    """The registry's entry point: the trace's priors with typed parameters."""
    if trace in (alibaba.TRACE, google2019.TRACE):
        return _run_trace_priors(settings, trace, params)
    if params.vmtable and trace != TRACE:
        raise TracelabError(
            f"--vmtable is an {TRACE} option (a V1 vmtable); `tracelab priors --trace {trace}` "
            f"reads DATA/derived/{trace}/ (run `tracelab derive --trace {trace}` first)"
        )
    if params.vmtable and not Path(params.vmtable).is_file():
        raise TracelabError(f"--vmtable {params.vmtable}: no such file; give a V1 vmtable CSV(.gz)")
    started = time.perf_counter()
    path, deployments = fit_azure(settings, trace, params)
    priors = str(path.parent.relative_to(settings.data_dir))
    return StageResult(
        stage="priors",
        trace=trace,
        outputs=(f"derived/{trace}", priors) if params.vmtable else (priors,),
        headline=(("deployments", f"{deployments:,}"),),
        seconds=time.perf_counter() - started,
        page="azure-priors",
    )


def _run_trace_priors(settings: Settings, trace: str, params: PriorsOptions) -> StageResult:
    """alibaba-2018's or google-2019's Gamma priors (the azure-only options refused)."""
    if params.vmtable:
        raise TracelabError(
            f"--vmtable is an {TRACE} option; `tracelab priors --trace {trace}` reads "
            f"DATA/derived/{trace}/ (run `tracelab derive --trace {trace}` first)"
        )
    started = time.perf_counter()
    print(
        f"[priors] 1/1 fitting the {trace} priors ({params.n_boot} bootstrap replicates per fit) ...",
        file=sys.stderr,
        flush=True,
    )
    fits: alibaba.AlibabaFits | google2019.Google2019Fits = (
        fit_alibaba_priors(settings, params)
        if trace == alibaba.TRACE
        else fit_google2019_priors(settings, params)
    )
    return StageResult(
        stage="priors",
        trace=trace,
        outputs=(f"results/{trace}/{alibaba.STAGE}",),
        headline=tuple((r.name, f"{r.n:,} values") for r in fits.records),
        seconds=time.perf_counter() - started,
        shortfalls=recorded_shortfalls((settings.results_dir / trace / alibaba.STAGE,)),
        page=_PRIORS_PAGE[trace],
    )
