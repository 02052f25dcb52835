"""An up-to-date `tracelab run` runs no stage and starts no Prefect server.

It decides from checksums alone (raw files against the ingest manifest, every stage's input
fingerprint and outputs against its state, the report's inputs against the latest run's), then
records itself with the latest pages. Each test runs on a copy of the session's tiny run of every
trace, so the data directory the other tests read keeps its two runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import TinyPipeline, run_tiny

from tracelab.flows.cli import main
from tracelab.flows.pipeline import up_to_date_plan
from tracelab.flows.run_config import default_stage_options
from tracelab.flows.settings import Settings

#: what a stage may say in a run where nothing changed
_AT_REST = {"unchanged", "no data"}


@pytest.fixture
def data(tiny_pipeline: TinyPipeline, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(tiny_pipeline.data, copy)
    return copy


def _newest_statuses(data: Path) -> dict[tuple[str, str], str]:
    newest = sorted((data / "site" / "runs").iterdir())[-1]
    doc = json.loads((newest / "run.json").read_text(encoding="utf-8"))
    return {(t["stage"], t["trace"]): t["status"] for t in doc["timings"]}


@pytest.mark.slow
def test_an_up_to_date_run_runs_no_stage_and_makes_no_flow_run(
    prefect_harness: None, data: Path
) -> None:
    from prefect import get_client

    with get_client(sync_client=True) as client:
        before = client.count_flow_runs()
        stdout = run_tiny(data)
        after = client.count_flow_runs()
    assert after == before, stdout
    statuses = _newest_statuses(data)
    assert {s for (stage, _), s in statuses.items() if stage != "report"} <= _AT_REST, statuses
    assert {t for (stage, t) in statuses if stage == "ingest"} == {
        "google-2011",
        "azure-2017",
        "alibaba-2018",
        "google-2019",
        "azure-2019",
    }
    assert statuses[("report", "all")] == "unchanged"


@pytest.mark.slow
def test_one_trace_after_every_trace_reruns_nothing_and_loads_no_prefect(data: Path) -> None:
    # in a process of its own: had anything imported Prefect, it would be in sys.modules there
    probe = (
        "import sys\n"
        "from tracelab.flows.cli import main\n"
        f"rc = main(['run', '--data', {str(data)!r}, '--trace', 'azure-2017'])\n"
        "print('prefect loaded:', 'prefect' in sys.modules, 'rc:', rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, check=False
    )
    assert "prefect loaded: False rc: 0" in done.stdout, done.stdout + done.stderr
    statuses = _newest_statuses(data)
    # export reads every trace's fitted parameters: one trace's run sees them unchanged too
    assert statuses[("export", "all")] == "unchanged", statuses
    assert {s for (stage, _), s in statuses.items() if stage != "report"} <= _AT_REST, statuses


@pytest.mark.slow
def test_a_changed_output_or_option_makes_the_run_go_through_prefect(data: Path) -> None:
    settings = Settings(data_dir=data)
    traces = ("azure-2017",)
    options = default_stage_options()
    assert up_to_date_plan(settings, traces, None, options) is not None
    # an option that changes a stage's inputs: that stage has work
    changed = {**options, "placement": replace(options["placement"], seed=1)}
    assert up_to_date_plan(settings, traces, None, changed) is None
    # an output deleted since: its stage runs again
    (data / "derived" / "azure-2017" / "fct_azure_deployments.parquet").unlink()
    assert up_to_date_plan(settings, traces, None, options) is None


@pytest.mark.slow
def test_a_data_directory_of_the_former_stage_names_reruns_those_stages_once(
    prefect_harness: None, data: Path
) -> None:
    settings = Settings(data_dir=data)
    traces = ("azure-2017",)
    options = default_stage_options()
    state = data / "state" / "azure-2017"
    # what a run wrote before the stage `priors` was renamed from `fit`
    (state / "priors.json").rename(state / "fit.json")
    assert up_to_date_plan(settings, traces, None, options) is None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "--data", str(data), "--trace", "azure-2017"]) == 0, out.getvalue()
    assert _newest_statuses(data)[("priors", "azure-2017")] == "ok"
    assert (state / "priors.json").is_file()
    assert not (state / "fit.json").exists()
    # once only: the next run finds every stage unchanged
    assert up_to_date_plan(settings, traces, None, options) is not None
