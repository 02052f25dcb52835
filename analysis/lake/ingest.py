"""Lossless raw CSV(.gz) → typed Parquet conversion of one trace file (issue #2, item 5).

Every physical line of a raw file ends up in exactly one place: a typed row of
``lake/<trace>/<table>/<stem>.parquet`` or a row of ``lake/<trace>/_rejects/<table>__<stem>.parquet``
(``source_file, source_line, reason, raw_text, raw_bytes``), so that for every file
``rows_read = rows_written + rows_rejected``.

Two paths convert a file:

* **native** — Polars' own CSV reader with the strict registry schema (booleans read as 0/1
  integers), a 1-based row index as ``source_row``, and in-query guards that make the query fail
  on anything the schema does not catch (a NULL mandatory field, which is also what a blank
  line parses to; a boolean other than 0/1; a NUL byte in a text field). It streams to a temp
  Parquet file. Polars fills the missing trailing fields of a *short* line with NULLs, so when the
  last column has NULLs a second native pass reads the file as whole lines and counts the commas
  of the lines whose last field is NULL (about +30% time, only for such files).
* **validated** — used only when the native path fails (or finds a short line): the file is read
  as raw bytes in fixed-size chunks, split into physical lines with numpy, and every check is a
  vectorised Polars expression, which gives each reject its exact line number and a reason.

Outputs are written as ``*.tmp`` and renamed into place only when complete; the caller (the
flow) records the outcome in the manifest (:mod:`analysis.ingest_manifest`).

Choices (documented in the README):

* blank line → rejected ("blank line"); it is a physical line, so it is counted in ``rows_read``;
* CRLF line endings → accepted, the ``\\r`` is dropped; so is one ``\\r`` ending any field (Polars'
  reader drops it, and both paths must give the same value for the same bytes);
* a UTF-8 BOM at the start of a file → dropped by both paths;
* a value is valid by one definition, :func:`value_rules`, on both paths: no surrounding spaces,
  floats finite (``1e400`` is rejected as out of range, ``inf``/``nan`` as not numbers);
* (nearly) every line rejected (UTF-16, a gzip of a gzip) → status error, every line in the rejects;
* empty file (0 bytes, or a gzip of nothing) → status ok, 0 rows, an empty typed Parquet file;
* same bytes as another file of the run → status duplicate, no output (see the flow);
* an integer that does not fit int64, a non-number in a numeric column, a boolean other than
  0/1, invalid UTF-8, a NUL byte, the wrong field count, a header line → rejected with the reason;
* when at least half of a file's lines have the wrong field count the file is the wrong format:
  status error naming the expected columns, every line kept in the rejects, no typed output.
"""

from __future__ import annotations

import errno
import fnmatch
import gzip
import os
import stat
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.schemas import SOURCE_FILE, SOURCE_ROW, Table, trace_tables
from tracelab.analysis.synthetic import GENERATING_MARKER, partial_sample

Status = Literal["ok", "skipped-unchanged", "duplicate", "error"]
Method = Literal["native", "validated", "none"]

TMP_SUFFIX = ".tmp"
REJECTS_DIR = "_rejects"
MANIFEST_NAME = "_manifest.parquet"
#: names of the parts a generator writes before they are complete (analysis.synthetic.csvparts)
GENERATOR_LEFTOVERS = ("_pending-*", "_*.csv.gz.tmp")
#: raw file suffixes ingest reads; anything else in a table folder is listed as ignored
RAW_SUFFIXES = (".csv", ".csv.gz", ".json.gz", ".json")
#: suffixes of JSON-lines shards (google-2019); the others are CSV
JSON_SUFFIXES = (".json.gz", ".json")
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
#: share of rejected lines from which a file is not a trace file at all (UTF-16, gzip of gzip);
#: real parts reject a header line or a few bad lines, never nine in ten
GARBAGE_SHARE = 0.9
#: a byte that never occurs in a well-formed trace line; used as the "separator" when the
#: native reader is asked for whole lines (a line containing it sends the file down the
#: validated path, which does not depend on it)
_LINE_SEPARATOR = "\x1f"
_LINE = "line"
_GUARD = "__tracelab_guard"
#: the validated path keeps one partial line in memory; a longer "line" is not a CSV line
_MAX_LINE_BYTES = 64 << 20

REJECT_SCHEMA = pa.schema(
    [
        pa.field(SOURCE_FILE, pa.large_string()),
        pa.field("source_line", pa.int64()),
        pa.field("reason", pa.large_string()),
        pa.field("raw_text", pa.large_string()),
        # the exact bytes of the line (without its end-of-line), for lines that are not UTF-8
        pa.field("raw_bytes", pa.large_binary()),
    ]
)


