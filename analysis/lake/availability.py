"""What the lake of a trace holds, in the words a shortfall needs ("found …").

A researcher often has a few parts of the trace, or one usage window. The stages check what they
need against what is here and, when it is not enough, say both (``analysis/common/shortfall.py``);
the "found" side names the real cause: no rows in a table, files left out for their names, no
task observed long enough.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from tracelab.analysis.common.datapaths import LAKE_MANIFEST, STAGE_PARAMS, derived_table
from tracelab.analysis.common.shortfall import Shortfall
from tracelab.analysis.common.sql import load_sql
from tracelab.analysis.lake.derive import (
    DeriveParams,
    referenced_names,
    table_dependencies,
    tables_needed,
)
from tracelab.analysis.lake.ingest import MANIFEST_NAME
from tracelab.analysis.lake.provenance import manifest_view, read_ingest_note
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.analysis.traces import google2011, trace_spec

GOOGLE = google2011.ID
#: T_i at or above this many usage windows makes a task long (derive's default)
LONG_TASK_WINDOWS = DeriveParams().long_task_windows
LONG_TASK = f"≥ {LONG_TASK_WINDOWS} usage windows"
_KEPT = ("ok", "skipped-unchanged")


@dataclass(frozen=True)
class TableRows:
    """One lake table: rows it holds, the files they came from, files that failed or were left out."""

    rows: int
    files: int
    failed: tuple[str, ...]
    ignored: tuple[str, ...]


def table_rows(lake_trace_dir: Path, table: str) -> TableRows:
    """What the manifest and the last ingest's note say about ``table``."""
    manifest = manifest_view(lake_trace_dir).filter(pl.col("table") == table)
    kept = manifest.filter(pl.col("status").is_in(_KEPT))
    failed = manifest.filter(pl.col("status") == "error")["path"].to_list()
    note = read_ingest_note(lake_trace_dir).get("ignored", [])
    ignored = [
        str(e["path"])
        for e in (note if isinstance(note, list) else [])
        if isinstance(e, dict) and str(e.get("path", "")).split("/")[0] == table
    ]
    rows, files = int(kept["rows_written"].sum()), kept.height
    if not files:
        # a lake written without a manifest (by hand, or an older tool): count its files' rows
        parts = sorted((lake_trace_dir / table).glob("*.parquet"))
        rows, files = sum(pq.read_metadata(p).num_rows for p in parts), len(parts)
    return TableRows(rows=rows, files=files, failed=tuple(failed), ignored=tuple(ignored))


def table_found(lake_trace_dir: Path, table: str) -> str:
    """``task_usage: 0 rows ingested, 1 file skipped for its name: task_usage/x.csv`` and the like."""
    t = table_rows(lake_trace_dir, table)
    if t.rows:
        return f"{table}: {t.rows:,} rows from {_files(t.files)}"
    parts = [f"{table}: 0 rows ingested"]
    if t.ignored:
        its = "its" if len(t.ignored) == 1 else "their"
        parts.append(f"{_files(len(t.ignored))} skipped for {its} name: {_listed(t.ignored)}")
    if t.failed:
        parts.append(f"{_files(len(t.failed))} failed to ingest: {_listed(t.failed)}")
    if not (t.ignored or t.failed or t.files):
        layout = trace_spec(lake_trace_dir.name).raw_layout
        parts.append(f"no {layout.replace('<table>', table)} file was given")
    return ", ".join(parts)


def lake_dir(data_dir: Path, trace: str) -> Path:
    """``DATA/lake/<trace>``: the folder of the trace's manifest and tables."""
    return LAKE_MANIFEST.path(data_dir, trace).parent


def _files(n: int) -> str:
    return f"{n:,} file" + ("" if n == 1 else "s")


def _listed(paths: tuple[str, ...], limit: int = 3) -> str:
    more = len(paths) - limit
    return ", ".join(paths[:limit]) + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class LongTasks:
    """The tasks of ``fct_task_usage_stats``: how many are long, and the longest one's windows."""

    n_long: int
    n_tasks: int
    max_windows: int


