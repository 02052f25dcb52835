"""The nightly deployment exists with its cron; nights are incremental."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from browser.html import read_refs

from tracelab.analysis.synthetic import generate_trace
from tracelab.analysis.synthetic.csvparts import marked_gzip
from tracelab.flows.nightly import DEPLOYMENT_NAME, nightly_deployment, nightly_flow

# a job that the generator never makes (its ids start far lower): SUBMIT, SCHEDULE, FINISH
_NEW_JOB = 9_000_000_001
_NEW_PART = (
    f"700000000,,{_NEW_JOB},0,,0,dXNlcg==,0,2,0.01,0.01,0.0001,0\n"
    f"700000000,,{_NEW_JOB},0,42,1,dXNlcg==,0,2,0.01,0.01,0.0001,0\n"
    f"760000000,,{_NEW_JOB},0,42,4,dXNlcg==,0,2,0.01,0.01,0.0001,0\n"
)


def test_deployment_is_registered_with_the_requested_cron(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect import get_client

    deployment = nightly_deployment("15 3 * * 1-5", tmp_path, ("google-2011",), None)
    deployment_id = deployment.apply()
    with get_client(sync_client=True) as client:
        stored = client.read_deployment(deployment_id)
        flow = client.read_flow(stored.flow_id)
    assert flow.name == "tracelab-nightly"
    assert stored.name == DEPLOYMENT_NAME
    assert [s.schedule.cron for s in stored.schedules] == ["15 3 * * 1-5"]
    assert stored.parameters["data_dir"] == str(tmp_path.resolve())
    assert stored.parameters["traces"] == ["google-2011"]


def test_schedule_command_passes_dask_address_to_every_night(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL

    from tracelab.flows.cli import main

    # the harness's server, as a user's PREFECT_API_URL: the command registers there and exits
    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
    address = "tcp://10.1.2.3:8786"
    argv = ["schedule", "--data", str(tmp_path / "data"), "--trace", "google-2011"]
    assert main([*argv, "--register-only", "--dask-address", address]) == 0
    with get_client(sync_client=True) as client:
        stored = client.read_deployment_by_name(f"tracelab-nightly/{DEPLOYMENT_NAME}")
    assert stored.parameters["dask_address"] == address
    assert stored.parameters["traces"] == ["google-2011"]


def _manifest(data: Path) -> pl.DataFrame:
    return pl.read_parquet(data / "lake/google-2011/_manifest.parquet")


@pytest.mark.slow
def test_second_night_does_no_work_and_a_new_part_is_ingested_alone(
    prefect_harness: None, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    raw = data / "raw/google-2011"
    generate_trace("google-2011", raw, seed=5, scale="tiny")
    n_files = len(list(raw.glob("*/part-*.csv.gz")))

    first = nightly_flow(data_dir=str(data), traces=("google-2011",))
    assert first["ingest/google-2011"] == "ok"
    assert first["derive/google-2011"] == "ok"
    assert first["statistics/google-2011"] == "ok"
    assert set(_manifest(data)["status"]) == {"ok"}
    assert _manifest(data).height == n_files
    derived = data / "derived/google-2011/fct_task_transitions.parquet"
    first_derived_bytes = derived.read_bytes()

    second = nightly_flow(data_dir=str(data), traces=("google-2011",))
    assert set(_manifest(data)["status"]) == {"skipped-unchanged"}  # no file converted again
    assert second["derive/google-2011"] == "unchanged"
    assert second["statistics/google-2011"] == "unchanged"
    assert derived.read_bytes() == first_derived_bytes

    new_part = raw / "task_events/part-00098-of-00099.csv.gz"
    # a part added to a generated sample carries the generator's mark: an unmarked (published)
    # file beside synthetic ones would be refused as a mix of sources
    with new_part.open("wb") as fh, marked_gzip(fh) as gz:
        gz.write(_NEW_PART.encode())
    third = nightly_flow(data_dir=str(data), traces=("google-2011",))
    manifest = _manifest(data)
    converted = manifest.filter(pl.col("status") == "ok")
    assert converted["path"].to_list() == ["task_events/part-00098-of-00099.csv.gz"]
    assert converted["rows_written"].to_list() == [3]
    assert manifest.filter(pl.col("status") == "skipped-unchanged").height == n_files
    assert third["derive/google-2011"] == "ok"
    transitions = pl.read_parquet(derived).filter(pl.col("job_id") == _NEW_JOB)
    # (NULL→SUBMIT, SUBMIT→SCHEDULE, SCHEDULE→FINISH), computed by hand from the three rows
    assert transitions.sort("time", "event_type")["event_type"].to_list() == [0, 1, 4]


@pytest.mark.slow
def test_an_unchanged_night_reuses_the_report_pages_and_a_changed_input_rebuilds_them(
    prefect_harness: None, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    generate_trace("google-2011", data / "raw/google-2011", seed=5, scale="tiny")
    first = nightly_flow(data_dir=str(data), traces=("google-2011",))
    second = nightly_flow(data_dir=str(data), traces=("google-2011",))
    assert first["report/all"] == "ok"
    assert second["report/all"] == "unchanged"
    built, reused = sorted((data / "site/runs").iterdir())
    doc = json.loads((reused / "run.json").read_text(encoding="utf-8"))
    assert doc["pages_from"] == built.name
    assert {(t["stage"], t["status"]) for t in doc["timings"]} >= {
        ("statistics", "unchanged"),
        ("report", "unchanged"),
    }
    assert [p.name for p in reused.glob("*.html")] == ["index.html"]  # no page of its own
    assert not list(reused.glob("*/*.png"))
    assert (built / "google-transitions.html").is_file()
    index = read_refs(data / "site/index.html")
    assert {f"runs/{built.name}/index.html", f"runs/{reused.name}/index.html"} <= set(index.links)

    # a derived table changes behind the stage records' back (edited by hand): the stage's
    # recorded outputs no longer match, so derive runs again and restores it, bit for bit, and
    # the report (which compares checksums) finds the pages' inputs as they were
    path = data / "derived/google-2011/agg_transition_counts.parquet"
    counts = pl.read_parquet(path)
    total = int(counts.filter(pl.col("prev_event_type").is_not_null())["n"].sum())
    counts.with_columns(pl.col("n") * 2).write_parquet(path)
    third = nightly_flow(data_dir=str(data), traces=("google-2011",))
    assert third["derive/google-2011"] == "ok"
    assert third["report/all"] == "unchanged"
    restored = pl.read_parquet(path)
    assert int(restored.filter(pl.col("prev_event_type").is_not_null())["n"].sum()) == total