@dataclass(frozen=True)
class RawFile:
    """One raw file of a table, as found under the raw root."""

    table: str
    path: Path
    #: path relative to the raw root, with forward slashes (the ``source_file`` value)
    rel: str
    size_bytes: int

    @property
    def stem(self) -> str:
        """Output name: the file name without ``.csv`` / ``.csv.gz``."""
        name = self.path.name
        for suffix in (".csv.gz", ".csv", *JSON_SUFFIXES):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name


@dataclass(frozen=True)
class RawProblem:
    """Something under the raw root that is not ingested, and why."""

    path: str
    reason: str
    #: True for a problem that makes the run fail (an unknown table folder)
    is_error: bool


@dataclass(frozen=True)
class RawDiscovery:
    """The files to ingest, sorted by table then path, and what was left out."""

    files: tuple[RawFile, ...]
    problems: tuple[RawProblem, ...]


@dataclass(frozen=True)
class LakePaths:
    """Where one raw file's outputs go under ``lake/<trace>``."""

    parquet: Path
    rejects: Path

    @property
    def parquet_tmp(self) -> Path:
        return self.parquet.with_name(self.parquet.name + TMP_SUFFIX)

    @property
    def rejects_tmp(self) -> Path:
        return self.rejects.with_name(self.rejects.name + TMP_SUFFIX)


@dataclass(frozen=True)
class Conversion:
    """The outcome of converting one raw file (outputs already renamed into place)."""

    status: Status
    method: Method
    rows_read: int
    rows_written: int
    rows_rejected: int
    #: empty when status is ok; otherwise the reason and what to do
    error: str
    seconds: float
    #: when the conversion began (UTC)
    started_at: datetime


class RawFileError(Exception):
    """The file cannot be ingested at all (unreadable, truncated or corrupt compression)."""


def discover_raw_files(trace: str, raw_root: Path) -> RawDiscovery:
    """Raw files of every table of ``trace`` under ``raw_root``, found with each ``Table.raw_glob``.

    A folder under the root that is not a table of the trace is an error naming the known tables;
    so is anything ingest would otherwise skip without a word: an unreadable file or folder, a
    FIFO or other special file, a dangling symlink, a part file at the wrong level (at the root or
    in a subfolder of a table folder). Other files in a table folder that do not match its glob
    are listed as ignored. For azure-2017 a single ``vmtable.csv[.gz]`` at the root (the published
    layout) is accepted as well.
    """
    if not raw_root.is_dir():
        raise FileNotFoundError(
            f"raw folder {raw_root} does not exist; pass --raw DIR or put the files there"
        )
    if partial_sample(raw_root):
        return RawDiscovery((), (_error(GENERATING_MARKER, _PARTIAL_SAMPLE),))
    root_entries = _listing(raw_root)
    tables = trace_tables(trace)
    files: list[RawFile] = []
    problems: list[RawProblem] = []
    seen: set[Path] = set()
    for name, tbl in sorted(tables.items()):
        candidates = sorted(raw_root.glob(tbl.raw_glob))
        if trace == "azure-2017":
            candidates += [raw_root / f"{name}{suffix}" for suffix in (".csv", ".csv.gz")]
        for path in candidates:
            if path.is_file() and path.name.endswith(RAW_SUFFIXES) and path not in seen:
                seen.add(path)
                unreadable = _unreadable(path)
                if unreadable:
                    problems.append(_error(path.relative_to(raw_root).as_posix(), unreadable))
                else:
                    files.append(_raw_file(tbl.name, path, raw_root))
    known = ", ".join(sorted(tables))
    for child in root_entries:
        if child.name.startswith("."):
            continue
        if child.is_dir() and child.name not in tables:
            problems.append(
                _error(
                    child.name,
                    f"unknown table folder {child.name!r} for {trace}; "
                    f"the known tables are: {known} (rename or move the folder)",
                )
            )
        elif child.is_dir():
            glob = tables[child.name].raw_glob
            problems += _folder_problems(child, raw_root, glob, seen, depth=1)
        elif child.name in tables:
            problems.append(_error(child.name, _not_a_folder(child)))
        elif child not in seen and (child.name.startswith("part-") or _is_leftover(child)):
            problems += _entry_problems(child, raw_root, "", seen, depth=0)
    if not files and not any(p.is_error for p in problems):
        globs = ", ".join(sorted(t.raw_glob for t in tables.values()))
        problems.append(
            _error(".", f"no raw files under {raw_root} (expected {globs}); check --raw")
        )
    return RawDiscovery(*_unique_output_names(files, problems))


def raw_files_present(raw_dir: Path) -> bool:
    """True when ``raw_dir`` holds a raw file (``.csv``/``.csv.gz``) and no partial sample.

    ``tracelab run`` generates the default sample when this is False, so a generation killed
    at any point is redone instead of leaving ingest with part of the sample: its folder keeps
    the generation marker, and a truth file or a leftover is not raw data.
    """
    if not raw_dir.is_dir() or partial_sample(raw_dir):
        return False
    return any(
        p.name.endswith(RAW_SUFFIXES)
        and not _is_leftover(p)
        and p.is_file()
        # a JSON file at the root is the generator's TRUTH.json, not a shard
        and not (p.name.endswith(JSON_SUFFIXES) and p.parent == raw_dir)
        for p in raw_dir.rglob("*")
    )


