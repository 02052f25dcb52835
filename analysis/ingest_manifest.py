"""The ingest manifest ``lake/<trace>/_manifest.parquet``: one row per raw file, and the run plan.

The manifest is the ledger that makes ingest incremental: a raw file whose size and checksum
match its last ``ok`` row (and whose typed Parquet still exists) is skipped. It is rewritten
whole, atomically (temp file + ``os.replace``), after every file, so a killed run loses at most
the row of the file it was converting, and that file is simply converted again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import polars as pl

from analysis.ingest import MANIFEST_NAME, TMP_SUFFIX, RawFile, Status, lake_paths

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
}

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
    return pl.read_parquet(path).cast(MANIFEST_SCHEMA)  # type: ignore[arg-type]


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
    path = manifest_path(lake_trace_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    manifest.write_parquet(tmp, compression="zstd")
    tmp.replace(path)
    return path


def plan_files(
    files: tuple[RawFile, ...],
    checksums: dict[str, str],
    previous: dict[tuple[str, str], ManifestRow],
    lake_trace_dir: Path,
) -> list[FilePlan]:
    """Decide per file: convert, skip (unchanged since its last ok ingest) or duplicate.

    A file with the same bytes as an earlier file of this run (files sorted by table, path) is a
    duplicate of the first: it is not converted, so its rows are never counted twice.
    """
    first_by_checksum: dict[str, str] = {}
    plans: list[FilePlan] = []
    for raw in files:
        checksum = checksums[raw.rel]
        if checksum in first_by_checksum:
            plans.append(FilePlan(raw, checksum, "duplicate", None, first_by_checksum[checksum]))
            continue
        first_by_checksum[checksum] = raw.rel
        before = previous.get((raw.table, raw.rel))
        unchanged = (
            before is not None
            and before.status in ("ok", "skipped-unchanged")
            and before.bytes == raw.size_bytes
            and before.checksum == checksum
            and lake_paths(lake_trace_dir, raw).parquet.is_file()
        )
        plans.append(FilePlan(raw, checksum, "skip" if unchanged else "convert", before, ""))
    return plans
