"""`tracelab derive`: the SQL files in ``queries/`` -> ``DATA/derived/<trace>/*.parquet``.

Plain orchestration over :mod:`analysis.lake.derive`, with no Prefect server behind it: each
table opens a bounded DuckDB connection (memory limit and spill directory from the settings),
exposes the lake tables and the tables derived before it as views, and streams its query into
Parquet. The per-task tables can be computed in job_id-hash partitions, on threads here or on a
Dask cluster. The invariant checks run last; the run fails with their offending rows shown.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.sql import QUERIES_DIR, load_sql
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.lake import derive
from tracelab.analysis.lake.options import DeriveOptions
from tracelab.analysis.traces import TRACE_IDS, azure2017, google2011
from tracelab.flows.scaleout import runner_for
from tracelab.flows.settings import Settings, duckdb_connection

_DEFAULTS = derive.DeriveParams()
_LOG = logging.getLogger("tracelab.derive")
#: partitions computed at once on this machine (each opens its own bounded DuckDB connection)
_PARTITION_THREADS = 2


@dataclass(frozen=True)
class DeriveRun:
    """What one derive run built and what its checks found."""

    trace: str
    tables: tuple[derive.TableResult, ...]
    checks: tuple[derive.CheckResult, ...]


def derive_table(
    settings: Settings, trace: str, name: str, reads: tuple[str, ...], params: derive.DeriveParams
) -> derive.TableResult:
    """Materialise ``queries/<name>.sql`` over the lake and the derived tables it ``reads``."""
    derived_dir = settings.derived_dir / trace
    with duckdb_connection(settings) as con:
        derive.create_input_views(
            con, trace, settings.lake_dir / trace, params=params.as_sql_params()
        )
        derive.expose_derived(con, reads, derived_dir)
        return derive.materialise_table(con, name, params.as_sql_params(), derived_dir)


def derive_partition(
    settings: Settings,
    trace: str,
    n_partitions: int,
    names: tuple[str, ...],
    params: derive.DeriveParams,
    partition: int,
) -> tuple[Path, ...]:
    """The per-task tables ``names`` for one job_id-hash partition, each written to its own file.

    Runs wherever the runner puts it (a Dask worker with ``--workers``/``--dask-address``).
    """
    out = derive.partition_dir(settings.derived_dir / trace, n_partitions) / f"part-{partition:05d}"
    with duckdb_connection(settings) as con:
        derive.create_partition_input_views(
            con, trace, settings.lake_dir / trace, partition, n_partitions, params.as_sql_params()
        )
        return tuple(
            derive.materialise_table(con, name, params.as_sql_params(), out).path for name in names
        )


def merge_table(
    settings: Settings, trace: str, name: str, parts: tuple[Path, ...]
) -> derive.TableResult:
    """One per-task table from its partitions (stable order: job_id, task_index)."""
    with duckdb_connection(settings) as con:
        return derive.merge_partitions(con, name, parts, settings.derived_dir / trace)


def run_checks(
    settings: Settings, trace: str, tables: tuple[str, ...], params: derive.DeriveParams
) -> tuple[derive.CheckResult, ...]:
    """Run every ``checks/assert_*`` query of the trace that reads only the tables built."""
    built = set(tables)
    every = derive.derived_table_names(trace)
    results = []
    with duckdb_connection(settings) as con:
        derive.create_input_views(
            con, trace, settings.lake_dir / trace, params=params.as_sql_params()
        )
        derive.expose_derived(con, tables, settings.derived_dir / trace)
        for check in derive.check_names(trace):
            reads = derive.referenced_names(load_sql(check), every)
            if set(reads) <= built:
                results.append(derive.check_violations(con, check, params.as_sql_params()))
    return tuple(results)


def run_derive(
    settings: Settings,
    trace: str = TRACE_IDS[0],
    tables: tuple[str, ...] = (),
    check_invariants: bool = True,
    show_progress: bool = False,
    params: derive.DeriveParams = _DEFAULTS,
    partitions: int = 1,
) -> DeriveRun:
    """Derive ``tables`` (default: all of the trace's) and what they read, in dependency order."""
    logger = _LOG
    console = Console(stderr=True) if show_progress else None
    deps = derive.table_dependencies(trace)
    unknown = sorted(set(tables) - set(deps))
    if unknown:
        raise TracelabError(
            f"no such derived table(s) for {trace}: {unknown}; known: {', '.join(sorted(deps))}"
        )
    order = derive.tables_needed(tables or deps, deps)
    if not order:
        raise TracelabError(f"no derived-table queries for {trace} in {QUERIES_DIR}")
    results = []
    per_task = [n for n in derive.PER_TASK_TABLES if n in order] if partitions > 1 else []
    if per_task:
        # per-task tables need no other derived table: compute them per partition (on Dask when
        # the settings name a cluster), then concatenate in partition order
        work = partial(derive_partition, settings, trace, partitions, tuple(per_task), params)
        done: dict[int, tuple[Path, ...]] = {}
        with runner_for(settings, _PARTITION_THREADS) as runner:
            for i, outcome in runner(work, range(partitions)):
                if isinstance(outcome, Exception):
                    raise outcome
                done[i] = outcome
        part_paths = [done[i] for i in range(partitions)]
        for j, name in enumerate(per_task):
            result = merge_table(settings, trace, name, tuple(p[j] for p in part_paths))
            logger.info("%s: %d rows from %d partitions", name, result.rows, partitions)
            results.append(result)
        shutil.rmtree(derive.partition_dir(settings.derived_dir / trace, partitions))
        order = [n for n in order if n not in per_task]
    for i, name in enumerate(order, start=1):
        if console is not None:
            console.print(f"[{i}/{len(order)}] {name} ...", highlight=False)
        result = derive_table(settings, trace, name, tuple(deps[name]), params)
        message = f"{name}: {result.rows:,} rows in {result.seconds:.2f} s"
        logger.info(message)
        if console is not None:
            console.print(f"[{i}/{len(order)}] {message}", highlight=False)
        results.append(result)
    checks: tuple[derive.CheckResult, ...] = ()
    if check_invariants:
        checks = run_checks(settings, trace, tuple(order), params)
        failed = derive.failed_checks_message(checks)
        if failed:
            raise TracelabError(failed)
        logger.info("%d invariant checks hold", len(checks))
    return DeriveRun(trace=trace, tables=tuple(results), checks=checks)


#: the report page to open after a derive (the azure tables are shown on the priors page)
_FIRST_PAGE = {google2011.ID: "google-transitions", azure2017.ID: "azure-priors"}


def summary_table(run: DeriveRun) -> Table:
    """The per-table summary printed at the end: name, rows, seconds."""
    out = Table(title=f"derived tables ({run.trace})")
    out.add_column("table")
    out.add_column("rows", justify="right")
    out.add_column("seconds", justify="right")
    for r in run.tables:
        out.add_row(r.name, f"{r.rows:,}", f"{r.seconds:.2f}")
    return out


def run_stage(settings: Settings, trace: str, params: DeriveOptions) -> StageResult:
    """The registry's entry point: every derived table of ``trace`` and its checks."""
    # a missing lake is a one-line reason before anything runs
    derive.require_lake(trace, settings.lake_dir / trace)
    # workers on other machines need absolute paths
    settings = settings.with_overrides(data_dir=settings.data_dir.resolve())
    on_dask = bool(settings.dask_address) or settings.workers > 0
    partitions = params.partitions or (4 * max(settings.workers, 1) if on_dask else 1)
    started = time.perf_counter()
    run = run_derive(
        settings=settings,
        partitions=partitions,
        trace=trace,
        tables=params.tables,
        check_invariants=params.checks,
        show_progress=True,
        params=params.sql_params(),
    )
    console = Console(stderr=True)
    console.print(summary_table(run))
    if run.checks:
        console.print(f"{len(run.checks)} invariant checks hold", highlight=False)
    return StageResult(
        stage="derive",
        trace=trace,
        outputs=(f"derived/{trace}",),
        headline=(("tables", str(len(run.tables))), ("invariant checks", str(len(run.checks)))),
        seconds=time.perf_counter() - started,
        page=_FIRST_PAGE.get(trace),
    )