_PARTIAL_SAMPLE = (
    "partial sample left by an interrupted or failed `tracelab generate`: generate again into "
    "this folder (`tracelab run` does it by itself) or delete the folder"
)


def _not_a_folder(path: Path) -> str:
    """Why a table's name at the raw root is not its folder of part files."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            kind = "a symlink loop"
        elif path.is_symlink():
            kind = f"a dangling symlink (to {path.readlink()})"
        else:
            kind = f"unreadable ({exc.strerror or exc})"
    else:
        kind = "a plain file" if stat.S_ISREG(mode) else "a FIFO, socket or device"
    return (
        f"table folder {path.name!r} is {kind}, not a folder of part files; "
        "replace it by the folder"
    )


def _is_leftover(path: Path) -> bool:
    return any(fnmatch.fnmatchcase(path.name, pattern) for pattern in GENERATOR_LEFTOVERS)


def _error(rel: str, reason: str) -> RawProblem:
    return RawProblem(path=rel, reason=reason, is_error=True)


def _listing(raw_root: Path) -> list[Path]:
    """The raw root's entries; one line naming the folder when it cannot be read."""
    try:
        return sorted(raw_root.iterdir())
    except OSError as exc:
        raise TracelabError(
            f"cannot read raw folder {raw_root}: {exc.strerror or exc}; "
            "check its permissions (or pass another --raw DIR)"
        ) from None


