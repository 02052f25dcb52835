"""One ingest run: converting planned files, their manifest rows, the ledger and the summary.

:mod:`flows.ingest` only orchestrates (Prefect tasks, progress, logging); what a planned file
becomes, which manifest row records it and what the run adds up to is decided here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from tracelab.analysis.lake.ingest import (
    REJECTS_DIR,
    Conversion,
    convert_file,
    lake_paths,
    remove_outputs,
)
from tracelab.analysis.lake.ingest_jsonl import convert_jsonl_file
from tracelab.analysis.lake.ingest_manifest import (
    FilePlan,
    ManifestRow,
    manifest_rows,
    manifest_with,
    write_manifest,
)
from tracelab.analysis.lake.provenance import (
    lake_kinds,
    raw_root_key,
    read_ingest_note,
    sha256_of,
)
from tracelab.analysis.lake.schemas import table


@dataclass(frozen=True)
class Converted:
    """One file's result: the conversion and the checksum of the file it read."""

    conversion: Conversion
    checksum: str
    #: hex sha256 of the file as stored, for the provenance of the results ("" if unreadable)
    sha256: str = ""


def failed_conversion(exc: BaseException) -> Conversion:
    """An ``error`` conversion for a failure no converter anticipated (e.g. disk full)."""
    return Conversion(
        status="error",
        method="none",
        rows_read=0,
        rows_written=0,
        rows_rejected=0,
        error=f"unexpected failure: {exc}; fix the cause and run ingest again",
        seconds=0.0,
        started_at=datetime.now(UTC),
    )


def converted_plan(
    trace: str,
    plan: FilePlan,
    lake_trace_dir: Path,
    *,
    chunk_bytes: int,
    wrong_format_share: float,
) -> Converted:
    """Convert one planned file; a failure is that file's ``error``, never an exception.

    The conversion's one read also gives the file's checksum and content digest; a file whose
    plan already has a checksum (it decided something) keeps it.
    """
    try:
        spec, paths = (
            table(trace, plan.raw.table),
            lake_paths(lake_trace_dir, plan.raw.table, plan.raw.rel),
        )
        if spec.format == "jsonl":
            result = convert_jsonl_file(spec, plan.raw, paths, chunk_bytes=chunk_bytes)
        else:
            result = convert_file(
                spec,
                plan.raw,
                paths,
                chunk_bytes=chunk_bytes,
                wrong_format_share=wrong_format_share,
            )
    except Exception as exc:
        # the file's earlier outputs must not outlive the row that says it holds no rows
        remove_outputs(lake_paths(lake_trace_dir, plan.raw.table, plan.raw.rel))
        result = failed_conversion(exc)
    digest = plan.checksum or result.checksum
    return Converted(result, digest, result.sha256)


def _sha256_or_empty(path: Path) -> str:
    # only for rows skipped as unchanged that predate sha256s (a conversion hashes in its read)
    try:
        return sha256_of(path)
    except OSError:
        return ""


def kinds_in_lake(
    previous: Iterable[ManifestRow], incoming: Mapping[str, str]
) -> dict[str, list[str]]:
    """The paths of each kind whose rows the lake holds before this run.

    A row written before kinds were recorded takes the kind of the file now at its path; one
    whose file is gone too is left out (its kind is unknown).
    """
    return lake_kinds(
        (r.path, r.source or incoming.get(r.path, ""))
        for r in previous
        if r.status in ("ok", "skipped-unchanged")
    )


def sha256_backfilled(rows: list[ManifestRow], plans: list[FilePlan]) -> list[ManifestRow]:
    """Skipped rows recorded before sha256s were kept, with their file's sha256 now."""
    paths = {p.raw.rel: p.raw.path for p in plans}
    return [
        replace(r, sha256=_sha256_or_empty(paths[r.path]))
        if r.status == "skipped-unchanged" and not r.sha256 and r.path in paths
        else r
        for r in rows
    ]


def with_sources(rows: list[ManifestRow], kinds: Mapping[str, str]) -> list[ManifestRow]:
    """The rows with the kind of their file (real or synthetic) as their ``source``."""
    return [replace(r, source=kinds.get(r.path, r.source)) for r in rows]


