"""One ingest run (:func:`ingest_lake`): planning, converting, the ledgers, the summary.

A plain function: :mod:`flows.ingest` gives it a runner (threads, or a Dask cluster) and a
progress bar, and prints the summary; nothing here needs Prefect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.faults import environment_fault
from tracelab.analysis.common.parallel import Runner
from tracelab.analysis.lake.ingest import (
    REJECTS_DIR,
    TMP_SUFFIX,
    Conversion,
    RawDiscovery,
    RawFile,
    convert_file,
    discover_raw_files,
    file_checksum,
    lake_paths,
    remove_leftover_temp_files,
    remove_outputs,
)
from tracelab.analysis.lake.ingest_identity import ContentLedger, Settlement
from tracelab.analysis.lake.ingest_jsonl import convert_jsonl_file
from tracelab.analysis.lake.ingest_manifest import (
    FilePlan,
    ManifestRow,
    conversion_batches,
    files_to_checksum_first,
    manifest_rows,
    manifest_with,
    plan_files,
    read_manifest,
    vanished_rows,
    write_manifest,
)
from tracelab.analysis.lake.ingest_stream import CONVERSION_WORKERS
from tracelab.analysis.lake.provenance import (
    TRUTH_FILE,
    Kind,
    check_not_mixing,
    file_kinds,
    lake_kinds,
    raw_root_key,
    read_ingest_note,
    sha256_of,
    write_ingest_note,
)
from tracelab.analysis.lake.schemas import table, trace_tables

_LOG = logging.getLogger("tracelab.ingest")


@dataclass(frozen=True)
class Converted:
    """One file's result: the conversion and the checksum of the file it read."""

    conversion: Conversion
    checksum: str
    #: hex sha256 of the file as stored, for the provenance of the results ("" if unreadable)
    sha256: str = ""