def long_tasks(data_dir: Path, trace: str = GOOGLE) -> LongTasks:
    """Counts from the derived per-task usage table (zeros when it is absent)."""
    path = derived_table("fct_task_usage_stats").path(data_dir, trace)
    if not path.is_file():
        return LongTasks(0, 0, 0)
    row = (
        pl.scan_parquet(path)
        .select(
            pl.col("is_long").sum().alias("n_long"),
            pl.len().alias("n_tasks"),
            pl.col("n_windows").max().alias("max_windows"),
        )
        .collect()
        .row(0, named=True)
    )
    return LongTasks(int(row["n_long"] or 0), int(row["n_tasks"]), int(row["max_windows"] or 0))


def long_tasks_found(data_dir: Path, trace: str = GOOGLE) -> str:
    """``0 (task_usage: 10,000 rows from 1 file; the longest of the 2,680 tasks kept for the
    statistics has 1 window)`` and the like (tasks that failed, or never used CPU, are not kept:
    ``queries/fct_task_usage_stats.sql``)."""
    counts = long_tasks(data_dir, trace)
    usage = table_found(lake_dir(data_dir, trace), "task_usage")
    if counts.n_tasks == 0:
        return f"{counts.n_long} ({usage})"
    windows = "window" if counts.max_windows == 1 else "windows"
    return (
        f"{counts.n_long:,} ({usage}; the longest of the {counts.n_tasks:,} tasks kept for the "
        f"statistics has {counts.max_windows:,} {windows})"
    )


def long_task_shortfall(stage: str, data_dir: Path, minimum: int = 1) -> Shortfall | None:
    """The shortfall of a stage that needs ``minimum`` long tasks of google-2011, or None."""
    if long_tasks(data_dir).n_long >= minimum:
        return None
    tasks = "long task" if minimum == 1 else "long tasks"
    return Shortfall(stage, f"≥ {minimum} {tasks} ({LONG_TASK} each)", long_tasks_found(data_dir))


def trace_requests_shortfall(stage: str, data_dir: Path, trace: str = GOOGLE) -> Shortfall | None:
    """Trace instances need tasks' CPU and memory requests and the machines' capacities."""
    lake = lake_dir(data_dir, trace)
    missing = [t for t in ("task_events", "machine_events") if table_rows(lake, t).rows == 0]
    if not missing:
        return None
    return Shortfall(
        stage,
        "task_events (CPU and memory requests) and machine_events (capacities) rows",
        "; ".join(table_found(lake, t) for t in missing),
    )


def export_needs(data_dir: Path, trace: str, params: Any) -> Shortfall | None:
    """The export gathers the stages' fitted parameters: it needs at least one."""
    for path in data_dir.glob(STAGE_PARAMS.relative()):
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("parameters"):
                return None
        except (OSError, ValueError, AttributeError):
            return None  # an unreadable params file: the export names it
    return Shortfall(
        "export",
        "≥ 1 fitted parameter (from analyze or fit)",
        "none: every fitting stage lacked data (see their pages)",
    )


def lake_tables_behind(table: str, trace: str = GOOGLE) -> tuple[str, ...]:
    """The lake tables a derived table is computed from (through the derived tables it reads)."""
    deps = table_dependencies(trace)
    lake = tuple(trace_tables(trace))
    return tuple(
        sorted(
            {
                t
                for name in tables_needed([table], deps)
                for t in referenced_names(load_sql(name), lake)
            }
        )
    )


def derived_shortfall(data_dir: Path, trace: str, table: str, what: str) -> Shortfall | None:
    """``what`` (a page) draws the derived ``table``: the shortfall when it has no rows or one of
    the lake tables it is computed from is empty, naming what those hold."""
    path = derived_table(table).path(data_dir, trace)
    if not path.is_file():
        return None
    sources = lake_tables_behind(table, trace)
    lake = lake_dir(data_dir, trace)
    # a table computed from an empty one has rows of zeros (usage with no task_usage): not data;
    # without a manifest nothing is known of the lake, and only the table's own rows count
    known = (lake / MANIFEST_NAME).is_file()
    empty = [t for t in sources if known and table_rows(lake, t).rows == 0]
    rows = pl.scan_parquet(path).select(pl.len()).collect().item()
    if rows and not empty:
        return None
    found = "; ".join(table_found(lake, t) for t in (empty or sources))
    needs = f"rows in {', '.join(sources)} (for {table})"
    return Shortfall(what, needs, found if rows else f"{found} (0 rows in {table})")
