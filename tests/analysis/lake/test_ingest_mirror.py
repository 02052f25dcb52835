"""The lake mirrors the raw folder: no row lost or doubled when raw files change name or form.

After every ingest the lake's rows plus its rejects equal the lines of the raw files present,
counted here from the raw bytes (one content counted once, as ingest keeps a copy out), without
the code under test. The files are the real excerpts of ``tests/data`` (azure-2017 has no real
vmtable in the published format, so its layout move uses the generator's).
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.ingest_manifest import ManifestRow, manifest_rows, read_manifest
from tracelab.analysis.lake.ingest_run import IngestSummary, reconciliation_problems
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.ingest import IngestOptions, run_ingest

DATA = Path(__file__).resolve().parents[2] / "data"
PART_2 = "task_events/part-00002-of-00500.csv.gz"


def _lines(path: Path) -> tuple[str, int]:
    """(digest of the decompressed bytes, their physical lines)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return hashlib.sha256(data).hexdigest(), lines


def _raw_rows(raw: Path, tables: set[str]) -> dict[str, int]:
    """Lines per table of the raw files present, each distinct content once."""
    seen: dict[tuple[str, str], int] = {}
    for path in raw.rglob("*"):
        if path.is_file() and path.name.endswith((".csv", ".csv.gz", ".json", ".json.gz")):
            rel = path.relative_to(raw)
            table = rel.parts[0] if len(rel.parts) > 1 else path.name.split(".")[0]
            if table in tables:  # not TRUTH.json
                digest, lines = _lines(path)
                seen[(table, digest)] = lines
    out: dict[str, int] = {}
    for (table, _), lines in seen.items():
        out[table] = out.get(table, 0) + lines
    return out


def _lake_rows(lake_trace_dir: Path) -> dict[str, int]:
    """Typed rows plus rejects per table, from the Parquet footers of every lake file."""
    out: dict[str, int] = {}
    for path in lake_trace_dir.glob("*/*.parquet"):
        folder = path.parent.name
        table = path.name.split("__")[0] if folder == "_rejects" else folder
        out[table] = out.get(table, 0) + pq.ParquetFile(path).metadata.num_rows
    return {t: n for t, n in out.items() if n}


def _ingest(trace: str, raw: Path, lake: Path, **options: bool) -> IngestSummary:
    summary = run_ingest(trace, raw, lake, IngestOptions(**options))
    assert not summary.failed, (summary.unreconciled, [r.error for r in summary.rows])
    raw_rows = _raw_rows(raw, set(trace_tables(trace)))
    assert _lake_rows(lake / trace) == {t: n for t, n in raw_rows.items() if n}
    assert reconciliation_problems(lake / trace, trace_tables(trace), _manifest(lake, trace)) == []
    return summary


def _manifest(lake: Path, trace: str) -> list[ManifestRow]:
    return list(manifest_rows(read_manifest(lake / trace)).values())


@pytest.fixture
def google_raw(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(DATA / "google-2011", raw, ignore=shutil.ignore_patterns("*.md", "*.py"))
    return raw


def _task_events(lake: Path) -> int:
    return _lake_rows(lake / "google-2011")["task_events"]


def test_gunzip_and_gzip_in_place_keep_every_row(
    google_raw: Path, tmp_path: Path, prefect_harness: None
) -> None:
    lake = tmp_path / "lake"
    _ingest("google-2011", google_raw, lake)
    before = _task_events(lake)
    part = google_raw / PART_2
    plain = part.with_suffix("")  # gunzip in place: part-00002-of-00500.csv
    plain.write_bytes(gzip.decompress(part.read_bytes()))
    part.unlink()
    _ingest("google-2011", google_raw, lake)
    assert _task_events(lake) == before
    again = _ingest("google-2011", google_raw, lake)  # two runs in a row: the same lake
    assert {r.status for r in again.rows} == {"skipped-unchanged"}
    assert _task_events(lake) == before
    part.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))  # gzip in place
    plain.unlink()
    _ingest("google-2011", google_raw, lake)
    assert _task_events(lake) == before


def test_a_copy_beside_its_gzip_then_removed(
    google_raw: Path, tmp_path: Path, prefect_harness: None
) -> None:
    lake = tmp_path / "lake"
    _ingest("google-2011", google_raw, lake)
    before = _task_events(lake)
    part = google_raw / PART_2
    part.with_suffix("").write_bytes(gzip.decompress(part.read_bytes()))
    beside = _ingest("google-2011", google_raw, lake)
    (dup,) = [r for r in beside.rows if r.status == "duplicate"]
    assert dup.path == PART_2.removesuffix(".gz")
    part.unlink()
    _ingest("google-2011", google_raw, lake)
    assert _task_events(lake) == before


