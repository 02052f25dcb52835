"""The ingest plan: which checksums are needed before converting, and how files share tasks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import xxhash

from tracelab.analysis.lake.ingest import RawFile, lake_paths
from tracelab.analysis.lake.ingest_manifest import (
    FilePlan,
    ManifestRow,
    conversion_batches,
    files_to_checksum_first,
    plan_files,
    read_manifest,
)
from tracelab.flows.ingest import IngestOptions, run_ingest

TRACE = "google-2011"


def _raw(name: str, size: int) -> RawFile:
    rel = f"job_events/{name}.csv"
    return RawFile(table="job_events", path=Path("/nowhere") / rel, rel=rel, size_bytes=size)


def _ok_row(raw: RawFile, size: int, checksum: str, content: str = "xxh3-128:c") -> ManifestRow:
    return ManifestRow(
        table=raw.table,
        path=raw.rel,
        bytes=size,
        checksum=checksum,
        rows_read=1,
        rows_written=1,
        rows_rejected=0,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        seconds=0.1,
        status="ok",
        error="",
        method="native",
        content=content,
    )


def test_only_files_a_checksum_can_decide_are_checksummed_first(tmp_path: Path) -> None:
    lone = _raw("part-00000-of-00006", 100)
    twin_a, twin_b = _raw("part-00001-of-00006", 200), _raw("part-00002-of-00006", 200)
    known = _raw("part-00003-of-00006", 300)  # ok before, same size, Parquet present
    resized = _raw("part-00004-of-00006", 400)  # ok before with another size
    no_output = _raw("part-00005-of-00006", 500)  # ok before, but its Parquet was deleted
    # ok before, same size, Parquet present, but its row predates content digests
    no_content = _raw("part-00006-of-00006", 600)
    files = (lone, twin_a, twin_b, known, resized, no_output, no_content)
    previous = {
        (known.table, known.rel): _ok_row(known, 300, "sha256:k"),
        (resized.table, resized.rel): _ok_row(resized, 399, "sha256:r"),
        (no_output.table, no_output.rel): _ok_row(no_output, 500, "sha256:n"),
        (no_content.table, no_content.rel): _ok_row(no_content, 600, "sha256:o", content=""),
    }
    for raw in (known, no_content):
        parquet = lake_paths(tmp_path, raw.table, raw.rel).parquet
        parquet.parent.mkdir(parents=True, exist_ok=True)
        parquet.write_bytes(b"PAR1")

    first = files_to_checksum_first(files, previous, tmp_path)
    assert [f.rel for f in first] == [twin_a.rel, twin_b.rel, known.rel]

    # same bytes for the twins: the second is a duplicate; the known file is unchanged
    sums = {twin_a.rel: "sha256:t", twin_b.rel: "sha256:t", known.rel: "sha256:k"}
    plans = {p.raw.rel: p for p in plan_files(files, sums, previous, tmp_path)}
    assert [(p.action, p.checksum) for p in plans.values()] == [
        ("convert", ""),
        ("convert", "sha256:t"),
        ("duplicate", "sha256:t"),
        ("skip", "sha256:k"),
        ("convert", ""),
        ("convert", ""),
        ("convert", ""),  # converted once more, to learn its content digest
    ]
    with pytest.raises(ValueError, match="part-00003-of-00006"):
        plan_files(files, {twin_a.rel: "sha256:t", twin_b.rel: "sha256:u"}, previous, tmp_path)


def _plan(name: str, size: int) -> FilePlan:
    return FilePlan(_raw(name, size), "", "convert", None, "")


def test_small_files_share_a_task_and_big_ones_stay_alone() -> None:
    sizes = [90, 40, 35, 10, 10, 5, 5, 3, 2]  # 200 bytes in all
    plans = [_plan(f"part-{i:05d}-of-00010", s) for i, s in enumerate(sizes)]
    plans.append(FilePlan(_raw("part-00009-of-00010", 1000), "x", "skip", None, ""))
    # bound = min(60, 200 // (8 * 1)) = 25 bytes: 90 | 40 | 35 | 10+10+5 | 5+3+2
    batches = conversion_batches(plans, batch_bytes=60, workers=1)
    assert [[p.raw.size_bytes for p in b] for b in batches] == [
        [90],
        [40],
        [35],
        [10, 10, 5],
        [5, 3, 2],
    ]
    # a configured bound above a worker's share is lowered to it: 200 // (8 * 2) = 12 bytes
    two = conversion_batches(plans, batch_bytes=10_000, workers=2)
    assert [[p.raw.size_bytes for p in b] for b in two] == [
        [90],
        [40],
        [35],
        [10, 10],
        [5, 5, 3],
        [2],
    ]


def test_batch_bytes_zero_gives_one_task_per_file() -> None:
    plans = [
        FilePlan(_raw(f"part-{i:05d}-of-00004", size), "", "convert", None, "")
        for i, size in enumerate((5, 3, 9, 1))
    ]
    batches = conversion_batches(plans, batch_bytes=0, workers=2)
    assert [[p.raw.size_bytes for p in b] for b in batches] == [[9], [5], [3], [1]]


def test_flow_records_the_checksum_of_files_converted_without_a_first_pass(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    contents = {
        "job_events/part-00000-of-00003.csv": b"1,,7000001,0,u,1,j,l\n",
        "job_events/part-00001-of-00003.csv": b"2,,7000002,0,uu,1,jj,ll\n",
        "job_events/part-00002-of-00003.csv": b"3,,7000003,0,uuu,1,jjj,lll\n",
    }
    for rel, data in contents.items():
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_bytes(data)
    summary = run_ingest(TRACE, raw, lake, IngestOptions(batch_mb=1))
    assert not summary.failed
    manifest = read_manifest(lake / TRACE).sort("path")
    assert manifest["checksum"].to_list() == [
        "xxh3-128:" + xxhash.xxh3_128(data).hexdigest() for data in contents.values()
    ]
    assert manifest["rows_written"].to_list() == [1, 1, 1]
    again = run_ingest(TRACE, raw, lake)
    assert {r.status for r in again.rows} == {"skipped-unchanged"}