def failed_conversion(exc: BaseException, lake_trace_dir: Path) -> Conversion:
    """An ``error`` conversion for a failure no converter anticipated: a fault of the machine
    (full disk, file-size limit) named with the path and what to do, anything else as it is."""
    fault = environment_fault(exc, lake_trace_dir)
    return Conversion(
        status="error",
        method="none",
        rows_read=0,
        rows_written=0,
        rows_rejected=0,
        error=fault or f"unexpected failure: {exc}; fix the cause and run ingest again",
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
        result = failed_conversion(exc, lake_trace_dir)
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


@dataclass(frozen=True)
class IngestOptions:
    """How one ingest run reads and records (``tracelab ingest``'s options)."""

    #: decompressed MB read at once: bounds the memory of the line-validating path
    chunk_mb: int = 32
    #: share of wrong-field-count lines from which a file is declared the wrong format
    wrong_format_share: float = 0.5
    #: least seconds between two manifest rewrites while files finish (a killed run converts
    #: the files that finished since the last rewrite again; 0 rewrites after every file)
    manifest_write_s: float = 1.0
    #: files smaller than this many stored MB share a piece of work (:func:`conversion_batches`)
    batch_mb: int = 32
    #: keep the rows of raw files ingested before and since deleted (default: remove them)
    keep_vanished: bool = False

    def __post_init__(self) -> None:
        if self.chunk_mb < 1:
            # a zero-byte read is end of file: the validated path would read no line at all
            raise TracelabError(
                f"--chunk-mb must be at least 1 (got {self.chunk_mb}); use the default 32"
            )


def converted_batch(
    trace: str, lake_trace_dir: Path, options: IngestOptions, batch: tuple[FilePlan, ...]
) -> list[Converted]:
    """Convert a batch of raw files (each atomically); a file's failure is that file's error."""
    return [
        converted_plan(
            trace,
            plan,
            lake_trace_dir,
            chunk_bytes=options.chunk_mb << 20,
            wrong_format_share=options.wrong_format_share,
        )
        for plan in batch
    ]


def _not_converted(
    plans: list[FilePlan], lake_trace_dir: Path, kinds: Mapping[str, str]
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


def _checksums(files: tuple[RawFile, ...]) -> dict[str, str]:
    with ThreadPoolExecutor(max_workers=CONVERSION_WORKERS) as pool:
        digests = pool.map(lambda f: file_checksum(f.path), files)
        return {f.rel: d for f, d in zip(files, digests, strict=True)}


def ingest_lake(
    trace: str,
    raw_dir: Path,
    lake_dir: Path,
    options: IngestOptions,
    runner: Runner,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> IngestSummary:
    """Ingest every raw file of ``trace`` under ``raw_dir`` into ``lake_dir/<trace>``.

    Files are converted in batches by ``runner`` (threads or a Dask cluster) and settled as each
    batch finishes, here; ``progress(done, total)`` gets the stored bytes converted so far. The
    lake mirrors ``raw_dir`` (see :mod:`analysis.lake.ingest_identity`), and the run ends by
    reconciling the lake's files with the manifest (:func:`reconciliation_problems`).
    """
    started = time.perf_counter()
    tables = trace_tables(trace)  # unknown trace id: a clear error before anything is touched
    lake_trace_dir = lake_dir / trace
    found, manifest, kinds = _prepared_lake(trace, raw_dir, lake_trace_dir)
    previous = manifest_rows(manifest)
    first = files_to_checksum_first(found.files, previous, lake_trace_dir)
    plans = plan_files(found.files, _checksums(first), previous, lake_trace_dir)
    rows = _not_converted(plans, lake_trace_dir, kinds)
    ledger = ManifestLedger(lake_trace_dir, manifest, options.manifest_write_s)
    # a copy (same content) is a duplicate, never counted twice; a vanished file's rows go,
    # unless kept on request and no present file holds the same content
    identity = ContentLedger(
        [p.previous for p in plans if p.action == "skip" and p.previous is not None],
        vanished_rows(found.files, previous),
        keep_vanished=options.keep_vanished,
    )
    _settle(identity.start, list(rows.values()), lake_trace_dir, ledger, rows)
    try:
        _convert_all(
            trace, plans, lake_trace_dir, options, runner, progress, identity, ledger, rows, kinds
        )
    finally:
        # also when interrupted: what finished stays recorded
        ledger.flush()
    order = {p.raw.rel: i for i, p in enumerate(plans)}
    return IngestSummary(
        trace=trace,
        raw_dir=raw_dir,
        lake_dir=lake_trace_dir,
        rows=tuple(sorted(rows.values(), key=lambda r: order[r.path])),
        discovery_errors=tuple((p.path, p.reason) for p in found.problems if p.is_error),
        ignored=tuple((p.path, p.reason) for p in found.problems if not p.is_error),
        seconds=time.perf_counter() - started,
        removed=tuple(identity.removed),
        kept=tuple(identity.kept),
        unreconciled=tuple(reconciliation_problems(lake_trace_dir, tables, ledger.rows())),
    )


def lake_up_to_date(trace: str, raw_dir: Path, lake_dir: Path) -> bool:
    """True when :func:`ingest_lake` would leave ``lake_dir/<trace>`` as it is: every raw file
    skipped as unchanged (same size and checksum, its Parquet present), none gone, no leftover
    or orphan to remove, and the same raw root and notes recorded.

    Reads only: ``tracelab run`` asks this before deciding whether anything needs to run.
    """
    lake_trace_dir = lake_dir / trace
    found = discover_raw_files(trace, raw_dir)
    previous = manifest_rows(read_manifest(lake_trace_dir))
    ignored = [{"path": p.path, "reason": p.reason} for p in found.problems if not p.is_error]
    note = read_ingest_note(lake_trace_dir)
    if (
        any(p.is_error for p in found.problems)
        or not found.files
        or vanished_rows(found.files, previous)
        or any(lake_trace_dir.rglob(f"*{TMP_SUFFIX}"))
        or orphan_outputs(lake_trace_dir, trace_tables(trace), previous.values())
        or note.get("raw_root_key") != raw_root_key(lake_trace_dir, raw_dir)
        or note.get("ignored") != ignored
        or note.get("generated") != (raw_dir / TRUTH_FILE).is_file()
    ):
        return False
    first = files_to_checksum_first(found.files, previous, lake_trace_dir)
    plans = plan_files(found.files, _checksums(first), previous, lake_trace_dir)
    return all(p.action == "skip" for p in plans)


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


def _prepared_lake(
    trace: str, raw_dir: Path, lake_trace_dir: Path
) -> tuple[RawDiscovery, pl.DataFrame, dict[str, Kind]]:
    """The raw files, the manifest and each file's kind, once the lake may take them: leftovers
    of a killed run deleted, one kind and one raw root per lake checked, the ingest note written."""
    removed = remove_leftover_temp_files(lake_trace_dir)
    if removed:
        _LOG.warning("removed %d temp file(s) left by an interrupted run", len(removed))
    found = discover_raw_files(trace, raw_dir)
    for problem in found.problems:
        (_LOG.error if problem.is_error else _LOG.warning)("%s: %s", problem.path, problem.reason)
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
    orphans = orphan_outputs(lake_trace_dir, trace_tables(trace), previous.values())
    for path in orphans:
        path.unlink()
    if orphans:
        _LOG.warning("removed %d lake file(s) that no raw file owns", len(orphans))
    ignored = [(p.path, p.reason) for p in found.problems if not p.is_error]
    write_ingest_note(lake_trace_dir, raw_dir, ignored)
    return found, manifest, kinds


def _convert_all(
    trace: str,
    plans: list[FilePlan],
    lake_trace_dir: Path,
    options: IngestOptions,
    runner: Runner,
    progress: Callable[[int, int], None] | None,
    identity: ContentLedger,
    ledger: ManifestLedger,
    rows: dict[str, ManifestRow],
    kinds: Mapping[str, str],
) -> None:
    """Convert the planned files in batches on ``runner``, settling each file as its batch ends."""
    batches = conversion_batches(plans, options.batch_mb << 20, CONVERSION_WORKERS)
    total = sum(p.raw.size_bytes for batch in batches for p in batch)
    done_bytes = 0
    work = partial(converted_batch, trace, lake_trace_dir, options)
    for batch, outcome in runner(work, batches):
        if isinstance(outcome, Exception):  # e.g. a lost Dask worker: every file of the batch
            outcome = [
                Converted(failed_conversion(outcome, lake_trace_dir), p.checksum) for p in batch
            ]
        for plan, converted in zip(batch, outcome, strict=True):
            row = with_sources([converted_row(plan, converted)], kinds)[0]
            _settle(identity.settle(row), [], lake_trace_dir, ledger, rows)
            if converted.conversion.status == "error":
                _LOG.error("%s: %s", plan.raw.rel, converted.conversion.error)
        done_bytes += sum(p.raw.size_bytes for p in batch)
        if progress is not None:
            progress(done_bytes, total)
