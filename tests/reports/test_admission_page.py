"""The admission page: its numbers come from the stage's files; absent inputs are reported."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from admission_helpers import write_params

from tracelab.analysis.admission.stage import AdmissionParams, admission_results
from tracelab.reports.model import InputsMissing, Number, PageContext
from tracelab.reports.pages.admission import admission_numbers, admission_sections

PARAMS = AdmissionParams(
    cores=40,
    arrival_rate=0.0,  # the exported deployment_arrival_rate
    horizon_hours=72.0,
    runs=3,
    policies=("zeroth", "first"),
    observations=(1,),
    tuning_iterations=2,
    lookahead_steps=3,
    bootstrap=200,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("admission_page")
    write_params(data)
    admission_results(PARAMS, data, data / "results" / "azure-2017" / "admission")
    return data


def test_numbers_are_the_files_numbers(data_dir: Path) -> None:
    stage = data_dir / "results" / "azure-2017" / "admission"
    n = admission_numbers(stage)
    policies = pl.read_parquet(stage / "policies.parquet")
    assert [r.policy for r in n.table2] == ["zeroth", "first"]
    assert {(r.policy, r.observations) for r in n.figure1} == {
        ("first-marginal", 1),
        ("second-marginal", 1),
    }
    zeroth = policies.filter(pl.col("policy") == "zeroth").row(0, named=True)
    assert n.table2[0].utilization == zeroth["utilization"]
    assert n.table2[0].ci_low == zeroth["utilization_ci_low"]
    assert (n.cores, n.runs, n.horizon_hours, n.sla) == (40, 3, 72.0, PARAMS.sla)
    assert n.arrival_rate_per_hour == pytest.approx(2.0)
    assert n.prior == "marginal"
    assert n.upper_bound is not None


def test_sections_state_the_setup_and_write_figures(data_dir: Path, tmp_path: Path) -> None:
    ctx = PageContext(data_dir=data_dir, out_dir=tmp_path, trace="azure-2017")
    sections = admission_sections(ctx)
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    assert numbers["cores"] == 40
    assert numbers["sla"] == PARAMS.sla
    assert numbers["upper_bound"] >= numbers["best_utilization"] - 1e-12
    summary_met = sum(
        bool(r.sla_met)
        for r in admission_numbers(data_dir / "results" / "azure-2017" / "admission").table2
    )
    assert numbers["sla_met"] == summary_met
    setup_text = "".join(f for f in sections[0].this_run if isinstance(f, str))
    assert "core_lifetime_rate_prior_marginal" in setup_text
    # the regime line: the Table 2 policies' range of time-mean deployments and accepted shares
    policies = pl.read_parquet(
        data_dir / "results" / "azure-2017" / "admission" / "policies.parquet"
    )
    table2 = policies.filter(pl.col("observations") == 0)
    assert numbers["min_mean_deployments"] == table2["mean_deployments"].min()
    assert numbers["max_mean_deployments"] == table2["mean_deployments"].max()
    assert numbers["max_accepted_share"] == table2["accepted_share"].max()
    assert numbers["tuning_tolerance"] == PARAMS.tuning_tolerance
    settled = policies["tuning_settled"].fill_null(False).sum()
    assert numbers["tuning_settled"] == settled
    for s in sections:
        for fig in s.figures:
            assert (tmp_path / fig.file).is_file()
    assert ctx.reads == ["results/azure-2017/admission"]


def test_absent_results_raise_inputs_missing(tmp_path: Path) -> None:
    ctx = PageContext(data_dir=tmp_path, out_dir=tmp_path / "out", trace="azure-2017")
    with pytest.raises(InputsMissing, match=r"summary\.json"):
        admission_sections(ctx)


def test_importance_sampling_section_shows_the_pilot_buckets(tmp_path: Path) -> None:
    write_params(tmp_path)
    stage = tmp_path / "results" / "azure-2017" / "admission"
    params = AdmissionParams(
        **{**PARAMS.__dict__, "observations": (), "importance_sampling": True, "is_pilot_runs": 100}
    )
    summary = admission_results(params, tmp_path, stage)
    assert summary.importance is not None
    ctx = PageContext(data_dir=tmp_path, out_dir=tmp_path / "out", trace="azure-2017")
    (section,) = [s for s in admission_sections(ctx) if "App. D" in s.title]
    numbers = {f.key: f.value for f in section.this_run if isinstance(f, Number)}
    assert numbers["pilot_runs"] == 100
    (table,) = section.tables
    assert [row[2] for row in table.rows] == [f"{p:.3f}" for p in summary.importance.nominal]
    assert [row[5] for row in table.rows] == [f"{w:.3f}" for w in summary.importance.weights]
