"""`tracelab ingest`: raw CSV(.gz) part files → typed Parquet lake, lossless, atomic, incremental.

The run itself is :func:`analysis.lake.ingest_run.ingest_lake`, a plain function; this module
gives it where its conversions run (two threads, since Polars releases the GIL, or a Dask cluster
with ``--workers`` / ``--dask-address``), a rich progress bar over raw bytes, and prints the
summary. No Prefect server is involved: ``tracelab run`` and ``tracelab schedule`` call it from
their own flow.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table as RichTable

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.analysis.lake.ingest import discover_raw_files
from tracelab.analysis.lake.ingest_manifest import manifest_rows, read_manifest
from tracelab.analysis.lake.ingest_run import (
    IngestOptions,
    IngestSummary,
    ingest_lake,
    kinds_in_lake,
)
from tracelab.analysis.lake.ingest_stream import CONVERSION_WORKERS, reuse_freed_memory
from tracelab.analysis.lake.provenance import check_not_mixing, drop_trace_data, file_kinds
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.flows.registry import TRACES
from tracelab.flows.scaleout import add_scaleout_arguments, runner_for, settings_with_scaleout
from tracelab.flows.settings import Settings

__all__ = ["IngestOptions", "IngestSummary", "run_ingest"]


@contextmanager
def _progress(show: bool) -> Iterator[Progress]:
    progress = Progress(
        TextColumn("[bold]ingest[/bold] raw files"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not show,
    )
    with progress:
        yield progress


def run_ingest(
    trace: str,
    raw_dir: Path,
    lake_dir: Path,
    options: IngestOptions | None = None,
    *,
    settings: Settings | None = None,
    show_progress: bool = False,
) -> IngestSummary:
    """Ingest ``raw_dir`` into ``lake_dir/<trace>``, on the settings' Dask cluster when they name
    one, else on this machine's threads."""
    with runner_for(settings, CONVERSION_WORKERS) as runner, _progress(show_progress) as bar:
        task = bar.add_task("raw files", total=None)
        return ingest_lake(
            trace,
            raw_dir,
            lake_dir,
            options or IngestOptions(),
            runner,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
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
    summary = run_ingest(
        trace,
        raw_dir,
        settings.lake_dir,
        IngestOptions(chunk_mb=chunk_mb, batch_mb=batch_mb, keep_vanished=keep_vanished),
        settings=settings,
        show_progress=show_progress and sys.stderr.isatty(),
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