def _unreadable(path: Path) -> str:
    """Why ``path`` cannot be opened for reading, or "" when it can."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        return f"cannot read the file: {exc.strerror or exc}; check its permissions"
    return ""


def _folder_problems(
    folder: Path, raw_root: Path, glob: str, seen: set[Path], depth: int
) -> list[RawProblem]:
    rel = folder.relative_to(raw_root).as_posix()
    try:
        children = sorted(folder.iterdir())
    except OSError as exc:
        return [
            _error(rel, f"cannot read the folder: {exc.strerror or exc}; check its permissions")
        ]
    problems: list[RawProblem] = []
    for child in children:
        problems += _entry_problems(child, raw_root, glob, seen, depth)
    return problems


def _entry_problems(
    path: Path, raw_root: Path, glob: str, seen: set[Path], depth: int
) -> list[RawProblem]:
    """What is wrong with one entry that discovery did not take (empty when it took it)."""
    rel = path.relative_to(raw_root).as_posix()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        target = path.readlink() if path.is_symlink() else "?"
        return [_error(rel, f"dangling symlink to {target}; fix or delete the link")]
    except OSError as exc:
        return [_error(rel, f"cannot read it: {exc.strerror or exc}; check its permissions")]
    if stat.S_ISDIR(mode):
        if path.is_symlink():
            return [_error(rel, "a linked folder inside a table folder is not read; link files")]
        return _folder_problems(path, raw_root, glob, seen, depth + 1)
    if not stat.S_ISREG(mode):
        return [_error(rel, "not a regular file (FIFO, socket or device); replace it by the file")]
    if path in seen:
        return []
    if _is_leftover(path):
        return [
            _error(
                rel,
                "left by an interrupted `tracelab generate`: generate again into this folder "
                "(it clears them) or delete the folder's generated files",
            )
        ]
    if depth != 1 and path.name.endswith(RAW_SUFFIXES):
        return [
            _error(
                rel,
                "part file at the wrong level: ingest reads <table>/part-*.csv[.gz] only "
                "(move it into its table folder)",
            )
        ]
    reason = (
        f"ignored: does not match {glob} with suffix .csv or .csv.gz "
        "(rename it to part-NNNNN-of-MMMMM.csv[.gz] to ingest it)"
    )
    if glob.endswith(".json*"):
        reason = f"ignored: does not match {glob} (the export's shard names end in .json[.gz])"
    return [RawProblem(path=rel, reason=reason, is_error=False)]


def _unique_output_names(
    files: list[RawFile], problems: list[RawProblem]
) -> tuple[tuple[RawFile, ...], tuple[RawProblem, ...]]:
    """Files sorted by table then path, the first of any two with the same output name kept."""
    files.sort(key=lambda f: (f.table, f.rel))
    kept: dict[tuple[str, str], RawFile] = {}
    for raw in files:
        first = kept.setdefault((raw.table, raw.stem), raw)
        if first is not raw:
            problems.append(
                _error(
                    raw.rel,
                    f"not ingested: same output name {raw.stem}.parquet as {first.rel} "
                    "(keep only one of the two files)",
                )
            )
    return tuple(kept.values()), tuple(problems)


def _raw_file(table_name: str, path: Path, raw_root: Path) -> RawFile:
    return RawFile(
        table=table_name,
        path=path,
        rel=path.relative_to(raw_root).as_posix(),
        size_bytes=path.stat().st_size,
    )


def lake_paths(lake_trace_dir: Path, raw: RawFile) -> LakePaths:
    """Output locations of one raw file under ``lake/<trace>``."""
    return LakePaths(
        parquet=lake_trace_dir / raw.table / f"{raw.stem}.parquet",
        rejects=lake_trace_dir / REJECTS_DIR / f"{raw.table}__{raw.stem}.parquet",
    )


def file_checksum(path: Path) -> str:
    """``xxh3-128:<hex>`` of the file's bytes as stored (compressed).

    The checksum detects changed and duplicate files; nothing here defends against a forger, so
    a cryptographic hash is not needed. XXH3-128 (rsync's default file checksum since 3.2.3)
    costs 0.04 CPU-s per 630 MB of gzip here against 0.34 for SHA-256 with the SHA extensions,
    i.e. ~1 % of the conversion instead of ~5 %, and 128 bits make an accidental collision among
    a trace's few thousand files negligible (~2^-105). Manifest rows written with ``sha256:``
    by earlier versions never match, so their files are converted once more (same output).
    """
    digest = xxhash.xxh3_128()
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as fh:
        while size := fh.readinto(buffer):
            digest.update(view[:size])
    return f"xxh3-128:{digest.hexdigest()}"


def remove_leftover_temp_files(lake_trace_dir: Path) -> list[Path]:
    """Delete ``*.tmp`` files a killed run left under ``lake/<trace>``; returns what was removed."""
    removed: list[Path] = []
    if lake_trace_dir.is_dir():
        for path in sorted(lake_trace_dir.rglob(f"*{TMP_SUFFIX}")):
            if path.is_file():
                path.unlink()
                removed.append(path)
    return removed


def publish_outputs(paths: LakePaths, *, has_rejects: bool) -> None:
    """Rename a finished conversion's temp files into place (rejects only when there are any)."""
    paths.parquet_tmp.replace(paths.parquet)
    if has_rejects:
        paths.rejects_tmp.replace(paths.rejects)
    else:
        paths.rejects_tmp.unlink(missing_ok=True)
        paths.rejects.unlink(missing_ok=True)


def publish_rejects_only(paths: LakePaths) -> None:
    """A file declared the wrong format: no typed output, every line in its rejects."""
    paths.parquet_tmp.unlink(missing_ok=True)
    paths.parquet.unlink(missing_ok=True)
    paths.rejects_tmp.replace(paths.rejects)


def remove_outputs(paths: LakePaths) -> None:
    """Delete a raw file's typed output and rejects (and their temp files), if present."""
    for path in (paths.parquet, paths.rejects, paths.parquet_tmp, paths.rejects_tmp):
        path.unlink(missing_ok=True)


def convert_file(
    table: Table,
    raw: RawFile,
    paths: LakePaths,
    *,
    chunk_bytes: int = 32 << 20,
    wrong_format_share: float = 0.5,
) -> Conversion:
    """Convert one raw file into its typed Parquet and rejects, atomically.

    ``chunk_bytes`` bounds the memory of the validated path; ``wrong_format_share`` is the share
    of lines with the wrong field count from which the whole file is declared the wrong format.
    """
    if chunk_bytes < 1:
        # a zero-byte read means end of file: every line would be lost, so refuse it
        raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
    started = time.perf_counter()
    started_at = datetime.now(UTC)
    paths.parquet.parent.mkdir(parents=True, exist_ok=True)
    paths.rejects.parent.mkdir(parents=True, exist_ok=True)
    for tmp in (paths.parquet_tmp, paths.rejects_tmp):
        tmp.unlink(missing_ok=True)
    try:
        rows = _native_convert(table, raw, paths.parquet_tmp)
        if rows is not None:
            paths.parquet_tmp.replace(paths.parquet)
            paths.rejects.unlink(missing_ok=True)
            return Conversion(
                "ok", "native", rows, rows, 0, "", time.perf_counter() - started, started_at
            )
        counts = _validated_convert(table, raw, paths, chunk_bytes)
    except RawFileError as exc:
        remove_outputs(paths)
        return Conversion(
            "error", "none", 0, 0, 0, str(exc), time.perf_counter() - started, started_at
        )
    except BaseException:
        for tmp in (paths.parquet_tmp, paths.rejects_tmp):
            tmp.unlink(missing_ok=True)
        raise
    error = _wrong_format_error(table, counts, wrong_format_share)
    if error:
        _reject_everything(table, raw, paths, counts, chunk_bytes)
        publish_rejects_only(paths)
        return Conversion(
            status="error",
            method="validated",
            rows_read=counts.rows_read,
            rows_written=0,
            rows_rejected=counts.rows_read,
            error=error,
            seconds=time.perf_counter() - started,
            started_at=started_at,
        )
    publish_outputs(paths, has_rejects=counts.rows_rejected > 0)
    return Conversion(
        status="ok",
        method="validated",
        rows_read=counts.rows_read,
        rows_written=counts.rows_written,
        rows_rejected=counts.rows_rejected,
        error="",
        seconds=time.perf_counter() - started,
        started_at=started_at,
    )


# --------------------------------------------------------------------------- native path


def _text_schema(table: Table) -> dict[str, pl.DataType]:
    # every field is read as text and typed by the same rules as the validated path
    return {c.name: pl.String() for c in table.columns}


def native_lake_query(table: Table, source: Path, source_file: str) -> pl.LazyFrame:
    """The native conversion as a lazy query; it raises on any line that is not clean.

    Polars only splits the lines into fields; :func:`value_rules` types them, so a value is
    valid on this path exactly when it is valid on the validated path.
    """
    # Polars reads an empty field as NULL already
    typed, checks = value_rules(table, empty_is_null=True)
    dirty = pl.any_horizontal([bad for bad, _ in checks])
    guard_failed = pl.when(dirty).then(pl.lit("dirty")).otherwise(pl.lit("0")).cast(pl.Int8)
    lf = pl.scan_csv(
        source,
        has_header=False,
        schema=_text_schema(table),
        quote_char=None,
        raise_if_empty=False,
    )
    return (
        lf.with_row_index(SOURCE_ROW, offset=1)
        # one select: the casts are shared by the typed columns and the guard
        .select(
            *typed,
            pl.lit(source_file, dtype=pl.String).alias(SOURCE_FILE),
            pl.col(SOURCE_ROW).cast(pl.Int64),
            # strict cast of "dirty" raises inside the streaming query: the whole query fails
            guard_failed.alias(_GUARD),
        )
        .filter(pl.col(_GUARD) == 0)
        .drop(_GUARD)
    )


#: a decimal number as the trace writes it; a float of this form that is not finite overflowed
_DECIMAL = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_DIGITS = r"^[+-]?[0-9]+$"


def value_rules(
    table: Table, *, empty_is_null: bool = False
) -> tuple[list[pl.Expr], list[tuple[pl.Expr, pl.Expr]]]:
    """The one definition of a valid value, over text columns named after the table's columns.

    Returns the typed columns and, per check, (a non-null boolean "this value is invalid", the
    reason). An empty field is NULL. Integers and booleans are what Polars' string cast accepts
    (digits with an optional sign; no spaces, no CR, no exponent), booleans 0 or 1; floats must
    be finite (``1e400`` is out of range, ``inf`` and ``nan`` are not numbers); text must not hold
    a NUL byte; a mandatory field must not be empty. ``empty_is_null`` says the reader already
    turned empty fields into NULL (Polars' CSV reader does), which saves a pass per column.
    """
    typed_columns: list[pl.Expr] = []
    checks: list[tuple[pl.Expr, pl.Expr]] = []
    for column in table.columns:
        name = column.name
        raw = pl.col(name)
        value = (
            raw
            if empty_is_null
            else pl.when(raw == "").then(pl.lit(None, dtype=pl.String)).otherwise(raw)
        )
        present = value.is_not_null()
        if column.kind in ("int", "bool"):
            typed = value.cast(pl.Int64, strict=False)
        elif column.kind == "float":
            typed = value.cast(pl.Float64, strict=False)
        else:
            typed = value
        unparsed = present & typed.is_null()
        if column.kind == "int":
            huge = value.str.contains(_DIGITS)
            checks.append(
                (
                    unparsed,
                    pl.when(huge)
                    .then(pl.format("{}: integer out of int64 range: '{}'", pl.lit(name), value))
                    .otherwise(pl.format("{}: not an integer: '{}'", pl.lit(name), value)),
                )
            )
        elif column.kind == "float":
            not_finite = present & ~typed.is_finite().fill_null(True)
            overflow = value.str.contains(_DECIMAL)
            checks.append(
                (
                    unparsed | not_finite,
                    pl.when(not_finite & overflow)
                    .then(pl.format("{}: number out of float64 range: '{}'", pl.lit(name), value))
                    .otherwise(pl.format("{}: not a number: '{}'", pl.lit(name), value)),
                )
            )
            typed = pl.when(not_finite).then(None).otherwise(typed)
        elif column.kind == "bool":
            bad = unparsed | (typed.is_not_null() & ~typed.is_in([0, 1]))
            checks.append((bad, pl.format("{}: expected 0 or 1, found '{}'", pl.lit(name), value)))
            typed = typed.cast(pl.Boolean)
        else:
            has_nul = value.str.contains("\x00", literal=True)
            checks.append((has_nul, pl.format("{}: NUL byte in text", pl.lit(name))))
        if column.mandatory:
            checks.append((value.is_null(), pl.lit(f"{name}: mandatory field is empty")))
        typed_columns.append(typed.alias(name))
    return typed_columns, [(bad.fill_null(False), message) for bad, message in checks]


def _native_convert(table: Table, raw: RawFile, out_tmp: Path) -> int | None:
    """Rows written by the native path, or None when the file needs the validated path."""
    if raw.size_bytes == 0:
        _empty_lake_file(table, out_tmp)
        return 0
    try:
        native_lake_query(table, raw.path, raw.rel).sink_parquet(out_tmp, compression="zstd")
    except pl.exceptions.PolarsError:
        out_tmp.unlink(missing_ok=True)
        return None
    except OSError:
        # unreadable / corrupt compression: the validated path reports it precisely
        out_tmp.unlink(missing_ok=True)
        return None
    metadata = pq.ParquetFile(out_tmp).metadata
    rows = int(metadata.num_rows)
    if _last_column_nulls(metadata, len(table.columns) - 1) and _has_short_line(
        table, raw, out_tmp
    ):
        out_tmp.unlink(missing_ok=True)
        return None
    return rows


def _last_column_nulls(metadata: pq.FileMetaData, index: int) -> bool:
    for g in range(metadata.num_row_groups):
        stats = metadata.row_group(g).column(index).statistics
        if stats is None or not stats.has_null_count or stats.null_count > 0:
            return True
    return False


def _has_short_line(table: Table, raw: RawFile, written: Path) -> bool:
    """True when a line whose last field parsed as NULL has fewer fields than the table.

    Polars pads a short line with NULLs, which is indistinguishable from empty trailing fields
    once parsed. Only lines whose last column is NULL can be short, so those line numbers are
    read back from the just-written Parquet and only those lines' commas are counted (the file
    is read again as whole lines, natively; no per-line work for the others).
    """
    last = table.columns[-1].name
    suspects = (
        pl.scan_parquet(written).filter(pl.col(last).is_null()).select(SOURCE_ROW).collect()
    )[SOURCE_ROW]
    expected = len(table.columns) - 1
    try:
        short = (
            pl.scan_csv(
                raw.path,
                has_header=False,
                separator=_LINE_SEPARATOR,
                quote_char=None,
                schema={_LINE: pl.String()},
                raise_if_empty=False,
            )
            .with_row_index("n", offset=1)
            .filter(pl.col("n").cast(pl.Int64).is_in(suspects.implode()))
            .filter(pl.col(_LINE).str.count_matches(",", literal=True) != expected)
            .select(pl.len())
            .collect()
            .item()
        )
    except (pl.exceptions.PolarsError, OSError):
        return True
    return int(short) > 0


def _empty_lake_file(table: Table, out: Path) -> None:
    pl.DataFrame(schema=lake_polars_schema(table)).write_parquet(out, compression="zstd")


def lake_polars_schema(table: Table) -> dict[str, pl.DataType]:
    """Polars schema of a lake file: typed published columns, then source_file, source_row."""
    return {**table.polars_schema(), SOURCE_FILE: pl.String(), SOURCE_ROW: pl.Int64()}


# ------------------------------------------------------------------------ validated path


@dataclass(frozen=True)
class _Counts:
    rows_read: int
    rows_written: int
    rows_rejected: int
    #: lines with the wrong field count, and the most common such count
    wrong_field_count: int
    typical_wrong_count: int


def _open_raw(raw: RawFile) -> BinaryIO:
    try:
        fh = raw.path.open("rb")
        magic = fh.read(2)
        fh.seek(0)
    except OSError as exc:
        raise RawFileError(
            f"cannot read {raw.rel}: {exc.strerror or exc}; check the file's permissions"
        ) from exc
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


def _physical_lines(raw: RawFile, chunk_bytes: int) -> Iterator[bytes]:
    """Chunks of the decompressed file, each ending at a line end (the last may not)."""
    fh = _open_raw(raw)
    try:
        with fh:
            # a UTF-8 BOM is an encoding mark, not data: Polars' reader drops it too
            carry = _read_block(fh, len(_UTF8_BOM), raw).removeprefix(_UTF8_BOM)
            while block := _read_block(fh, chunk_bytes, raw):
                data = carry + block
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) > max(4 * chunk_bytes, _MAX_LINE_BYTES):
                        raise RawFileError(
                            f"{raw.rel} has a line longer than {len(data) >> 20} MB: it is not a "
                            "trace CSV file (check what was copied there)"
                        )
                    carry = data
                    continue
                carry = data[cut + 1 :]
                yield data[: cut + 1]
    finally:
        fh.close()
    if carry:
        yield carry


