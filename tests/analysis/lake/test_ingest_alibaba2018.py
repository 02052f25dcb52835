"""Ingest of Alibaba cluster-trace-v2018: the real samples and the trimmed excerpt.

Expected counts were taken from the files with Python's csv module (PROVENANCE.md of
``../shared/data/real/alibaba-cluster-trace-v2018`` and of ``tests/data/alibaba-2018``), not
from the code under test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
from repo_paths import TESTS

from tracelab.analysis.lake import derive
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.lake.ingest_run import IngestSummary
from tracelab.flows.ingest import run_ingest

TRACE = "alibaba-2018"
SAMPLES = "alibaba-cluster-trace-v2018"
EXCERPT = TESTS / "data" / TRACE
#: the shared sample of each table (laid out as DIR/<table>/<table>.csv at test time)
SAMPLE_FILES = {
    "batch_task": "alibaba2018_batch_task_sample.csv",
    "container_meta": "alibaba2018_container_meta_sample.csv",
    "machine_meta": "alibaba2018_machine_meta.csv",
}


def _ingest(raw: Path, lake: Path) -> IngestSummary:
    return run_ingest(TRACE, raw, lake)


@pytest.fixture(scope="module")
def real_lake(
    real_dir: Path, tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> tuple[Path, IngestSummary]:
    raw = tmp_path_factory.mktemp("raw") / TRACE
    for table, name in SAMPLE_FILES.items():
        (raw / table).mkdir(parents=True)
        shutil.copy(real_dir / SAMPLES / name, raw / table / f"{table}.csv")
    lake = tmp_path_factory.mktemp("lake")
    return lake / TRACE, _ingest(raw, lake)


@pytest.fixture(scope="module")
def excerpt_lake(
    tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> tuple[Path, IngestSummary]:
    lake = tmp_path_factory.mktemp("lake")
    return lake / TRACE, _ingest(EXCERPT, lake)


def _table(lake: Path, table: str, raw_name: str = "*") -> pl.DataFrame:
    return pl.read_parquet(lake / table / f"{raw_name}.parquet")


@pytest.mark.real_data
def test_real_samples_give_the_published_counts(real_lake: tuple[Path, IngestSummary]) -> None:
    lake, summary = real_lake
    assert not summary.failed
    tasks = _table(lake, "batch_task")
    assert tasks.height == 50_000
    assert dict(tasks.group_by("status").len().iter_rows()) == {
        "Terminated": 49_229,
        "Running": 390,
        "Failed": 296,
        "Waiting": 85,
    }
    # empty fields are NULL, never 0
    assert tasks["instance_num"].null_count() == 85
    assert tasks["plan_cpu"].null_count() == 199
    assert tasks["job_name"].n_unique() == 14_407
    containers = _table(lake, "container_meta")
    assert containers.height == 20_000
    assert containers["container_id"].n_unique() == 3_861
    machines = _table(lake, "machine_meta")
    assert machines.height == 17_592
    assert machines["machine_id"].n_unique() == 4_034
    assert machines["failure_domain_2"].null_count() == 34


@pytest.mark.real_data
def test_real_header_line_is_the_one_reject(real_lake: tuple[Path, IngestSummary]) -> None:
    lake, _ = real_lake
    tasks = _table(lake, "batch_task")
    # line 1 is the header the sample's source added: never a data row
    assert tasks["source_row"].min() == 2
    assert (tasks["task_name"] == "task_name").sum() == 0
    rejects = pl.read_parquet(lake / "_rejects")
    assert rejects.height == 1
    row = rejects.row(0, named=True)
    assert row["source_file"] == "batch_task/batch_task.csv"
    assert row["source_line"] == 1
    assert row["reason"] == "header line (column names); the published files have no header"
    assert row["raw_text"].startswith("task_name,instance_num,job_name")


@pytest.mark.real_data
def test_real_counts_reconcile(real_lake: tuple[Path, IngestSummary]) -> None:
    lake, _ = real_lake
    manifest = read_manifest(lake).sort("table")
    assert manifest["table"].to_list() == ["batch_task", "container_meta", "machine_meta"]
    assert manifest["rows_read"].to_list() == [50_001, 20_000, 17_592]
    assert manifest["rows_rejected"].to_list() == [1, 0, 0]
    assert (manifest["rows_read"] == manifest["rows_written"] + manifest["rows_rejected"]).all()
    assert set(manifest["source"]) == {"real"}


@pytest.mark.real_data
def test_real_samples_derive_the_status_counts(
    real_lake: tuple[Path, IngestSummary], tmp_path: Path
) -> None:
    lake, _ = real_lake
    con = duckdb.connect()
    derive.create_input_views(con, TRACE, lake)
    params = derive.DeriveParams().as_sql_params()
    deps = derive.table_dependencies(TRACE)
    for name in derive.tables_needed(["agg_alibaba_transition_counts"], deps):
        derive.materialise_table(con, name, params, tmp_path)
    got = {
        (r[0], r[1]): (r[2], r[3])
        for r in con.sql(
            "select prev_state, state, n, n_times_inconsistent from agg_alibaba_transition_counts"
        ).fetchall()
    }
    # the 50,000 tasks' statuses (above): every started task ran; none has times against it
    assert got == {
        (None, "Running"): (49_229 + 296 + 390, 0),
        (None, "Waiting"): (85, 0),
        ("Running", "Failed"): (296, 0),
        ("Running", "Terminated"): (49_229, 0),
    }


def test_excerpt_counts(excerpt_lake: tuple[Path, IngestSummary]) -> None:
    lake, summary = excerpt_lake
    assert not summary.failed
    tasks = _table(lake, "batch_task")
    assert tasks.height == 5_000
    assert dict(tasks.group_by("status").len().iter_rows()) == {
        "Terminated": 4_920,
        "Running": 39,
        "Failed": 28,
        "Waiting": 13,
    }
    assert tasks["instance_num"].null_count() == 13
    assert tasks["plan_cpu"].null_count() == 33
    assert tasks["source_file"].unique().to_list() == ["batch_task/batch_task.csv.gz"]
    first = tasks.filter(pl.col("source_row") == 2).row(0, named=True)
    # M1,1,j_1,1,Terminated,419912,419912,100,0.2 (the file's second line)
    assert first == {
        "task_name": "M1",
        "instance_num": 1,
        "job_name": "j_1",
        "task_type": "1",
        "status": "Terminated",
        "start_time": 419_912,
        "end_time": 419_912,
        "plan_cpu": 100.0,
        "plan_mem": 0.2,
        "source_file": "batch_task/batch_task.csv.gz",
        "source_row": 2,
    }
    assert _table(lake, "container_meta").height == 20_000
    machines = _table(lake, "machine_meta")
    assert machines.height == 17_592
    assert machines["machine_id"].n_unique() == 4_034
    assert (machines["status"] == "IMPORT_INSTALLING").sum() == 5
    rejects = pl.read_parquet(lake / "_rejects")
    assert rejects.select("source_file", "source_line").rows() == [
        ("batch_task/batch_task.csv.gz", 1)
    ]
    assert rejects["reason"][0].startswith("header line")


def test_excerpt_ingest_is_incremental_and_idempotent(
    excerpt_lake: tuple[Path, IngestSummary], tmp_path: Path
) -> None:
    lake, _ = excerpt_lake
    before = {p: p.read_bytes() for p in sorted(lake.rglob("*.parquet")) if p.name[0] != "_"}
    again = _ingest(EXCERPT, lake.parent)
    assert {r.status for r in again.rows} == {"skipped-unchanged"}
    after = {p: p.read_bytes() for p in sorted(lake.rglob("*.parquet")) if p.name[0] != "_"}
    assert after == before
    # a new file is converted, the others are not
    raw, copy = tmp_path / TRACE, tmp_path / "lake"
    shutil.copytree(EXCERPT, raw)
    _ingest(raw, copy)
    extra = b"M1,1,j_x,1,Terminated,10,20,100,0.5\n"
    (raw / "batch_task" / "more.csv").write_bytes(extra)
    third = _ingest(raw, copy)
    statuses = {r.path: r.status for r in third.rows}
    assert statuses["batch_task/more.csv"] == "ok"
    assert statuses["machine_meta/machine_meta.csv.gz"] == "skipped-unchanged"
    assert _table(copy / TRACE, "batch_task", "more.csv").height == 1


def test_bad_lines_are_rejected_with_their_reason(tmp_path: Path, prefect_harness: None) -> None:
    raw = tmp_path / "raw"
    (raw / "machine_meta").mkdir(parents=True)
    lines = [
        "m_1,0,219,17.0,96,100,USING",  # good
        "m_2,x,219,17.0,96,100,USING",  # time_stamp not an integer
        ",5,219,17.0,96,100,USING",  # no machine_id
        "m_3,5,219,17.0,96,100",  # a field short
        "m_4,7,,,,,",  # only the identity: kept, the rest NULL
    ]
    (raw / "machine_meta" / "machine_meta.csv").write_text("\n".join(lines) + "\n")
    summary = _ingest(raw, tmp_path / "lake")
    lake = tmp_path / "lake" / TRACE
    kept = _table(lake, "machine_meta")
    assert kept["machine_id"].to_list() == ["m_1", "m_4"]
    assert kept.filter(pl.col("machine_id") == "m_4")["cpu_num"].null_count() == 1
    rejects = pl.read_parquet(lake / "_rejects").sort("source_line")
    assert rejects["source_line"].to_list() == [2, 3, 4]
    reasons = rejects["reason"].to_list()
    assert reasons[0] == "time_stamp: not an integer: 'x'"
    assert reasons[1] == "machine_id: mandatory field is empty"
    assert reasons[2].startswith("expected 7 fields (machine_id, time_stamp,")
    row = summary.rows[0]
    assert (row.rows_read, row.rows_written, row.rows_rejected) == (5, 2, 3)
