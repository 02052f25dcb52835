"""The priors page's numbers (recommended fit, paper's fit, truth, bias) by hand, and its layout."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.common.fitted_params import (
    FittedParameter,
    Interval,
    Quantity,
    write_stage_params,
)
from tracelab.reports.model import PageContext
from tracelab.reports.pages.alibaba_priors import alibaba_priors_sections
from tracelab.reports.pages.priors import priors_comparison, priors_sections


def _gamma(name: str, shape: float, rate: float, ci: bool = False) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution="gamma",
        parameters={"shape": Quantity(shape, ""), "rate": Quantity(rate, "hour")},
        method="test",
        n=10,
        stage="priors",
        trace="azure-2017",
        ks_distance=0.1,
        ci={"shape": Interval(low=shape * 0.9, high=shape * 1.1)} if ci else {},
    )


def _const(name: str, alpha: float) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution="constant",
        parameters={"alpha": Quantity(alpha, "")},
        method="test",
        n=10,
        stage="priors",
        trace="azure-2017",
    )


RECORDS = {
    r.name: r
    for r in (
        _gamma("core_lifetime_rate_prior_marginal", 2.1, 38.0, ci=True),
        _gamma("core_lifetime_rate_prior", 1.5, 25.0),
        _const("scaleout_alpha_marginal", 0.58),
        _const("scaleout_alpha", -3.0),
    )
}
TRUTH = {"priors": {"lifetime_rate": {"shape": 2.0, "rate": 40.0}}, "alpha": 0.6}


def test_comparison_rows_and_biases_by_hand() -> None:
    rows = {r.label: r for r in priors_comparison(RECORDS, TRUTH)}
    # only parameters some record has: lifetime shape and rate, alpha
    assert set(rows) == {
        "core lifetime rate, shape",
        "core lifetime rate, rate",
        "alpha (lifetimes in hours)",
    }
    shape = rows["core lifetime rate, shape"]
    assert (shape.recommended, shape.paper, shape.truth) == (2.1, 1.5, 2.0)
    assert shape.recommended_ci == pytest.approx((1.89, 2.31))
    assert shape.bias_recommended == pytest.approx(0.05)  # 2.1 / 2 - 1
    assert shape.bias_paper == pytest.approx(-0.25)  # 1.5 / 2 - 1
    rate = rows["core lifetime rate, rate"]
    assert rate.unit == "hour"
    assert rate.bias_recommended == pytest.approx(-0.05)  # 38 / 40 - 1
    assert rate.bias_paper == pytest.approx(-0.375)  # 25 / 40 - 1
    assert rate.recommended_ci is None
    alpha = rows["alpha (lifetimes in hours)"]
    # alpha's bias is a difference, not a ratio
    assert not alpha.relative
    assert alpha.bias_recommended == pytest.approx(-0.02)
    assert alpha.bias_paper == pytest.approx(-3.6)


def test_comparison_without_truth_has_no_bias() -> None:
    rows = priors_comparison(RECORDS, None)
    assert rows
    assert all(r.truth is None and r.bias_paper is None for r in rows)
    assert all(r.bias_recommended is None for r in rows)


def test_page_leads_with_the_recommended_fit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = data / "results" / "azure-2017" / "priors"
    write_stage_params(folder, list(RECORDS.values()))
    pl.DataFrame(
        {
            "lifetime_rate_per_hour": [0.05, 0.04, float("nan")],
            "scaleout_rate_per_hour": [0.1, 0.2, 0.3],
            "scaleout_size_param": [1.0, 2.0, 3.0],
        }
    ).write_parquet(folder / "deployment_mles.parquet")
    raw = data / "raw" / "azure-2017"
    raw.mkdir(parents=True)
    (raw / "TRUTH.json").write_text('{"priors": {"lifetime_rate": {"shape": 2.0, "rate": 40.0}}}')
    out = tmp_path / "site"
    out.mkdir()
    ctx = PageContext(data_dir=data, out_dir=out, trace="azure-2017")
    sections = priors_sections(ctx)
    first = sections[0]
    assert first.title.startswith("Recommended priors")
    table = first.tables[0]
    assert "recommended (joint marginal)" in table.columns
    assert "bias paper two-stage" in table.columns
    row = next(r for r in table.rows if r[0] == "core lifetime rate, shape")
    assert row[-1] == "-25.0%"
    assert "raw/azure-2017/TRUTH.json" in ctx.reads
    # the two-stage figure section keeps the keys the pipeline test reads
    keys = {f.key for s in sections for f in s.this_run if hasattr(f, "key")}
    assert {"core_lifetime_rate_prior_shape", "core_lifetime_rate_prior_sample_mean"} <= keys


def test_each_fits_unit_exponent_goes_beside_its_value_and_no_identifier_paragraph(
    tmp_path: Path,
) -> None:
    """The normalised scale-out rate's rate is in hour^(1−α), α per fit: with α 0.849 and
    0.322 the units are hour^0.1511 and hour^0.6782. One unit column cannot hold both, so each
    value carries its own (3 significant digits); the record names stay out of the prose."""

    def scaleout(name: str, rate: float, unit: str) -> FittedParameter:
        rec = _gamma(name, 2.0, rate)
        return replace(
            rec, parameters={"shape": Quantity(2.0, ""), "rate": Quantity(rate, unit)}, notes="x"
        )

    records = {
        **RECORDS,
        "normalised_scaleout_rate_prior_marginal": scaleout(
            "normalised_scaleout_rate_prior_marginal", 3.13, "hour^0.1511"
        ),
        "normalised_scaleout_rate_prior": scaleout(
            "normalised_scaleout_rate_prior", 1.35, "hour^0.6782"
        ),
    }
    data = tmp_path / "data"
    folder = data / "results" / "azure-2017" / "priors"
    write_stage_params(folder, list(records.values()))
    pl.DataFrame(
        {
            "lifetime_rate_per_hour": [0.05, 0.04],
            "scaleout_rate_per_hour": [0.1, 0.2],
            "scaleout_size_param": [1.0, 2.0],
        }
    ).write_parquet(folder / "deployment_mles.parquet")
    out = tmp_path / "site"
    out.mkdir()
    sections = priors_sections(PageContext(data_dir=data, out_dir=out, trace="azure-2017"))
    rows = {r[0]: r for r in sections[0].tables[0].rows}
    rate = rows["normalised scale-out rate, rate"]
    assert rate[1:3] == ("each fit's, beside it", "3.13 hour^0.151")
    assert rate[4] == "1.35 hour^0.678"
    # a unit the two fits share stays in its column
    assert rows["core lifetime rate, rate"][1:3] == ("hour", "38")
    prose = sections[0].paper + "".join(str(f) for f in sections[0].this_run)
    assert "_prior" not in prose
    assert "scaleout_alpha" not in prose


def _alibaba_results(data: Path) -> None:
    """Derived tables of four tasks and the stage's records, written as ``fit`` writes them:
    execution times 10, 20, 40 s (Terminated), one not ended, one Failed."""
    derived = data / "derived" / "alibaba-2018"
    derived.mkdir(parents=True)
    pl.DataFrame(
        {
            "terminal_state": ["Terminated", "Terminated", "Terminated", None, "Failed"],
            "execution_time_s": [10.0, 20.0, 40.0, None, 5.0],
        }
    ).write_parquet(derived / "fct_alibaba_task_times.parquet")
    pl.DataFrame({"avg_mean": [0.1, 0.2, 0.4, 0.8]}).write_parquet(
        derived / "fct_alibaba_task_usage_stats.parquet"
    )
    folder = data / "results" / "alibaba-2018" / "priors"
    folder.mkdir(parents=True)
    records = [
        replace(
            _gamma("alibaba_task_execution_time", 2.0, 0.1),
            trace="alibaba-2018",
            parameters={"shape": Quantity(2.0, ""), "rate": Quantity(0.1, "1/s")},
        ),
        replace(
            _gamma("alibaba_task_avg_mean", 1.5, 4.0),
            trace="alibaba-2018",
            parameters={"shape": Quantity(1.5, ""), "rate": Quantity(4.0, "1/cores")},
        ),
    ]
    write_stage_params(folder, records)
    summary = {
        "parameters": {"seed": 0, "n_boot": 20, "vmtable": "", "location": 0.0},
        "inputs": {"terminal_states": {"Terminated": 3, "Failed": 1, "not ended": 1}},
    }
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def test_alibaba_priors_draw_each_fit_over_the_values_it_was_fitted_to(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _alibaba_results(data)
    ctx = PageContext(data, tmp_path / "site", "alibaba-2018")
    fits, options = alibaba_priors_sections(ctx)
    assert [f.file for f in fits.figures] == [
        "gamma_alibaba_task_execution_time.png",
        "gamma_alibaba_task_avg_mean.png",
    ]
    execution = pl.read_csv(tmp_path / "site" / fits.figures[0].data_file)
    assert execution.columns[2:] == [
        "execution time of Terminated tasks (s)",
        "fraction at or below",
    ]
    data_rows = execution.filter(pl.col("series") == "data")
    # the Terminated tasks only: the Failed one's 5 s and the censored one are in neither curve
    assert data_rows[:, 2].to_list() == [10.0, 20.0, 40.0]
    assert data_rows[:, 3].to_list() == pytest.approx([1 / 3, 2 / 3, 1.0])
    fitted = execution.filter(pl.col("series") == "Gamma fit")
    # Gamma(2, 0.1) from 0 to the largest value, 40 s, where its CDF is 1 - e^-4 (1 + 4)
    assert fitted[:, 2].min() == 0.0
    assert fitted[-1, 2] == 40.0
    assert fitted[-1, 3] == pytest.approx(1 - math.exp(-4) * 5)
    assert "1 tasks not ended" in fits.figures[0].caption
    assert "right-censored" in fits.figures[0].caption
    assert "1 Failed" in fits.figures[0].caption
    # the Azure-only option recorded by an older summary is not listed
    listed = {row[0] for row in options.tables[0].rows}
    assert "vmtable" not in listed
    assert {"seed", "n_boot"} <= listed
