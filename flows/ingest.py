"""`tracelab ingest`: raw CSV(.gz) part files → typed Parquet lake, lossless, atomic, incremental.

A Prefect flow: a checksum pass over only the files whose checksum decides what happens to them
(possibly unchanged since the last run, or the same size as another file), then conversion tasks
on a two-worker thread pool (Polars releases the GIL, so both cores convert). Small files share a
task, because each Prefect task costs the API server CPU time that the conversion needs; a task
checksums its own files when the plan did not need their checksums. The flow's main thread
records finished files in the manifest (atomic rewrite, at most about once a second and at the
end) and advances a rich progress bar over raw bytes. The work itself is in
:mod:`analysis.lake.ingest`, :mod:`analysis.lake.ingest_manifest` and :mod:`analysis.lake.ingest_run`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table as RichTable

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.analysis.lake.ingest import (
    RawDiscovery,
    RawFile,
    discover_raw_files,
    file_checksum,
    lake_paths,
    remove_leftover_temp_files,
    remove_outputs,
)
from tracelab.analysis.lake.ingest_identity import ContentLedger, Settlement
from tracelab.analysis.lake.ingest_manifest import (
    FilePlan,
    ManifestRow,
    conversion_batches,
    files_to_checksum_first,
    manifest_rows,
    plan_files,
    read_manifest,
    vanished_rows,
)
from tracelab.analysis.lake.ingest_run import (
    Converted,
    IngestSummary,
    ManifestLedger,
    converted_plan,
    converted_row,
    failed_conversion,
    kinds_in_lake,
    not_converted_row,
    orphan_outputs,
    other_root_error,
    reconciliation_problems,
    remove_lake_outputs,
    sha256_backfilled,
    with_sources,
)
from tracelab.analysis.lake.ingest_stream import CONVERSION_WORKERS, reuse_freed_memory
from tracelab.analysis.lake.provenance import (
    Kind,
    check_not_mixing,
    drop_trace_data,
    file_kinds,
    write_ingest_note,
)
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.flows.observe import flow_run_name
from tracelab.flows.registry import TRACES
from tracelab.flows.scaleout import add_scaleout_arguments, dask_task_runner, settings_with_scaleout
from tracelab.flows.settings import Settings
from tracelab.flows.temp_server import wait_until_ready


@task(name="discover-raw-files", cache_policy=NO_CACHE)
def discover(trace: str, raw_dir: Path) -> RawDiscovery:
    """Raw files of every table (each table's registry glob) and folders that are not tables."""
    return discover_raw_files(trace, raw_dir)


@task(name="remove-leftover-temp-files", cache_policy=NO_CACHE)
def clean_temp_files(lake_trace_dir: Path) -> int:
    """Delete ``*.tmp`` outputs of a killed earlier run; returns how many were removed."""
    return len(remove_leftover_temp_files(lake_trace_dir))


@task(name="checksum-raw-files", cache_policy=NO_CACHE)
def checksums_of(files: tuple[RawFile, ...], workers: int) -> dict[str, str]:
    """Checksum of each raw file's stored bytes, keyed by its path relative to the raw root."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        digests = pool.map(lambda f: file_checksum(f.path), files)
        return {f.rel: d for f, d in zip(files, digests, strict=True)}


@task(name="convert-raw-files", cache_policy=NO_CACHE, task_run_name="convert {label}")
def convert(
    trace: str,
    batch: tuple[FilePlan, ...],
    lake_trace_dir: Path,
    chunk_mb: int,
    wrong_format_share: float,
    label: str,
) -> list[Converted]:
    """Convert a batch of raw files to typed Parquet and rejects (atomic rename per file).

    Files that need a checksum are hashed here, so the hashing overlaps the other worker's
    conversion; a failure of one file is that file's error and the rest of the batch goes on.
    """
    return [
        converted_plan(
            trace,
            plan,
            lake_trace_dir,
            chunk_bytes=chunk_mb << 20,
            wrong_format_share=wrong_format_share,
        )
        for plan in batch
    ]


def _batch_label(batch: tuple[FilePlan, ...]) -> str:
    first = batch[0].raw.rel
    return first if len(batch) == 1 else f"{first} and {len(batch) - 1} more"


@contextmanager
def _progress(total_bytes: int, show: bool) -> Iterator[tuple[Progress, TaskID]]:
    progress = Progress(
        TextColumn("[bold]ingest[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not show,
    )
    with progress:
        yield progress, progress.add_task("raw files", total=total_bytes)


# both cores: Polars releases the GIL, so two files convert at once
_WORKERS = CONVERSION_WORKERS
_RUNNER: ThreadPoolTaskRunner[Any] = ThreadPoolTaskRunner(max_workers=_WORKERS)


#: what the flow's main thread keeps while files finish: the lake folder, the manifest ledger,
#: the content ledger and the run's manifest rows by path
_RunState = tuple[Path, ManifestLedger, ContentLedger, dict[str, ManifestRow]]


def _settle(
    settlement: Settlement,
    extra: list[ManifestRow],
    lake_trace_dir: Path,
    ledger: ManifestLedger,
    rows: dict[str, ManifestRow],
) -> None:
    """Apply a content settlement: outputs first, then the manifest rows in one write.

    Deleting the outputs first keeps a kill harmless: the manifest still names the file and the
    next run settles it again.
    """
    remove_lake_outputs(lake_trace_dir, settlement.remove_outputs)
    recorded = extra + settlement.record
    ledger.record(recorded, settlement.forget)
    rows.update((r.path, r) for r in recorded)


def _convert_all(
    trace: str,
    plans: list[FilePlan],
    state: _RunState,
    sizes: tuple[int, int, float],
    show_progress: bool,
    kinds: dict[str, Kind],
) -> None:
    """Convert every planned file in batches (threads or Dask), settling each file as it ends.

    ``sizes`` = (chunk MB, batch MB, wrong-format share), as :func:`ingest_flow` takes them;
    ``kinds``: each file's kind (real or synthetic) by its path.
    """
    lake_trace_dir, ledger, identity, rows = state
    chunk_mb, batch_mb, wrong_format_share = sizes
    logger = get_run_logger()
    to_convert = [p for p in plans if p.action == "convert"]
    with _progress(sum(p.raw.size_bytes for p in to_convert), show_progress) as (progress, bar):
        futures = []
        pending: dict[object, tuple[FilePlan, ...]] = {}
        for batch in conversion_batches(plans, batch_mb << 20, _WORKERS):
            future = convert.submit(
                trace, batch, lake_trace_dir, chunk_mb, wrong_format_share, _batch_label(batch)
            )
            futures.append(future)
            pending[future.task_run_id] = batch
        for future in as_completed(futures):
            batch = pending[future.task_run_id]
            try:
                done: list[Converted] = future.result()
            except Exception as exc:  # e.g. a lost Dask worker: every file of the batch
                done = [Converted(failed_conversion(exc), plan.checksum) for plan in batch]
            for plan, d in zip(batch, done, strict=True):
                row = with_sources([converted_row(plan, d)], kinds)[0]
                _settle(identity.settle(row), [], lake_trace_dir, ledger, rows)
                if d.conversion.status == "error":
                    logger.error("%s: %s", plan.raw.rel, d.conversion.error)
            progress.advance(bar, sum(plan.raw.size_bytes for plan in batch))


def _not_converted(
    plans: list[FilePlan], lake_trace_dir: Path, kinds: dict[str, Kind]
) -> dict[str, ManifestRow]:
    """Rows of the files this run does not convert (unchanged, byte-for-byte duplicates), by
    path; a duplicate's outputs are deleted."""
    now = datetime.now(UTC)
    rows: list[ManifestRow] = []
    for plan in plans:
        if plan.action != "convert":
            if plan.action == "duplicate":
                remove_outputs(lake_paths(lake_trace_dir, plan.raw.table, plan.raw.rel))
            rows.append(not_converted_row(plan, now))
    return {r.path: r for r in with_sources(sha256_backfilled(rows, plans), kinds)}


@flow(
    name="tracelab-ingest",
    flow_run_name=flow_run_name("ingest"),
    task_runner=_RUNNER,  # type: ignore[arg-type]
    validate_parameters=False,
)
def ingest_flow(
    trace: str,
    raw_dir: Path,
    lake_dir: Path,
    chunk_mb: int = 32,
    wrong_format_share: float = 0.5,
    show_progress: bool = False,
    manifest_write_s: float = 1.0,
    batch_mb: int = 32,
    keep_vanished: bool = False,
) -> IngestSummary:
    """Ingest every raw file of ``trace`` under ``raw_dir`` into ``lake_dir/<trace>``.

    ``chunk_mb`` bounds the memory of the line-validating path; ``wrong_format_share`` is the
    share of wrong-field-count lines from which a file is declared the wrong format;
    ``manifest_write_s`` is the least time between two manifest rewrites while files finish (a
    killed run re-converts the files that finished since the last rewrite; 0 rewrites after
    every file); files smaller than ``batch_mb`` stored MB share a conversion task (see
    :func:`analysis.lake.ingest_manifest.conversion_batches`). The lake mirrors ``raw_dir``: the
    rows of files ingested before whose raw file is gone are removed, or kept with
    ``keep_vanished``; the run ends by reconciling the lake's files with the manifest.
    """
    logger = get_run_logger()
    started = time.perf_counter()
    if chunk_mb < 1:
        # a zero-byte read is end of file: the validated path would read no line at all
        raise TracelabError(f"--chunk-mb must be at least 1 (got {chunk_mb}); use the default 32")
    trace_tables(trace)  # unknown trace id: a clear error before anything is touched
    lake_trace_dir = lake_dir / trace
    removed = clean_temp_files(lake_trace_dir)
    if removed:
        logger.warning("removed %d temp file(s) left by an interrupted run", removed)
    found = discover(trace, raw_dir)
    for problem in found.problems:
        (logger.error if problem.is_error else logger.warning)(
            "%s: %s", problem.path, problem.reason
        )
    manifest = read_manifest(lake_trace_dir)
    previous = manifest_rows(manifest)
    kinds = file_kinds({f.rel: f.path for f in found.files}, raw_dir)
    # before anything is written: a lake holds the rows of one kind and one raw root only
    check_not_mixing(lake_trace_dir, kinds_in_lake(previous.values(), kinds), kinds)
    other_root = other_root_error(
        lake_trace_dir, raw_dir, holds_rows=any(r.rows_read for r in previous.values())
    )
    if other_root:
        raise TracelabError(other_root)
    tables = trace_tables(trace)
    orphans = orphan_outputs(lake_trace_dir, tables, previous.values())
    for path in orphans:
        path.unlink()
    if orphans:
        logger.warning("removed %d lake file(s) that no raw file owns", len(orphans))
    ignored = [(p.path, p.reason) for p in found.problems if not p.is_error]
    write_ingest_note(lake_trace_dir, raw_dir, ignored)
    first = files_to_checksum_first(found.files, previous, lake_trace_dir)
    checksums = checksums_of(first, 2) if first else {}
    plans = plan_files(found.files, checksums, previous, lake_trace_dir)
    rows = _not_converted(plans, lake_trace_dir, kinds)
    ledger = ManifestLedger(lake_trace_dir, manifest, manifest_write_s)
    # a copy (same content) is a duplicate, never counted twice; a vanished file's rows go,
    # unless kept on request and no present file holds the same content
    identity = ContentLedger(
        [p.previous for p in plans if p.action == "skip" and p.previous is not None],
        vanished_rows(found.files, previous),
        keep_vanished=keep_vanished,
    )
    _settle(identity.start, list(rows.values()), lake_trace_dir, ledger, rows)
    try:
        _convert_all(
            trace,
            plans,
            (lake_trace_dir, ledger, identity, rows),
            (chunk_mb, batch_mb, wrong_format_share),
            show_progress,
            kinds,
        )
    finally:
        # also when interrupted: what finished stays recorded
        ledger.flush()
    order = {p.raw.rel: i for i, p in enumerate(plans)}
    summary_rows = sorted(rows.values(), key=lambda r: order[r.path])
    return IngestSummary(
        trace=trace,
        raw_dir=raw_dir,
        lake_dir=lake_trace_dir,
        rows=tuple(summary_rows),
        discovery_errors=tuple((p.path, p.reason) for p in found.problems if p.is_error),
        ignored=tuple((p.path, p.reason) for p in found.problems if not p.is_error),
        seconds=time.perf_counter() - started,
        removed=tuple(identity.removed),
        kept=tuple(identity.kept),
        unreconciled=tuple(reconciliation_problems(lake_trace_dir, tables, ledger.rows())),
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace", choices=TRACES, default=TRACES[0], help="trace to ingest (default: %(default)s)"
    )
    parser.add_argument(
        "--raw",
        type=Path,
        default=None,
        help="raw root: <table>/part-*.csv[.gz] (default: DATA/raw/<trace>)",
    )
    parser.add_argument(
        "--chunk-mb",
        type=number_arg(int, 1, 4096),
        default=32,
        help="decompressed MB read at once (at most 24 are typed at a time; bounds the memory)",
    )
    parser.add_argument(
        "--batch-mb",
        type=number_arg(int, 0, 1_000_000),
        default=32,
        help="files smaller than this many stored MB share a conversion task, since each Prefect "
        "task costs bookkeeping CPU (default 32; 0: one task per file)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (logs and summary only)"
    )
    add_replace_argument(parser)
    add_scaleout_arguments(parser)


def add_replace_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-vanished",
        action="store_true",
        help="keep the lake rows of raw files ingested before and since deleted (default: the "
        "lake mirrors the raw folder and their rows are removed); the summary names each file",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="first delete this trace's lake, derived tables, results and params export (and "
        "its generated sample in DATA/raw): needed to put real files where synthetic ones were, "
        "or the reverse, since one lake never mixes the two",
    )