def _read_block(fh: BinaryIO, size: int, raw: RawFile) -> bytes:
    try:
        return fh.read(size)
    except (EOFError, OSError, zlib.error) as exc:
        raise RawFileError(
            f"{raw.rel} is truncated or its compression is corrupt ({exc}); "
            "download or copy the file again"
        ) from exc


def _chunk_lines(chunk: bytes, first_line: int) -> pl.DataFrame:
    """One row per physical line of ``chunk``: source_line, text (NULL if not UTF-8), raw bytes."""
    arr = np.frombuffer(chunk, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    if len(ends) == 0 or ends[-1] != len(arr) - 1:
        ends = np.append(ends, len(arr))  # last line without a newline
    starts = np.concatenate(([0], ends[:-1] + 1))
    # a line's content ends before "\n" and before a "\r" that precedes it (CRLF files)
    stop = ends.copy()
    has_cr = (stop > starts) & (arr[np.maximum(stop - 1, 0)] == 13)
    stop[has_cr] -= 1
    n = len(starts)
    raw_bytes = [chunk[s:e] for s, e in zip(starts.tolist(), stop.tolist(), strict=True)]
    try:
        text: list[str | None] = [b.decode("utf-8") for b in raw_bytes]
    except UnicodeDecodeError:
        text = [_utf8_or_none(b) for b in raw_bytes]
    return pl.DataFrame(
        {
            "source_line": np.arange(first_line, first_line + n, dtype=np.int64),
            "text": pl.Series(text, dtype=pl.String),
            "raw_bytes": pl.Series(raw_bytes, dtype=pl.Binary),
        }
    )


def _utf8_or_none(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _header_names(table: Table) -> list[str]:
    names = {c.name for c in table.columns}
    names |= {c.official.lower().replace(" ", "_") for c in table.columns}
    return sorted(names)


def _expected_fields_text(table: Table) -> str:
    return f"expected {len(table.columns)} fields ({', '.join(table.column_names)})"


def validated_frame(table: Table, lines: pl.DataFrame) -> pl.DataFrame:
    """Per line: the typed columns, and ``reason`` (NULL for a good line, else why it is rejected).

    Also ``n_fields`` (the line's field count) and ``wrong_field_count`` (rejected for that
    reason). Values are typed by :func:`value_rules`, as on the native path. Pure: tests call it
    directly.
    """
    n_cols = len(table.columns)
    text = pl.col("text")
    fields = text.str.split_exact(",", n_cols - 1).struct.rename_fields(table.column_names)
    typed, checks = value_rules(table)
    problems = [pl.when(bad).then(message) for bad, message in checks]
    lowered = text.str.to_lowercase().str.split(",")
    header_like = lowered.list.eval(
        pl.element().str.strip_chars().is_in(_header_names(table))
    ).list.any()
    n_fields = text.str.count_matches(",", literal=True) + 1
    expected = _expected_fields_text(table)
    blank = pl.col("raw_bytes").bin.size() == 0
    has_nul = text.str.contains("\x00", literal=True)
    reason = (
        pl.when(blank)
        .then(pl.lit("blank line"))
        .when(text.is_null())
        .then(pl.lit("invalid UTF-8 bytes"))
        .when(has_nul)
        .then(pl.lit("NUL byte in line"))
        .when((n_fields != n_cols) & header_like)
        .then(pl.format("header line (column names), {}, found {}", pl.lit(expected), n_fields))
        .when(n_fields != n_cols)
        .then(pl.format("{}, found {}", pl.lit(expected), n_fields))
        .when(header_like)
        .then(pl.lit("header line (column names); the published files have no header"))
        .otherwise(pl.concat_str(problems, separator="; ", ignore_nulls=True))
    )
    # Polars' reader drops one CR at the end of every field, as the CR of a CRLF line end (which
    # _chunk_lines drops for the last field): the same bytes give the same value on both paths
    cr_dropped = [pl.col(c).str.strip_suffix("\r") for c in table.column_names[:-1]]
    return (
        lines.with_columns(fields.alias("_fields"))
        .unnest("_fields")
        .with_columns(cr_dropped)
        .select(
            "source_line",
            "text",
            "raw_bytes",
            n_fields.cast(pl.Int64).alias("n_fields"),
            (~blank & text.is_not_null() & ~has_nul & (n_fields != n_cols))
            .fill_null(False)
            .alias("wrong_field_count"),
            pl.when(reason == "")
            .then(pl.lit(None, dtype=pl.String))
            .otherwise(reason)
            .alias("reason"),
            *typed,
        )
    )


def _validated_convert(table: Table, raw: RawFile, paths: LakePaths, chunk_bytes: int) -> _Counts:
    lake_schema = _lake_arrow_schema(table)
    rows_read = written = rejected = wrong = 0
    wrong_counts: dict[int, int] = {}
    with (
        pq.ParquetWriter(paths.parquet_tmp, lake_schema, compression="zstd") as good_out,
        pq.ParquetWriter(paths.rejects_tmp, REJECT_SCHEMA, compression="zstd") as bad_out,
    ):
        for chunk in _physical_lines(raw, chunk_bytes):
            frame = validated_frame(table, _chunk_lines(chunk, rows_read + 1))
            rows_read += frame.height
            good = frame.filter(pl.col("reason").is_null())
            bad = frame.filter(pl.col("reason").is_not_null())
            if good.height:
                typed = good.select(
                    *table.column_names,
                    pl.lit(raw.rel, dtype=pl.String).alias(SOURCE_FILE),
                    pl.col("source_line").alias(SOURCE_ROW),
                )
                good_out.write_table(typed.to_arrow().cast(lake_schema))
                written += good.height
            if bad.height:
                bad_out.write_table(_reject_table(bad, raw.rel))
                rejected += bad.height
                miscounted = bad.filter(pl.col("wrong_field_count"))
                wrong += miscounted.height
                for k, v in miscounted.group_by("n_fields").len().iter_rows():
                    wrong_counts[int(k)] = wrong_counts.get(int(k), 0) + int(v)
    typical = max(wrong_counts, key=lambda k: wrong_counts[k]) if wrong_counts else 0
    return _Counts(rows_read, written, rejected, wrong, typical)


def _reject_table(bad: pl.DataFrame, source_file: str) -> pa.Table:
    frame = bad.select(
        pl.lit(source_file, dtype=pl.String).alias(SOURCE_FILE),
        "source_line",
        "reason",
        # lines that are not UTF-8 keep a readable text with U+FFFD and their exact bytes
        pl.coalesce(
            "text",
            pl.col("raw_bytes").map_elements(
                lambda b: b.decode("utf-8", errors="replace"), return_dtype=pl.String
            ),
        ).alias("raw_text"),
        "raw_bytes",
    )
    return frame.to_arrow().cast(REJECT_SCHEMA)


def _wrong_format_error(table: Table, counts: _Counts, share: float) -> str:
    """Why the whole file is the wrong format, or "" when it is not.

    A file is the wrong format when at least ``share`` of its lines have the wrong field count,
    or when (nearly) every line is rejected for any reason (:data:`GARBAGE_SHARE`): a UTF-16
    file or a gzip of a gzip may have the right commas, but not one valid line, and must not
    pass as ok with nothing written.
    """
    if counts.rows_read == 0:
        return ""
    hint = (
        " — is this the original headerless vmtable?"
        if table.trace == "azure-2017"
        else f" — is this an original headerless {table.name} part file?"
    )
    kept = f"(every line kept in {REJECTS_DIR}/{table.name}__*.parquet)"
    if counts.wrong_field_count >= share * counts.rows_read:
        return (
            f"{_expected_fields_text(table)}, found {counts.typical_wrong_count} in "
            f"{counts.wrong_field_count} of {counts.rows_read} lines{hint} {kept}"
        )
    if counts.rows_rejected >= GARBAGE_SHARE * counts.rows_read:
        return (
            f"{counts.rows_rejected} of {counts.rows_read} lines rejected{hint} (UTF-8 CSV, "
            f"compressed at most once) {kept}"
        )
    return ""


def _reject_everything(
    table: Table, raw: RawFile, paths: LakePaths, counts: _Counts, chunk_bytes: int
) -> None:
    """Rewrite the rejects so they hold every line of a file declared the wrong format."""
    if counts.wrong_field_count >= counts.rows_rejected - counts.wrong_field_count:
        whole_file = (
            f"file rejected: most lines have the wrong field count ({counts.typical_wrong_count}"
            f" instead of {len(table.columns)})"
        )
    else:
        whole_file = f"file rejected: {counts.rows_rejected} of {counts.rows_read} lines invalid"
    paths.rejects_tmp.unlink(missing_ok=True)
    line = 0
    with pq.ParquetWriter(paths.rejects_tmp, REJECT_SCHEMA, compression="zstd") as out:
        for chunk in _physical_lines(raw, chunk_bytes):
            frame = validated_frame(table, _chunk_lines(chunk, line + 1))
            line += frame.height
            frame = frame.with_columns(pl.col("reason").fill_null(pl.lit(whole_file)))
            out.write_table(_reject_table(frame, raw.rel))


def _lake_arrow_schema(table: Table) -> pa.Schema:
    # the same Arrow schema Polars writes on the native path (large strings, all nullable),
    # so files from both paths read back identically
    fields = []
    for field in table.arrow_schema():
        dtype = pa.large_string() if pa.types.is_string(field.type) else field.type
        fields.append(pa.field(field.name, dtype, nullable=True))
    return pa.schema(fields)
