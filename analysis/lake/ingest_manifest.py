"""The ingest manifest ``lake/<trace>/_manifest.parquet``: one row per raw file, and the run plan.

The manifest is the ledger that makes ingest incremental: a raw file whose size and checksum
match its last ``ok`` row (and whose typed Parquet still exists) is skipped. ``checksum`` is the
digest of the bytes as stored (it tells an unchanged file without decompressing it); ``content``
is the digest of the decompressed bytes, the file's identity whatever its name or compression
(:mod:`analysis.lake.ingest_identity` keeps a content's rows in the lake once). It is rewritten
whole, atomically (temp file + ``os.replace``), at most about once a second while files finish
and once at the end, so a killed run loses at most the rows of the files that finished in its last
second, and those files are simply converted again (their outputs are replaced atomically).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import polars as pl

from tracelab.analysis.common.atomic import atomic_write_with
from tracelab.analysis.lake.ingest import (
    MANIFEST_NAME,
    RawFile,
    Status,
    lake_paths,
)

MANIFEST_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String(),
    #: path of the raw file relative to the raw root (= source_file in the lake)
    "path": pl.String(),
    "bytes": pl.Int64(),
    "checksum": pl.String(),
    "rows_read": pl.Int64(),
    "rows_written": pl.Int64(),
    "rows_rejected": pl.Int64(),
    "started_at": pl.Datetime("us", "UTC"),
    "seconds": pl.Float64(),
    "status": pl.String(),
    "error": pl.String(),
    #: native (Polars reader), validated (line-by-line checks) or none
    "method": pl.String(),
    #: real (the published trace) or synthetic (tracelab's generator): analysis/lake/provenance.py
    "source": pl.String(),
    #: hex sha256 of the raw file as stored ("" until computed)
    "sha256": pl.String(),
    #: xxh3-128 of the decompressed bytes ("" in rows written before it was recorded)
    "content": pl.String(),
}
#: columns added after the first manifests were written: empty in an older manifest's rows (a
#: row without ``content`` is converted once more to learn it)
_LATER_COLUMNS = ("source", "sha256", "content")

Action = Literal["convert", "skip", "duplicate"]


@dataclass(frozen=True)
class ManifestRow:
    """What ingest did with one raw file."""

    table: str
    path: str
    bytes: int
    checksum: str
    rows_read: int
    rows_written: int
    rows_rejected: int
    started_at: datetime
    seconds: float
    status: Status
    error: str
    method: str
    source: str = ""
    sha256: str = ""
    content: str = ""


@dataclass(frozen=True)
class FilePlan:
    """What this run will do with one raw file."""

    raw: RawFile
    checksum: str
    action: Action
    #: for ``skip``: the previous manifest row; for ``duplicate``: the file it duplicates
    previous: ManifestRow | None
    duplicate_of: str


def manifest_path(lake_trace_dir: Path) -> Path:
    return lake_trace_dir / MANIFEST_NAME


def read_manifest(lake_trace_dir: Path) -> pl.DataFrame:
    """The manifest, or an empty frame with its schema when there is none yet."""
    path = manifest_path(lake_trace_dir)
    if not path.is_file():
        return pl.DataFrame(schema=MANIFEST_SCHEMA)
    frame = pl.read_parquet(path)
    missing = [c for c in _LATER_COLUMNS if c not in frame.columns]
    frame = frame.with_columns(pl.lit("", dtype=pl.String).alias(c) for c in missing)
    return frame.select(list(MANIFEST_SCHEMA)).cast(MANIFEST_SCHEMA)  # type: ignore[arg-type]


def manifest_rows(manifest: pl.DataFrame) -> dict[tuple[str, str], ManifestRow]:
    """Manifest rows keyed by (table, path)."""
    rows: dict[tuple[str, str], ManifestRow] = {}
    for record in manifest.iter_rows(named=True):
        row = ManifestRow(**record)
        rows[(row.table, row.path)] = row
    return rows


def manifest_with(manifest: pl.DataFrame, rows: list[ManifestRow]) -> pl.DataFrame:
    """``manifest`` with ``rows`` inserted or replacing the rows of the same (table, path)."""
    if not rows:
        return manifest
    new = pl.DataFrame([asdict(r) for r in rows], schema=MANIFEST_SCHEMA)
    kept = manifest.join(new.select("table", "path"), on=["table", "path"], how="anti")
    return pl.concat([kept, new]).sort("table", "path")


def write_manifest(lake_trace_dir: Path, manifest: pl.DataFrame) -> Path:
    """Write the manifest atomically; returns its path."""
    return atomic_write_with(
        manifest_path(lake_trace_dir), lambda tmp: manifest.write_parquet(tmp, compression="zstd")
    )


def files_to_checksum_first(
    files: tuple[RawFile, ...],
    previous: dict[tuple[str, str], ManifestRow],
    lake_trace_dir: Path,
) -> tuple[RawFile, ...]:
    """The files whose checksum decides what happens to them, so it is needed before converting.

    A file can be skipped only when its last row is ok with the same size and its typed Parquet
    exists, and it can be a byte-for-byte copy only of a file of exactly the same size. Every
    other file is converted whatever its checksum is, and the conversion's one read gives its
    checksum and content digest (a copy under another compression, or a renamed file, is
    recognised by its content once converted: :mod:`analysis.lake.ingest_identity`).
    """
    size_count: dict[int, int] = {}
    for raw in files:
        size_count[raw.size_bytes] = size_count.get(raw.size_bytes, 0) + 1
    return tuple(
        raw
        for raw in files
        if size_count[raw.size_bytes] > 1 or _may_be_unchanged(raw, previous, lake_trace_dir)
    )


def vanished_rows(
    files: tuple[RawFile, ...], previous: dict[tuple[str, str], ManifestRow]
) -> list[ManifestRow]:
    """Rows of files ingested before whose path no longer exists; their lake rows are kept."""
    present = {(raw.table, raw.rel) for raw in files}
    return [
        row
        for key, row in previous.items()
        if key not in present and row.status in ("ok", "skipped-unchanged")
    ]


def _may_be_unchanged(
    raw: RawFile, previous: dict[tuple[str, str], ManifestRow], lake_trace_dir: Path
) -> bool:
    before = previous.get((raw.table, raw.rel))
    return (
        before is not None
        and before.status in ("ok", "skipped-unchanged")
        and before.bytes == raw.size_bytes
        # a row without a content digest (an earlier version's) is converted once more
        and bool(before.content)
        and lake_paths(lake_trace_dir, raw.table, raw.rel).parquet.is_file()
    )


def plan_files(
    files: tuple[RawFile, ...],
    checksums: dict[str, str],
    previous: dict[tuple[str, str], ManifestRow],
    lake_trace_dir: Path,
) -> list[FilePlan]:
    """Decide per file: convert, skip (unchanged since its last ok ingest) or duplicate.

    A file with the same bytes as another file of this run is a duplicate of the one already in
    the lake under its path (else of the first in table, path order): it is not converted. A file
    missing from ``checksums`` (see :func:`files_to_checksum_first`) is converted, with an empty
    checksum that the conversion fills in. Renamed, moved or recompressed files are recognised
    by their content once converted (:mod:`analysis.lake.ingest_identity`).
    """
    needed = {raw.rel for raw in files_to_checksum_first(files, previous, lake_trace_dir)}
    missing = sorted(raw.rel for raw in files if raw.rel in needed and not checksums.get(raw.rel))
    if missing:
        raise ValueError(f"{missing[0]}: its checksum is needed to plan it")
    unchanged = {
        raw.rel
        for raw in files
        if _may_be_unchanged(raw, previous, lake_trace_dir)
        and previous[(raw.table, raw.rel)].checksum == checksums.get(raw.rel)
    }
    # the copies already in the lake under their own path keep their rows
    first_by_checksum = {checksums[rel]: rel for rel in sorted(unchanged, reverse=True)}
    plans: list[FilePlan] = []
    for raw in files:
        checksum = checksums.get(raw.rel, "")
        before = previous.get((raw.table, raw.rel))
        if not checksum:
            plans.append(FilePlan(raw, "", "convert", before, ""))
            continue
        first = first_by_checksum.setdefault(checksum, raw.rel)
        if first != raw.rel:
            plans.append(FilePlan(raw, checksum, "duplicate", None, first))
        elif raw.rel in unchanged:
            plans.append(FilePlan(raw, checksum, "skip", before, ""))
        else:
            plans.append(FilePlan(raw, checksum, "convert", before, ""))
    return plans


def conversion_batches(
    plans: list[FilePlan], batch_bytes: int, workers: int
) -> list[tuple[FilePlan, ...]]:
    """The files to convert grouped into batches, one task each, largest batch first.

    Every task costs the orchestrator a fixed bookkeeping price (Prefect's API server records
    each task run's states: ~20 ms of CPU per task here, competing with the conversion for the
    same cores), so small files share a task. A batch collects files, largest first, until it
    holds ``batch_bytes`` stored bytes; the bound is lowered to an eighth of each worker's share
    so that small runs still spread over ``workers``, and the smallest files, last, keep the
    workers finishing close together.
    """
    todo = sorted((p for p in plans if p.action == "convert"), key=lambda p: -p.raw.size_bytes)
    total = sum(p.raw.size_bytes for p in todo)
    bound = max(1, min(batch_bytes, total // (8 * max(1, workers))))
    batches: list[tuple[FilePlan, ...]] = []
    current: list[FilePlan] = []
    size = 0
    for plan in todo:
        current.append(plan)
        size += plan.raw.size_bytes
        if size >= bound:
            batches.append(tuple(current))
            current, size = [], 0
    if current:
        batches.append(tuple(current))
    return sorted(batches, key=lambda b: -sum(p.raw.size_bytes for p in b))