def prepare_source(settings: Settings, trace: str, raw_dir: Path, *, replace: bool) -> None:
    """Before ingesting ``raw_dir``: ``replace`` drops the trace's data; then a raw folder of the
    other kind than the lake's (real / synthetic) is refused in one line naming the fix."""
    if replace:
        removed = drop_trace_data(settings.data_dir, trace, raw_dir)
        shown = ", ".join(str(p.relative_to(settings.data_dir)) for p in removed) or "nothing"
        print(f"--replace: removed {shown}", flush=True)
    if not raw_dir.is_dir():
        return  # nothing to ingest: the run generates the default sample, or says so
    found = discover_raw_files(trace, raw_dir)
    kinds = file_kinds({f.rel: f.path for f in found.files}, raw_dir)
    lake = settings.lake_dir / trace
    check_not_mixing(lake, kinds_in_lake(manifest_rows(read_manifest(lake)).values(), kinds), kinds)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    raw_dir = args.raw if args.raw is not None else settings.raw_dir / args.trace
    try:
        trace_tables(args.trace)
    except ValueError as exc:
        raise TracelabError(str(exc)) from None
    if not raw_dir.is_dir():
        raise FileNotFoundError(
            f"raw folder {raw_dir} does not exist; pass --raw DIR (the published root with "
            "<table>/part-*.csv.gz) or run `tracelab generate --out` into it"
        )
    prepare_source(settings, args.trace, raw_dir, replace=args.replace)
    reuse_freed_memory()  # before the conversion threads start
    settings = settings_with_scaleout(args, settings)
    return ingest_trace(
        settings,
        args.trace,
        raw_dir,
        chunk_mb=args.chunk_mb,
        batch_mb=args.batch_mb,
        show_progress=not args.no_progress,
        keep_vanished=args.keep_vanished,
    )


