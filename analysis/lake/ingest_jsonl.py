"""Lossless JSON-lines (.json[.gz]) → typed Parquet conversion: google-2019's BigQuery export shards.

The same contract as the CSV converter (:mod:`analysis.lake.ingest`): every physical line of a
shard is a typed row of ``lake/google-2019/<table>/<stem>.parquet`` or a row of
``_rejects/<table>__<stem>.parquet`` with its line number and reason, so ``rows_read =
rows_written + rows_rejected``; outputs appear by atomic rename only when complete; memory is
bounded by ``chunk_bytes`` (the file is read in chunks of whole lines).

What a valid line is (docs/ingest.md, "google-2019"):

* one JSON object; its keys are the table's fields of the v3 schema (a key the schema does not
  have is rejected, never dropped, so nothing is lost silently); a nested message (``capacity``,
  ``resource_request``, ``average_usage``, ...) is an object whose keys are its leaves;
* a missing key or a JSON ``null`` is NULL; a missing mandatory field rejects the line;
* integers arrive as JSON strings of digits (the export's encoding of INT64) or as JSON integers,
  and must fit int64; floats as strings or numbers, finite (``"NaN"``, ``"Infinity"`` and
  ``1e400`` are rejected); booleans as ``true``/``false`` (or those words as strings); text as
  JSON strings without a NUL; repeated numbers as arrays; ``constraint`` as an array, kept as
  its compact JSON text;
* a blank line, invalid UTF-8, a NUL byte, a line that is not JSON or an object with the same key
  twice (the parser would keep one value) is rejected with the reason;
* a line longer than :data:`MAX_JSON_LINE_BYTES` is rejected with its length, its first
  :data:`~analysis.lake.ingest_stream.LONG_LINE_HEAD` bytes kept in the reject, and the rest of
  the shard is ingested: reading past it holds at most the limit plus one read in memory.

Two paths, one definition. :func:`parse_line` (Python's ``json``, line by line, ~15,000 lines a
CPU-second) *is* the definition and gives each rejected line its reason. Ingest types the lines
of the export's own shape vectorised (:mod:`analysis.lake.ingest_jsonl_fast`: one regular
expression proves the shape, Polars' NDJSON reader types them) and sends only the other lines
through :func:`parse_line`; ``tests/analysis/lake/test_ingest_jsonl_differential.py`` checks on
generated shards, malformed lines included, that both write the same rows and rejects. A line
that ``parse_line`` cannot judge is a reject too, never an exception (an integer of more than
4300 digits, an escaped lone surrogate).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tracelab.analysis.lake.ingest import (
    GARBAGE_SHARE,
    REJECT_SCHEMA,
    REJECTS_DIR,
    ZSTD,
    Conversion,
    LakePaths,
    RawFile,
    RawFileError,
    _chunk_lines,
    _lake_arrow_schema,
    publish_outputs,
    publish_rejects_only,
    remove_outputs,
)
from tracelab.analysis.lake.ingest_jsonl_fast import FastShape, chunk_text, fast_rows
from tracelab.analysis.lake.ingest_stream import LONG_LINE_HEAD, LongLine, RawStream, read_ahead
from tracelab.analysis.lake.schemas import SOURCE_FILE, SOURCE_ROW, Column, Table

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DIGITS = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
#: repeated message fields kept as the JSON text of their array
_JSON_TEXT_FIELDS = frozenset({"constraint"})
#: the longest line typed, in bytes (docs/ingest.md): the export's lines are a few KB, and
#: Python's parser takes ~15 times a line's size in memory
MAX_JSON_LINE_BYTES = 8 << 20

#: a rejected line: its number, the reason, its text (None: decode its bytes) and its bytes
_Reject = tuple[int, str, str | None, bytes]


class _Invalid(ValueError):
    """A field's value breaks the schema; the message is the reject reason."""


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Invalid(f"{name}: expected an integer, found {json.dumps(value)}")
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise _Invalid(f"{name}: not an integer: {value!r}")
    try:
        number = int(value)
    except ValueError:  # more than 4300 digits (int_max_str_digits): far beyond int64
        number = _INT64_MAX + 1
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise _Invalid(f"{name}: integer out of int64 range: {value!r}")
    return number


