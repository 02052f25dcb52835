"""`tracelab derive` (issue #3): the SQL files in ``queries/`` -> ``DATA/derived/<trace>/*.parquet``.

Thin Prefect flow over :mod:`analysis.derive`: each table is one task that opens a bounded DuckDB
connection (memory limit and spill directory from the settings), exposes the lake tables and the
tables derived before it as views, and streams its query into Parquet. The invariant checks run
last; the flow fails with their offending rows shown.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE
from rich.console import Console
from rich.table import Table

from analysis import derive
from analysis.errors import TracelabError
from analysis.sql import QUERIES_DIR, load_sql
from flows.settings import Settings, duckdb_connection

_DEFAULTS = derive.DeriveParams()


@dataclass(frozen=True)
class DeriveRun:
    """What one derive run built and what its checks found."""

    trace: str
    tables: tuple[derive.TableResult, ...]
    checks: tuple[derive.CheckResult, ...]


@task(cache_policy=NONE)
def derive_table(
    settings: Settings, trace: str, name: str, reads: tuple[str, ...], params: derive.DeriveParams
) -> derive.TableResult:
    """Materialise ``queries/<name>.sql`` over the lake and the derived tables it ``reads``."""
    derived_dir = settings.derived_dir / trace
    with duckdb_connection(settings) as con:
        derive.create_input_views(con, trace, settings.lake_dir / trace)
        derive.expose_derived(con, reads, derived_dir)
        return derive.materialise_table(con, name, params.as_sql_params(), derived_dir)


@task(cache_policy=NONE)
def run_checks(
    settings: Settings, trace: str, tables: tuple[str, ...], params: derive.DeriveParams
) -> tuple[derive.CheckResult, ...]:
    """Run every ``checks/assert_*`` query of the trace that reads only the tables built."""
    built = set(tables)
    every = derive.derived_table_names(trace)
    results = []
    with duckdb_connection(settings) as con:
        derive.create_input_views(con, trace, settings.lake_dir / trace)
        derive.expose_derived(con, tables, settings.derived_dir / trace)
        for check in derive.check_names(trace):
            reads = derive.referenced_names(load_sql(check), every)
            if set(reads) <= built:
                results.append(derive.check_violations(con, check, params.as_sql_params()))
    return tuple(results)


@flow(name="derive", log_prints=False)
def derive_flow(
    settings: Settings,
    trace: str = "google-2011",
    tables: tuple[str, ...] = (),
    check_invariants: bool = True,
    show_progress: bool = False,
    window_start_us: int = _DEFAULTS.window_start_us,
    time_after_window_us: int = _DEFAULTS.time_after_window_us,
    usage_window_us: int = _DEFAULTS.usage_window_us,
    window_length_us: int = _DEFAULTS.window_length_us,
    long_task_windows: int = _DEFAULTS.long_task_windows,
    production_priority: int = _DEFAULTS.production_priority,
    change_threshold: float = _DEFAULTS.change_threshold,
    grid_s: int = _DEFAULTS.grid_s,
    censored_s: int = _DEFAULTS.censored_s,
    shutdown_min_vms: int = _DEFAULTS.shutdown_min_vms,
) -> DeriveRun:
    """Derive ``tables`` (default: all of the trace's) and what they read, in dependency order."""
    logger = get_run_logger()
    console = Console(stderr=True) if show_progress else None
    params = derive.DeriveParams(
        window_start_us=window_start_us,
        time_after_window_us=time_after_window_us,
        usage_window_us=usage_window_us,
        window_length_us=window_length_us,
        long_task_windows=long_task_windows,
        production_priority=production_priority,
        change_threshold=change_threshold,
        grid_s=grid_s,
        censored_s=censored_s,
        shutdown_min_vms=shutdown_min_vms,
    )
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


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="google-2011", help="trace id (google-2011, azure-2017)")
    parser.add_argument(
        "--table",
        dest="tables",
        action="append",
        default=None,
        metavar="NAME",
        help="derive only this table and what it reads (repeatable; default: every table)",
    )
    parser.add_argument(
        "--no-checks",
        action="store_true",
        help="skip the invariant checks in queries/checks/ (they run by default)",
    )
    parser.add_argument(
        "--long-task-windows",
        type=int,
        default=_DEFAULTS.long_task_windows,
        help="usage windows that make a task long (default: %(default)s = 2 hours)",
    )
    parser.add_argument(
        "--production-priority",
        type=int,
        default=_DEFAULTS.production_priority,
        help="lowest priority of a production task (default: %(default)s)",
    )


def summary_table(run: DeriveRun) -> Table:
    """The per-table summary printed at the end: name, rows, seconds."""
    out = Table(title=f"derived tables ({run.trace})")
    out.add_column("table")
    out.add_column("rows", justify="right")
    out.add_column("seconds", justify="right")
    for r in run.tables:
        out.add_row(r.name, f"{r.rows:,}", f"{r.seconds:.2f}")
    return out


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    # fail before Prefect starts: a missing lake is a one-line reason, not a failed flow run
    derive.require_lake(args.trace, settings.lake_dir / args.trace)
    run = derive_flow(
        settings=settings,
        trace=args.trace,
        tables=tuple(args.tables or ()),
        check_invariants=not args.no_checks,
        show_progress=True,
        long_task_windows=args.long_task_windows,
        production_priority=args.production_priority,
    )
    console = Console()
    console.print(summary_table(run))
    if run.checks:
        console.print(f"{len(run.checks)} invariant checks hold", highlight=False)
    console.print(f"wrote {settings.derived_dir / run.trace}", highlight=False)
    return 0