def ingest_trace(
    settings: Settings,
    trace: str,
    raw_dir: Path,
    *,
    chunk_mb: int = 32,
    batch_mb: int = 32,
    show_progress: bool = True,
    keep_vanished: bool = False,
) -> int:
    """Ingest ``raw_dir`` (on Dask when the settings say so), print the summary; 1 if any error."""
    runner = dask_task_runner(settings)
    wait_until_ready()  # the temporary server the CLI started early, if any
    run = ingest_flow if runner is None else ingest_flow.with_options(task_runner=runner)
    summary = run(
        trace=trace,
        raw_dir=raw_dir,
        lake_dir=settings.lake_dir,
        chunk_mb=chunk_mb,
        batch_mb=batch_mb,
        show_progress=show_progress and sys.stderr.isatty(),
        keep_vanished=keep_vanished,
    )
    # a wide console when piped, so table rows and reasons stay on one line in logs
    print_summary(summary, Console(width=None if sys.stdout.isatty() else 160))
    return 1 if summary.failed else 0


def print_summary(summary: IngestSummary, console: Console) -> None:
    """Per-table totals, then every error with its file, reason and what to do."""
    console.print(f"ingest {summary.trace}: {summary.raw_dir} -> {summary.lake_dir}")
    grid = RichTable(box=None, header_style="bold")
    grid.add_column("table", no_wrap=True)
    for name in ("files", "ok", "skipped", "dup", "error", "read", "written", "rejected"):
        grid.add_column(name, justify="right", no_wrap=True)
    for t in summary.tables():
        grid.add_row(
            t.table,
            str(t.files),
            str(t.converted),
            str(t.skipped),
            str(t.duplicates),
            str(t.errors),
            f"{t.rows_read:,}",
            f"{t.rows_written:,}",
            f"{t.rows_rejected:,}",
        )
    console.print(grid)
    for path, reason in summary.ignored:
        console.print(f"[yellow]note[/yellow] {path}: {reason}")
    for row in summary.rows:
        if row.status == "duplicate":
            console.print(f"[yellow]duplicate[/yellow] {row.path}: {row.error}")
    for row in summary.removed:
        console.print(
            f"[yellow]removed[/yellow] {row.path}: raw file gone, its {row.rows_read:,} rows "
            "left the lake"
        )
    for row in summary.kept:
        console.print(
            f"[yellow]kept[/yellow] {row.path}: raw file gone, its {row.rows_read:,} rows stay "
            "in the lake (--keep-vanished)"
        )
    for path, reason in summary.discovery_errors:
        console.print(f"[red]error[/red] {path}: {reason}")
    for row in summary.rows:
        if row.status == "error":
            console.print(f"[red]error[/red] {row.table}/{Path(row.path).name}: {row.error}")
    for problem in summary.unreconciled:
        console.print(f"[red]error[/red] lake does not reconcile: {problem}")
    rejected = sum(r.rows_rejected for r in summary.rows if r.status == "ok")
    if rejected:
        console.print(
            f"{rejected:,} rejected line(s) with reasons in {summary.lake_dir / '_rejects'}"
        )
    console.print(
        f"done in {summary.seconds:.2f} s; manifest {summary.lake_dir / '_manifest.parquet'}"
    )
