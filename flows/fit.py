"""`tracelab fit`: Gamma priors of the Azure deployment model (issue #5, METHODS §2.6).

Reads the lake (``DATA/lake/azure-2017/vmtable/*.parquet``, exposed to SQL as the view ``vmtable``)
or, with ``--vmtable FILE``, one vmtable CSV(.gz); derives the ``fct_azure_*`` / ``agg_azure_*``
tables in DuckDB (``queries/``, :mod:`analysis.azure_vmtable`) into ``DATA/derived/azure-2017/``;
fits the priors (:mod:`analysis.priors`) into ``DATA/results/azure-2017/priors/``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from tracelab.analysis import derive
from tracelab.analysis.azure_vmtable import (
    TRACE,
    derive_azure_tables,
    register_vmtable_csv,
    register_vmtable_lake,
)
from tracelab.analysis.params import write_stage_params
from tracelab.analysis.priors import azure_priors, priors_summary, priors_tables
from tracelab.analysis.schemas import AZURE_CENSORED_VMDELETED_S
from tracelab.flows.settings import Settings, duckdb_connection


@task(cache_policy=NONE)
def derive_azure(
    settings: Settings, vmtable_csv: Path | None, shutdown_min_vms: int
) -> dict[str, int]:
    """Derived azure tables -> ``DATA/derived/azure-2017/<table>.parquet``; returns row counts."""
    logger = get_run_logger()
    con = duckdb_connection(settings)
    try:
        if vmtable_csv is not None:
            register_vmtable_csv(con, vmtable_csv)
        else:
            register_vmtable_lake(con, settings.lake_dir)
        params = derive.DeriveParams(shutdown_min_vms=shutdown_min_vms).as_sql_params()
        counts = derive_azure_tables(con, params, settings.derived_dir / TRACE)
        for name, rows in counts.items():
            logger.info("derived %s: %d rows", name, rows)
        return counts
    finally:
        con.close()


@task(cache_policy=NONE)
def fit_priors(
    settings: Settings,
    seed: int,
    n_boot: int,
    zero_event_probability: float,
    alpha: float | None,
) -> Path:
    """Priors from ``fct_azure_deployments.parquet`` -> ``DATA/results/azure-2017/priors/``."""
    logger = get_run_logger()
    deployments = pl.read_parquet(settings.derived_dir / TRACE / "fct_azure_deployments.parquet")
    priors = azure_priors(
        deployments,
        window_hours=AZURE_CENSORED_VMDELETED_S / 3600.0,
        seed=seed,
        n_boot=n_boot,
        zero_event_probability=zero_event_probability,
        alpha=alpha,
    )
    out = settings.results_dir / TRACE / "priors"
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in priors_tables(priors).items():
        tmp = out / f"{name}.parquet.tmp"
        frame.write_parquet(tmp)
        tmp.replace(out / f"{name}.parquet")
    summary = out / "summary.json"
    summary.with_suffix(".json.tmp").write_text(
        json.dumps(priors_summary(priors), indent=2, sort_keys=True), encoding="utf-8"
    )
    summary.with_suffix(".json.tmp").replace(summary)
    path = write_stage_params(out, priors.records())
    logger.info(
        "priors from %d deployments: lifetime rate Gamma(%.3g, %.3g), alpha %.3g",
        len(priors.mles.deploymentid),
        priors.lifetime_rate.shape,
        priors.lifetime_rate.rate,
        priors.alpha,
    )
    return path


@flow(name="fit-azure-2017")
def fit_azure_flow(
    data_dir: Path,
    vmtable_csv: Path | None = None,
    seed: int = 0,
    n_boot: int = 200,
    zero_event_probability: float = 0.5,
    alpha: float | None = None,
    shutdown_min_vms: int = 3,
    duckdb_memory_limit: str = "8GB",
    duckdb_threads: int = 0,
    duckdb_temp_dir: Path | None = None,
) -> Path:
    """Derive the azure tables, then fit the priors; returns the stage's params.json."""
    settings = Settings(
        data_dir=data_dir,
        duckdb_memory_limit=duckdb_memory_limit,
        duckdb_threads=duckdb_threads,
        duckdb_temp_dir=duckdb_temp_dir,
    )
    derive_azure(settings, vmtable_csv, shutdown_min_vms)
    return fit_priors(settings, seed, n_boot, zero_event_probability, alpha)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        default=TRACE,
        choices=["azure-2017", "google-2011"],
        help="trace id (default azure-2017; google-2011 fits are written by `tracelab analyze`)",
    )
    parser.add_argument(
        "--vmtable",
        type=Path,
        default=None,
        metavar="FILE",
        help="fit this V1 vmtable CSV(.gz) instead of the lake",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument(
        "--n-boot", type=int, default=200, help="bootstrap replicates (default 200)"
    )
    parser.add_argument(
        "--zero-event-probability",
        type=float,
        default=0.5,
        help="a zero-event MLE becomes the value at which no event has this probability (default 0.5)",
    )
    parser.add_argument(
        "--alpha", type=float, default=None, help="fix alpha instead of estimating it"
    )
    parser.add_argument(
        "--shutdown-min-vms",
        type=int,
        default=3,
        help="VMs ending together that mark a shutdown (default 3, seed 004)",
    )


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.trace != TRACE:
        print(
            f"tracelab fit: nothing to fit for {args.trace}; its Gamma fits come from `tracelab analyze`"
        )
        return 0
    path = fit_azure_flow(
        data_dir=settings.data_dir,
        vmtable_csv=args.vmtable,
        seed=args.seed,
        n_boot=args.n_boot,
        zero_event_probability=args.zero_event_probability,
        alpha=args.alpha,
        shutdown_min_vms=args.shutdown_min_vms,
        duckdb_memory_limit=settings.duckdb_memory_limit,
        duckdb_threads=settings.duckdb_threads,
        duckdb_temp_dir=settings.duckdb_temp_dir,
    )
    print(f"tracelab fit: wrote {path}")
    return 0
