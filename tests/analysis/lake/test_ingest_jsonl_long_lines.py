"""google-2019: a JSON line longer than the documented limit is one reject, the rest of the shard
is ingested, and reading past it takes bounded memory.

The good lines are the real excerpt's (tests/data/google-2019/PROVENANCE.md); the long line is
valid JSON padded with spaces, so only its length can reject it.
"""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import polars as pl
import pytest
from repo_paths import REPO

from tracelab.analysis.lake.ingest_jsonl import MAX_JSON_LINE_BYTES
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.lake.ingest_stream import LONG_LINE_HEAD, LongLine, RawStream
from tracelab.flows.ingest import IngestOptions, run_ingest

TRACE = "google-2019"
SHARD = "machine_events/machine_events-000000000000.json.gz"
REAL = REPO / "tests" / "data" / TRACE / SHARD
HEAD = b'{"time":"1","machine_id":"2","type":"1"'


def _padded(size: int) -> bytes:
    """A valid machine_events line of exactly ``size`` bytes (without its newline)."""
    return HEAD + b" " * (size - len(HEAD) - 1) + b"}"


def _real_lines(n: int) -> list[bytes]:
    with gzip.open(REAL, "rb") as fh:
        return [fh.readline() for _ in range(n)]


def _write_shard(tmp_path: Path, lines: list[bytes]) -> None:
    (tmp_path / "raw" / "machine_events").mkdir(parents=True)
    with gzip.open(tmp_path / "raw" / SHARD, "wb", compresslevel=1) as fh:
        for line in lines:
            fh.write(line)


def _ingest(tmp_path: Path, chunk_mb: int) -> tuple[pl.DataFrame, Path]:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    summary = run_ingest(TRACE, raw, lake, IngestOptions(chunk_mb=chunk_mb))
    assert not summary.failed, summary.rows
    return pl.read_parquet(lake / TRACE / "machine_events" / "*.parquet"), lake


def test_a_line_of_200_mb_is_rejected_and_the_shard_ingested_in_bounded_memory(
    tmp_path: Path, prefect_harness: None
) -> None:
    # before: "not a trace CSV file", and the 40 good lines went to neither lake nor rejects
    good = _real_lines(40)
    _write_shard(tmp_path, [*good[:20], _padded(200_000_000) + b"\n", *good[20:]])
    tracemalloc.start()
    try:
        rows, lake = _ingest(tmp_path, chunk_mb=4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows["source_row"].to_list() == [*range(1, 21), *range(22, 42)]
    assert rows["machine_id"].to_list()[0] == 385611578151  # the excerpt's first line
    rejects = pl.read_parquet(lake / TRACE / "_rejects" / "*.parquet")
    assert rejects["source_line"].to_list() == [21]
    assert rejects["reason"][0] == (
        f"line of 200,000,000 bytes, longer than the {MAX_JSON_LINE_BYTES:,} bytes a JSON line "
        f"may have (raw_bytes keeps its first {LONG_LINE_HEAD:,})"
    )
    assert rejects["raw_bytes"][0] == _padded(200_000_000)[:LONG_LINE_HEAD]
    manifest = read_manifest(lake / TRACE)
    assert manifest.select("rows_read", "rows_written", "rows_rejected").row(0) == (41, 40, 1)
    # the line is never whole in memory: the partial line carried up to the limit plus a read
    # (twice while it grows), the read buffer and the chunks in flight; 200 MB before
    chunk = 4 << 20
    assert peak < 2 * (MAX_JSON_LINE_BYTES + chunk) + 4 * chunk, peak


@pytest.mark.parametrize("chunk_mb", [1, 32])
def test_the_limit_is_exact_whether_the_line_spans_reads_or_not(
    tmp_path: Path, prefect_harness: None, chunk_mb: int
) -> None:
    # chunk 1 MB: the long lines span reads (the stream skips them); 32 MB: each fits in one
    # read and the chunk's lines are measured
    good = _real_lines(3)
    lines = [
        good[0],
        _padded(MAX_JSON_LINE_BYTES) + b"\n",
        good[1],
        _padded(MAX_JSON_LINE_BYTES + 1) + b"\n",
        good[2],
        _padded(MAX_JSON_LINE_BYTES + 1),  # the last line, without a newline
    ]
    _write_shard(tmp_path, lines)
    rows, lake = _ingest(tmp_path, chunk_mb)
    assert rows["source_row"].to_list() == [1, 2, 3, 5]
    assert rows.filter(pl.col("source_row") == 2)["machine_id"].to_list() == [2]
    rejects = pl.read_parquet(lake / TRACE / "_rejects" / "*.parquet").sort("source_line")
    assert rejects["source_line"].to_list() == [4, 6]
    assert all(
        r.startswith(f"line of {MAX_JSON_LINE_BYTES + 1:,} bytes") for r in rejects["reason"]
    )
    manifest = read_manifest(lake / TRACE)
    assert manifest.select("rows_read", "rows_written", "rows_rejected").row(0) == (6, 4, 2)


@pytest.mark.parametrize("chunk_bytes", [1, 4096])
def test_the_stream_hands_over_each_long_line_in_its_place(
    tmp_path: Path, chunk_bytes: int
) -> None:
    content = b"a\n" + b"x" * 100 + b"\nbb\n" + b"y" * 25 + b"\nccc\n" + b"z" * 30
    path = tmp_path / "s.json.gz"
    path.write_bytes(gzip.compress(content))
    lines: list[bytes | tuple[int, bytes]] = []
    for item in RawStream(path, "s", chunk_bytes, max_line=20).items():
        if isinstance(item, LongLine):
            lines.append((item.size, item.head[:3]))
        else:
            lines.extend(item.removesuffix(b"\n").split(b"\n"))
    if chunk_bytes > len(content):  # every line fits in a read: the caller measures them
        assert lines == content.split(b"\n")
    else:  # reads of 3 bytes (a BOM's): each long line is carried past 20 bytes before its end
        assert lines == [b"a", (100, b"xxx"), b"bb", (25, b"yyy"), b"ccc", (30, b"zzz")]
