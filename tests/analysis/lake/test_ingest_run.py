"""One ingest run's pieces: converting a planned file, its manifest rows, the ledger, the totals."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import xxhash

from tracelab.analysis.lake.ingest import RawFile
from tracelab.analysis.lake.ingest_manifest import FilePlan, ManifestRow, read_manifest
from tracelab.analysis.lake.ingest_run import (
    Converted,
    IngestSummary,
    ManifestLedger,
    converted_plan,
    converted_row,
    not_converted_row,
)

TRACE = "google-2011"
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def _raw(root: Path, name: str, data: bytes | None) -> RawFile:
    rel = f"job_events/{name}.csv"
    path = root / rel
    if data is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return RawFile("job_events", path, rel, len(data or b""))


def _row(table: str, path: str, status: str, read: int, written: int) -> ManifestRow:
    return ManifestRow(
        table=table,
        path=path,
        bytes=10,
        checksum="xxh3-128:0",
        rows_read=read,
        rows_written=written,
        rows_rejected=read - written,
        started_at=WHEN,
        seconds=0.0,
        status=status,  # type: ignore[arg-type]
        error="",
        method="none",
    )


def _convert(raw: RawFile, lake: Path) -> Converted:
    return converted_plan(
        TRACE,
        FilePlan(raw, "", "convert", None, ""),
        lake,
        chunk_bytes=1 << 20,
        wrong_format_share=0.9,
    )


def test_converted_plan_checksums_converts_and_reports_failures_per_file(tmp_path: Path) -> None:
    # job_events has 8 fields; the second line has 7, so it is rejected with its line number
    data = b"1,,7000001,0,u,1,j,l\n2,,7000002,0,u,1,j\n"
    good = _raw(tmp_path / "raw", "part-00000-of-00002", data)
    done = _convert(good, tmp_path / "lake")
    assert done.checksum == "xxh3-128:" + xxhash.xxh3_128(data).hexdigest()
    assert (done.conversion.status, done.conversion.rows_read) == ("ok", 2)
    assert (done.conversion.rows_written, done.conversion.rows_rejected) == (1, 1)
    row = converted_row(FilePlan(good, "", "convert", None, ""), done)
    assert (row.path, row.bytes, row.checksum) == (good.rel, len(data), done.checksum)
    assert row.rows_read == row.rows_written + row.rows_rejected
    # a file that vanished after discovery: an error row naming what to do, no exception
    gone = replace(good, path=tmp_path / "raw/job_events/missing.csv", rel="job_events/missing.csv")
    lost = _convert(gone, tmp_path / "lake")
    assert lost.conversion.status == "error"
    assert lost.checksum == ""
    assert lost.conversion.error


def test_skipped_and_duplicate_rows(tmp_path: Path) -> None:
    raw = _raw(tmp_path, "part-00001-of-00002", b"x")
    before = _row("job_events", raw.rel, "ok", 5, 4)
    skipped = not_converted_row(FilePlan(raw, "xxh3-128:0", "skip", before, ""), WHEN)
    # the counts of the run that converted it, marked as skipped this time
    assert (skipped.status, skipped.rows_read, skipped.rows_written) == ("skipped-unchanged", 5, 4)
    dup = not_converted_row(
        FilePlan(raw, "xxh3-128:0", "duplicate", None, "job_events/part-00000-of-00002.csv"),
        WHEN,
    )
    assert (dup.status, dup.rows_read, dup.rows_written, dup.rows_rejected) == (
        "duplicate",
        0,
        0,
        0,
    )
    assert "job_events/part-00000-of-00002.csv" in dup.error


def test_summary_totals_per_table_and_failure() -> None:
    rows = (
        _row("job_events", "a", "ok", 10, 9),
        _row("job_events", "b", "skipped-unchanged", 4, 4),
        _row("job_events", "c", "duplicate", 0, 0),
        _row("task_events", "d", "error", 0, 0),
    )
    summary = IngestSummary(TRACE, Path("raw"), Path("lake"), rows, (), (), 1.0)
    jobs, tasks = summary.tables()
    assert (jobs.table, jobs.files, jobs.converted, jobs.skipped, jobs.duplicates) == (
        "job_events",
        3,
        1,
        1,
        1,
    )
    assert (jobs.rows_read, jobs.rows_written, jobs.rows_rejected) == (14, 13, 1)
    assert (tasks.files, tasks.errors) == (1, 1)
    assert summary.failed
    assert not IngestSummary(TRACE, Path("raw"), Path("lake"), rows[:3], (), (), 1.0).failed
    assert IngestSummary(TRACE, Path("r"), Path("l"), rows[:1], (("x", "unknown"),), (), 1.0).failed


def test_ledger_rewrites_at_most_once_per_interval_and_on_flush(tmp_path: Path) -> None:
    ledger = ManifestLedger(tmp_path, read_manifest(tmp_path), interval_s=3600.0)
    ledger.record([_row("job_events", "a", "ok", 1, 1)])  # first record writes at once
    ledger.record([_row("job_events", "b", "ok", 1, 1)])  # within the interval: held
    assert read_manifest(tmp_path)["path"].to_list() == ["a"]
    ledger.flush()
    assert read_manifest(tmp_path)["path"].to_list() == ["a", "b"]
    # a new row for the same file replaces the old one
    ledger.record([_row("job_events", "a", "error", 0, 0)])
    ledger.flush()
    manifest = read_manifest(tmp_path)
    assert manifest["path"].to_list() == ["a", "b"]
    assert manifest["status"].to_list() == ["error", "ok"]