def remove_lake_outputs(lake_trace_dir: Path, keys: list[tuple[str, str]]) -> None:
    """Delete the lake outputs (typed Parquet and rejects) of raw files given as (table, path)."""
    for table_name, rel in keys:
        remove_outputs(lake_paths(lake_trace_dir, table_name, rel))


def _lake_files(lake_trace_dir: Path, tables: Iterable[str]) -> list[Path]:
    folders = [lake_trace_dir / t for t in sorted(tables)] + [lake_trace_dir / REJECTS_DIR]
    return [p for folder in folders if folder.is_dir() for p in sorted(folder.glob("*.parquet"))]


def orphan_outputs(
    lake_trace_dir: Path, tables: Iterable[str], rows: Iterable[ManifestRow]
) -> list[Path]:
    """Lake files that no manifest row owns: outputs of a run killed before it recorded them, or
    named by an earlier version's rule. Their rows are in no count, so ingest deletes them."""
    owned: set[Path] = set()
    for r in rows:
        paths = lake_paths(lake_trace_dir, r.table, r.path)
        owned |= {paths.parquet, paths.rejects}
    return [p for p in _lake_files(lake_trace_dir, tables) if p not in owned]


def _parquet_rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows if path.is_file() else 0


def reconciliation_problems(
    lake_trace_dir: Path, tables: Iterable[str], rows: Iterable[ManifestRow]
) -> list[str]:
    """Where the lake and the manifest disagree; empty when every row is accounted for.

    For each raw file the lake keeps: rows read = rows written + rows rejected, its typed file
    holds exactly the rows written and its rejects file the rows rejected (counted from the
    Parquet footers, not from the conversion); a duplicate has no outputs; and no lake file is
    left that no row owns.
    """
    rows = list(rows)
    problems = [
        f"{p}: lake file owned by no raw file; run ingest again (it deletes such files)"
        for p in orphan_outputs(lake_trace_dir, tables, rows)
    ]
    for r in rows:
        paths = lake_paths(lake_trace_dir, r.table, r.path)
        written, rejected = _parquet_rows(paths.parquet), _parquet_rows(paths.rejects)
        if r.rows_read != r.rows_written + r.rows_rejected:
            problems.append(
                f"{r.path}: {r.rows_read:,} rows read but {r.rows_written:,} written + "
                f"{r.rows_rejected:,} rejected"
            )
        if (written, rejected) != (r.rows_written, r.rows_rejected):
            problems.append(
                f"{r.path}: the lake holds {written:,} rows and {rejected:,} rejects, the manifest "
                f"says {r.rows_written:,} and {r.rows_rejected:,}"
            )
    return problems


def other_root_error(lake_trace_dir: Path, raw_root: Path, holds_rows: bool) -> str | None:
    """One line refusing to ingest another raw root into a lake that mirrors one already.

    Two roots can hold the same relative names (every google-2019 cell's export uses the same
    shard names): one would silently replace the other's rows. None when the roots agree, the
    lake holds no rows, or no root was recorded.
    """
    note = read_ingest_note(lake_trace_dir)
    recorded = str(note.get("raw_root_key", ""))
    if not holds_rows or not recorded or recorded == raw_root_key(lake_trace_dir, raw_root):
        return None
    return (
        f"{lake_trace_dir} mirrors the raw folder {note.get('raw_root')}, not {raw_root}: ingest "
        f"{raw_root} into another data directory (--data NEW_DIR) to keep both, or pass "
        "--replace to drop this trace's lake and ingest it instead"
    )


def converted_row(plan: FilePlan, done: Converted) -> ManifestRow:
    """The manifest row of a file this run converted (or failed to)."""
    result = done.conversion
    return ManifestRow(
        table=plan.raw.table,
        path=plan.raw.rel,
        bytes=plan.raw.size_bytes,
        checksum=done.checksum,
        rows_read=result.rows_read,
        rows_written=result.rows_written,
        rows_rejected=result.rows_rejected,
        started_at=result.started_at,
        seconds=result.seconds,
        status=result.status,
        error=result.error,
        method=result.method,
        content=result.content,
        sha256=done.sha256,
    )