def test_a_deleted_part_leaves_with_its_rows_named(
    google_raw: Path, tmp_path: Path, prefect_harness: None
) -> None:
    lake = tmp_path / "lake"
    _ingest("google-2011", google_raw, lake)
    gone = "task_events/part-00003-of-00500.csv.gz"
    _, lines = _lines(google_raw / gone)
    (google_raw / gone).unlink()
    summary = _ingest("google-2011", google_raw, lake)
    assert [(r.path, r.rows_read) for r in summary.removed] == [(gone, lines)]
    read = {t.table: t.rows_read for t in summary.tables()}
    assert read["task_events"] == _raw_rows(google_raw, {"task_events"})["task_events"]


def test_a_rename_plus_an_edit_counts_the_new_file_once(
    google_raw: Path, tmp_path: Path, prefect_harness: None
) -> None:
    lake = tmp_path / "lake"
    _ingest("google-2011", google_raw, lake)
    old = google_raw / "task_usage/part-00000-of-00500.csv.gz"
    lines = gzip.decompress(old.read_bytes()).splitlines(keepends=True)
    old.unlink()
    new = google_raw / "task_usage/part-00007-of-00500.csv"
    new.write_bytes(b"".join(lines[:-1]))  # the last line edited away
    summary = _ingest("google-2011", google_raw, lake)
    read = {t.table: t.rows_read for t in summary.tables()}
    assert read["task_usage"] == len(lines) - 1
    sources = pl.read_parquet(lake / "google-2011/task_usage/*.parquet")["source_file"]
    assert set(sources) == {"task_usage/part-00007-of-00500.csv"}


def test_json_gz_to_json_keeps_the_shard(tmp_path: Path, prefect_harness: None) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    shutil.copytree(DATA / "google-2019", raw, ignore=shutil.ignore_patterns("*.md"))
    _ingest("google-2019", raw, lake)
    before = _lake_rows(lake / "google-2019")
    shard = raw / "machine_events/machine_events-000000000000.json.gz"
    shard.with_suffix("").write_bytes(gzip.decompress(shard.read_bytes()))
    shard.unlink()
    _ingest("google-2019", raw, lake)
    assert _lake_rows(lake / "google-2019") == before


def test_azure_vmtable_moved_between_its_two_layouts(tmp_path: Path, prefect_harness: None) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    generate_trace("azure-2017", raw, seed=3, scale="tiny")
    folder_file = raw / "vmtable/vmtable.csv.gz"
    _ingest("azure-2017", raw, lake)
    before = _lake_rows(lake / "azure-2017")
    assert before["vmtable"] > 0
    folder_file.rename(raw / "vmtable.csv.gz")  # the published root layout
    folder_file.parent.rmdir()
    _ingest("azure-2017", raw, lake)
    assert _lake_rows(lake / "azure-2017") == before
    (raw / "vmtable").mkdir()
    (raw / "vmtable.csv.gz").rename(folder_file)
    _ingest("azure-2017", raw, lake)
    assert _lake_rows(lake / "azure-2017") == before


def test_another_raw_root_with_the_same_names_is_refused(
    tmp_path: Path, prefect_harness: None
) -> None:
    lake = tmp_path / "lake"
    root_a, root_b = tmp_path / "cell-a", tmp_path / "cell-b"
    shutil.copytree(DATA / "google-2011", root_a)
    (root_b / "task_events").mkdir(parents=True)
    shutil.copy(root_a / PART_2, root_b / "task_events/part-00000-of-00500.csv.gz")
    _ingest("google-2011", root_a, lake)
    before = _lake_rows(lake / "google-2011")
    with pytest.raises(TracelabError, match=r"mirrors the raw folder .*cell-a.*--data NEW_DIR"):
        run_ingest("google-2011", root_b, lake)
    assert _lake_rows(lake / "google-2011") == before


def test_a_lake_file_out_of_step_with_the_manifest_fails_loudly(
    google_raw: Path, tmp_path: Path, prefect_harness: None
) -> None:
    lake = tmp_path / "lake"
    _ingest("google-2011", google_raw, lake)
    events = lake / "google-2011/job_events/part-00000-of-00500.csv.gz.parquet"
    pl.read_parquet(events).head(3).write_parquet(events)  # rows lost behind ingest's back
    stray = lake / "google-2011/task_events/stray.parquet"
    shutil.copy(events, stray)
    summary = run_ingest("google-2011", google_raw, lake)
    assert not stray.exists()  # a file no raw file owns is deleted, never counted
    assert summary.failed
    (problem,) = summary.unreconciled
    assert problem.startswith("job_events/part-00000-of-00500.csv.gz: the lake holds 3 rows")


def test_a_data_directory_moved_whole_keeps_its_raw_root(
    tmp_path: Path, prefect_harness: None
) -> None:
    data = tmp_path / "data"
    shutil.copytree(DATA / "google-2019", data / "raw/google-2019")
    _ingest("google-2019", data / "raw/google-2019", data / "lake")
    moved = tmp_path / "moved"
    data.rename(moved)
    again = _ingest("google-2019", moved / "raw/google-2019", moved / "lake")
    assert {r.status for r in again.rows} == {"skipped-unchanged"}
