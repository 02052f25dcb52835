"""`tracelab run --trace alibaba-2018` end to end (issue 27): in a fresh data directory with no raw
data (the generator's sample) and on the real excerpt in ``tests/data/alibaba-2018``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import polars as pl
import pytest
from repo_paths import TESTS

from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.flows.cli import main

TRACE = "alibaba-2018"
EXCERPT = TESTS / "data" / TRACE


def _tracelab(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(list(args))
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def generated_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("alibaba-generated") / "data"
    rc, out = _tracelab("run", "--data", str(data), "--trace", TRACE, "--scale", "tiny")
    assert rc == 0, out
    return data


@pytest.fixture(scope="module")
def excerpt_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("alibaba-excerpt") / "data"
    rc, out = _tracelab("run", "--data", str(data), "--trace", TRACE, "--raw", str(EXCERPT))
    assert rc == 0, out
    return data


def test_run_in_a_fresh_data_dir_generates_all_six_tables(generated_run: Path) -> None:
    manifest = read_manifest(generated_run / "lake" / TRACE)
    assert sorted(manifest["table"]) == [
        "batch_instance",
        "batch_task",
        "container_meta",
        "container_usage",
        "machine_meta",
        "machine_usage",
    ]
    assert set(manifest["source"]) == {"synthetic"}
    assert (generated_run / "raw" / TRACE / "TRUTH.json").is_file()


def test_run_on_the_real_excerpt(excerpt_run: Path) -> None:
    lake = excerpt_run / "lake" / TRACE
    manifest = read_manifest(lake)
    assert set(manifest["source"]) == {"real"}
    assert pl.read_parquet(lake / "batch_task").height == 5_000
    assert pl.read_parquet(lake / "machine_meta")["machine_id"].n_unique() == 4_034


def _derived(data: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(data / "derived" / TRACE / f"{name}.parquet")


def test_derived_tables_on_the_generated_sample_match_its_truth(generated_run: Path) -> None:
    truth = json.loads((generated_run / "raw" / TRACE / "TRUTH.json").read_text())
    counts = _derived(generated_run, "agg_alibaba_transition_counts").filter(
        pl.col("level") == "task"
    )
    # every task's status is the last state of its row: Waiting as a first state, the rest
    # reached from Running (the generator starts every non-Waiting task)
    last = {
        r["state"]: r["n"]
        for r in counts.iter_rows(named=True)
        if r["prev_state"] is not None or r["state"] == "Waiting"
    }
    ran = counts.filter(pl.col("prev_state").is_null() & (pl.col("state") == "Running"))
    last["Running"] = ran["n"].sum() - sum(n for s, n in last.items() if s != "Waiting")
    assert {s: n for s, n in last.items() if n} == truth["tasks"]["status_counts"]
    assert counts["n_times_inconsistent"].sum() == 0
    capacity = _derived(generated_run, "agg_alibaba_machine_capacity")
    assert capacity["machines"][0] == truth["machines"]["present_at_start"]
    assert capacity["machines"][-1] == truth["machines"]["n"]
    assert capacity["cpus"][-1] == 96 * truth["machines"]["n"]
    usage = _derived(generated_run, "fct_alibaba_container_usage_stats")
    assert usage.height == truth["containers"]["n"]
    # mean over containers of their used share of the request: the truth's within 0.02
    assert abs(usage["used_over_requested"].mean() - truth["containers"]["mean_util_share"]) < 0.02  # type: ignore[operator]
    running = _derived(generated_run, "agg_alibaba_running_tasks")
    assert running["running_tasks"][-1] == truth["tasks"]["status_counts"].get("Running", 0)


def test_derived_tables_on_the_real_excerpt(excerpt_run: Path) -> None:
    counts = _derived(excerpt_run, "agg_alibaba_transition_counts")
    # the excerpt's 5,000 tasks (PROVENANCE.md): Terminated 4,920, Running 39, Failed 28, Waiting 13
    got = {(r["prev_state"], r["state"]): r["n"] for r in counts.iter_rows(named=True)}
    assert got == {
        (None, "Running"): 4_987,
        (None, "Waiting"): 13,
        ("Running", "Failed"): 28,
        ("Running", "Terminated"): 4_920,
    }
    running = _derived(excerpt_run, "agg_alibaba_running_tasks")
    assert running["running_tasks"][-1] == 39
    capacity = _derived(excerpt_run, "agg_alibaba_machine_capacity")
    assert capacity["machines"][-1] == 4_034
    assert _derived(excerpt_run, "fct_alibaba_task_usage_stats").height == 0