def not_converted_row(plan: FilePlan, started_at: datetime) -> ManifestRow:
    """The manifest row of a file skipped as unchanged or left out as a duplicate."""
    if plan.action == "skip" and plan.previous is not None:
        before = plan.previous
        return ManifestRow(
            **{
                **before.__dict__,
                "started_at": started_at,
                "seconds": 0.0,
                "status": "skipped-unchanged",
                "error": "",
            }
        )
    return ManifestRow(
        table=plan.raw.table,
        path=plan.raw.rel,
        bytes=plan.raw.size_bytes,
        checksum=plan.checksum,
        rows_read=0,
        rows_written=0,
        rows_rejected=0,
        started_at=started_at,
        seconds=0.0,
        status="duplicate",
        error=f"same bytes as {plan.duplicate_of}; not ingested so its rows are not counted "
        "twice (delete one of the two copies)",
        method="none",
    )


class ManifestLedger:
    """The manifest in memory, rewritten atomically at most every ``interval_s`` and on flush.

    Rewriting the whole manifest after each of thousands of files would cost O(files²); a file
    whose row is lost to a kill is converted again by the next run (its outputs are complete or
    absent, never partial), so ingest stays idempotent.
    """

    def __init__(self, lake_trace_dir: Path, manifest: pl.DataFrame, interval_s: float) -> None:
        self._dir = lake_trace_dir
        self._manifest = manifest
        self._interval_s = interval_s
        self._pending: list[ManifestRow] = []
        self._forget: list[tuple[str, str]] = []
        self._last_write = -float("inf")

    def record(self, rows: list[ManifestRow], forget: list[tuple[str, str]] | None = None) -> None:
        """Insert or replace ``rows``; drop the rows of ``forget`` (table, path) in the same write."""
        self._pending.extend(rows)
        self._forget.extend(forget or [])
        if time.monotonic() - self._last_write >= self._interval_s:
            self.flush()

    def rows(self) -> list[ManifestRow]:
        """Every row of the manifest as written by the last :meth:`flush`."""
        return list(manifest_rows(self._manifest).values())

    def flush(self) -> None:
        manifest = manifest_with(self._manifest, self._pending)
        if self._forget:
            gone = pl.DataFrame(
                self._forget, schema={"table": pl.String(), "path": pl.String()}, orient="row"
            )
            manifest = manifest.join(gone, on=["table", "path"], how="anti")
        self._manifest = manifest
        self._pending = []
        self._forget = []
        write_manifest(self._dir, self._manifest)
        self._last_write = time.monotonic()


@dataclass(frozen=True)
class TableSummary:
    """Per-table totals of one ingest run."""

    table: str
    files: int
    converted: int
    skipped: int
    duplicates: int
    errors: int
    rows_read: int
    rows_written: int
    rows_rejected: int


@dataclass(frozen=True)
class IngestSummary:
    """What one ingest run did: every file's manifest row and what could not be ingested."""

    trace: str
    raw_dir: Path
    lake_dir: Path
    rows: tuple[ManifestRow, ...]
    #: (path relative to raw root, reason): unknown table folders, clashing names; these fail the run
    discovery_errors: tuple[tuple[str, str], ...]
    #: (path, reason) of files left out on purpose (not matching the table glob)
    ignored: tuple[tuple[str, str], ...]
    seconds: float
    #: files ingested before whose raw file is gone: rows removed, or kept (``--keep-vanished``)
    removed: tuple[ManifestRow, ...] = ()
    kept: tuple[ManifestRow, ...] = ()
    #: where the lake and the manifest disagree after the run (:func:`reconciliation_problems`)
    unreconciled: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return (
            bool(self.discovery_errors)
            or bool(self.unreconciled)
            or any(r.status == "error" for r in self.rows)
        )

    def tables(self) -> list[TableSummary]:
        out: list[TableSummary] = []
        for name in sorted({r.table for r in self.rows}):
            rows = [r for r in self.rows if r.table == name]
            out.append(
                TableSummary(
                    table=name,
                    files=len(rows),
                    converted=sum(r.status == "ok" for r in rows),
                    skipped=sum(r.status == "skipped-unchanged" for r in rows),
                    duplicates=sum(r.status == "duplicate" for r in rows),
                    errors=sum(r.status == "error" for r in rows),
                    rows_read=sum(r.rows_read for r in rows),
                    rows_written=sum(r.rows_written for r in rows),
                    rows_rejected=sum(r.rows_rejected for r in rows),
                )
            )
        return out
