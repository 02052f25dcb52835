"""Lossless raw CSV(.gz) → typed Parquet conversion of one trace file.

Every physical line of a raw file ends up in exactly one place: a typed row of
``lake/<trace>/<table>/<name>.parquet`` or a row of ``lake/<trace>/_rejects/<table>__<name>.parquet``
(``<name>``: :func:`lake_name`, unique per raw path)
(``source_file, source_line, reason, raw_text, raw_bytes``), so that for every file
``rows_read = rows_written + rows_rejected``.

A file is read once (:class:`analysis.lake.ingest_stream.RawStream`), in chunks of whole lines of its
decompressed bytes, which also yields its two digests: of the bytes as stored (``checksum``: an
unchanged file) and of the decompressed bytes (``content``: the file's identity, whatever its
name or compression). Each chunk is typed by one of two paths:

* **fast** (:func:`fast_chunk`) — Polars' CSV reader parses the fields straight into their types
  (booleans as 0/1 integers); the value rules (:func:`rules_hold`) are vectorised expressions
  on the typed columns, and the chunk is kept only when every line passes. No text is kept. The
  few ways the reader is more lenient than the rules (a number after a space or tab, a short
  line padded with NULLs) are caught on the chunk's bytes.
* **validated** — for a chunk with any line that is not clean: the chunk is split into physical
  lines with numpy, typed by the same rules, and each rejected line gets its number and a reason
  quoting its text.

The manifest's ``method`` is ``native`` when every chunk took the fast path, else ``validated``.

Outputs are written as ``*.tmp`` and renamed into place only when complete; the caller (the
flow) records the outcome in the manifest (:mod:`analysis.lake.ingest_manifest`).

Choices (documented in the README):

* blank line → rejected ("blank line"); it is a physical line, so it is counted in ``rows_read``;
* CRLF line endings → accepted, the ``\\r`` is dropped; so is one ``\\r`` ending any field (Polars'
  reader drops it, and both paths must give the same value for the same bytes);
* a UTF-8 BOM at the start of a file → dropped by both paths;
* a value is valid by one definition on both paths (:func:`invalid_parsed`):
  what Polars' number parser accepts, with no surrounding spaces, and floats finite (``1e400`` is rejected as out of range, ``inf``/``nan`` as not numbers);
* (nearly) every line rejected (UTF-16, a gzip of a gzip) → status error, every line in the rejects;
* empty file (0 bytes, or a gzip of nothing) → status ok, 0 rows, an empty typed Parquet file;
* same content as another file (any name or compression) → status duplicate, no output
  (see :mod:`analysis.lake.ingest_identity`);
* an integer that does not fit int64, a non-number in a numeric column, a boolean other than
  0/1, invalid UTF-8, a NUL byte, the wrong field count, a header line → rejected with the reason;
* when at least half of a file's lines have the wrong field count the file is the wrong format:
  status error naming the expected columns, every line kept in the rejects, no typed output.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.generating import GENERATING_MARKER, partial_sample
from tracelab.analysis.lake.ingest_stream import (
    DIGEST_PREFIX,
    RawFileError,
    RawStream,
    WriteBehind,
    read_ahead,
)
from tracelab.analysis.lake.schemas import SOURCE_FILE, SOURCE_ROW, Column, Table, trace_tables
from tracelab.analysis.traces import trace_spec

__all__ = ["RawFileError"]  # re-exported: callers catch it from here

Status = Literal["ok", "skipped-unchanged", "duplicate", "error"]
Method = Literal["native", "validated", "none"]

TMP_SUFFIX = ".tmp"
REJECTS_DIR = "_rejects"
MANIFEST_NAME = "_manifest.parquet"
#: names of the parts a generator writes before they are complete (analysis.synthetic.csvparts)
GENERATOR_LEFTOVERS = ("_pending-*", "_*.csv.gz.tmp")
#: raw file suffixes ingest reads; anything else in a table folder is listed as ignored
RAW_SUFFIXES = (".csv", ".csv.gz", ".json.gz", ".json")
#: suffixes of JSON-lines shards (Google's v3 export); the others are CSV
JSON_SUFFIXES = (".json.gz", ".json")
#: share of rejected lines from which a file is not a trace file at all (UTF-16, gzip of gzip);
#: real parts reject a header line or a few bad lines, never nine in ten
GARBAGE_SHARE = 0.9
#: decompressed bytes typed at once by the fast path: large enough that Polars' per-call cost
#: is amortised, small enough that glibc reuses the freed chunk copies from its heap instead of
#: growing it (larger chunks page-fault about twice as often)
FAST_CHUNK_BYTES = 12 << 20
#: zstd at level 1, for the rejects (and the lake files of JSON-lines tables)
ZSTD: dict[str, Any] = {"compression": "zstd", "compression_level": 1}
#: the lake files' codec: LZ4. With row groups of LAKE_ROW_GROUP_ROWS most pages hold dictionary
#: indices, which zstd compresses only ~5% smaller at a higher CPU cost
LAKE_CODEC: dict[str, Any] = {"compression": "lz4"}
#: rows per row group of a lake file, at least: typed chunks are gathered to this many before they
#: are written, because each row group costs the writer a fresh dictionary and codec per column.
#: Arrow's 1 MB dictionary pages hold the real trace's repeating values. Memory: at most two
#: groups per conversion (one gathering, one being written), ~190 MB each for task_usage
LAKE_ROW_GROUP_ROWS = 1 << 20

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
    #: ``xxh3-128:`` digests of the file as stored and of its decompressed bytes, from the
    #: conversion's one read ("" when it could not read the file to the end)
    checksum: str = ""
    content: str = ""
    #: hex SHA-256 of the file as stored, from the same read ("" as above)
    sha256: str = ""


def discover_raw_files(trace: str, raw_root: Path) -> RawDiscovery:
    """Raw files of every table of ``trace`` under ``raw_root``, found with each ``Table.raw_glob``.

    A folder under the root that is not a table of the trace is an error naming the known tables;
    so is anything ingest would otherwise skip without a word: an unreadable file or folder, a
    FIFO or other special file, a dangling symlink, a part file at the wrong level (at the root or
    in a subfolder of a table folder). Other files in a table folder that do not match its glob
    are listed as ignored. A table declared ``at_root`` may also be one ``<table>.csv[.gz]`` at the
    root (Azure's published layout).
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
        if tbl.at_root:
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
    files.sort(key=lambda f: (f.table, f.rel))
    return RawDiscovery(tuple(files), tuple(problems))


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


def _raw_file(table_name: str, path: Path, raw_root: Path) -> RawFile:
    return RawFile(
        table=table_name,
        path=path,
        rel=path.relative_to(raw_root).as_posix(),
        size_bytes=path.stat().st_size,
    )


def lake_name(table: str, rel: str) -> str:
    """The name of a raw file's outputs: its path in its table folder, percent-encoded.

    Two raw files never share it: ``part-0.csv`` and ``part-0.csv.gz`` keep their suffixes, and
    a file outside the table folder (a table published as one file at the raw root) is encoded
    from its whole path after ``%2F``, which no encoded name in the folder starts with (``%``
    itself is encoded).
    """
    inside = rel.removeprefix(f"{table}/")
    if inside == rel or "/" in inside:
        return "%2F" + quote(rel, safe="")
    return quote(inside, safe="")


def lake_paths(lake_trace_dir: Path, table: str, rel: str) -> LakePaths:
    """Output locations of the raw file ``rel`` (relative to the raw root) of ``table``."""
    name = lake_name(table, rel)
    return LakePaths(
        parquet=lake_trace_dir / table / f"{name}.parquet",
        rejects=lake_trace_dir / REJECTS_DIR / f"{table}__{name}.parquet",
    )


def file_checksum(path: Path) -> str:
    """``xxh3-128:<hex>`` of the file's bytes as stored (compressed), without decompressing it.

    The checksum tells an unchanged file and a byte-for-byte copy before converting anything
    (a conversion computes it too, in its one read, with the content digest); nothing here defends against a forger, so
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
    return DIGEST_PREFIX + digest.hexdigest()


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
    """Convert one raw file into its typed Parquet and rejects, atomically, in one read.

    ``chunk_bytes`` bounds the decompressed bytes handled at once (at most
    :data:`FAST_CHUNK_BYTES`); ``wrong_format_share`` is the share of lines with the wrong field
    count from which the whole file is declared the wrong format.
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
        counts = _convert_chunks(table, raw, paths, min(chunk_bytes, FAST_CHUNK_BYTES), fast=True)
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
    else:
        publish_outputs(paths, has_rejects=counts.rows_rejected > 0)
    return Conversion(
        status="error" if error else "ok",
        method="validated" if counts.validated_chunks else "native",
        rows_read=counts.rows_read,
        rows_written=0 if error else counts.rows_written,
        rows_rejected=counts.rows_read if error else counts.rows_rejected,
        error=error,
        seconds=time.perf_counter() - started,
        started_at=started_at,
        checksum=counts.checksum,
        content=counts.content,
        sha256=counts.sha256,
    )


@dataclass(frozen=True)
class _Counts:
    rows_read: int
    rows_written: int
    rows_rejected: int
    #: lines with the wrong field count, and the most common such count
    wrong_field_count: int
    typical_wrong_count: int
    #: chunks that went through the validated path (0: the fast path typed every line)
    validated_chunks: int = 0
    #: digests of the stored and of the decompressed bytes (see :class:`RawStream`)
    checksum: str = ""
    content: str = ""
    sha256: str = ""


@dataclass
class _Tally:
    """Running counts of one conversion."""

    rows_read: int = 0
    rows_written: int = 0
    rows_rejected: int = 0
    wrong: int = 0
    validated_chunks: int = 0
    wrong_counts: dict[int, int] = field(default_factory=dict)

    def counts(self, stream: RawStream) -> _Counts:
        wrong_counts = self.wrong_counts
        typical = max(wrong_counts, key=lambda k: wrong_counts[k]) if wrong_counts else 0
        return _Counts(
            self.rows_read,
            self.rows_written,
            self.rows_rejected,
            self.wrong,
            typical,
            self.validated_chunks,
            stream.checksum,
            stream.content,
            stream.sha256,
        )


def _convert_chunks(
    table: Table, raw: RawFile, paths: LakePaths, chunk_bytes: int, *, fast: bool
) -> _Counts:
    """One read of the file, chunk by chunk: typed rows to ``parquet_tmp``, rejects to
    ``rejects_tmp``.

    A chunk whose every line is clean is typed by the fast path (:func:`fast_chunk`), any other
    chunk by the validated path, which gives each rejected line its number and reason; so one
    bad line costs the validated path one chunk, not the file. ``fast=False`` validates every
    chunk: the reference the fast path is tested against.
    """
    stream = RawStream(raw.path, raw.rel, chunk_bytes)
    tally = _Tally()
    schema = _lake_arrow_schema(table)
    with (
        _lake_writer(paths.parquet_tmp, schema) as good_out,
        pq.ParquetWriter(paths.rejects_tmp, REJECT_SCHEMA, **ZSTD) as bad_out,
        # reading ahead and writing behind: decompression, typing and writing overlap
        WriteBehind(lambda group: good_out.write_table(group, group.num_rows)) as write_good,
    ):
        group = _RowGroup()
        for chunk in read_ahead(stream.chunks()):
            first = tally.rows_read + 1
            typed = fast_chunk(table, chunk) if fast else None
            if typed is None:
                good = _validated_chunk(table, chunk, first, raw.rel, tally, bad_out)
                rows = good.get_column(SOURCE_ROW).to_arrow()
                good = good.drop(SOURCE_ROW)
            else:
                good, rows = typed, _row_numbers(first, typed.height)
                tally.rows_read += typed.height
            if good.height:
                group.add(_lake_table(good, rows, raw.rel, schema))
                tally.rows_written += good.height
            if group.rows >= LAKE_ROW_GROUP_ROWS:
                write_good.submit(group.take())
        if group.rows:
            write_good.submit(group.take())
    return tally.counts(stream)


@dataclass
class _RowGroup:
    """Typed chunks waiting to be written as one row group of the lake file (see
    :data:`LAKE_ROW_GROUP_ROWS`)."""

    tables: list[pa.Table] = field(default_factory=list)
    rows: int = 0

    def add(self, typed: pa.Table) -> None:
        self.tables.append(typed)
        self.rows += typed.num_rows

    def take(self) -> pa.Table:
        # zero-copy: the chunks stay separate arrays, the writer encodes them as one row group
        group = pa.concat_tables(self.tables)
        self.tables, self.rows = [], 0
        return group


def _lake_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """The lake file's writer: LZ4 (:data:`LAKE_CODEC`), dictionary pages, row numbers
    delta-encoded.

    ``source_row`` counts up by one: delta encoding stores it in a few bits per row instead of
    eight bytes (10 MB less per published-size part) and for less CPU than a dictionary try.
    The Arrow schema is not stored (``source_file`` is written from a one-entry dictionary):
    every reader sees the Parquet types, String for text.
    """
    return pq.ParquetWriter(
        path,
        schema,
        use_dictionary=[f.name for f in schema if f.name != SOURCE_ROW],
        column_encoding={SOURCE_ROW: "DELTA_BINARY_PACKED"},
        store_schema=False,
        **LAKE_CODEC,
    )


def _lake_table(
    good: pl.DataFrame, rows: pa.Array, source_file: str, schema: pa.Schema
) -> pa.Table:
    """Typed rows and their line numbers (``source_row``) as an Arrow table of the lake schema.

    The typed columns keep the chunks Polars' reader made (one per block it parsed): joining
    them with a one-chunk column in one frame would copy every column into one chunk first
    (0.14 CPU-s and 15,000 page faults per published-size part). ``source_file`` is
    one dictionary entry and an index per row: the writer never hashes or compares the same path
    once per row.
    """
    columns = good.select(schema.names[:-2]).to_arrow()
    # Polars Series, not `pa.array` (of a list or an ndarray it imports pandas to check for its
    # types: ~0.5 CPU-s of every command's fixed cost) nor numpy (glibc memory that lives until
    # the row group is written, between the stream's buffers: they could no longer be reused)
    indices = pl.repeat(0, good.height, dtype=pl.Int32, eager=True).to_arrow()
    entry = pl.Series([source_file], dtype=pl.String).to_arrow().cast(pa.large_string())
    source = pa.DictionaryArray.from_arrays(indices, entry)
    return pa.Table.from_arrays([*columns.columns, source, rows], schema=schema)


def _row_numbers(first: int, count: int) -> pa.Array:
    """The line numbers ``first`` .. ``first + count - 1`` as an Arrow int64 array."""
    return pl.int_range(first, first + count, dtype=pl.Int64, eager=True).to_arrow()


def _validated_chunk(
    table: Table,
    chunk: bytes,
    first_line: int,
    source_file: str,
    tally: _Tally,
    bad_out: pq.ParquetWriter,
) -> pl.DataFrame:
    """The good rows of a chunk checked line by line (with ``source_row``); rejects written."""
    good, bad = validated_frames(table, _chunk_lines(chunk, first_line))
    tally.rows_read += good.height + bad.height
    tally.validated_chunks += 1
    if bad.height:
        bad_out.write_table(_reject_table(bad, source_file))
        tally.rows_rejected += bad.height
        miscounted = bad.filter(pl.col("wrong_field_count"))
        tally.wrong += miscounted.height
        for k, v in miscounted.group_by("n_fields").len().iter_rows():
            tally.wrong_counts[int(k)] = tally.wrong_counts.get(int(k), 0) + int(v)
    return good.select(*_lake_columns(table), pl.col("source_line").alias(SOURCE_ROW))


def _validated_convert(table: Table, raw: RawFile, paths: LakePaths, chunk_bytes: int) -> _Counts:
    """Every chunk through the validated path (the reference of the differential test)."""
    return _convert_chunks(table, raw, paths, chunk_bytes, fast=False)


# ----------------------------------------------------------------------------- fast path


def _read_schema(table: Table) -> dict[str, pl.DataType]:
    """What the reader parses each column as: booleans as the integers 0/1 of the files."""
    return {c.name: _READ_TYPE[c.kind] for c in table.columns}


def _text_schema(table: Table) -> dict[str, pl.DataType]:
    return {c.name: pl.String() for c in table.columns}


def fast_chunk(table: Table, chunk: bytes) -> pl.DataFrame | None:
    """The typed columns of a chunk of whole lines, or None when any line is not clean.

    Polars' CSV reader types the fields (it raises on a value it cannot parse, on a line with
    too many fields and on invalid UTF-8); then the chunk must pass the validated path's value
    rules, vectorised on the typed columns (:func:`rules_hold`). No text is kept: a chunk with a failing line
    goes to the validated path, which quotes the text in the reason. Where the reader is more
    lenient than the validated path's cast (its number parser skips a leading space or tab) the
    chunk is read as text and cast the validated path's way. A NUL byte is always a reject.
    """
    if b"\x00" in chunk:
        return None
    as_text = (b" " in chunk or b"\t" in chunk) and any(c.kind != "str" for c in table.columns)
    try:
        frame = pl.read_csv(
            chunk,
            has_header=False,
            schema=_text_schema(table) if as_text else _read_schema(table),
            quote_char=None,
            raise_if_empty=False,
        )
        if as_text:
            # strict: a value the validated path's cast does not parse fails the chunk
            frame = frame.select(
                pl.col(c.name).cast(_READ_TYPE[c.kind], strict=True) for c in table.columns
            )
    except pl.exceptions.PolarsError:
        return None
    if not rules_hold(table, frame) or _has_short_line(table, chunk, frame):
        return None
    return frame.select(_lake_columns(table))


def rules_hold(table: Table, frame: pl.DataFrame) -> bool:
    """True when every row of a typed frame meets the value rules, by one reduction per column.

    The rules are :func:`invalid_parsed` and "a mandatory field is not empty", the validated
    path's; reduced instead of a mask per row: a float column's sum is finite exactly when every
    value is (NaN and ±inf propagate; a sum that overflows on finite values only sends the
    chunk to the validated path), an integer column of booleans has its min and max in 0..1,
    a mandatory column has no NULL (a count Polars keeps). A blank line reads as a row of
    NULLs, so the mandatory first column of every table rejects it too.
    """
    if any(frame[c.name].null_count() for c in table.columns if c.mandatory):
        return False
    reductions: list[pl.Expr] = []
    for column in table.columns:
        typed = pl.col(column.name)
        if column.kind == "float":
            reductions.append(typed.sum().is_finite())
        elif column.kind == "bool":
            reductions.append(((typed.min() >= 0) & (typed.max() <= 1)).fill_null(True))
    if not any(c.mandatory for c in table.columns):
        reductions.append(~pl.all_horizontal(pl.all().is_null()).any())
    return not reductions or all(frame.select(reductions).row(0))


def _lake_columns(table: Table) -> list[pl.Expr]:
    """The typed columns as the lake stores them: booleans from the integers 0/1."""
    return [
        pl.col(c.name).cast(pl.Boolean) if c.kind == "bool" else pl.col(c.name)
        for c in table.columns
    ]


def _has_short_line(table: Table, chunk: bytes, frame: pl.DataFrame) -> bool:
    """True when a line of the chunk has fewer fields than the table.

    Polars pads a short line with NULLs, which looks like empty trailing fields once parsed (it
    raises on a line with too many). So when the last column has a NULL, the chunk holds only
    lines of the right field count exactly when it has (columns - 1) commas per line (without
    quoting every comma separates). Counting costs ~0.4 ms per MB, only in such chunks.
    """
    if frame.height == 0 or frame[table.columns[-1].name].null_count() == 0:
        return False
    return chunk.count(b",") != frame.height * (len(table.columns) - 1)


# ----------------------------------------------------------------------------- value rules

#: a decimal number as the trace writes it; a float of this form that is not finite overflowed
_DECIMAL = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_DIGITS = r"^[+-]?[0-9]+$"
_READ_TYPE: dict[str, pl.DataType] = {
    "int": pl.Int64(),
    "float": pl.Float64(),
    "str": pl.String(),
    "bool": pl.Int64(),
}


def invalid_parsed(column: Column, typed: pl.Expr) -> pl.Expr | None:
    """A parsed value of ``column`` that is still invalid, or None when every parsed value is valid.

    Parsed means what Polars' number parser accepts (digits with an optional sign for integers
    and booleans, no space, no exponent in an integer). Floats must also be finite (``1e400``
    overflowed, ``inf`` and ``nan`` are not numbers), booleans 0 or 1.
    """
    if column.kind == "float":
        return ~typed.is_finite()
    if column.kind == "bool":
        return ~typed.is_in([0, 1])
    return None


def _text_column(name: str) -> str:
    return f"__text_{name}"


def _typed_from_text(table: Table) -> list[pl.Expr]:
    """The validated path's typing: each text field cast (an empty field is NULL)."""
    typed: list[pl.Expr] = []
    for column in table.columns:
        text = pl.col(_text_column(column.name))
        value = pl.when(text == "").then(pl.lit(None, dtype=pl.String)).otherwise(text)
        typed.append(value.cast(_READ_TYPE[column.kind], strict=False).alias(column.name))
    return typed


def _value_problems(table: Table) -> tuple[pl.Expr, list[pl.Expr]]:
    """Over the text and typed columns: "some value is invalid", and each value's reason.

    A value is invalid when the cast does not parse it or :func:`invalid_parsed` says so; a
    mandatory field must not be empty. The reasons quote the text (NULL where the value is
    fine); they are computed only for the lines that fail.
    """
    flags: list[pl.Expr] = []
    reasons: list[pl.Expr] = []
    for column in table.columns:
        name = column.name
        text = pl.col(_text_column(name))
        typed = pl.col(name)
        present = text.is_not_null() & (text != "")
        bad = present & typed.is_null()
        invalid = invalid_parsed(column, typed)
        if invalid is not None:
            bad = bad | (present & invalid)
        flags.append(bad)
        reasons.append(pl.when(bad).then(_value_reason(column, text)))
        if column.mandatory:
            flags.append(~present)
            reasons.append(pl.when(~present).then(pl.lit(f"{name}: mandatory field is empty")))
    return pl.any_horizontal(flags).fill_null(False), reasons


def _value_reason(column: Column, text: pl.Expr) -> pl.Expr:
    name = pl.lit(column.name)
    if column.kind == "int":
        return (
            pl.when(text.str.contains(_DIGITS))
            .then(pl.format("{}: integer out of int64 range: '{}'", name, text))
            .otherwise(pl.format("{}: not an integer: '{}'", name, text))
        )
    if column.kind == "float":
        return (
            pl.when(text.str.contains(_DECIMAL))
            .then(pl.format("{}: number out of float64 range: '{}'", name, text))
            .otherwise(pl.format("{}: not a number: '{}'", name, text))
        )
    return pl.format("{}: expected 0 or 1, found '{}'", name, text)


# ------------------------------------------------------------------------ validated path


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


def validated_frames(table: Table, lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The lines split into (good, bad), both with ``source_line``, ``text``, ``raw_bytes``,
    ``n_fields`` (the line's field count), ``wrong_field_count`` and the typed columns.

    ``bad`` also has ``reason``. Values are typed by the validated path's cast and checked by
    the value rules on the typed columns (:func:`invalid_parsed`), as on the fast path; the
    reasons, which quote the text, are computed for the bad lines only. Pure: tests call it.
    """
    n_cols = len(table.columns)
    text = pl.col("text")
    texts = [_text_column(n) for n in table.column_names]
    fields = text.str.split_exact(",", n_cols - 1).struct.rename_fields(texts)
    n_fields = text.str.count_matches(",", literal=True) + 1
    blank = pl.col("raw_bytes").bin.size() == 0
    has_nul = text.str.contains("\x00", literal=True)
    value_bad, _ = _value_problems(table)
    frame = (
        lines.with_columns(fields.alias("_fields"))
        .unnest("_fields")
        # Polars' reader drops one CR at the end of every field, as the CR of a CRLF line end
        # (which _chunk_lines drops for the last field): the same bytes give the same value
        .with_columns(pl.col(t).str.strip_suffix("\r") for t in texts[:-1])
        .with_columns(
            n_fields.cast(pl.Int64).alias("n_fields"),
            (~blank & text.is_not_null() & ~has_nul & (n_fields != n_cols))
            .fill_null(False)
            .alias("wrong_field_count"),
            (
                blank
                | text.is_null()
                | has_nul.fill_null(False)
                | (n_fields != n_cols).fill_null(True)
            ).alias("_broken"),
        )
        .with_columns(_typed_from_text(table))
        .with_columns((pl.col("_broken") | value_bad).alias("_bad"))
    )
    good = frame.filter(~pl.col("_bad")).drop("_broken", "_bad", *texts)
    bad = frame.filter(pl.col("_bad"))
    bad = bad.with_columns(_reason(table).alias("reason")).drop("_broken", "_bad", *texts)
    return good, bad


def _reason(table: Table) -> pl.Expr:
    """Why a bad line is rejected: the first structural problem, else every invalid value."""
    n_cols = len(table.columns)
    text = pl.col("text")
    lowered = text.str.to_lowercase().str.split(",")
    header_like = lowered.list.eval(
        pl.element().str.strip_chars().is_in(_header_names(table))
    ).list.any()
    n_fields = pl.col("n_fields")
    expected = _expected_fields_text(table)
    _, problems = _value_problems(table)
    return (
        pl.when(pl.col("raw_bytes").bin.size() == 0)
        .then(pl.lit("blank line"))
        .when(text.is_null())
        .then(pl.lit("invalid UTF-8 bytes"))
        .when(text.str.contains("\x00", literal=True))
        .then(pl.lit("NUL byte in line"))
        .when((n_fields != n_cols) & header_like)
        .then(pl.format("header line (column names), {}, found {}", pl.lit(expected), n_fields))
        .when(n_fields != n_cols)
        .then(pl.format("{}, found {}", pl.lit(expected), n_fields))
        .when(header_like)
        .then(pl.lit("header line (column names); the published files have no header"))
        .otherwise(pl.concat_str(problems, separator="; ", ignore_nulls=True))
    )


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
        trace_spec(table.trace).wrong_shape_hint
        or f" — is this an original headerless {table.name} part file?"
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
    with pq.ParquetWriter(paths.rejects_tmp, REJECT_SCHEMA, **ZSTD) as out:
        for chunk in RawStream(raw.path, raw.rel, chunk_bytes).chunks():
            good, bad = validated_frames(table, _chunk_lines(chunk, line + 1))
            line += good.height + bad.height
            every = pl.concat(
                [bad, good.with_columns(pl.lit(whole_file).alias("reason"))], how="diagonal"
            ).sort("source_line")
            out.write_table(_reject_table(every, raw.rel))


def _lake_arrow_schema(table: Table) -> pa.Schema:
    """What a lake file is written from: the typed columns, ``source_file``, ``source_row``."""
    fields = []
    for field_ in table.arrow_schema():
        dtype = pa.large_string() if pa.types.is_string(field_.type) else field_.type
        if field_.name == SOURCE_FILE:
            dtype = pa.dictionary(pa.int32(), pa.large_string())
        fields.append(pa.field(field_.name, dtype, nullable=True))
    return pa.schema(fields)
