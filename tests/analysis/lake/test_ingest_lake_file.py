"""The lake file's layout: typed chunks gathered into row groups of at least
LAKE_ROW_GROUP_ROWS rows, every row once, in order, with its line number."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from tracelab.analysis.lake import ingest
from tracelab.analysis.lake.ingest import RawFile, convert_file, lake_paths
from tracelab.analysis.lake.schemas import SOURCE_ROW, table

JOB = table("google-2011", "job_events")
LINES = 2000
BAD_LINE = 777  # not a number in the mandatory timestamp: its chunk takes the validated path


def _line(n: int) -> bytes:
    return (b"x" if n == BAD_LINE else b"%d" % n) + b",,7000001,0,user,1,job,log\n"


def _row_groups(tmp_path: Path, chunk_bytes: int) -> tuple[list[int], pl.DataFrame]:
    folder = tmp_path / "raw" / "job_events"
    folder.mkdir(parents=True)
    path = folder / "part-00000-of-00001.csv"
    path.write_bytes(b"".join(_line(n) for n in range(1, LINES + 1)))
    raw = RawFile("job_events", path, "job_events/part-00000-of-00001.csv", path.stat().st_size)
    paths = lake_paths(tmp_path / "lake", raw.table, raw.rel)
    result = convert_file(JOB, raw, paths, chunk_bytes=chunk_bytes)
    assert (result.status, result.rows_written, result.rows_rejected) == ("ok", LINES - 1, 1)
    meta = pq.ParquetFile(paths.parquet).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    return sizes, pl.read_parquet(paths.parquet)


def test_chunks_are_gathered_into_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "LAKE_ROW_GROUP_ROWS", 500)
    # 4 KB chunks hold 4096 // 31 + 1 = 133 lines at most (the shortest line, "1,,…", is 28
    # bytes but lines from 1000 on are 31): a group closes at the first chunk that reaches 500
    sizes, rows = _row_groups(tmp_path, chunk_bytes=4096)
    assert sum(sizes) == LINES - 1
    assert all(500 <= n < 500 + 4096 // 28 + 1 for n in sizes[:-1]), sizes
    assert 0 < sizes[-1] < 500 + 4096 // 28 + 1
    # 1,999 rows in groups of 500 to 632: at least ceil(1999 / 632) = 4, at most 1999 // 500 + 1
    # = 4 (one group per chunk would be 15)
    assert len(sizes) == 4
    expected = [n for n in range(1, LINES + 1) if n != BAD_LINE]
    assert rows[SOURCE_ROW].to_list() == expected
    assert rows["time"].to_list() == expected


def test_a_file_below_the_bound_is_one_row_group(tmp_path: Path) -> None:
    sizes, _ = _row_groups(tmp_path, chunk_bytes=4096)
    assert sizes == [LINES - 1]
