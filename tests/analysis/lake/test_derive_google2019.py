"""google-2019 derived tables against the generator's truth and on the real machine_events shard.

The generator records per instance its true scheduling delay, run length and CPU level, the
instances running at the window end and the machines it wrote (TRUTH.json); the derived tables
must give them back. Hand-made cases of every table are in tests/queries/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from tracelab.analysis.lake import derive
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.ingest import run_ingest

TRACE = "google-2019"


def _derive_all(lake: Path, out: Path) -> dict[str, pl.DataFrame]:
    con = duckdb.connect()
    derive.create_input_views(con, TRACE, lake / TRACE)
    params = derive.DeriveParams().as_sql_params()
    tables = derive.tables_needed(
        derive.derived_table_names(TRACE), derive.table_dependencies(TRACE)
    )
    for name in tables:
        derive.materialise_table(con, name, params, out)
    for check in derive.check_names(TRACE):
        result = derive.check_violations(con, check, params)
        assert result.holds, derive.failed_checks_message([result])
    assert derive.check_names(TRACE), "no google-2019 invariant checks found"
    # the shared marts' checks over its staging (it has no table of its own)
    shared = {"checks/assert_machine_capacity_non_negative"}
    shared.add("checks/assert_machine_capacity_mix_matches_series")
    shared.add("checks/assert_events_by_priority_covers_events")
    for times_check in ("durations_non_negative", "missing_info_valid", "one_row_per_incarnation"):
        shared.add(f"checks/assert_task_times_{times_check}")
    shared.add("checks/assert_task_lifecycles_one_row_per_task")
    shared.add("checks/assert_task_transitions_one_row_per_event")
    shared.add("checks/assert_transition_counts_cover_transitions")
    shared.add("checks/assert_queue_length_non_negative")
    shared.add("checks/assert_running_tasks_non_negative")
    shared.add("checks/assert_task_usage_stats_ordered")
    shared.add("checks/assert_task_usage_stats_one_row_per_task")
    shared.add("checks/assert_task_times_hourly_censored_within_scheduled")
    assert set(derive.check_names(TRACE)) == shared
    return {name: pl.read_parquet(out / f"{name}.parquet") for name in tables}


@pytest.fixture(scope="module")
def generated(
    tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> tuple[dict[str, Any], dict[str, pl.DataFrame]]:
    root = tmp_path_factory.mktemp("g2019derive")
    truth = json.loads(generate_trace(TRACE, root / "raw", seed=11, scale="small").read_text())
    summary = run_ingest(TRACE, root / "raw", root / "lake")
    assert not summary.failed
    return truth, _derive_all(root / "lake", root / "derived")


def test_every_transition_of_the_generator_is_in_the_documented_graph(
    generated: tuple[dict[str, Any], dict[str, pl.DataFrame]],
) -> None:
    truth, tables = generated
    transitions = tables["fct_task_transitions"]
    verdicts = transitions["allowed_by_documented_graph"]
    # the generator only takes documented steps; each instance's first event has no verdict
    assert verdicts.null_count() == truth["instances"]
    assert verdicts.drop_nulls().all()


def test_running_and_queue_at_the_end_match_the_truth(
    generated: tuple[dict[str, Any], dict[str, pl.DataFrame]],
) -> None:
    truth, tables = generated
    running = tables["agg_running_tasks"].sort("time")
    assert running["running_tasks"][-1] == truth["instances_running_at_end"]
    queue = tables["agg_queue_length"]
    # every SUBMIT of the generator is in the data: nothing is scheduled without one
    assert queue["unqueued_schedules"].sum() == 0
    assert queue["submits"].sum() == truth["event_counts"]["instance_events"]["0"]


def test_instance_times_are_the_generated_delays_and_runs(
    generated: tuple[dict[str, Any], dict[str, pl.DataFrame]],
) -> None:
    truth, tables = generated
    first = tables["fct_task_times"].filter(pl.col("incarnation") == 1)
    got = {
        (r["job_id"], r["task_index"]): r
        for r in first.iter_rows(named=True)
        if r["schedule_time"] is not None
    }
    known = [t for t in truth["instance_truths"] if t["schedule_delay_s"] is not None]
    assert len(got) == len(known)
    for t in known:
        row = got[(t["collection_id"], t["instance_index"])]
        # µs integers on both sides: exact up to the float division by 1e6
        assert row["scheduling_time_s"] == pytest.approx(t["schedule_delay_s"], abs=1e-6)
        if row["execution_time_s"] is not None:
            assert row["execution_time_s"] == pytest.approx(t["duration_s"], abs=1e-6)


def test_usage_stats_recover_each_instances_cpu_level(
    generated: tuple[dict[str, Any], dict[str, pl.DataFrame]],
) -> None:
    truth, tables = generated
    mu = {(t["collection_id"], t["instance_index"]): t["mu_cpu"] for t in truth["instance_truths"]}
    stats = tables["fct_task_usage_stats"].filter(pl.col("n_windows") >= 12)
    assert stats.height > 50
    ratios = [
        r["avg_mean"] / mu[(r["job_id"], r["task_index"])] for r in stats.iter_rows(named=True)
    ]
    # avg = mu x U(0.8, 1.2) (float32): a window's ratio has sd 0.4 / sqrt(12) = 0.115, a mean of
    # >= 12 windows <= 0.033; the ratio's mean over the instances is 1 within a few of those
    assert max(abs(r - 1) for r in ratios) < 0.2
    assert sum(ratios) / len(ratios) == pytest.approx(1.0, abs=0.02)
    # the window maximum is avg x U(1.2, 2): its mean lies between 1.2 and 2 times avg_mean
    assert ((stats["win_max_mean"] / stats["avg_mean"]).is_between(1.2, 2.0)).all()


def test_machine_capacity_matches_the_generated_machines(
    generated: tuple[dict[str, Any], dict[str, pl.DataFrame]],
) -> None:
    truth, tables = generated
    capacity = tables["agg_machine_capacity"].sort("time")
    at_start = capacity.row(0, named=True)
    assert at_start["time"] == 0
    assert at_start["machines"] == truth["machines"]
    assert at_start["machines_without_capacity"] == truth["machines_without_capacity"]
    counts = truth["event_counts"]["machine_events"]
    assert capacity["adds"].sum() == counts["1"]
    assert capacity["removes"].sum() == counts.get("2", 0)
    # a removed machine is added again an hour later, so at the end every machine is up
    assert capacity["machines"][-1] == truth["machines"]


def test_capacity_mix_and_event_counts_match_the_generator(
    generated: tuple[dict[str, Any], dict[str, pl.DataFrame]],
) -> None:
    truth, tables = generated
    mix = tables["agg_machine_capacity_mix"]
    machines = dict(mix.group_by("snapshot").agg(pl.col("machines").sum()).iter_rows())
    # every generated machine is up at the start, and again at the end (see above)
    assert machines == {"window_start": truth["machines"], "window_end": truth["machines"]}
    blank = mix.filter((pl.col("snapshot") == "window_start") & pl.col("cpus").is_null())
    assert blank["machines"].sum() == truth["machines_without_capacity"]
    by_type = tables["agg_events_by_priority"].group_by("event_type").agg(pl.col("n_events").sum())
    assert {str(t): n for t, n in by_type.iter_rows()} == truth["event_counts"]["instance_events"]


def test_real_shard_machine_capacity(real_dir: Path, tmp_path: Path, prefect_harness: None) -> None:
    raw = tmp_path / "raw" / "machine_events"
    raw.mkdir(parents=True)
    shard = "machine_events-000000000000.json.gz"
    shutil.copy(real_dir / "google-clusterdata-2019" / shard, raw / shard)
    assert not run_ingest(TRACE, tmp_path / "raw", tmp_path / "lake").failed
    tables = _derive_all(tmp_path / "lake", tmp_path / "derived")
    capacity = tables["agg_machine_capacity"]
    # the shard's event counts (PROVENANCE.md): every event is on the time axis (none at 2^63-1)
    assert (capacity["adds"].sum(), capacity["removes"].sum(), capacity["updates"].sum()) == (
        27_777,
        17_941,
        501,
    )
    # the instance tables of a trace with machine_events only are empty, not missing
    assert tables["fct_task_transitions"].height == 0
