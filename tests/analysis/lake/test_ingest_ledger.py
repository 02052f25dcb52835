"""The ingest ledger under misuse: no row counted twice, none lost silently.

A rename, a copy or a move of a raw file between runs never counts its rows twice; anything in
the raw root that ingest cannot read is an error that fails the run, never a silent skip.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake import ingest
from tracelab.analysis.lake.ingest import discover_raw_files
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.flows.ingest import IngestOptions, IngestSummary, run_ingest

TRACE = "google-2011"


def _job_lines(first_time: int, n: int) -> bytes:
    times = range(first_time, first_time + n)
    return "".join(f"{t},,{7_000_000 + t},0,user{t},1,job{t},log{t}\n" for t in times).encode()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _run(raw: Path, lake: Path) -> IngestSummary:
    return run_ingest(TRACE, raw, lake)


def _lake_rows(lake: Path) -> int:
    files = sorted((lake / TRACE / "job_events").glob("*.parquet"))
    return sum(pl.read_parquet(f).height for f in files)


def _manifest_paths(lake: Path) -> dict[str, str]:
    manifest = read_manifest(lake / TRACE)
    return dict(zip(manifest["path"], manifest["status"], strict=True))


def test_rename_copy_and_move_never_count_rows_twice(tmp_path: Path, prefect_harness: None) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    folder = raw / "job_events"
    _write(folder / "part-00000-of-00002.csv.gz", gzip.compress(_job_lines(0, 40)))
    _write(folder / "part-00001-of-00002.csv", _job_lines(40, 25))
    assert not _run(raw, lake).failed
    assert _lake_rows(lake) == 65

    # rename (the reproduction): the rows move with the file
    (folder / "part-00000-of-00002.csv.gz").rename(folder / "part-00000-of-00002-renamed.csv.gz")
    assert not _run(raw, lake).failed
    assert _lake_rows(lake) == 65
    assert _manifest_paths(lake) == {
        "job_events/part-00000-of-00002-renamed.csv.gz": "ok",
        "job_events/part-00001-of-00002.csv": "skipped-unchanged",
    }
    sources = pl.read_parquet(lake / TRACE / "job_events" / "*.parquet")["source_file"]
    assert sorted(set(sources)) == [
        "job_events/part-00000-of-00002-renamed.csv.gz",
        "job_events/part-00001-of-00002.csv",
    ]

    # a copy whose name sorts before the original: the original keeps its rows
    shutil.copy(folder / "part-00001-of-00002.csv", folder / "part-00000-of-00002-copy.csv")
    _run(raw, lake)
    assert _lake_rows(lake) == 65
    statuses = _manifest_paths(lake)
    assert statuses["job_events/part-00000-of-00002-copy.csv"] == "duplicate"
    assert statuses["job_events/part-00001-of-00002.csv"] == "skipped-unchanged"

    # a move of the original away: the copy takes over its rows, once
    (folder / "part-00001-of-00002.csv").unlink()
    assert not _run(raw, lake).failed
    assert _lake_rows(lake) == 65
    assert _manifest_paths(lake) == {
        "job_events/part-00000-of-00002-copy.csv": "ok",
        "job_events/part-00000-of-00002-renamed.csv.gz": "skipped-unchanged",
    }


def test_a_deleted_raw_file_leaves_the_lake_unless_kept(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    _write(raw / "job_events/part-00000-of-00002.csv", _job_lines(0, 10))
    _write(raw / "job_events/part-00001-of-00002.csv", _job_lines(10, 5))
    _run(raw, lake)
    (raw / "job_events/part-00001-of-00002.csv").unlink()
    kept = run_ingest(TRACE, raw, lake, IngestOptions(keep_vanished=True))
    # deleting raw files to save space loses nothing when asked
    assert _lake_rows(lake) == 15
    assert [(r.path, r.rows_read) for r in kept.kept] == [("job_events/part-00001-of-00002.csv", 5)]
    assert not kept.unreconciled
    # by default the lake mirrors the raw folder, and the summary names what left
    mirrored = _run(raw, lake)
    assert _lake_rows(lake) == 10
    assert [(r.path, r.rows_read) for r in mirrored.removed] == [
        ("job_events/part-00001-of-00002.csv", 5)
    ]
    assert list(_manifest_paths(lake)) == ["job_events/part-00000-of-00002.csv"]


def test_fifo_dangling_link_and_wrong_level_are_errors(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    _write(raw / "job_events/part-00000-of-00003.csv", _job_lines(0, 3))
    os.mkfifo(raw / "job_events/part-00001-of-00003.csv")
    (raw / "job_events/part-00002-of-00003.csv.gz").symlink_to(tmp_path / "nowhere.csv.gz")
    _write(raw / "job_events/extra/part-00000-of-00001.csv", _job_lines(0, 3))
    _write(raw / "part-00000-of-00500.csv.gz", b"")
    _write(raw / "SHA256SUM", b"")  # the published root holds checksum lists: not an error
    found = discover_raw_files(TRACE, raw)
    assert [f.rel for f in found.files] == ["job_events/part-00000-of-00003.csv"]
    errors = {p.path: p.reason for p in found.problems if p.is_error}
    assert sorted(errors) == [
        "job_events/extra/part-00000-of-00001.csv",
        "job_events/part-00001-of-00003.csv",
        "job_events/part-00002-of-00003.csv.gz",
        "part-00000-of-00500.csv.gz",
    ]
    assert "not a regular file" in errors["job_events/part-00001-of-00003.csv"]
    assert "dangling symlink" in errors["job_events/part-00002-of-00003.csv.gz"]
    assert "wrong level" in errors["job_events/extra/part-00000-of-00001.csv"]
    assert "wrong level" in errors["part-00000-of-00500.csv.gz"]


def _deny(monkeypatch: pytest.MonkeyPatch, denied: Path) -> None:
    """Permission denied on ``denied`` (tests run as root, which chmod cannot stop)."""
    real_open, real_iterdir = os.open, Path.iterdir

    def fake_open(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if Path(path) == denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    def fake_iterdir(self: Path):  # type: ignore[no-untyped-def]
        if self == denied:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(ingest.os, "open", fake_open)
    monkeypatch.setattr(Path, "iterdir", fake_iterdir)


def test_unreadable_file_and_folder_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = tmp_path / "raw"
    _write(raw / "job_events/part-00000-of-00001.csv", _job_lines(0, 3))
    _write(raw / "task_events/part-00000-of-00001.csv", b"")
    _deny(monkeypatch, raw / "job_events/part-00000-of-00001.csv")
    found = discover_raw_files(TRACE, raw)
    errors = {p.path: p.reason for p in found.problems if p.is_error}
    assert "cannot read the file: Permission denied" in errors["job_events/part-00000-of-00001.csv"]
    assert [f.rel for f in found.files] == ["task_events/part-00000-of-00001.csv"]
    monkeypatch.undo()
    _deny(monkeypatch, raw / "task_events")
    found = discover_raw_files(TRACE, raw)
    errors = {p.path: p.reason for p in found.problems if p.is_error}
    assert "cannot read the folder: Permission denied" in errors["task_events"]


def test_unreadable_raw_root_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    _deny(monkeypatch, raw)
    with pytest.raises(TracelabError) as caught:
        discover_raw_files(TRACE, raw)
    message = str(caught.value)
    assert f"cannot read raw folder {raw}" in message
    assert "\n" not in message


def test_chunk_mb_zero_is_refused_before_anything_is_recorded(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    _write(raw / "job_events/part-00000-of-00001.csv", _job_lines(0, 5) + b"\n")  # validated path
    with pytest.raises(TracelabError, match="--chunk-mb must be at least 1"):
        run_ingest(TRACE, raw, lake, IngestOptions(chunk_mb=0))
    assert not (lake / TRACE / "_manifest.parquet").exists()
    summary = run_ingest(TRACE, raw, lake)
    assert [(r.rows_read, r.rows_written, r.rows_rejected) for r in summary.rows] == [(6, 5, 1)]


def test_generator_leftovers_fail_ingest_and_let_run_generate_again(tmp_path: Path) -> None:
    # a generation killed half-way (the names analysis.synthetic.csvparts writes)
    raw = tmp_path / "raw"
    _write(raw / "task_events/_pending-00000.csv.gz", gzip.compress(b"x"))
    _write(raw / "task_events/__pending-00001.csv.gz.tmp", b"half")
    _write(raw / "job_events/_part-00000-of-00001.csv.gz.tmp", b"half")
    found = discover_raw_files(TRACE, raw)
    assert found.files == ()
    errors = {p.path: p.reason for p in found.problems if p.is_error}
    assert sorted(errors) == [
        "job_events/_part-00000-of-00001.csv.gz.tmp",
        "task_events/__pending-00001.csv.gz.tmp",
        "task_events/_pending-00000.csv.gz",
    ]
    assert all("interrupted `tracelab generate`" in r for r in errors.values())
    # before: `run` saw files, skipped generating, and ingest reported ok with 0 files
    assert not ingest.raw_files_present(raw)
    _write(raw / "job_events/part-00000-of-00001.csv", _job_lines(0, 1))
    assert ingest.raw_files_present(raw)


def test_a_raw_root_without_raw_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "task_events").mkdir()
    found = discover_raw_files(TRACE, tmp_path)
    (problem,) = found.problems
    assert problem.is_error
    assert f"no raw files under {tmp_path}" in problem.reason


def test_rename_plus_recompress_replaces_rows_instead_of_doubling(
    tmp_path: Path, prefect_harness: None
) -> None:
    # zcat part-00001 | gzip -9 > part-00011-of-00012.csv.gz; rm part-00001
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    folder = raw / "job_events"
    first, second = _job_lines(0, 30), _job_lines(30, 12)
    _write(folder / "part-00000-of-00004.csv.gz", gzip.compress(first, compresslevel=1, mtime=0))
    _write(folder / "part-00001-of-00004.csv.gz", gzip.compress(second, compresslevel=1, mtime=0))
    assert not _run(raw, lake).failed
    assert _lake_rows(lake) == 42

    content = gzip.decompress((folder / "part-00001-of-00004.csv.gz").read_bytes())
    recompressed = gzip.compress(content, compresslevel=9, mtime=1)
    assert recompressed != (folder / "part-00001-of-00004.csv.gz").read_bytes()
    _write(folder / "part-00011-of-00012.csv.gz", recompressed)
    (folder / "part-00001-of-00004.csv.gz").unlink()
    summary = _run(raw, lake)
    assert not summary.failed
    assert _lake_rows(lake) == 42  # before: 54, the 12 rows counted twice
    assert _manifest_paths(lake) == {
        "job_events/part-00000-of-00004.csv.gz": "skipped-unchanged",
        "job_events/part-00011-of-00012.csv.gz": "ok",
    }
    sources = pl.read_parquet(lake / TRACE / "job_events" / "*.parquet")["source_file"]
    assert sources.value_counts().sort("source_file").rows() == [
        ("job_events/part-00000-of-00004.csv.gz", 30),
        ("job_events/part-00011-of-00012.csv.gz", 12),
    ]


def test_a_copy_under_another_compression_is_a_duplicate(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    folder = raw / "job_events"
    lines = _job_lines(0, 20)
    _write(folder / "part-00001-of-00002.csv.gz", gzip.compress(lines, mtime=0))
    assert not _run(raw, lake).failed
    # the same content, uncompressed, under a name that sorts first: the ingested file keeps
    # its rows, the copy is a duplicate and leaves no output
    _write(folder / "part-00000-of-00002.csv", lines)
    summary = _run(raw, lake)
    statuses = _manifest_paths(lake)
    assert statuses["job_events/part-00000-of-00002.csv"] == "duplicate"
    assert statuses["job_events/part-00001-of-00002.csv.gz"] == "skipped-unchanged"
    assert _lake_rows(lake) == 20
    copy = next(r for r in summary.rows if r.path.endswith("00000-of-00002.csv"))
    assert copy.rows_written == 0
    assert copy.error.startswith("same content as job_events/part-00001-of-00002.csv.gz")
    # two new copies of one content in one run: the first by path keeps the rows, whatever order
    # the conversions finish in (the small batches let both run at once)
    more = _job_lines(100, 7)
    _write(folder / "part-00003-of-00009.csv", more)
    _write(folder / "part-00002-of-00009.csv.gz", gzip.compress(more, mtime=0))
    run_ingest(TRACE, raw, lake, IngestOptions(batch_mb=0))
    statuses = _manifest_paths(lake)
    assert statuses["job_events/part-00002-of-00009.csv.gz"] == "ok"
    assert statuses["job_events/part-00003-of-00009.csv"] == "duplicate"
    assert _lake_rows(lake) == 27


def test_a_manifest_without_content_digests_converts_its_files_once_more(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    _write(raw / "job_events/part-00000-of-00001.csv.gz", gzip.compress(_job_lines(0, 9)))
    _run(raw, lake)
    manifest_file = lake / TRACE / "_manifest.parquet"
    # as an earlier version wrote it: no content column
    pl.read_parquet(manifest_file).drop("content").write_parquet(manifest_file)
    assert [r.status for r in _run(raw, lake).rows] == ["ok"]
    again = _run(raw, lake)
    assert [r.status for r in again.rows] == ["skipped-unchanged"]
    assert again.rows[0].content.startswith("xxh3-128:")
    assert _lake_rows(lake) == 9
