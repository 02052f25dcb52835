"""The plain functions behind the derive flow: discovery, order, parameters, checks, lake views."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.sql import QUERIES_DIR, load_sql
from tracelab.analysis.lake import derive

GOOGLE_TABLES = [
    "agg_event_cdf",
    "agg_event_cdf_summary",
    "agg_events_by_priority",
    "agg_machine_capacity",
    "agg_machine_capacity_mix",
    "agg_machine_capacity_pairs",
    "agg_machine_capacity_summary",
    "agg_queue_length",
    "agg_queue_summary",
    "agg_running_tasks",
    "agg_task_times_hourly",
    "agg_task_times_summary",
    "agg_task_times_window",
    "agg_transition_counts",
    "agg_transition_summary",
    "agg_usage_by_class",
    "agg_usage_by_priority",
    "agg_usage_summary",
    "agg_utilization_change",
    "agg_utilization_change_summary",
    "fct_task_lifecycles",
    "fct_task_times",
    "fct_task_transitions",
    "fct_task_transitions_collapsed",
    "fct_task_usage_histograms",
    "fct_task_usage_stats",
]


def test_google_tables_are_the_contract() -> None:
    # INTERFACE.md: these names are user-facing
    assert derive.derived_table_names("google-2011") == GOOGLE_TABLES
    assert not set(GOOGLE_TABLES) & set(derive.derived_table_names("azure-2017"))


def test_google_dependencies_are_read_from_the_sql() -> None:
    deps = derive.table_dependencies("google-2011")
    assert deps == {
        "agg_event_cdf": ("fct_task_transitions",),
        "agg_event_cdf_summary": ("agg_event_cdf",),
        "agg_events_by_priority": (),
        "agg_machine_capacity": (),
        "agg_machine_capacity_mix": (),
        "agg_machine_capacity_pairs": ("agg_machine_capacity_mix",),
        "agg_machine_capacity_summary": ("agg_machine_capacity", "agg_machine_capacity_pairs"),
        "agg_queue_length": ("fct_task_transitions_collapsed",),
        "agg_queue_summary": ("agg_queue_length", "agg_running_tasks"),
        "agg_running_tasks": ("fct_task_transitions_collapsed",),
        "agg_task_times_hourly": ("agg_task_times_window", "fct_task_times"),
        "agg_task_times_summary": (
            "agg_task_times_hourly",
            "agg_task_times_window",
            "fct_task_times",
        ),
        "agg_task_times_window": ("fct_task_times",),
        "agg_transition_counts": ("fct_task_transitions",),
        "agg_transition_summary": ("agg_transition_counts",),
        "agg_usage_by_class": ("agg_usage_by_priority",),
        "agg_usage_by_priority": ("fct_task_transitions",),
        "agg_usage_summary": ("agg_usage_by_class", "agg_usage_by_priority"),
        "agg_utilization_change": ("agg_usage_by_priority",),
        "agg_utilization_change_summary": ("agg_utilization_change",),
        "fct_task_lifecycles": ("fct_task_times",),
        "fct_task_times": (),
        "fct_task_transitions": (),
        "fct_task_transitions_collapsed": ("fct_task_transitions",),
        "fct_task_usage_histograms": ("fct_task_usage_stats",),
        "fct_task_usage_stats": (),
    }
    order = derive.dependency_order(deps)
    for table, reads in deps.items():
        assert all(order.index(r) < order.index(table) for r in reads)


def test_dependency_order_is_deterministic_and_rejects_cycles() -> None:
    assert derive.dependency_order({"c": ("a",), "b": (), "a": ()}) == ["a", "b", "c"]
    with pytest.raises(TracelabError, match="cycle"):
        derive.dependency_order({"a": ("b",), "b": ("a",)})
    with pytest.raises(TracelabError, match="no queries"):
        derive.dependency_order({"a": ("ghost",)})


def test_tables_needed_pulls_in_what_a_table_reads() -> None:
    deps = derive.table_dependencies("google-2011")
    assert derive.tables_needed(["agg_queue_length"], deps) == [
        "fct_task_transitions",
        "fct_task_transitions_collapsed",
        "agg_queue_length",
    ]
    assert derive.tables_needed(["fct_task_usage_stats"], deps) == ["fct_task_usage_stats"]


def test_comments_do_not_create_dependencies_or_parameters() -> None:
    sql = "-- reads fct_task_times and $ghost\nselect $a as x from fct_task_transitions"
    assert derive.referenced_names(sql, ["fct_task_times", "fct_task_transitions"]) == (
        "fct_task_transitions",
    )
    assert derive.params_for(sql, {"a": 1, "b": 2, "ghost": 3}) == {"a": 1}
    with pytest.raises(TracelabError, match=r"\['a'\]"):
        derive.params_for(sql, {"b": 2})


def test_every_parameter_is_used_and_every_sql_parameter_has_a_default() -> None:
    defaults = derive.DeriveParams().as_sql_params()
    used: set[str] = set()
    for path in [*QUERIES_DIR.glob("*.sql"), *(QUERIES_DIR / "checks").glob("*.sql")]:
        name = path.stem if path.parent == QUERIES_DIR else f"checks/{path.stem}"
        if path.parent == QUERIES_DIR and not re.match(r"^(fct|agg)_", path.stem):
            continue  # other stages' queries (e.g. analysis_*) take their own parameters
        sql = load_sql(name)
        used |= set(derive.params_for(sql, defaults))
    assert used == set(defaults)


@pytest.mark.parametrize("name", GOOGLE_TABLES)
def test_sql_follows_the_house_shape(name: str) -> None:
    sql = load_sql(name)
    code = re.sub(r"--[^\n]*", "", sql)
    # STYLE.md: CTEs, then `select * from final`; values only as named parameters
    assert sql.rstrip().endswith("select * from final")
    assert code.lstrip().startswith("with")
    assert "{" not in code.replace("$", "")
    # lowercase keywords; upper case only inside string literals ('SUBMIT')
    unquoted = re.sub(r"'[^']*'", "''", code)
    assert unquoted == unquoted.lower(), name


def test_checks_belong_to_their_trace() -> None:
    google = derive.check_names("google-2011")
    azure = derive.check_names("azure-2017")
    assert google
    assert not set(google) & set(azure)
    every = {p.stem for p in (QUERIES_DIR / "checks").glob("assert_*.sql")}
    mine = {c.removeprefix("checks/") for c in google}
    assert mine <= every


def _queries_folder(folder: Path, files: dict[str, str]) -> None:
    (folder / "checks").mkdir()
    for name, sql in files.items():
        (folder / name).write_text(sql)


def test_discovery_on_a_queries_folder(tmp_path: Path) -> None:
    files = {
        "fct_a.sql": "select * from task_events",
        "agg_b.sql": "-- not fct_alibaba_c\nselect * from fct_a",
        "fct_alibaba_c.sql": "select * from batch_task",
        "analysis_other.sql": "select * from fct_a",  # another stage's query: not a table
        "checks/assert_google.sql": "select * from agg_b",
        "checks/assert_google_lake.sql": "select * from task_usage",
        "checks/assert_alibaba_lake.sql": "select * from batch_task",
        "checks/assert_mixed.sql": "select * from fct_a, fct_alibaba_c",
        "checks/assert_nothing.sql": "select 1",
    }
    _queries_folder(tmp_path, files)
    assert derive.derived_table_names("google-2011", tmp_path) == ["agg_b", "fct_a"]
    assert derive.derived_table_names("alibaba-2018", tmp_path) == ["fct_alibaba_c"]
    assert derive.table_dependencies("google-2011", tmp_path) == {"agg_b": ("fct_a",), "fct_a": ()}
    assert derive.check_names("google-2011", tmp_path) == [
        "checks/assert_google",
        "checks/assert_google_lake",
    ]
    assert derive.check_names("alibaba-2018", tmp_path) == ["checks/assert_alibaba_lake"]
    with pytest.raises(ValueError, match="unknown trace"):
        derive.derived_table_names("borg-2019", tmp_path)


def test_marts_run_where_the_relations_they_read_exist(tmp_path: Path) -> None:
    """A mart over a staging shape runs for each trace whose staging provides it; one over a
    shape only one trace provides runs there; a raw table only one trace publishes routes a file
    to that trace, whatever its name; a CTE or a column alias named like a relation is no read."""
    files = {
        "stg_azure2017__vms.sql": "select vmid from vmtable",
        "stg_azure2019__vms.sql": "select vmid from stg_vm_buckets",
        "stg_azure2019__vm_buckets.sql": "select vmid from vmtable",
        "fct_azure_shared.sql": "with vms as (select * from stg_vms) select * from vms",
        "agg_azure_on_shared.sql": "select count(*) as deployments from fct_azure_shared",
        "agg_buckets.sql": "with deployments as (select * from stg_vm_buckets) "
        "select * from deployments",
        "agg_instances.sql": "select * from instance_events",
        "checks/assert_vms.sql": "select * from stg_vms where vmid is null",
    }
    _queries_folder(tmp_path, files)
    shared = ["agg_azure_on_shared", "fct_azure_shared"]
    assert derive.derived_table_names("azure-2017", tmp_path) == shared
    assert derive.derived_table_names("azure-2019", tmp_path) == sorted(["agg_buckets", *shared])
    assert derive.derived_table_names("google-2011", tmp_path) == []
    assert derive.derived_table_names("google-2019", tmp_path) == ["agg_instances"]
    assert derive.derived_table_names("alibaba-2018", tmp_path) == []
    assert derive.staging_views("azure-2019", tmp_path) == {
        "stg_vm_buckets": "stg_azure2019__vm_buckets",
        "stg_vms": "stg_azure2019__vms",
    }
    assert derive.check_names("azure-2017", tmp_path) == ["checks/assert_vms"]
    assert derive.check_names("azure-2019", tmp_path) == ["checks/assert_vms"]
    assert derive.check_names("google-2011", tmp_path) == []


@pytest.mark.parametrize("name", ["agg_azure_raw", "agg_g2019_machines", "checks/assert_raw"])
def test_a_file_reading_a_raw_table_several_traces_publish_is_refused(
    tmp_path: Path, name: str
) -> None:
    """machine_events and vmtable do not say whose rows they hold; a file's name routes nothing,
    so only staging files may read them."""
    raw = "vmtable" if "azure" in name else "machine_events"
    _queries_folder(tmp_path, {f"{name}.sql": f"select * from {raw}"})
    with pytest.raises(TracelabError, match=rf"reads {raw}, which several traces publish.*stg_"):
        derive.check_names("google-2011", tmp_path)


def _table(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    con.from_arrow(frame.to_arrow()).create(name)


def test_checks_catch_what_they_promise() -> None:
    con = duckdb.connect()
    params = derive.DeriveParams().as_sql_params()
    stats = pl.DataFrame(
        {"job_id": [1, 1, 1], "task_index": [0, 0, 1], "n_windows": [30, 30, 24]},
    ).with_columns(is_long=pl.lit(True))
    _table(con, "fct_task_usage_stats", stats)
    dup = derive.check_violations(con, "checks/assert_task_usage_stats_one_row_per_task", params)
    assert dup.n_violations == 1
    assert dup.rows == ((1, 0, 2),)
    # 100 bins of 0.011 sum to 1.1: not a distribution
    hist = pl.DataFrame(
        {"job_id": [1], "task_index": [1], "n_windows": [24], "h": [[0.011] * 100]},
        schema_overrides={"h": pl.Array(pl.Float64(), 100)},
    )
    _table(con, "fct_task_usage_histograms", hist)
    sums = derive.check_violations(
        con, "checks/assert_task_usage_histograms_rows_sum_to_one", params
    )
    assert sums.n_violations == 1
    assert sums.rows[0][2] == pytest.approx(1.1)
    queue = pl.DataFrame(
        {
            "time": [0, 600_000_000, 700_000_000],
            "queue_length_paper": [-5, 0, 1],
            "queue_length": [-5, -1, 1],
            # the batch-queued tasks are part of the waiting ones: 2 of 1 is a violation
            "queued_length": [0, 0, 2],
        }
    )
    _table(con, "agg_queue_length", queue)
    # before the window starts a partial history may dip below zero; from then on it may not
    result = derive.check_violations(con, "checks/assert_queue_length_non_negative", params)
    assert result.rows == ((600_000_000, 0, -1, 0), (700_000_000, 1, 1, 2))
    message = derive.failed_checks_message([dup, sums, result])
    assert message is not None
    assert "3 invariant check(s) failed" in message
    assert "assert_queue_length_non_negative: 2 offending row(s)" in message


def test_no_lake_is_a_clear_error(tmp_path: Path) -> None:
    con = duckdb.connect()
    with pytest.raises(TracelabError, match=r"run `tracelab ingest --trace google-2011` first"):
        derive.create_input_views(con, "google-2011", tmp_path / "lake" / "google-2011")
