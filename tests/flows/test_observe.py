"""What Prefect shows: run names that say what ran, and each stage's summary artifact."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tracelab.analysis.common.fitted_params import FittedParameter, Quantity, write_stage_params
from tracelab.analysis.export.options import ExportOptions
from tracelab.flows.observe import artifact_key, summary_markdown
from tracelab.flows.pipeline import published
from tracelab.flows.prefect_flows import as_flow, without_heartbeats
from tracelab.flows.registry import stage_named, stage_runner
from tracelab.flows.settings import Settings

PRIOR = FittedParameter(
    name="core_lifetime_rate_prior",
    distribution="gamma",
    parameters={"shape": Quantity(2.0, ""), "rate": Quantity(40.0, "hour")},
    method="maximum likelihood",
    n=300,
    stage="priors",
    trace="azure-2017",
)


def test_markdown_and_keys_follow_prefects_rules() -> None:
    assert artifact_key("statistics", "google-2011") == "tracelab-statistics-google-2011"
    assert artifact_key("inst_vs_avg", "all") == "tracelab-inst-vs-avg-all"
    text = summary_markdown("pack", "google-2011", (("GPA q", "0.0016"),), "google-packing")
    assert "| GPA q | 0.0016 |" in text
    assert "google-packing.html" in text


def test_an_exports_run_is_named_and_publishes_its_summary(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    write_stage_params(tmp_path / "results" / "azure-2017" / "priors", [PRIOR])
    # what `tracelab run` does with a stage: a flow around the plain function
    run = as_flow("export", published(stage_named("export")))
    result = run(Settings(data_dir=tmp_path), "all", ExportOptions())
    assert result.outputs == ("exports/params.json", "exports/params.schema.json")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs()
        names = {r.name for r in runs}
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["tracelab-export-all"]))
        )
    assert f"tracelab-export all {today}" in names
    # the session's other export runs publish under the same key: this run's is among them
    assert any("| records | 1 |" in str(a.data) for a in artifacts)


def test_a_stage_called_directly_makes_no_flow_run(prefect_harness: None, tmp_path: Path) -> None:
    from prefect import get_client

    write_stage_params(tmp_path / "results" / "azure-2017" / "priors", [PRIOR])
    with get_client(sync_client=True) as client:
        before = client.count_flow_runs()
        result = stage_runner(stage_named("export"))(
            Settings(data_dir=tmp_path), "all", ExportOptions()
        )
        after = client.count_flow_runs()
    assert result.headline == (("records", "1"), ("traces", "azure-2017"))
    assert after == before


def test_a_command_runs_its_flows_without_heartbeats(prefect_harness: None) -> None:
    from prefect import flow
    from prefect.settings import get_current_settings

    seen: list[int | None] = []

    @flow
    def probe() -> None:
        seen.append(get_current_settings().flows.heartbeat_frequency)

    with without_heartbeats():
        probe()
    probe()
    # inside the block the flow sees no heartbeat interval; Prefect's own setting is back after
    assert seen[0] is None
    assert seen[1] is not None
