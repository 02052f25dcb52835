"""The derive flow end to end: Parquet lake -> derived Parquet files + invariant checks (Prefect)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.options import DeriveParams
from tracelab.analysis.lake.schemas import AZURE_2017, GOOGLE_2011, SOURCE_FILE, SOURCE_ROW
from tracelab.flows.cli import main
from tracelab.flows.derive import run_derive
from tracelab.flows.settings import Settings

REAL_GOOGLE = "google-clusterdata-2011-2"


def _write_lake_table(lake: Path, table: str, frame: pl.DataFrame, name: str) -> None:
    folder = lake / table
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(folder / f"{name}.parquet")


def _typed(frame: pl.DataFrame, table: str, source_file: str) -> pl.DataFrame:
    """Registry types and column order, plus the source columns ingest adds."""
    schema = GOOGLE_2011[table].polars_schema()
    return frame.with_columns(
        *(pl.col(c).cast(pl.Boolean()) for c, t in schema.items() if t == pl.Boolean()),
        pl.lit(source_file).alias(SOURCE_FILE),
        pl.col(SOURCE_ROW).cast(pl.Int64()),
    ).select(*schema, SOURCE_FILE, SOURCE_ROW)


def _task_events_lake(data_dir: Path, te: pl.DataFrame) -> Settings:
    """A google-2011 lake whose task_events are ``te`` (other columns NULL), and its settings."""
    full = te.with_columns(
        pl.lit(None, dtype=t).alias(c)
        for c, t in GOOGLE_2011["task_events"].polars_schema().items()
        if c not in te.columns
    )
    lake = data_dir / "lake" / "google-2011"
    _write_lake_table(lake, "task_events", _typed(full, "task_events", "part-0"), "part-0")
    return Settings(data_dir=data_dir, duckdb_memory_limit="512MB", duckdb_threads=1)


def test_a_schedule_whose_submit_predates_the_data_leaves_the_queue_at_zero(
    prefect_harness: None, tmp_path: Path
) -> None:
    # a SCHEDULE inside the window with no SUBMIT before it (a mid-trace window): it
    # is not subtracted, as its SUBMIT was never added, so the queue stays at zero
    te = pl.DataFrame(
        {
            "time": [700_000_000],
            "job_id": [7],
            "task_index": [0],
            "event_type": [1],
            "priority": [0],
            SOURCE_ROW: [1],
        }
    )
    settings = _task_events_lake(tmp_path, te)
    run = run_derive(settings=settings, tables=("agg_queue_length",))
    assert [t.name for t in run.tables] == [
        "fct_task_transitions",
        "fct_task_transitions_collapsed",
        "agg_queue_length",
    ]
    assert all(c.holds for c in run.checks)
    queue = pl.read_parquet(tmp_path / "derived" / "google-2011" / "agg_queue_length.parquet")
    assert queue.select("schedules", "unqueued_schedules", "queue_length").rows() == [(1, 1, 0)]


def test_the_production_priority_option_reaches_the_staging_view(
    prefect_harness: None, tmp_path: Path
) -> None:
    # production is judged in google-2011's staging view (a DuckDB variable, as a view takes no
    # parameters): a priority-3 task is production only once the option lowers the threshold to 2
    te = pl.DataFrame(
        {"time": [700_000_000], "job_id": [7], "task_index": [0], "event_type": [0]}
    ).with_columns(pl.lit(3).alias("priority"), pl.lit(1).alias(SOURCE_ROW))
    settings = _task_events_lake(tmp_path, te)
    counts = tmp_path / "derived" / "google-2011" / "agg_events_by_priority.parquet"
    for threshold, production in ((9, False), (2, True)):
        params = DeriveParams(production_priority=threshold)
        run = run_derive(settings=settings, tables=("agg_events_by_priority",), params=params)
        assert all(c.holds for c in run.checks)
        assert pl.read_parquet(counts)["is_production"].to_list() == [production]


def test_flow_fails_with_the_offending_rows(prefect_harness: None, tmp_path: Path) -> None:
    lake = tmp_path / "lake" / "azure-2017"
    # a VM deleted before it was created: assert_azure_vm_times_valid names it
    vm = {
        "vmid": ["vm1"],
        "subscriptionid": ["s1"],
        "deploymentid": ["d1"],
        "vmcreated": [600],
        "vmdeleted": [300],
        "maxcpu": [1.0],
        "avgcpu": [0.5],
        "p95maxcpu": [0.9],
        "vmcategory": ["Interactive"],
        "vmcorecount": [2],
        "vmmemory": [4.0],
        SOURCE_ROW: [1],
    }
    schema = AZURE_2017["vmtable"].polars_schema()
    frame = pl.DataFrame(vm).with_columns(
        *(pl.col(c).cast(t) for c, t in schema.items()),
        pl.lit("vmtable.csv.gz").alias(SOURCE_FILE),
        pl.col(SOURCE_ROW).cast(pl.Int64()),
    )
    _write_lake_table(lake, "vmtable", frame.select(*schema, SOURCE_FILE, SOURCE_ROW), "vmtable")
    settings = Settings(data_dir=tmp_path, duckdb_memory_limit="512MB", duckdb_threads=1)
    tables = ("fct_azure_vm_lifetimes",)
    with pytest.raises(TracelabError, match=r"assert_azure_vm_times_valid: 1 offending row"):
        run_derive(settings=settings, trace="azure-2017", tables=tables)
    # the tables themselves were written; only the invariant failed
    assert (tmp_path / "derived" / "azure-2017" / "fct_azure_vm_lifetimes.parquet").is_file()
    run = run_derive(settings=settings, trace="azure-2017", tables=tables, check_invariants=False)
    assert [t.name for t in run.tables] == ["fct_azure_vm_lifetimes"]


def test_cli_without_a_lake_names_the_ingest_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["derive", "--data", str(tmp_path), "--trace", "google-2011"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "run `tracelab ingest --trace google-2011` first" in err[0]
    assert str(tmp_path / "lake" / "google-2011") in err[0]


def test_cli_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["derive", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--trace", "--table", "--no-checks", "--long-task-windows"):
        assert flag in out
