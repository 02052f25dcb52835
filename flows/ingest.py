"""`tracelab ingest`: raw CSV(.gz) part files → typed Parquet lake, lossless, atomic, incremental.

The run itself is :func:`analysis.lake.ingest_run.ingest_lake`, a plain function; this module
gives it where its conversions run (two threads, since Polars releases the GIL, or a Dask cluster
with ``--workers`` / ``--dask-address``), a rich progress bar over raw bytes, and prints the
summary. No Prefect server is involved: ``tracelab run`` and ``tracelab schedule`` call it from
their own flow.
"""

from __future__ import annotations

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

from tracelab.analysis.lake.ingest import discover_raw_files
from tracelab.analysis.lake.ingest_manifest import manifest_rows, read_manifest
from tracelab.analysis.lake.ingest_run import (
    IngestOptions,
    IngestSummary,
    ingest_lake,
    kinds_in_lake,
)
from tracelab.analysis.lake.ingest_stream import CONVERSION_WORKERS
from tracelab.analysis.lake.provenance import check_not_mixing, drop_trace_data, file_kinds
from tracelab.flows.scaleout import runner_for
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