def _float(value: Any, name: str) -> float:
    # the export writes FLOAT as a JSON number: the common case first
    if type(value) is float and math.isfinite(value):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Invalid(f"{name}: expected a number, found {json.dumps(value)}")
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise _Invalid(f"{name}: not a number: {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64 (a string or float is inf instead)
        number = math.inf
    if not math.isfinite(number):
        raise _Invalid(f"{name}: number out of range: {value!r}")
    return number


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return bool(value == "true")
    raise _Invalid(f"{name}: expected true or false, found {json.dumps(value)}")


def _text(value: Any, name: str) -> str:
    text: str
    if name in _JSON_TEXT_FIELDS and isinstance(value, list):
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    elif not isinstance(value, str):
        raise _Invalid(f"{name}: expected a string, found {json.dumps(value)}")
    elif "\x00" in value:
        raise _Invalid(f"{name}: NUL byte in text")
    else:
        text = value
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # "\ud800": JSON escapes half a UTF-16 pair, no character
            raise _Invalid(f"{name}: a lone surrogate escape is not text") from None
    return text


def _typed(column: Column, value: Any) -> object:
    """One field's lake value (None for NULL); raises :class:`_Invalid` with the reason."""
    name = column.name
    if value is None:
        if column.mandatory:
            raise _Invalid(f"{name}: mandatory field is missing")
        return None
    if column.kind in ("int_list", "float_list"):
        if not isinstance(value, list):
            raise _Invalid(f"{name}: expected an array, found {json.dumps(value)}")
        floats = column.kind == "float_list" and all(type(v) is float for v in value)
        if floats and all(map(math.isfinite, value)):
            return value
        convert = _int if column.kind == "int_list" else _float
        return [convert(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if column.kind == "int":
        return _int(value, name)
    if column.kind == "float":
        return _float(value, name)
    if column.kind == "bool":
        return _bool(value, name)
    return _text(value, name)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys: the other value would be lost without a word
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Invalid(f"duplicate field {key!r}")
            seen.add(key)
    return obj


@dataclass(frozen=True)
class JsonShape:
    """Where each column of a table is in a line's object: its key, and its leaf when nested."""

    table: Table
    paths: tuple[tuple[str, ...], ...]
    #: top-level key -> the leaves of a nested message (empty for a plain field)
    keys: dict[str, frozenset[str]]

    @classmethod
    def of(cls, table: Table) -> JsonShape:
        paths = tuple(tuple(c.official.split(".")) for c in table.columns)
        keys: dict[str, set[str]] = {}
        for path in paths:
            keys.setdefault(path[0], set()).update(path[1:])
        return cls(table, paths, {k: frozenset(v) for k, v in keys.items()})


def parse_line(shape: JsonShape, text: str | None, raw_size: int) -> list[object] | str:
    """The typed values of one line in column order, or the reason it is rejected. Pure."""
    if raw_size == 0:
        return "blank line"
    if text is None:
        return "invalid UTF-8 bytes"
    if "\x00" in text:
        return "NUL byte in line"
    try:
        obj = json.loads(text, object_pairs_hook=_object)
    except _Invalid as exc:
        return str(exc)
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"invalid JSON: {getattr(exc, 'msg', exc)} (column {getattr(exc, 'colno', '?')})"
    except ValueError:  # Python reads integers of at most 4300 digits (int_max_str_digits)
        return "invalid JSON: an integer with more than 4300 digits"
    if not isinstance(obj, dict):
        return f"expected a JSON object, found {type(obj).__name__}"
    problem = _unknown_keys(shape, obj)
    if problem:
        return problem
    values: list[object] = []
    try:
        for column, path in zip(shape.table.columns, shape.paths, strict=True):
            value = obj.get(path[0])
            if len(path) > 1 and value is not None:
                value = value.get(path[1])
            values.append(_typed(column, value))
    except _Invalid as exc:
        return str(exc)
    return values


def _unknown_keys(shape: JsonShape, obj: dict[str, Any]) -> str:
    table = shape.table.name
    for key, value in obj.items():
        leaves = shape.keys.get(key)
        if leaves is None:
            return f"unknown field {key!r}: not in the v3 schema of {table}"
        if leaves and value is not None:
            if not isinstance(value, dict):
                return f"{key}: expected an object with {sorted(leaves)}, found {json.dumps(value)}"
            extra = sorted(set(value) - leaves)
            if extra:
                return f"unknown field {key}.{extra[0]}: not in the v3 schema of {table}"
    return ""


@dataclass(frozen=True)
class _Counts:
    rows_read: int
    rows_written: int
    rows_rejected: int
    #: lines the reference parser decided (0: the vectorised path typed every line)
    referred: int = 0
    #: digests of the stored and decompressed bytes, from the one read (see RawStream)
    checksum: str = ""
    content: str = ""
    sha256: str = ""


def _long_line(number: int, size: int, head: bytes) -> _Reject:
    reason = (
        f"line of {size:,} bytes, longer than the {MAX_JSON_LINE_BYTES:,} bytes a JSON line may "
        f"have (raw_bytes keeps its first {min(size, LONG_LINE_HEAD):,})"
    )
    return number, reason, None, head[:LONG_LINE_HEAD]


def _without_long_lines(lines: pl.DataFrame, chunk: bytes) -> tuple[pl.DataFrame, list[_Reject]]:
    """The lines of a chunk but those longer than :data:`MAX_JSON_LINE_BYTES`, and their
    rejects (the stream handed over as :class:`LongLine` only those that spanned reads)."""
    if len(chunk) <= MAX_JSON_LINE_BYTES:
        return lines, []
    size = pl.coalesce(
        pl.col("raw_bytes").cast(pl.Binary).bin.size(), pl.col("text").str.len_bytes()
    )
    long = lines.select(size > MAX_JSON_LINE_BYTES).to_series().fill_null(False)
    if not long.any():
        return lines, []
    bad: list[_Reject] = []
    for number, text, data in lines.filter(long).iter_rows():
        # the validated split keeps every line's bytes; the text split only its text
        line = data if data is not None else text.encode()
        bad.append(_long_line(number, len(line), line))
    return lines.filter(~long), bad


def _parsed_chunks(
    shape: JsonShape, raw: RawFile, stream: RawStream, *, fast: bool
) -> Iterator[tuple[pa.Table | None, list[_Reject], int]]:
    """Per chunk of lines: the good rows as a lake table (None for a line too long to read),
    the rejects (line, reason, text, bytes), and how many lines the reference parser decided.

    With ``fast``, the lines of the export's canonical shape are typed by the vectorised path
    (:mod:`analysis.lake.ingest_jsonl_fast`) and only the others go through :func:`parse_line`;
    without, every line does (the reference the differential test compares against).
    """
    schema = _lake_arrow_schema(shape.table)
    fast_shape = FastShape.of(shape.table, _JSON_TEXT_FIELDS)
    line = 0
    for chunk in read_ahead(stream.items()):
        if isinstance(chunk, LongLine):
            line += 1
            yield None, [_long_line(line, chunk.size, chunk.head)], 0
            continue
        text = chunk_text(chunk) if fast else None
        lines = _chunk_lines(chunk, line + 1) if text is None else _text_lines(text, line + 1)
        line += lines.height
        lines, long = _without_long_lines(lines, chunk)
        if fast:
            typed, taken = fast_rows(fast_shape, lines["text"], None if long else chunk)
            typed = typed.with_columns(lines["source_line"].filter(taken).alias(SOURCE_ROW))
            lines = lines.filter(~pl.Series(taken))
        good, bad = _reference_rows(shape, lines.with_columns(_raw_bytes()))
        if fast and good.height:
            good = pl.concat([typed, good]).sort(SOURCE_ROW)
        elif fast:
            good = typed
        if long:
            bad = sorted(bad + long, key=lambda b: b[0])
        yield _lake_rows(good, raw.rel, schema), bad, lines.height


def _text_lines(text: pl.Series, first_line: int) -> pl.DataFrame:
    """What :func:`_chunk_lines` gives for a chunk :func:`chunk_text` split, but ``raw_bytes``
    NULL: the bytes are the text's (valid UTF-8, no CR), made only for the lines that need them."""
    rows = pl.int_range(first_line, first_line + len(text), dtype=pl.Int64, eager=True)
    return pl.DataFrame({"source_line": rows, "text": text, "raw_bytes": None})


def _raw_bytes() -> pl.Expr:
    raw = pl.col("raw_bytes").cast(pl.Binary)
    return raw.fill_null(pl.col("text").cast(pl.Binary)).alias("raw_bytes")


def _reference_rows(shape: JsonShape, lines: pl.DataFrame) -> tuple[pl.DataFrame, list[_Reject]]:
    """The lines typed by :func:`parse_line`: the good rows (with ``source_row``), the rejects."""
    good: list[list[object]] = []
    bad: list[_Reject] = []
    for number, text, data in lines.iter_rows():
        parsed = parse_line(shape, text, len(data))
        if isinstance(parsed, str):
            bad.append((number, parsed, text, data))
        else:
            parsed.append(number)
            good.append(parsed)
    schema = shape.table.polars_schema() | {SOURCE_ROW: pl.Int64()}
    return pl.DataFrame(good, schema=schema, orient="row"), bad


def _lake_rows(good: pl.DataFrame, source_file: str, schema: pa.Schema) -> pa.Table:
    """Typed rows (with ``source_row``) as an Arrow table of the lake schema."""
    columns = good.select(*schema.names[:-2], SOURCE_ROW).to_arrow()
    source = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(good.height, dtype=np.int32)), pa.array([source_file], pa.large_string())
    )
    arrays = [c.cast(f.type) for c, f in zip(columns.columns[:-1], schema, strict=False)]
    return pa.Table.from_arrays([*arrays, source, columns.column(SOURCE_ROW)], schema=schema)


def _lake_writer(table: Table, path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """The lake file's writer: dictionary pages for text and integers (IDs, enums, times repeat)
    only, row numbers delta-encoded. A dictionary tried on every float and float list of
    instance_usage (values rarely repeat) cost 0.18 CPU-s per 32 MB chunk, five times the
    whole write without it, and made the file 20 % larger."""
    repeating = [c.name for c in table.columns if c.kind in ("str", "int", "bool")]
    return pq.ParquetWriter(
        path,
        schema,
        store_schema=False,
        use_dictionary=[*repeating, SOURCE_FILE],
        column_encoding={SOURCE_ROW: "DELTA_BINARY_PACKED"},
        **ZSTD,
    )


def _reject_rows(raw: RawFile, bad: list[_Reject]) -> pa.Table:
    return pa.table(
        {
            SOURCE_FILE: [raw.rel] * len(bad),
            "source_line": [b[0] for b in bad],
            "reason": [b[1] for b in bad],
            # lines that are not UTF-8 keep a readable text with U+FFFD and their exact bytes
            "raw_text": [
                b[2] if b[2] is not None else b[3].decode("utf-8", "replace") for b in bad
            ],
            "raw_bytes": [b[3] for b in bad],
        },
        schema=REJECT_SCHEMA,
    )


def _write(
    shape: JsonShape, raw: RawFile, paths: LakePaths, chunk_bytes: int, *, fast: bool = True
) -> _Counts:
    read = written = rejected = referred = 0
    schema = _lake_arrow_schema(shape.table)
    stream = RawStream(raw.path, raw.rel, chunk_bytes, max_line=MAX_JSON_LINE_BYTES)
    with (
        _lake_writer(shape.table, paths.parquet_tmp, schema) as good_out,
        pq.ParquetWriter(paths.rejects_tmp, REJECT_SCHEMA, **ZSTD) as bad_out,
    ):
        for good, bad, decided in _parsed_chunks(shape, raw, stream, fast=fast):
            rows = 0 if good is None else good.num_rows
            if good is not None:
                good_out.write_table(good)
            referred += decided
            if bad:
                bad_out.write_table(_reject_rows(raw, bad))
            read += rows + len(bad)
            written += rows
            rejected += len(bad)
    return _Counts(
        read, written, rejected, referred, stream.checksum, stream.content, stream.sha256
    )


def _reject_everything(
    shape: JsonShape, raw: RawFile, paths: LakePaths, counts: _Counts, chunk_bytes: int
) -> None:
    """Rewrite the rejects so they hold every line of a file that is not this table's export."""
    whole_file = f"file rejected: {counts.rows_rejected} of {counts.rows_read} lines invalid"
    paths.rejects_tmp.unlink(missing_ok=True)
    line = 0
    stream = RawStream(raw.path, raw.rel, chunk_bytes, max_line=MAX_JSON_LINE_BYTES)
    with pq.ParquetWriter(paths.rejects_tmp, REJECT_SCHEMA, **ZSTD) as out:
        for chunk in stream.items():
            if isinstance(chunk, LongLine):
                line += 1
                out.write_table(_reject_rows(raw, [_long_line(line, chunk.size, chunk.head)]))
                continue
            lines = _chunk_lines(chunk, line + 1)
            line += lines.height
            lines, rows = _without_long_lines(lines, chunk)
            for number, text, data in lines.iter_rows():
                reason = parse_line(shape, text, len(data))
                rows.append((number, reason if isinstance(reason, str) else whole_file, text, data))
            out.write_table(_reject_rows(raw, sorted(rows, key=lambda b: b[0])))


def convert_jsonl_file(
    table: Table, raw: RawFile, paths: LakePaths, *, chunk_bytes: int = 32 << 20
) -> Conversion:
    """Convert one JSON-lines shard into its typed Parquet and rejects, atomically."""
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
    started, started_at = time.perf_counter(), datetime.now(UTC)
    shape = JsonShape.of(table)
    paths.parquet.parent.mkdir(parents=True, exist_ok=True)
    paths.rejects.parent.mkdir(parents=True, exist_ok=True)
    try:
        counts = _write(shape, raw, paths, chunk_bytes)
    except RawFileError as exc:
        remove_outputs(paths)
        return Conversion("error", "none", 0, 0, 0, str(exc), _since(started), started_at)
    except BaseException:
        for tmp in (paths.parquet_tmp, paths.rejects_tmp):
            tmp.unlink(missing_ok=True)
        raise
    if counts.rows_read and counts.rows_rejected >= GARBAGE_SHARE * counts.rows_read:
        _reject_everything(shape, raw, paths, counts, chunk_bytes)
        publish_rejects_only(paths)
        error = (
            f"{counts.rows_rejected} of {counts.rows_read} lines rejected — is this an original "
            f"{table.name} export shard (JSON lines, compressed at most once)? (every line kept "
            f"in {REJECTS_DIR}/{table.name}__*.parquet)"
        )
        return Conversion(
            "error",
            "validated",
            counts.rows_read,
            0,
            counts.rows_read,
            error,
            _since(started),
            started_at,
            counts.checksum,
            counts.content,
            counts.sha256,
        )
    publish_outputs(paths, has_rejects=counts.rows_rejected > 0)
    return Conversion(
        "ok",
        "validated" if counts.referred else "native",
        counts.rows_read,
        counts.rows_written,
        counts.rows_rejected,
        "",
        _since(started),
        started_at,
        counts.checksum,
        counts.content,
        counts.sha256,
    )


def _since(started: float) -> float:
    return time.perf_counter() - started
