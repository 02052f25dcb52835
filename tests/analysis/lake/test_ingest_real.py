"""Ingest of the real trace excerpts in ../shared (copied into a tmp raw layout at test time).

Expected counts are the facts checked independently on these files (PROVENANCE.md, docs/methods.md §0.3).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.lake.ingest_run import IngestSummary
from tracelab.flows.ingest import run_ingest

pytestmark = pytest.mark.real_data

GOOGLE = "google-clusterdata-2011-2"


@pytest.fixture(scope="module")
def google_lake(
    real_dir: Path, tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> tuple[Path, IngestSummary]:
    src = real_dir / GOOGLE
    raw = tmp_path_factory.mktemp("raw") / "google-2011"
    for folder in ("task_events", "job_events", "machine_events"):
        shutil.copytree(src / folder, raw / folder)
    usage = raw / "task_usage"
    usage.mkdir()
    # renamed so they match the published part-file glob; the first has an added header line
    shutil.copy(
        src / "task_usage/google2011_task_usage_sample.csv", usage / "part-00000-of-00002.csv"
    )
    shutil.copy(src / "task_usage/datagg_test.csv", usage / "part-00001-of-00002.csv")
    lake = tmp_path_factory.mktemp("lake")
    summary = run_ingest("google-2011", raw, lake)
    return lake / "google-2011", summary


def _rows(lake: Path, rel: str) -> pl.DataFrame:
    return pl.read_parquet(lake / rel)


def test_task_events_part0_exact_counts(google_lake: tuple[Path, IngestSummary]) -> None:
    lake, _ = google_lake
    df = _rows(lake, "task_events/part-00000-of-00500.csv.gz.parquet")
    assert df.height == 450_146
    counts = dict(df.group_by("event_type").len().iter_rows())
    assert counts == {0: 201_491, 1: 189_994, 2: 4_338, 3: 581, 4: 43_237, 5: 10_505}
    assert df["machine_id"].null_count() == 119_565
    assert df["missing_info"].is_not_null().sum() == 291
    assert (df["time"] == 0).sum() == 277_321
    assert df["source_row"].to_list() == list(range(1, 450_147))
    assert df["source_file"].unique().to_list() == ["task_events/part-00000-of-00500.csv.gz"]


def test_machine_and_job_events_counts(google_lake: tuple[Path, IngestSummary]) -> None:
    lake, _ = google_lake
    machines = _rows(lake, "machine_events/part-00000-of-00001.csv.gz.parquet")
    assert machines.height == 37_780
    assert machines["machine_id"].n_unique() == 12_583
    for part, rows in (("00000", 10_704), ("00002", 3_360), ("00003", 4_179)):
        assert _rows(lake, f"job_events/part-{part}-of-00500.csv.gz.parquet").height == rows


def test_task_usage_header_line_goes_to_rejects(google_lake: tuple[Path, IngestSummary]) -> None:
    lake, _ = google_lake
    usage = _rows(lake, "task_usage/part-00000-of-00002.csv.parquet")
    assert usage.height == 10_000
    assert usage["source_row"].min() == 2  # line 1 is the header
    assert (usage["start_time"] == 600_000_000).all()
    assert (usage["sampled_cpu_usage"] == 0).sum() == 7_277
    rejects = _rows(lake, "_rejects/task_usage__part-00000-of-00002.csv.parquet")
    assert rejects.height == 1
    row = rejects.row(0, named=True)
    assert row["source_line"] == 1
    assert row["reason"].startswith("header line")
    assert row["raw_text"].startswith("start_time,end_time,job_id")
    headerless = _rows(lake, "task_usage/part-00001-of-00002.csv.parquet")
    assert headerless.height == 120
    # datagg_test.csv holds rows 1-120 of the same part file
    assert headerless.drop("source_file", "source_row").equals(
        usage.head(120).drop("source_file", "source_row")
    )


def test_manifest_reconciles_every_file(google_lake: tuple[Path, IngestSummary]) -> None:
    lake, summary = google_lake
    manifest = read_manifest(lake)
    assert manifest.height == 9
    assert set(manifest["status"]) == {"ok"}
    assert (manifest["rows_read"] == manifest["rows_written"] + manifest["rows_rejected"]).all()
    assert manifest["rows_rejected"].sum() == 1
    assert manifest.filter(pl.col("path") == "task_events/part-00002-of-00500.csv.gz")[
        "rows_written"
    ].to_list() == [160_642]
    assert all(c.startswith("xxh3-128:") and len(c) == 9 + 32 for c in manifest["checksum"])
    assert not summary.failed


def test_azure_filtered_vmtable_is_a_clear_error(
    real_dir: Path, tmp_path: Path, prefect_harness: None
) -> None:
    raw = tmp_path / "raw"
    (raw / "vmtable").mkdir(parents=True)
    shutil.copy(real_dir / "azure-public-dataset-v1/filtered_vmtables_50.csv", raw / "vmtable")
    summary = run_ingest("azure-2017", raw, tmp_path / "lake")
    assert summary.failed
    (row,) = summary.rows
    assert row.status == "error"
    assert row.error.startswith(
        "expected 11 fields (vmid, subscriptionid, deploymentid, vmcreated, vmdeleted, maxcpu, "
        "avgcpu, p95maxcpu, vmcategory, vmcorecount, vmmemory), found 9"
    )
    assert "is this the original headerless vmtable?" in row.error
    assert (row.rows_read, row.rows_written, row.rows_rejected) == (658, 0, 658)
    lake = tmp_path / "lake/azure-2017"
    assert not (lake / "vmtable/filtered_vmtables_50.csv.parquet").exists()
    rejects = pl.read_parquet(lake / "_rejects/vmtable__filtered_vmtables_50.csv.parquet")
    headers = rejects.filter(pl.col("raw_text").str.starts_with(",vmid,vmcreated"))
    assert headers["source_line"].to_list() == [1, 631]
    assert all(r.startswith("header line") for r in headers["reason"])
