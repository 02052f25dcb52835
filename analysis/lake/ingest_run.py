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

from tracelab.analysis.lake.ingest import (
    Conversion,
    RawFile,
    convert_file,
    lake_paths,
    remove_outputs,
)
from tracelab.analysis.lake.ingest_jsonl import convert_jsonl_file
from tracelab.analysis.lake.ingest_manifest import (
    FilePlan,
    ManifestRow,
    manifest_with,
    write_manifest,
)
from tracelab.analysis.lake.provenance import lake_kinds, sha256_of
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
        spec, paths = table(trace, plan.raw.table), lake_paths(lake_trace_dir, plan.raw)
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
        gone = RawFile(table=table_name, path=Path(rel), rel=rel, size_bytes=0)
        remove_outputs(lake_paths(lake_trace_dir, gone))


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

    @property
    def failed(self) -> bool:
        return bool(self.discovery_errors) or any(r.status == "error" for r in self.rows)

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
